"""The permission matrix's corpus, personas and oracle.

The oracle (``can_read``, ``expected``) is written from each item's *state* as this module created it,
never from the engine's querysets: if ``ContentItem.objects.searchable`` were wrong, the oracle would
still be right.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from accounts.api_keys import api_key_create, api_key_revoke
from search.models import ContentItem
from search.services import content
from tests.factories import build, make_item

VISIBILITIES = ("public", "signed_in", "staff", "groups:alpha", "groups:beta")
LIFECYCLES = ("published", "draft", "unpublished", "superseded", "published_with_draft", "archived")
ITEMS_PER_STATE = 8  # 5 visibilities x 6 lifecycles x 8 = 240 items

# Query words. Every title holds TITLE_WORD, every body BODY_WORD. RESTRICTED_WORD and RESTRICTED_NEAR
# occur only in items readable by staff or by members of group beta (no test persona below is one).
TITLE_WORD = "quokka"
BODY_WORD = "wombat"
RESTRICTED_WORD = "narwhal"
NOWHERE_WORD = "axolotl"
DRAFT_WORD = "kookaburra"  # only in the newest (unpublished) draft of published_with_draft items
READABLE_NEAR = "platypus"  # in some public published items
RESTRICTED_NEAR = "platypos"  # one edit from platypus, only in restricted items, and more frequent
NOWHERE_NEAR = "platypis"  # one edit from both, nowhere
RESTRICTED_TYPO = "narwhhal"  # one edit from the restricted word
NOWHERE_TYPO = "axolottl"  # one edit from the word that exists nowhere

FILLER = (
    "harbour",
    "ledger",
    "turbine",
    "meadow",
    "lantern",
    "copper",
    "glacier",
    "orchard",
    "compass",
    "velvet",
    "saddle",
    "quarry",
    "beacon",
    "thistle",
    "anchor",
    "falcon",
    "granite",
    "willow",
    "ember",
    "canyon",
)

Surface = Literal["browse", "graphql", "mcp"]
Corpus = Literal["live", "latest"]


@dataclass(frozen=True)
class ItemState:
    """What the test did to an item: the oracle reads only this."""

    pk: int
    slug: str
    title: str
    visibility: str
    group: str | None
    lifecycle: str
    placeholder: bool
    words_live: frozenset[str]
    words_latest: frozenset[str]

    @property
    def archived(self) -> bool:
        return self.lifecycle == "archived"

    @property
    def superseded(self) -> bool:
        return self.lifecycle == "superseded"

    def in_corpus(self, corpus: Corpus) -> bool:
        if corpus == "latest":
            return True  # every item has a latest revision
        return self.lifecycle in ("published", "superseded", "published_with_draft", "archived")

    def has_word(self, word: str, corpus: Corpus) -> bool:
        return word in (self.words_latest if corpus == "latest" else self.words_live)


@dataclass(frozen=True)
class Persona:
    name: str
    kind: Literal["anonymous", "user", "staff", "api_key"]
    groups: frozenset[str] = frozenset()
    all_content: bool = False
    # How the persona calls each surface: a session user, an API key, or nothing.
    username: str | None = None
    api_key: str | None = None
    refused: bool = False  # a revoked or expired key: every request is refused with 401


def can_read(persona: Persona, item: ItemState) -> bool:
    """Visibility alone (corpus and superseded are separate): the access rule, from the item's state."""
    if item.archived:
        return False
    if persona.all_content:
        return True
    if persona.kind == "anonymous":
        return item.visibility == "public"
    if item.visibility in ("public", "signed_in"):
        return True
    return item.visibility.startswith("groups:") and item.group in persona.groups


def corpus_of(persona: Persona, surface: Surface) -> Corpus:
    """Which corpus a persona's searches read on a surface (GraphQL is always asked for LATEST)."""
    if surface == "graphql":
        return "latest" if persona.kind == "staff" else "live"
    if surface == "mcp":
        return "latest" if persona.kind == "api_key" else "live"
    return "live"


def expected_search(persona: Persona, surface: Surface, items: list[ItemState], word: str) -> set[int]:
    corpus = corpus_of(persona, surface)
    return {
        i.pk
        for i in items
        if can_read(persona, i) and i.in_corpus(corpus) and not i.superseded and i.has_word(word, corpus)
    }


def expected_lookup(persona: Persona, surface: Surface, item: ItemState) -> bool:
    corpus = corpus_of(persona, surface) if surface != "browse" else "live"
    return can_read(persona, item) and item.in_corpus(corpus)


def expected_closed(persona: Persona, items: list[ItemState], word: str) -> set[int]:
    """/search's closed-material placeholders: unreadable, allowed, live, current, the title matches."""
    if persona.all_content:
        return set()
    return {
        i.pk
        for i in items
        if not can_read(persona, i)
        and not i.archived
        and i.placeholder
        and i.in_corpus("live")
        and not i.superseded
        and word in i.title.lower().split()
    }


@dataclass
class Matrix:
    items: list[ItemState]
    personas: dict[str, Persona]
    successor: ItemState
    counts: dict[str, int] = field(default_factory=dict)


