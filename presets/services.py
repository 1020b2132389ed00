"""Preset services: every surface (browse JSON API, GraphQL, MCP) reads and writes presets through these.

``owner`` may be a Django user, ``AnonymousUser``, a ``search.principal.Principal``, a user id or ``None``;
anything without a signed-in user reads the system presets only and may not write.

Errors are ``presets.errors.PresetError`` subclasses (themselves ``search.errors.SearchError``), each
with a message that says how to fix the problem and, where it applies, ``field`` (``name`` or
``params.<key>``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from presets.errors import (
    PresetImmutable,
    PresetLimitReached,
    PresetNameInvalid,
    PresetNameTaken,
    PresetNotFound,
    PresetParamsInvalid,
    PresetSignInRequired,
)
from presets.models import NAME_MAX_CHARS, RECENT_QUERY_MAX_CHARS, RECENT_SEARCHES_KEPT, Preset, RecentSearch
from presets.params import apply_params, filters_from_params, normalize_params, params_identity
from search.errors import InvalidQuery
from search.principal import owner_id_of
from search.text.query_parser import normalize_query_text
from search.types import SearchFilters

NAME_MIN_CHARS = 1
MAX_PRESETS_PER_USER = 100
MAX_IMPORT = 100
SIGN_IN_MESSAGE = (
    "Sign in to save presets to your account. Until then, presets you save stay in this browser "
    "and can be imported when you sign in."
)


@dataclass(frozen=True)
class ImportSkip:
    name: str
    reason: str


@dataclass(frozen=True)
class ImportResult:
    created: tuple[Preset, ...] = ()
    skipped: tuple[ImportSkip, ...] = field(default_factory=tuple)


# --- helpers ------------------------------------------------------------------------------------------


def clean_name(raw: Any) -> str:
    """Trim and collapse whitespace, drop invisible characters; 1–40 characters remain or it is refused."""
    if not isinstance(raw, str):
        raise PresetNameInvalid("Give the preset a name (text, 1–40 characters).", field="name")
    name = normalize_query_text(unicodedata.normalize("NFC", raw))
    if len(name) < NAME_MIN_CHARS:
        raise PresetNameInvalid("Give the preset a name (1–40 characters).", field="name")
    if len(name) > NAME_MAX_CHARS:
        raise PresetNameInvalid(
            f"The name is {len(name)} characters long; shorten it to {NAME_MAX_CHARS} or fewer.", field="name"
        )
    return name


def _require_user(owner: Any) -> int:
    user_id = owner_id_of(owner)
    if user_id is None:
        raise PresetSignInRequired(SIGN_IN_MESSAGE)
    return user_id


def normalize_preset_params(raw: Any) -> dict[str, Any]:
    """Validated, canonical preset parameters with at least one filter (see ``presets.params``)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping) and not hasattr(raw, "getlist"):
        raise PresetParamsInvalid("params must be an object of filter names to values.", field="params")
    params = normalize_params(raw)
    if not params:
        raise PresetParamsInvalid("Set at least one filter before saving a preset.", field="params")
    return params


def _name_holder(user_id: int, name: str, *, exclude_id: int | None = None) -> Preset | None:
    """The live preset (the user's own or a system one) that already uses ``name``, ignoring case."""
    qs = Preset.objects.alive().visible_to(user_id).filter(name__iexact=name)
    if exclude_id is not None:
        qs = qs.exclude(pk=exclude_id)
    return qs.first()


def _taken(holder: Preset) -> PresetNameTaken:
    if holder.is_system:
        return PresetNameTaken(
            f"'{holder.name}' is the name of a system preset; choose another name.", field="name"
        )
    return PresetNameTaken(
        f"You already have a preset called '{holder.name}'; choose another name.", field="name"
    )


