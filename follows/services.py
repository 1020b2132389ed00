"""Follow services (writes): follow, unfollow, mark seen, the digest choice, and the run that finds what is new.

``owner`` may be a Django user, ``AnonymousUser``, a ``search.principal.Principal``, a user id or ``None``;
anything without a signed-in user may not follow (``FollowSignInRequired``).

What a run does (``follow_run``), as the follow's owner, never as anyone else:

1. The owner is read from the database and their ``Principal`` built fresh (``principal_for_user``), so a
   revoked group or an inactive account counts at once; an inactive owner pauses the follow.
2. The stored query and filters are parsed again with the one URL codec (``search.filter_params``); filters
   that no longer parse pause the follow with the reason. A paused follow keeps its feed; the next run that
   can parse it (and whose owner is active) resumes it by itself.
3. The top ``FOLLOW_TOP_N`` items by rank come from the one engine (``search.engine.retrieve``, the
   live corpus, as on the results page; a follow of filters only lists the newest items,
   ``search.selectors.items.items_list``), and their revision numbers from
   ``search.selectors.items.revision_numbers`` (the same access rule).
4. The first run is the **baseline**: what is there when you follow is recorded as already shown, and nothing
   is reported new. ``follow_create`` takes it at once, so what you saw when you clicked is the baseline.
5. Later runs record an item that was never shown as ``new`` and one whose revision number went up since it
   was shown as ``changed``; an unseen entry is updated in place when its item changes again.
6. Entries whose items the owner can no longer read are deleted (and reads filter them too).

Runs are idempotent: a run locks its follow (``select_for_update(skip_locked=True)``; a second run of the
same follow at the same moment skips it), compares with ``shown`` and updates it in one transaction, and
a unique constraint allows one unseen entry per (follow, item).
"""

from __future__ import annotations

import logging
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.mail import EmailMessage, get_connection
from django.db import DatabaseError, transaction
from django.utils import timezone

from follows.errors import FollowInvalid, FollowLimitReached, FollowNotFound, FollowSignInRequired
from follows.models import LABEL_MAX_CHARS, PAUSED_REASON_MAX_CHARS, Follow, FollowItem, FollowPreference
from search.engine import retrieve
from search.errors import SearchError
from search.filter_params import (
    LIST_PARAMS,
    ParamLists,
    filters_from_params,
    param_lists_of,
    params_from_filters,
    unique_list_values,
)
from search.principal import Principal, owner_id_of, principal_for_user
from search.selectors.items import items_list, revision_numbers
from search.text.query_parser import normalize_query_text, validate_query_text
from search.types import MAX_LIMIT, SITE_THRESHOLD, RetrievalQuery, SearchFilters

logger = logging.getLogger(__name__)

MAX_FOLLOWS_PER_USER = 50
# Seen entries kept per follow (the "Earlier" list); older ones are pruned by the run.
SEEN_KEPT = 20
# ``shown`` keeps every item a follow has shown, so one that leaves the top N and comes back unchanged is not
# "new"; past this many entries only the current top N is kept.
SHOWN_MAX = 1000
NEWS_CACHE_S = 60
SIGN_IN_MESSAGE = "Sign in to follow searches: new results are kept for your account."
INACTIVE_REASON = "The account that owns this follow is inactive; it resumes when the account is active again."

FollowParams = dict[str, list[str]]


# --- helpers ------------------------------------------------------------------------------------------


def _require_user(owner: Any) -> int:
    user_id = owner_id_of(owner)
    if user_id is None:
        raise FollowSignInRequired(SIGN_IN_MESSAGE)
    return user_id


def threshold() -> float:
    """The confidence floor of a run's hits (``FOLLOW_THRESHOLD``, the site's by default)."""
    return float(getattr(settings, "FOLLOW_THRESHOLD", SITE_THRESHOLD))


def top_n() -> int:
    """How many items a run considers (``FOLLOW_TOP_N``), within the engine's page limit."""
    return max(1, min(MAX_LIMIT, int(getattr(settings, "FOLLOW_TOP_N", 50))))


def news_cache_key(user_id: int) -> str:
    return f"follows:news:{user_id}"


