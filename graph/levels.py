"""Access levels: which graph a user may be served from. Pure rules; SQL lives in graph/store.py.

A level is a named set of groups. Its graph is built only from chunks whose ACL overlaps the
level's groups, so anyone holding all of the level's groups may read every chunk behind it. A user
may therefore be served from a level only if all of its groups are among the user's groups.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.errors import CrossroadsError

DEFAULT_LEVEL = "all"


@dataclass(frozen=True)
class AccessLevel:
    name: str
    groups: tuple[str, ...]  # resolved: for `all`, every group present in the tenant
    chunks: int = 0  # chunks behind the level's graph (how much a user sees through it)


def eligible(levels: list[AccessLevel], user_groups: set[str]) -> list[AccessLevel]:
    return [lvl for lvl in levels if lvl.groups and set(lvl.groups) <= user_groups]


def choose_level(levels: list[AccessLevel], user_groups: set[str]) -> AccessLevel | None:
    """The eligible level with the most chunks (ties by name); None when no level fits the user."""
    fitting = eligible(levels, user_groups)
    if not fitting:
        return None
    return min(fitting, key=lambda lvl: (-lvl.chunks, lvl.name))


def levels_to_build(levels: list[AccessLevel], name: str | None, tenant: str) -> list[AccessLevel]:
    """The levels a build of `name` covers (None: every level); an unknown name raises, naming the levels."""
    chosen = [lvl for lvl in levels if name in (None, lvl.name)]
    if not chosen:
        names = ", ".join(lvl.name for lvl in levels) or "none"
        raise CrossroadsError(f"no access level {name!r} in tenant {tenant!r} (levels: {names}); "
                              "create it with `crossroads levels set`")
    return chosen