def _own_for_update(user_id: int | None, preset_id: Any, *, system: str, field: str | None = None) -> Preset:
    """The owner's preset ``preset_id``, locked for this transaction; a system preset raises
    ``PresetImmutable`` with the message ``system`` (their name in it as ``{name}``)."""
    pk = _as_id(preset_id)
    try:
        preset = Preset.objects.select_for_update().visible_to(user_id).get(pk=pk)
    except Preset.DoesNotExist:
        raise _not_found(preset_id) from None
    if preset.is_system:
        raise PresetImmutable(system.format(name=preset.name), field=field)
    return preset


def _save_unique_name(preset: Preset, fields: list[str], *, taken: str) -> None:
    """Save ``fields``; a live preset of the same owner and name saved meanwhile (the unique index) raises
    ``PresetNameTaken`` with the message ``taken``, and this transaction goes on."""
    try:
        with transaction.atomic():
            preset.save(update_fields=fields)
    except IntegrityError:
        raise PresetNameTaken(taken, field="name") from None


def _as_id(preset_id: Any) -> int:
    try:
        pk = int(str(preset_id).strip())
    except (TypeError, ValueError):
        raise _not_found(preset_id) from None
    if pk < 1 or pk > 2**63 - 1:
        raise _not_found(preset_id)
    return pk


def _not_found(preset_id: Any) -> PresetNotFound:
    return PresetNotFound(
        f"No preset with id {preset_id!s:.40}. List the presets to see the ids you can use."
    )


# --- reads --------------------------------------------------------------------------------------------


def preset_list(*, owner: Any = None) -> list[Preset]:
    """System presets first (fixed order), then the owner's live presets by ``created_at`` ascending."""
    return list(Preset.objects.alive().visible_to(owner_id_of(owner)).in_list_order())


def preset_get(*, owner: Any = None, preset_id: Any, include_deleted: bool = False) -> Preset:
    """One preset the owner may see (system or their own). Raises ``PresetNotFound``."""
    qs = Preset.objects.visible_to(owner_id_of(owner))
    if not include_deleted:
        qs = qs.alive()
    try:
        return qs.get(pk=_as_id(preset_id))
    except Preset.DoesNotExist:
        raise _not_found(preset_id) from None


def preset_resolve(owner: Any, name_or_id: Any) -> Preset:
    """A live preset by id (``12`` or ``"12"``) or by name (case-insensitive), for MCP and GraphQL callers.

    The owner's presets and the system presets are searched; anonymous callers see system presets only.
    """
    user_id = owner_id_of(owner)
    visible = Preset.objects.alive().visible_to(user_id)
    if isinstance(name_or_id, int) or (isinstance(name_or_id, str) and name_or_id.strip().isdigit()):
        found = visible.filter(pk=_as_id(name_or_id)).first()
        if found is not None:
            return found
    if isinstance(name_or_id, str):
        name = normalize_query_text(unicodedata.normalize("NFC", name_or_id))
        found = visible.filter(name__iexact=name).first() if name else None
        if found is not None:
            return found
    names = [p.name for p in visible.in_list_order()[:30]]
    raise PresetNotFound(
        f"No preset named or numbered '{name_or_id!s:.60}'. Available presets: {', '.join(names)}.",
        field="preset",
    )


def preset_filters(preset: Preset) -> SearchFilters:
    """The engine filters a preset stands for (what MCP ``find(preset=...)`` expands into)."""
    return filters_from_params(preset.params)


def preset_apply(
    *, owner: Any = None, preset_id: Any, current: Mapping[str, Any] | None = None
) -> dict[str, list[str]]:
    """The URL parameters after applying the preset to ``current`` (see ``presets.params.apply_params``).

    The preset's filters replace the current filters; ``q``, ``from_bid`` (sticky), ``sort`` and ``order``
    are kept; the cursor is dropped. Values are lists: a multi-valued filter repeats its key in the URL.
    """
    preset = preset_get(owner=owner, preset_id=preset_id)
    return apply_params(preset.params, current)