def news_cache_clear(user_id: int) -> None:
    cache.delete(news_cache_key(user_id))


def _canonical(filters: SearchFilters) -> FollowParams:
    """URL parameters of ``filters`` (``params_from_filters``), list values de-duplicated ignoring case (the
    engine matches them so) and sorted, keys sorted: two follows with the same effect store the same filters."""
    params: FollowParams = {}
    for key, values in params_from_filters(filters).items():
        if key in LIST_PARAMS:
            params[key] = unique_list_values(values)
        else:
            params[key] = [values[-1]]
    return {key: params[key] for key in sorted(params)}


def _as_multi(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) and not hasattr(raw, "getlist"):
        raise FollowInvalid("filters must be an object of filter names to values.", field="filters")
    return param_lists_of(raw, invalid=lambda message: FollowInvalid(message, field="filters"))


def follow_params(raw: Any) -> FollowParams:
    """Validate filter parameters (a ``QueryDict`` or a JSON object) and return their canonical URL form.

    Raises ``FollowInvalid`` with ``field="filters.<key>"`` and the engine's words for a bad value or an
    unknown key.
    """
    multi = _as_multi(raw)
    try:
        return _canonical(filters_from_params(ParamLists(multi), strict=True))
    except SearchError as exc:
        key = exc.field or ""
        field = f"filters.{key}" if key in multi else "filters"
        raise FollowInvalid(exc.message, field=field) from None


def stored_filters(follow: Follow) -> SearchFilters:
    """The engine filters a follow stands for, parsed again with the URL codec (``SearchError`` if they no
    longer parse: a filter renamed or a value now refused)."""
    stored = follow.filters
    if not isinstance(stored, Mapping):
        raise FollowInvalid("the saved filters are not an object of filter names to values.", field="filters")
    return filters_from_params(ParamLists(_as_multi(stored)), strict=True)


def clean_label(raw: Any, *, query: str, params: FollowParams) -> str:
    """The label given (trimmed, 1–80 characters), or one made from the query or the filters."""
    if raw is not None and not isinstance(raw, str):
        raise FollowInvalid("label must be text (1–80 characters).", field="label")
    label = normalize_query_text(unicodedata.normalize("NFC", raw or ""))
    if len(label) > LABEL_MAX_CHARS:
        raise FollowInvalid(
            f"label is {len(label)} characters long; shorten it to {LABEL_MAX_CHARS} or fewer.", field="label"
        )
    if label:
        return label
    if query:
        return query[: LABEL_MAX_CHARS - 1] + "…" if len(query) > LABEL_MAX_CHARS else query
    summary = "; ".join(f"{key}: {', '.join(values)}" for key, values in params.items())
    return summary[: LABEL_MAX_CHARS - 1] + "…" if len(summary) > LABEL_MAX_CHARS else summary


def _get_owned(user_id: int, follow_id: Any, *, for_update: bool = False) -> Follow:
    try:
        pk = int(str(follow_id).strip())
    except (TypeError, ValueError):
        pk = 0
    qs = Follow.objects.filter(owner_id=user_id)
    if for_update:
        qs = qs.select_for_update()
    found = qs.filter(pk=pk).first() if 0 < pk < 2**63 else None
    if found is None:
        raise FollowNotFound(
            f"You follow no search with id {follow_id!s:.40}. List your follows (/follows) to see their ids.",
            field="id",
        )
    return found


# --- writes -------------------------------------------------------------------------------------------


