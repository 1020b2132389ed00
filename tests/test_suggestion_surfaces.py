"""'Did you mean' reaches every surface: JSON, the pages, GraphQL, MCP and kb_search."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from mcp_api.schemas import FindArgs
from mcp_api.tools import find_result
from search.engine import retrieve
from search.principal import ANONYMOUS
from search.types import RetrievalQuery
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus():
    make_item(title="Procurement rules", body="How public procurement works for suppliers.")
    make_item(title="Other", body="Catering menus.")
    build()


def test_every_surface_returns_the_suggestion(corpus):
    client = Client()
    # JSON
    response = client.post("/api/search", data=json.dumps({"query": "procurment rules"}),
                           content_type="application/json")
    assert response.status_code == 200 and response.json()["suggestion"] == "procurement rules"
    # pages: a link with the corrected query
    for path in ("/search", "/browse"):
        page = client.get(path, {"q": "procurment rules"}).content.decode()
        assert 'id="did-you-mean"' in page and "q=procurement+rules" in page
    # GraphQL
    response = client.post("/graphql", data=json.dumps(
        {"query": '{ search(input: {query: "procurment rules"}) { suggestion } }'}), content_type="application/json")
    assert response.json()["data"]["search"]["suggestion"] == "procurement rules"
    # MCP (structured content built by the tool from the same result)
    query = RetrievalQuery(text="procurment rules", principal=ANONYMOUS, limit=10)
    assert find_result(query, retrieve(query=query)).suggestion == "procurement rules"
    assert FindArgs.model_fields  # the argument model is importable alongside
    # CLI
    out = StringIO()
    call_command("kb_search", "procurment rules", "--json", stdout=out)
    assert json.loads(out.getvalue())["suggestion"] == "procurement rules"