# --- writes -------------------------------------------------------------------------------------------


def preset_create(*, owner: Any, name: Any, params: Any) -> Preset:
    """Save the owner's filters under ``name``. ``params`` are URL parameters (normalised here)."""
    user_id = _require_user(owner)
    clean = clean_name(name)
    normalized = normalize_preset_params(params)
    with transaction.atomic():
        # One writer per owner at a time, so the per-user limit and the name check hold under races.
        get_user_model().objects.select_for_update().filter(pk=user_id).first()
        if Preset.objects.alive().owned_by(user_id).count() >= MAX_PRESETS_PER_USER:
            raise PresetLimitReached(
                f"You have {MAX_PRESETS_PER_USER} presets, the most an account can keep; delete one first."
            )
        holder = _name_holder(user_id, clean)
        if holder is not None:
            raise _taken(holder)
        try:
            with transaction.atomic():
                return Preset.objects.create(owner_id=user_id, name=clean, params=normalized)
        except IntegrityError:
            raise PresetNameTaken(
                f"You already have a preset called '{clean}'; choose another name.", field="name"
            ) from None


def preset_rename(*, owner: Any, preset_id: Any, name: Any) -> Preset:
    """Rename one of the owner's presets. Concurrent renames of the same preset: the last write wins.

    System presets are refused (``PresetImmutable``); a deleted preset answers ``PresetNotFound``.
    """
    user_id = _require_user(owner)
    clean = clean_name(name)
    with transaction.atomic():
        preset = _own_for_update(
            user_id, preset_id, field="name",
            system="'{name}' is a system preset and cannot be renamed. "
            "Apply it and save your own copy under the name you want.",
        )
        if preset.is_deleted:
            raise PresetNotFound(
                f"The preset '{preset.name}' was deleted. Undo the delete first, then rename it."
            )
        if preset.name == clean:
            return preset
        holder = _name_holder(user_id, clean, exclude_id=preset.pk)
        if holder is not None:
            raise _taken(holder)
        preset.name = clean
        _save_unique_name(
            preset, ["name", "updated_at"], taken=f"You already have a preset called '{clean}'; choose another name."
        )
        return preset


def preset_delete(*, owner: Any, preset_id: Any) -> Preset:
    """Delete one of the owner's presets, leaving a tombstone that ``preset_restore`` undoes.

    Deleting an already deleted preset is a no-op (two tabs may both delete it).
    """
    user_id = _require_user(owner)
    with transaction.atomic():
        preset = _own_for_update(
            user_id, preset_id, system="'{name}' is a system preset and cannot be deleted; it is shared by everyone."
        )
        if not preset.is_deleted:
            preset.deleted_at = timezone.now()
            preset.save(update_fields=["deleted_at", "updated_at"])
        return preset


def preset_restore(*, owner: Any, preset_id: Any) -> Preset:
    """Undo a delete. Restoring a live preset is a no-op; system presets are never deleted."""
    user_id = _require_user(owner)
    with transaction.atomic():
        preset = _own_for_update(
            user_id, preset_id, system="'{name}' is a system preset; it cannot be deleted or restored."
        )
        if not preset.is_deleted:
            return preset
        holder = _name_holder(user_id, preset.name, exclude_id=preset.pk)
        if holder is not None:
            raise PresetNameTaken(
                f"Another preset is now called '{holder.name}'. Rename that one first, then undo the delete.",
                field="name",
            )
        if Preset.objects.alive().owned_by(user_id).count() >= MAX_PRESETS_PER_USER:
            raise PresetLimitReached(
                f"You have {MAX_PRESETS_PER_USER} presets, the most an account can keep; delete one first."
            )
        preset.deleted_at = None
        _save_unique_name(
            preset, ["deleted_at", "updated_at"],
            taken=f"Another preset is now called '{preset.name}'. Rename that one first, then undo the delete.",
        )
        return preset


