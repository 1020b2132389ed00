"""browse/prompts.py: cold-start cards per focus, the filter whitelist, chips of the top domains."""

from __future__ import annotations

import pytest

from accounts.models import UserProfile
from browse import prompts
from search.filter_params import filters_from_params
from tests.factories import make_item


@pytest.mark.parametrize("focus", [*UserProfile.Focus.values, ""])
@pytest.mark.django_db
def test_every_focus_has_three_cards_with_a_search_a_filter_and_chips(focus: str) -> None:
    cards = prompts.prompt_cards(primary_focus=focus)
    assert [c.kind for c in cards] == ["search", "filter", "chipComposite"]


def test_filter_cards_only_use_whitelisted_valid_parameters() -> None:
    for cards in [*prompts.CARDS.values(), prompts.FALLBACK]:
        for card in cards:
            if card.kind == "filter":
                assert set(card.params) <= prompts.FILTER_CARD_KEYS
                filters_from_params(card.params, strict=True)


def test_a_filter_card_outside_the_whitelist_is_refused() -> None:
    with pytest.raises(ValueError, match="author"):
        prompts._filter("Bad", {"author": "someone"}, "")


def test_card_links_work_without_javascript() -> None:
    search = prompts._search("T", "social value", "")
    card = prompts._filter("T", {"domain": "pricing", "freshness": "90"}, "")
    assert search.href == "/browse?q=social+value"
    assert card.href == "/browse?domain=pricing&freshness=90"


@pytest.mark.django_db
def test_chips_are_the_top_three_domains() -> None:
    # given
    for domain, n in (("pricing", 3), ("legal", 2), ("security", 1), ("marketing", 1)):
        for i in range(n):
            make_item(title=f"{domain} {i}", primary_domain=domain)
    # when
    chips = prompts.prompt_cards(primary_focus="")[2].chips
    # then
    assert [(c.value, c.count) for c in chips] == [("pricing", 3), ("legal", 2), ("marketing", 1)]
    assert chips[0].href == "/browse?domain=pricing" and chips[0].label == "Pricing"
