"""Federation's pure parts: the answer a peer may give (schema), the merge (on the pooled lanes, else by
confidence), the key at rest."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from django.test import override_settings
from pydantic import ValidationError

from search.errors import InvalidQuery
from search.federation.federated import FederatedHit, canonical_url, fusion_evidence, merge, sources_parse
from search.federation.protocol import MAX_HITS, PeerAnswer
from search.federation.secrets import PeerKeyUnreadable, secret_decrypt, secret_encrypt
from search.types import FusionEvidence, LaneEvidence

GOOD_HIT = {"title": "Pricing policy", "url": "https://kb.example.org/items/pricing", "snippet": "Day rates.",
            "snippet_spans": [[0, 3]], "title_spans": [[0, 7]], "confidence": 0.8, "lanes": ["lexical"]}


def answer(**hit: object) -> dict[str, object]:
    return {"instance": "emea", "version": "0.1.0", "count": 1, "hits": [{**GOOD_HIT, **hit}]}


def test_a_well_formed_answer_is_read_and_unknown_fields_are_ignored() -> None:
    parsed = PeerAnswer.model_validate({**answer(), "extra": {"anything": 1}})
    assert parsed.hits[0].title == "Pricing policy" and parsed.hits[0].snippet_spans == [(0, 3)]


@pytest.mark.parametrize(
    "bad",
    [
        {"url": "javascript:alert(1)"},
        {"url": "/items/relative"},
        {"url": "https://user:pw@kb.example.org/x"},
        {"confidence": 1.5},
        {"confidence": math.nan},
        {"confidence": "high"},
        {"snippet_spans": [[5, 99]]},
        {"title_spans": [[3, 2]]},
        {"lanes": ["lexical", "telepathy"]},
        {"title": ""},
        {"title": "x" * 501},
        {"content_hash": "<script>"},
        {"url": "https://kb.example.org/a b"},
    ],
)
def test_a_hostile_or_broken_hit_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        PeerAnswer.model_validate(answer(**bad))


def test_too_many_hits_are_refused() -> None:
    with pytest.raises(ValidationError):
        PeerAnswer.model_validate({"instance": "x", "count": 99, "hits": [GOOD_HIT] * (MAX_HITS + 1)})


def hit(url: str, confidence: float, source: str, content_hash: str = "") -> FederatedHit:
    return FederatedHit(title=url, url=url, snippet="", snippet_spans=(), title_spans=(), confidence=confidence,
                        lanes=("lexical",), language="en", updated_at=None, sources=(source,),
                        content_hash=content_hash)


def test_merge_orders_by_confidence_and_folds_duplicates_with_every_source() -> None:
    local = [replace(hit("https://kb.example.org/items/a", 0.6, "local", "aa"), local=object()),
             replace(hit("https://kb.example.org/items/b", 0.5, "local"), local=object())]
    emea = [hit("https://KB.example.org:443/items/a/", 0.9, "emea"), hit("https://emea.example.org/c", 0.7, "emea")]
    apac = [hit("https://apac.example.org/mirror-of-a", 0.4, "apac", "aa")]
    merged = merge([local, emea, apac])
    assert [(h.url, h.sources) for h in merged.hits] == [
        ("https://emea.example.org/c", ("emea",)),
        ("https://kb.example.org/items/a", ("local", "emea", "apac")),  # same page by URL, then by hash
        ("https://kb.example.org/items/b", ("local",)),
    ]
    assert merged.folded == 2


def test_a_peer_cannot_put_its_text_or_its_confidence_under_a_local_page() -> None:
    ours = replace(hit("https://kb.example.org/items/a", 0.4, "local"), snippet="our text", local=object())
    theirs = replace(hit("https://kb.example.org/items/a", 1.0, "evil"), snippet="their text")
    [shown] = merge([[ours], [theirs]]).hits
    assert (shown.snippet, shown.confidence, shown.sources) == ("our text", 0.4, ("local", "evil"))


def test_each_source_keeps_its_own_order_and_is_placed_by_the_lowest_confidence_so_far() -> None:
    # given a source whose engine ranked a less confident hit first (its ranking beats its confidences)
    local = [replace(hit("https://kb.example.org/items/x", 0.5, "local"), local=object()),
             replace(hit("https://kb.example.org/items/y", 0.9, "local"), local=object())]
    emea = [hit("https://emea.example.org/z", 0.7, "emea"), hit("https://emea.example.org/w", 0.2, "emea")]
    # then y stays below x, and both below the peer's more confident z; w comes last
    assert [h.url.rsplit("/", 1)[-1] for h in merge([local, emea]).hits] == ["z", "x", "y", "w"]
    # and the hits keep their own confidence: the merge only decides the order
    assert [h.confidence for h in merge([local, emea]).hits] == [0.7, 0.5, 0.9, 0.2]


def test_equal_confidence_keeps_the_order_of_the_sources() -> None:
    merged = merge([[hit("https://a.example/1", 0.5, "local")], [hit("https://b.example/1", 0.5, "emea")]])
    assert [h.source for h in merged.hits] == ["local", "emea"]


def test_canonical_urls_ignore_case_default_ports_trailing_slashes_and_fragments() -> None:
    assert canonical_url("HTTPS://Kb.Example.org:443/items/a/#top") == canonical_url("https://kb.example.org/items/a")
    assert canonical_url("http://kb.example.org:8000/a") != canonical_url("http://kb.example.org/a")


def test_sources_are_all_or_a_list_of_names() -> None:
    assert sources_parse(None) == ("local",)
    assert sources_parse("all") == "all"
    assert sources_parse(["local", "emea", "emea"]) == ("local", "emea")
    assert sources_parse("local,emea") == ("local", "emea")
    assert sources_parse(["all"]) == "all"
    for bad in ([], [""], [1], {"a": 1}, ["x"] * 21):
        with pytest.raises(InvalidQuery, match="sources"):
            sources_parse(bad)


def test_a_peer_key_is_encrypted_at_rest_and_unreadable_after_the_secret_changes() -> None:
    raw = "kb_1a2b3c4d_" + "k" * 43
    token = secret_encrypt(raw)
    assert raw not in token and secret_decrypt(token) == raw
    with (
        override_settings(FEDERATION_SECRET_KEY="another secret"),
        pytest.raises(PeerKeyUnreadable, match="Add it again"),
    ):
        secret_decrypt(token)


def test_control_characters_become_spaces_so_offsets_stay_valid() -> None:
    parsed = PeerAnswer.model_validate(answer(title="Pricing\x1b[31m policy", title_spans=[[0, 7]]))
    assert parsed.hits[0].title == "Pricing [31m policy"


def test_an_unknown_protocol_and_an_absurd_count_are_refused() -> None:
    with pytest.raises(ValidationError, match="protocol 2"):
        PeerAnswer.model_validate({**answer(), "protocol": 2})
    with pytest.raises(ValidationError):
        PeerAnswer.model_validate({**answer(), "count": 2**40})


# --- merging by the sources' fusion evidence -------------------------------------------------------------


def fused(model: str = "e5", lexical: tuple[float, ...] = (6.0, 4.0, 2.0, 1.0),
          vector: tuple[float, ...] = (0.9, 0.85, 0.8, 0.7)) -> FusionEvidence:
    return FusionEvidence("zscore", (LaneEvidence("lexical", 1.0, lexical), LaneEvidence("vector", 1.0, vector)),
                          model, "", 4, depth=200, lexical_hits=len(lexical))


def scored(url: str, confidence: float, source: str, lexical: float | None, vector: float | None) -> FederatedHit:
    lanes = {name: value for name, value in (("lexical", lexical), ("vector", vector)) if value is not None}
    return replace(hit(url, confidence, source), lane_scores=lanes)


def test_sources_that_send_their_fusion_are_merged_as_one_instance_would_rank_them() -> None:
    # given a peer whose best hit is stronger in both lanes than ours, but which it is less confident of
    local = [replace(scored("https://kb.example.org/items/a", 0.9, "local", 4.0, 0.85), local=object())]
    emea = [scored("https://emea.example.org/b", 0.5, "emea", 6.0, 0.9),
            scored("https://emea.example.org/c", 0.95, "emea", 1.0, 0.7)]
    # when both sent how they fused their lanes: by the pooled lanes' scores, not by confidence
    merged = merge([local, emea], [fused(), fused()])
    assert [h.url.rsplit("/", 1)[-1] for h in merged.hits] == ["b", "a", "c"]
    # and without that evidence (or from another embedding model) by confidence, each source's order kept
    assert [h.url.rsplit("/", 1)[-1] for h in merge([local, emea]).hits] == ["a", "b", "c"]
    assert [h.url.rsplit("/", 1)[-1] for h in merge([local, emea], [fused(), fused("minilm")]).hits] == ["a", "b", "c"]
    assert [h.url.rsplit("/", 1)[-1] for h in merge([local, emea], [fused(), None]).hits] == ["a", "b", "c"]


def test_a_page_two_sources_hold_keeps_our_place_whatever_scores_a_peer_claims_for_it() -> None:
    local = [replace(scored("https://kb.example.org/items/a", 0.4, "local", 1.0, 0.7), local=object())]
    emea = [scored("https://emea.example.org/z", 0.9, "emea", 4.0, 0.8),
            scored("https://emea.example.org/mirror", 0.5, "emea", 6.0, 0.9)]
    emea[1] = replace(emea[1], content_hash="aa")
    local[0] = replace(local[0], content_hash="aa")
    ours = fused(lexical=(1.0, 0.5, 0.4, 0.3), vector=(0.7, 0.6, 0.5, 0.4))
    merged = merge([local, emea], [ours, fused()])
    assert [(h.url, h.sources) for h in merged.hits] == [
        ("https://emea.example.org/z", ("emea",)),
        ("https://kb.example.org/items/a", ("local", "emea")),  # ours, at our place, not the peer's copy's
    ]


def test_a_peers_fusion_is_read_and_bounded() -> None:
    body = {**answer(lane_scores={"lexical": 3.5, "vector": 0.81}, rerank=1.2),
            "fusion": {"method": "zscore", "model": "e5", "candidates": 2, "depth": 200, "lexical_hits": 1,
                       "vector_lexical": [True, False],
                       "lanes": [{"name": "lexical", "weight": 1.0, "scores": [3.5], "absent": 0.0},
                                 {"name": "vector", "weight": 0.8, "scores": [0.81, 0.8]}]}}
    parsed = PeerAnswer.model_validate(body)
    assert parsed.fusion is not None and fusion_evidence(parsed.fusion) == FusionEvidence(
        "zscore", (LaneEvidence("lexical", 1.0, (3.5,), 0.0), LaneEvidence("vector", 0.8, (0.81, 0.8))), "e5", "", 2,
        depth=200, lexical_hits=1, vector_lexical=(True, False))
    assert parsed.hits[0].lane_scores == {"lexical": 3.5, "vector": 0.81} and parsed.hits[0].rerank == 1.2
    lanes = body["fusion"]["lanes"]  # type: ignore[index]
    for bad in [
        {"fusion": {**body["fusion"], "lanes": [lanes[0], lanes[0]]}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "method": "magic"}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "vector_lexical": [True]}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "lanes": [{**lanes[1], "scores": [0.5] * 2001}]}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "lanes": [{**lanes[1], "scores": [math.inf]}]}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "lanes": [lanes[1]], "vector_lexical": []}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "lanes": [lanes[0], {**lanes[1], "scores": [5.0, 0.8]}]}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "lanes": [lanes[0], {**lanes[1], "absent": 0.0}]}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "lanes": [{**lanes[0], "absent": 9.0}, lanes[1]]}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "lanes": [lanes[1], lanes[0]]}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "method": "lexical"}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "vector_lexical": []}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "worst": {"english": 0.5}}},  # type: ignore[dict-item]
        {"fusion": {**body["fusion"], "granularity": "sentence"}},  # type: ignore[dict-item]
        {"hits": [{**GOOD_HIT, "lane_scores": {"lexical": 99.0}}]},  # a score its lane never returned
        {"hits": [{**GOOD_HIT, "rerank": 0.5}]},
        {"hits": [{**GOOD_HIT, "lane_scores": {"telepathy": 1.0}}]},
    ]:
        with pytest.raises(ValidationError):
            PeerAnswer.model_validate({**body, **bad})
