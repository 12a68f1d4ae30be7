"""API tokens: create, verify, revoke, list. All SQL of the `api_tokens` table lives here.

A token reads `cr_<id>_<secret>`: `id` is 12 hex characters, public (shown by `token list`, accepted
by `token revoke`); `secret` is 32 random bytes (`secrets.token_urlsafe`). Only the SHA-256 of the
whole token is stored: with that much entropy a plain hash cannot be brute-forced, and a lookup by
hash needs no per-token salt or constant-time comparison.
"""
from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

import psycopg

ROLES = ("reader", "writer", "admin")
_TOKEN_RE = re.compile(r"^cr_([a-f0-9]{12})_[A-Za-z0-9_-]{20,}$")
_ID_RE = re.compile(r"^[a-f0-9]{8,32}$")


@dataclass(frozen=True)
class TokenRecord:
    id: str
    tenant: str
    groups: tuple[str, ...]
    role: str
    name: str
    created_at: object = None
    revoked_at: object = None

    def to_dict(self) -> dict:
        return {"id": self.id, "tenant": self.tenant, "groups": list(self.groups), "role": self.role,
                "name": self.name, "created_at": self.created_at, "revoked_at": self.revoked_at,
                "revoked": self.revoked_at is not None}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def looks_like_token(value: str) -> bool:
    return bool(_TOKEN_RE.match(value))


def clean_groups(groups) -> tuple[str, ...]:
    return tuple(sorted({g.strip() for g in groups if g and g.strip()}))


def create_token(conn: psycopg.Connection, tenant: str, groups, role: str = "reader", name: str = "") -> tuple[str, TokenRecord]:
    """A new token (returned once, never stored) and its record."""
    tenant = (tenant or "").strip()
    groups = clean_groups(groups)
    if not tenant:
        raise ValueError("a token needs a tenant")
    if not groups:
        raise ValueError("a token needs at least one group")
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    token_id = secrets.token_hex(6)
    token = f"cr_{token_id}_{secrets.token_urlsafe(32)}"
    row = conn.execute(
        "INSERT INTO api_tokens (id, token_hash, tenant_id, groups, role, name) VALUES (%s, %s, %s, %s, %s, %s)"
        " RETURNING created_at",
        (token_id, hash_token(token), tenant, list(groups), role, name),
    ).fetchone()
    conn.commit()
    return token, TokenRecord(token_id, tenant, groups, role, name, row[0])


def verify_token(conn: psycopg.Connection, token: str) -> TokenRecord | None:
    """The record of a valid, unrevoked token; None otherwise."""
    if not looks_like_token(token):
        return None
    row = conn.execute(
        "SELECT id, tenant_id, groups, role, name, created_at FROM api_tokens"
        " WHERE token_hash = %s AND revoked_at IS NULL",
        (hash_token(token),),
    ).fetchone()
    conn.commit()
    if row is None:
        return None
    return TokenRecord(row[0], row[1], tuple(row[2]), row[3], row[4], row[5])


def revoke_token(conn: psycopg.Connection, token_or_id: str) -> str | None:
    """Revoke by the token itself or by its id; the id revoked, or None when no live token matched."""
    value = token_or_id.strip()
    if looks_like_token(value):
        row = conn.execute(
            "UPDATE api_tokens SET revoked_at = now() WHERE token_hash = %s AND revoked_at IS NULL RETURNING id",
            (hash_token(value),),
        ).fetchone()
    elif _ID_RE.match(value):
        row = conn.execute(
            "UPDATE api_tokens SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL RETURNING id", (value,)
        ).fetchone()
    else:
        row = None
    conn.commit()
    return row[0] if row else None


def list_tokens(conn: psycopg.Connection, tenant: str | None = None) -> list[TokenRecord]:
    rows = conn.execute(
        "SELECT id, tenant_id, groups, role, name, created_at, revoked_at FROM api_tokens"
        " WHERE %(tenant)s::text IS NULL OR tenant_id = %(tenant)s ORDER BY tenant_id, created_at, id",
        {"tenant": tenant},
    ).fetchall()
    conn.commit()
    return [TokenRecord(r[0], r[1], tuple(r[2]), r[3], r[4], r[5], r[6]) for r in rows]
