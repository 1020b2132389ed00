"""Who is searching. Every surface turns its caller into a Principal; the engine decides what it reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

PrincipalKind = Literal["anonymous", "user", "staff", "api_key"]


@dataclass(frozen=True)
class Principal:
    kind: PrincipalKind = "anonymous"
    user_id: int | None = None
    group_ids: frozenset[int] = field(default_factory=frozenset)
    # Staff and all-content API keys read every item; group-scoped keys read public, signed-in and their groups.
    all_content: bool = False
    api_key_id: int | None = None

    @property
    def is_anonymous(self) -> bool:
        return self.kind == "anonymous"

    @property
    def can_read_drafts(self) -> bool:
        """Staff and API keys search the latest corpus (drafts included)."""
        return self.kind in ("staff", "api_key")

    @property
    def cache_key(self) -> str:
        groups = ",".join(str(g) for g in sorted(self.group_ids))
        return f"{self.kind}:{self.user_id or ''}:{self.api_key_id or ''}:{int(self.all_content)}:{groups}"


ANONYMOUS = Principal()


def principal_for_user(user: Any) -> Principal:
    """The principal of a Django user (``AnonymousUser`` included)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return ANONYMOUS
    group_ids = frozenset(user.groups.values_list("id", flat=True))
    if user.is_staff or user.is_superuser:
        return Principal(kind="staff", user_id=user.pk, group_ids=group_ids, all_content=True)
    return Principal(kind="user", user_id=user.pk, group_ids=group_ids)


def owner_id_of(owner: Any) -> int | None:
    """The signed-in user id behind ``owner`` (a Django user, ``AnonymousUser``, a ``Principal``, a user id or
    ``None``), or ``None`` for anonymous callers and bare API keys: whose presets, follows and recent
    searches a call reads or writes."""
    if owner is None or isinstance(owner, bool):
        return None
    if isinstance(owner, int):
        return owner
    if hasattr(owner, "is_authenticated"):  # a Django user or AnonymousUser
        return int(owner.pk) if owner.is_authenticated else None
    user_id = getattr(owner, "user_id", None)  # a Principal
    return int(user_id) if user_id is not None else None
