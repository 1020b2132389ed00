"""The demo goes only into an empty knowledge base, once (search/services/demo.py, used by ``manage.py up``)."""

from __future__ import annotations

import pytest

from search.models import SystemFlag
from search.services import demo
from tests.factories import make_item

pytestmark = pytest.mark.django_db


def test_an_empty_knowledge_base_gets_the_demo():
    assert demo.demo_load_decision() == demo.DemoDecision(load=True)


def test_a_knowledge_base_with_content_of_its_own_does_not_and_says_so():
    # given: content imported before the first start (a draft counts too)
    make_item(title="Our own guide", external_id="own-1")
    make_item(title="Our own draft", external_id="own-2", publish=False)
    # when
    decision = demo.demo_load_decision()
    # then
    assert not decision.load
    assert decision.message == "Not loading the demo: this knowledge base already has 2 items."


def test_one_item_is_one_item():
    make_item(title="Our own guide", external_id="own-1")
    assert demo.demo_load_decision().message == "Not loading the demo: this knowledge base already has 1 item."


def test_the_demo_is_loaded_once_and_then_quietly_skipped():
    SystemFlag.objects.create(key=demo.FLAG, value={})
    assert demo.demo_load_decision() == demo.DemoDecision(load=False, message="")


def test_a_first_start_stopped_while_loading_the_demo_finishes_it_next_time():
    # given: some demo items, no flag (the load was interrupted)
    demo_id = sorted(demo.demo_external_ids())[0]
    make_item(title="Half-loaded demo item", external_id=demo_id)
    # then: the demo's own items do not make the knowledge base someone's content
    assert demo.demo_load_decision().load