def _body(rng: random.Random, words: list[str]) -> str:
    filler = " ".join(rng.sample(FILLER, 6))
    return f"{BODY_WORD.capitalize()} field notes: {filler}. " + " ".join(f"The {w} entry." for w in words)


def build_matrix(seed: int = 20261130) -> Matrix:
    """Create 240 items (every visibility x every lifecycle), users, a group, API keys; build the index."""
    rng = random.Random(seed)
    now = timezone.now()
    alpha, _ = Group.objects.get_or_create(name="alpha")
    Group.objects.get_or_create(name="beta")
    successor_item = make_item(
        title=f"{TITLE_WORD.capitalize()} successor handbook",
        body=_body(rng, []),
        external_id="pm-successor",
        primary_domain="governance",
    )
    states: list[ItemState] = []
    n = 0
    for visibility in VISIBILITIES:
        for lifecycle in LIFECYCLES:
            for k in range(ITEMS_PER_STATE):
                n += 1
                group = visibility.split(":", 1)[1] if visibility.startswith("groups:") else None
                restricted = visibility in ("staff", "groups:beta")
                near = visibility == "public" and lifecycle == "published" and k % 3 == 0
                title_words = [TITLE_WORD.capitalize(), rng.choice(FILLER), "report", str(n)]
                extra = []
                if restricted:
                    title_words.insert(1, RESTRICTED_WORD)
                    extra += [RESTRICTED_WORD, RESTRICTED_NEAR]
                if near:
                    extra.append(READABLE_NEAR)
                title = " ".join(title_words)
                body = _body(rng, extra)
                placeholder = k % 4 == 0
                item = make_item(
                    title=title,
                    body=body,
                    external_id=f"pm-{n}",
                    publish=lifecycle != "draft",
                    visibility="groups" if group else visibility,
                    groups=[group] if group else None,
                    allow_closed_placeholder=placeholder,
                    primary_domain=rng.choice(["pricing", "safety", "legal"]),
                    content_type=rng.choice(["guide", "policy", "checklist"]),
                    archived_at=now - timedelta(days=1) if lifecycle == "archived" else None,
                )
                words = {w.lower() for w in title.split()} | {BODY_WORD, *extra}
                latest = set(words)
                if lifecycle == "unpublished":
                    content.item_unpublish(item=item)
                elif lifecycle == "superseded":
                    content.item_mark_superseded(item=item, by=successor_item)
                elif lifecycle == "published_with_draft":
                    content.item_save_revision(
                        item=item, title=title, body=body + f" The {DRAFT_WORD} draft."
                    )
                    latest.add(DRAFT_WORD)
                item.refresh_from_db()
                states.append(
                    ItemState(
                        pk=item.pk,
                        slug=item.slug,
                        title=title,
                        visibility=visibility,
                        group=group,
                        lifecycle=lifecycle,
                        placeholder=placeholder,
                        words_live=frozenset(words)
                        if lifecycle not in ("draft", "unpublished")
                        else frozenset(),
                        words_latest=frozenset(latest),
                    )
                )
    successor = ItemState(
        pk=successor_item.pk,
        slug=successor_item.slug,
        title=successor_item.title,
        visibility="public",
        group=None,
        lifecycle="published",
        placeholder=False,
        words_live=frozenset({TITLE_WORD, "successor", "handbook", BODY_WORD}),
        words_latest=frozenset({TITLE_WORD, "successor", "handbook", BODY_WORD}),
    )
    users = get_user_model().objects
    users.create_user("pm-user", password="pw-matrix-123")
    member = users.create_user("pm-member", password="pw-matrix-123")
    member.groups.add(alpha)
    users.create_user("pm-staff", password="pw-matrix-123", is_staff=True)
    revoked = api_key_create(name="pm revoked")
    api_key_revoke(api_key=revoked.api_key)
    personas = {
        p.name: p
        for p in (
            Persona("anonymous", "anonymous"),
            Persona("signed_in", "user", username="pm-user"),
            Persona("group_member", "user", groups=frozenset({"alpha"}), username="pm-member"),
            Persona("staff", "staff", all_content=True, username="pm-staff"),
            Persona("api_key", "api_key", all_content=True, api_key=api_key_create(name="pm key").raw_key),
            Persona(
                "api_key_group",
                "api_key",
                groups=frozenset({"alpha"}),
                api_key=api_key_create(name="pm group key", all_content=False, groups=[alpha]).raw_key,
            ),
            Persona("revoked_key", "api_key", api_key=revoked.raw_key, refused=True),
            Persona(
                "expired_key",
                "api_key",
                refused=True,
                api_key=api_key_create(name="pm expired", expires_at=now - timedelta(hours=1)).raw_key,
            ),
        )
    }
    build()
    all_items = [successor, *states]
    counts: dict[str, int] = {"items": len(all_items)}
    for state in states:
        counts[f"{state.visibility} {state.lifecycle}"] = (
            counts.get(f"{state.visibility} {state.lifecycle}", 0) + 1
        )
    assert ContentItem.objects.filter(external_id__startswith="pm-").count() == len(all_items)
    return Matrix(all_items, personas, successor, counts)