def preset_import(*, owner: Any, presets: Iterable[Any]) -> ImportResult:
    """Merge presets kept in a browser (``[{name, params}, ...]``) into the owner's account.

    No duplicates: an entry whose filters equal a live preset's (system or the owner's; values compared
    ignoring case, as the engine matches them) is skipped; an
    entry whose name is taken by a preset with other filters is saved as "<name> (2)", "(3)", ...
    Invalid entries are skipped with the reason. Imports by the same owner run one at a time, so two
    tabs importing at sign-in do not double the presets.
    """
    user_id = _require_user(owner)
    entries = list(presets)
    created: list[Preset] = []
    skipped: list[ImportSkip] = []
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user_id).first()
        existing = list(Preset.objects.alive().visible_to(user_id))
        count = sum(1 for p in existing if not p.is_system)
        for index, entry in enumerate(entries):
            label = str(entry.get("name", "")) if isinstance(entry, Mapping) else ""
            label = label[:80] or f"#{index + 1}"
            if index >= MAX_IMPORT:
                skipped.append(ImportSkip(label, f"only the first {MAX_IMPORT} presets are imported at once"))
                continue
            if not isinstance(entry, Mapping):
                skipped.append(ImportSkip(label, "not a preset (expected an object with name and params)"))
                continue
            try:
                name = clean_name(entry.get("name"))
                params = normalize_preset_params(entry.get("params"))
            except (PresetNameInvalid, PresetParamsInvalid) as exc:
                skipped.append(ImportSkip(label, exc.message))
                continue
            identity = params_identity(params)
            same = next((p for p in existing if params_identity(p.params) == identity), None)
            if same is not None:
                skipped.append(ImportSkip(name, f"same filters as '{same.name}', already in your presets"))
                continue
            if count >= MAX_PRESETS_PER_USER:
                skipped.append(ImportSkip(name, f"an account keeps at most {MAX_PRESETS_PER_USER} presets"))
                continue
            final = _free_name(name, {p.name.casefold() for p in existing})
            preset = Preset.objects.create(owner_id=user_id, name=final, params=params)
            existing.append(preset)
            created.append(preset)
            count += 1
    return ImportResult(created=tuple(created), skipped=tuple(skipped))


def _free_name(name: str, taken: set[str]) -> str:
    if name.casefold() not in taken:
        return name
    for n in range(2, MAX_PRESETS_PER_USER + 50):
        suffix = f" ({n})"
        candidate = name[: NAME_MAX_CHARS - len(suffix)].rstrip() + suffix
        if candidate.casefold() not in taken:
            return candidate
    raise PresetLimitReached("Too many presets share this name; rename some first.")


def preset_purge_deleted(*, older_than_days: int = 30) -> int:
    """Remove tombstones older than ``older_than_days`` (undo is long over). Returns how many went."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = Preset.objects.filter(is_system=False, deleted_at__lt=cutoff).delete()
    return deleted


# --- recent searches ---


def recent_search_record(*, user_id: int, query: str) -> str:
    """Remember ``query`` as the user's newest recent search; keeps the newest 10. Returns the stored text."""
    text = normalize_query_text(query)[:RECENT_QUERY_MAX_CHARS].strip()
    if not text:
        raise InvalidQuery("query is empty: nothing to remember.", field="query")
    with transaction.atomic():
        RecentSearch.objects.update_or_create(user_id=user_id, query=text, defaults={"used_at": timezone.now()})
        stale = RecentSearch.objects.filter(user_id=user_id).order_by("-used_at", "-id")[RECENT_SEARCHES_KEPT:]
        RecentSearch.objects.filter(pk__in=list(stale.values_list("pk", flat=True))).delete()
    return text


def recent_search_clear(*, user_id: int) -> int:
    """Forget every recent search of the user. Returns how many were removed."""
    deleted, _ = RecentSearch.objects.filter(user_id=user_id).delete()
    return deleted
