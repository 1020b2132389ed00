import json, time, cProfile, pstats
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from tests.factories import build, make_item
from search.services import retrieve
from search.types import RetrievalQuery

@pytest.mark.django_db
def test_probe():
    for i in range(20):
        make_item(title=f"Pricing guide {i}", body=f"Tender pricing body {i} zebra words here.")
    build()
    with CaptureQueriesContext(connection) as ctx:
        retrieve(query=RetrievalQuery(text="pricing tender x"))
    for q in ctx.captured_queries:
        print(q["time"], q["sql"][:150].replace("\n"," "))
    pr = cProfile.Profile(); pr.enable()
    for i in range(50):
        retrieve(query=RetrievalQuery(text=f"pricing tender {i}"))
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(30)