def follow_create(*, owner: Any, query: Any = "", filters: Any = None, label: Any = None) -> Follow:
    """Follow a search (query and filters). Following the same search again returns the existing follow.

    The baseline is taken at once (what the search finds now counts as already shown); if the engine cannot
    answer now, the next run takes it. At most ``MAX_FOLLOWS_PER_USER`` follows per account.
    """
    user_id = _require_user(owner)
    if query is not None and not isinstance(query, str):
        raise FollowInvalid("query must be text.", field="query")
    try:
        text = validate_query_text(query or "", field="query")
    except SearchError as exc:
        raise FollowInvalid(exc.message, field="query") from None
    params = follow_params(filters)
    if not text and not params:
        raise FollowInvalid(
            "Type words to search, or set at least one filter, before following a search.", field="query"
        )
    clean = clean_label(label, query=text, params=params)
    with transaction.atomic():
        # One writer per owner at a time, so the limit holds under races (two tabs following at once).
        get_user_model().objects.select_for_update().filter(pk=user_id).first()
        existing = Follow.objects.filter(owner_id=user_id, query=text, filters=params).first()
        if existing is not None:
            return existing
        count = Follow.objects.filter(owner_id=user_id).count()
        if count >= MAX_FOLLOWS_PER_USER:
            raise FollowLimitReached(
                f"You follow {count} searches, the most an account can keep. Unfollow one on /follows, "
                "then follow this search again."
            )
        follow = Follow.objects.create(owner_id=user_id, query=text, filters=params, label=clean)
        try:
            with transaction.atomic():
                follow_run(follow_id=follow.pk)
        except DatabaseError:
            logger.exception("follows: baseline of follow %s failed; the next run takes it", follow.pk)
        follow.refresh_from_db()
    news_cache_clear(user_id)
    return follow


def follow_delete(*, owner: Any, follow_id: Any) -> Follow:
    """Unfollow: the follow and its feed go. Returns the deleted follow (its ``pk`` kept for the caller)."""
    user_id = _require_user(owner)
    with transaction.atomic():
        follow = _get_owned(user_id, follow_id, for_update=True)
        pk = follow.pk
        follow.delete()
        follow.pk = pk
    news_cache_clear(user_id)
    return follow


def follow_mark_seen(*, owner: Any, follow_id: Any, now: datetime | None = None) -> Follow:
    """Mark every unseen entry of one follow as seen (they move to "Earlier")."""
    user_id = _require_user(owner)
    with transaction.atomic():
        follow = _get_owned(user_id, follow_id)
        FollowItem.objects.filter(follow=follow, seen_at__isnull=True).update(seen_at=now or timezone.now())
    news_cache_clear(user_id)
    return follow


def follow_digest_set(*, owner: Any, enabled: bool) -> bool:
    """Turn the owner's e-mail digest on or off. Returns the new choice. Turning it on is refused while the
    server sends no digests (``FOLLOWS_DIGEST`` off): the choice would do nothing."""
    user_id = _require_user(owner)
    if enabled and not settings.FOLLOWS_DIGEST:
        raise FollowInvalid(
            "This server sends no e-mail digests (FOLLOWS_DIGEST is off); ask an administrator to turn them on.",
            field="enabled",
        )
    FollowPreference.objects.update_or_create(user_id=user_id, defaults={"email_digest": bool(enabled)})
    return bool(enabled)


# --- the run ------------------------------------------------------------------------------------------

RunStatus = Literal["baseline", "ran", "paused", "degraded", "locked", "gone"]


@dataclass(frozen=True)
class RunOutcome:
    status: RunStatus
    follow_id: int
    owner_id: int | None = None
    new: int = 0
    changed: int = 0
    removed: int = 0
    reason: str = ""


@dataclass
class RunReport:
    """What ``follows_run_all`` did, for the job run record and the task's summary."""

    follows: int = 0
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    new: int = 0
    changed: int = 0
    removed: int = 0
    digests: int = 0

    def add(self, outcome: RunOutcome) -> None:
        self.follows += 1
        self.counts[outcome.status] += 1
        self.new += outcome.new
        self.changed += outcome.changed
        self.removed += outcome.removed

    def detail(self) -> dict[str, int]:
        return {"follows": self.follows, **dict(self.counts), "new": self.new, "changed": self.changed,
                "removed": self.removed, "digests": self.digests}


def _pause(follow: Follow, reason: str, now: datetime) -> RunOutcome:
    reason = reason[:PAUSED_REASON_MAX_CHARS]
    if follow.paused_reason != reason:
        follow.paused_reason, follow.paused_at = reason, now
        follow.save(update_fields=["paused_reason", "paused_at"])
    return RunOutcome("paused", follow.pk, follow.owner_id, reason=reason)


def _ranked_item_ids(principal: Principal, text: str, filters: SearchFilters) -> tuple[list[int], bool]:
    """The top N readable item ids by rank, and whether the engine answered degraded (lexical only)."""
    if text:
        result = retrieve(query=RetrievalQuery(
            text=text, principal=principal, corpus="live", filters=filters, limit=top_n(),
            threshold=threshold(), tool="follow_run",
        ))
        return [hit.item_id for hit in result.hits if not hit.closed], bool(result.degraded)
    page = items_list(principal=principal, filters=filters, sort="newest", limit=top_n(), corpus="live")
    return [item.pk for item in page.items], False


def follow_run(*, follow_id: int, now: datetime | None = None) -> RunOutcome:
    """Run one follow as its owner (see the module docstring). Safe to call twice at once or twice in a row."""
    now = now or timezone.now()
    with transaction.atomic():
        follow = Follow.objects.select_for_update(skip_locked=True).filter(pk=follow_id).first()
        if follow is None:
            exists = Follow.objects.filter(pk=follow_id).exists()
            return RunOutcome("locked" if exists else "gone", follow_id)
        owner = get_user_model().objects.filter(pk=follow.owner_id).first()
        if owner is None or not owner.is_active:
            return _pause(follow, INACTIVE_REASON, now)
        try:
            text = validate_query_text(follow.query, field="query")
            filters = stored_filters(follow)
        except SearchError as exc:
            return _pause(
                follow,
                f"The saved search no longer works: {exc.message} Unfollow it and follow the search again "
                "with filters that work today.",
                now,
            )
        principal = principal_for_user(owner)
        ranked, degraded = _ranked_item_ids(principal, text, filters)
        numbers = revision_numbers(principal=principal, item_ids=ranked)
        current = [(rank, item_id, numbers[item_id]) for rank, item_id in enumerate(ranked, 1) if item_id in numbers]
        outcome = _record(follow, principal, current, now=now, degraded=degraded)
    news_cache_clear(follow.owner_id)
    return outcome


def _record(
    follow: Follow, principal: Principal, current: list[tuple[int, int, int]], *, now: datetime, degraded: bool
) -> RunOutcome:
    shown = {int(k): int(v) for k, v in (follow.shown or {}).items()}
    new = changed = 0
    status: RunStatus = "ran"
    if follow.last_run_at is None:
        status = "baseline"
        shown.update({item_id: number for _, item_id, number in current})
    elif degraded:
        # Lexical-only answers rank differently: items that only the missing lane pushed out would come back
        # as "new" next time. Record nothing; the next healthy run compares with what was really shown.
        status = "degraded"
    else:
        unseen = {e.item_id: e for e in FollowItem.objects.filter(follow=follow, seen_at__isnull=True)}
        for rank, item_id, number in current:
            before = shown.get(item_id)
            if before is not None and number <= before:
                continue
            entry = unseen.get(item_id)
            if entry is not None:  # changed again before it was seen: one entry, the newest revision
                entry.revision_number, entry.rank, entry.found_at = number, rank, now
                entry.save(update_fields=["revision_number", "rank", "found_at"])
            else:
                FollowItem.objects.create(
                    follow=follow, item_id=item_id, revision_number=number, rank=rank, found_at=now,
                    kind=FollowItem.Kind.NEW if before is None else FollowItem.Kind.CHANGED,
                )
            if before is None:
                new += 1
            else:
                changed += 1
            shown[item_id] = number
    removed = _drop_unreadable(follow, principal)
    _prune_seen(follow)
    if len(shown) > SHOWN_MAX:
        keep = {item_id for _, item_id, _ in current}
        shown = {item_id: number for item_id, number in shown.items() if item_id in keep}
    follow.shown = {str(item_id): number for item_id, number in sorted(shown.items())}
    follow.last_run_at = now
    follow.paused_reason, follow.paused_at = "", None
    follow.save(update_fields=["shown", "last_run_at", "paused_reason", "paused_at"])
    return RunOutcome(status, follow.pk, follow.owner_id, new=new, changed=changed, removed=removed)


def _drop_unreadable(follow: Follow, principal: Principal) -> int:
    """Delete the entries whose items the owner may no longer read (private now, archived, unpublished)."""
    item_ids = set(FollowItem.objects.filter(follow=follow).values_list("item_id", flat=True))
    if not item_ids:
        return 0
    readable = revision_numbers(principal=principal, item_ids=item_ids)
    gone = item_ids - set(readable)
    if not gone:
        return 0
    deleted, _ = FollowItem.objects.filter(follow=follow, item_id__in=gone).delete()
    return deleted


def _prune_seen(follow: Follow) -> None:
    stale = (
        FollowItem.objects.filter(follow=follow, seen_at__isnull=False)
        .order_by("-seen_at", "-found_at", "-id")
        .values_list("id", flat=True)[SEEN_KEPT:]
    )
    ids = list(stale)
    if ids:
        FollowItem.objects.filter(pk__in=ids).delete()


def follows_run_all(*, now: datetime | None = None) -> RunReport:
    """Run every follow, one transaction each (a failure in one does not stop the others), then the digest."""
    now = now or timezone.now()
    report = RunReport()
    for follow_id in Follow.objects.order_by("id").values_list("id", flat=True):
        try:
            report.add(follow_run(follow_id=follow_id, now=now))
        except DatabaseError:
            raise  # the database is gone: stop, the next beat runs again
        except Exception:  # noqa: BLE001 - one broken follow must not stop everyone's
            logger.exception("follows: run of follow %s failed", follow_id)
            report.counts["failed"] += 1
    if getattr(settings, "FOLLOWS_DIGEST", False):
        report.digests = follows_digest_send(now=now)
    return report


# --- the e-mail digest --------------------------------------------------------------------------------


def _digest_lines(entries: Iterable[FollowItem], titles: Mapping[int, str]) -> list[str]:
    site = str(getattr(settings, "SITE_URL", "")).rstrip("/")
    lines: list[str] = []
    label = None
    for entry in entries:
        if entry.follow.label != label:
            label = entry.follow.label
            lines.append(f"\n{label}")
        mark = "New" if entry.kind == FollowItem.Kind.NEW else "Changed"
        lines.append(f"  [{mark}] {titles[entry.item_id]}\n  {site}{entry.item.get_absolute_url()}")
    return lines


def follows_digest_send(*, now: datetime | None = None) -> int:
    """One e-mail per opted-in owner with unseen entries not mailed yet; marks them mailed. Returns how many
    e-mails went. Titles are re-checked against the owner's access right before sending. A failed send
    leaves the entries unmarked, so the next run sends them."""
    now = now or timezone.now()
    owners = list(
        FollowPreference.objects.filter(email_digest=True, user__is_active=True)
        .exclude(user__email="")
        .values_list("user_id", flat=True)
    )
    sent = 0
    if not owners:
        return 0
    connection = get_connection()
    for user_id in owners:
        entries = list(
            FollowItem.objects.filter(follow__owner_id=user_id, seen_at__isnull=True, emailed_at__isnull=True)
            .select_related("follow", "item__live_revision")
            .order_by("follow__label", "follow_id", "rank")
        )
        if not entries:
            continue
        owner = get_user_model().objects.get(pk=user_id)
        principal = principal_for_user(owner)
        readable = revision_numbers(principal=principal, item_ids={e.item_id for e in entries})
        entries = [e for e in entries if e.item_id in readable and e.item.live_revision is not None]
        if not entries:
            continue
        titles = {e.item_id: e.item.live_revision.title for e in entries}  # type: ignore[union-attr]
        count = len(entries)
        site = str(getattr(settings, "SITE_URL", "")).rstrip("/")
        body = "\n".join([
            f"{count} new or changed item{'s' if count != 1 else ''} for the searches you follow:",
            *_digest_lines(entries, titles),
            "",
            f"See them all and mark them seen: {site}/follows",
            f"Stop these e-mails: {site}/follows (E-mail digest).",
        ])
        message = EmailMessage(
            subject=f"{count} new for the searches you follow",
            body=body,
            to=[owner.email],
            connection=connection,
        )
        try:
            message.send()
        except Exception:  # noqa: BLE001 - SMTP down: the entries stay unmarked for the next run
            logger.exception("follows: digest to user %s failed; retried on the next run", user_id)
            continue
        FollowItem.objects.filter(pk__in=[e.pk for e in entries]).update(emailed_at=now)
        sent += 1
    return sent
