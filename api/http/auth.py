"""Bearer authentication: an API token (`crossroads token create`) or, when configured, a JWT.

The verified token is the only source of the caller's tenant, groups and role; nothing in a
request body or query can add a group. Roles are ordered: reader < writer < admin.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api import tokens
from api.http.problems import ApiProblem
from core.settings import Settings
from core.text_safety import CONTROL


log = logging.getLogger("crossroads.api")

ROLE_RANK = {"reader": 0, "writer": 1, "admin": 2}
REALM = 'Bearer realm="crossroads"'

bearer = HTTPBearer(auto_error=False, description="An API token from `crossroads token create`, or a JWT.")


@dataclass(frozen=True)
class Principal:
    tenant: str
    groups: tuple[str, ...]
    role: str
    subject: str  # token id, or `jwt:<sub>`

    def can(self, role: str) -> bool:
        return ROLE_RANK[self.role] >= ROLE_RANK[role]


def _unauthorized(detail: str, error: str | None = None) -> ApiProblem:
    challenge = REALM + (f', error="{error}"' if error else "")
    return ApiProblem(401, "unauthorized", "Unauthorized", detail, headers={"WWW-Authenticate": challenge})


@lru_cache(maxsize=8)
def _pem(value: str) -> str:
    text = value.strip()
    if text.startswith("-----BEGIN"):
        return text
    return Path(text).expanduser().read_text(encoding="utf-8")


def _jwt_configured(settings: Settings) -> bool:
    return bool((settings.jwt_secret and settings.jwt_secret.get_secret_value()) or settings.jwt_public_key)


def verify_jwt(token: str, settings: Settings) -> Principal:
    """A principal from a JWT signed with the configured HS256 secret or RS256 key; 401 otherwise."""
    import jwt

    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise _unauthorized("The bearer token is neither a Crossroads API token nor a well-formed JWT.",
                            "invalid_token") from None
    alg = header.get("alg")
    if alg == "HS256" and settings.jwt_secret and settings.jwt_secret.get_secret_value():
        key = settings.jwt_secret.get_secret_value()
    elif alg == "RS256" and settings.jwt_public_key:
        try:
            key = _pem(settings.jwt_public_key)
        except OSError as exc:
            log.error("cannot read CROSSROADS_JWT_PUBLIC_KEY: %s", exc)
            raise ApiProblem(503, "auth-misconfigured", "Authentication misconfigured",
                             "The server cannot read its JWT public key; tell its operator.") from None
    else:
        raise _unauthorized(f"JWTs signed with {alg!r} are not accepted here.", "invalid_token")
    required = ["exp"] + (["aud"] if settings.jwt_audience else []) + (["iss"] if settings.jwt_issuer else [])
    try:
        claims = jwt.decode(
            token, key, algorithms=[alg], audience=settings.jwt_audience, issuer=settings.jwt_issuer,
            options={"require": required, "verify_aud": bool(settings.jwt_audience)}, leeway=30,
        )
    except jwt.PyJWTError as exc:
        raise _unauthorized(f"The JWT was rejected: {exc}.", "invalid_token") from None
    tenant = claims.get("tenant")
    raw_groups = claims.get("groups")
    if isinstance(raw_groups, str):
        raw_groups = raw_groups.split(",")
    role = claims.get("role", "reader")
    if not isinstance(tenant, str) or not tenant.strip():
        raise _unauthorized("The JWT has no `tenant` claim.", "invalid_token")
    if not isinstance(raw_groups, list) or not all(isinstance(g, str) for g in raw_groups):
        raise _unauthorized("The JWT's `groups` claim must be a list of group names.", "invalid_token")
    if any(CONTROL.search(g) for g in raw_groups) or CONTROL.search(tenant):
        # NUL cannot reach PostgreSQL and no group or tenant is named with control characters
        raise _unauthorized("The JWT's `tenant` and `groups` must not contain control characters.", "invalid_token")
    groups = tokens.clean_groups(raw_groups)
    if not groups:
        raise _unauthorized("The JWT's `groups` claim is empty.", "invalid_token")
    if role not in ROLE_RANK:
        raise _unauthorized(f"The JWT's `role` claim must be one of {', '.join(ROLE_RANK)}.", "invalid_token")
    return Principal(tenant.strip(), groups, role, f"jwt:{claims.get('sub', '')}")


def authenticate(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Principal:
    """The caller, from `Authorization: Bearer <token>`; 401 with WWW-Authenticate when missing or bad."""
    if credentials is None:
        header = request.headers.get("authorization")
        if header:
            raise _unauthorized("Use `Authorization: Bearer <token>`.", "invalid_request")
        raise _unauthorized("This endpoint needs `Authorization: Bearer <token>` (see `crossroads token create`).")
    token = credentials.credentials.strip()
    services = request.app.state.services
    if tokens.looks_like_token(token):
        with services.db().connection() as conn:
            record = tokens.verify_token(conn, token)
        if record is None:
            raise _unauthorized("The token is unknown or was revoked.", "invalid_token")
        principal = Principal(record.tenant, record.groups, record.role, record.id)
    elif token.count(".") == 2 and _jwt_configured(services.settings):
        principal = verify_jwt(token, services.settings)
    else:
        raise _unauthorized("The token is not valid.", "invalid_token")
    request.state.principal = principal
    return principal


def require(role: str):
    """A dependency: the authenticated caller, who must hold at least `role` (403 otherwise)."""
    if role not in ROLE_RANK:
        raise ValueError(role)

    def check(principal: Principal = Depends(authenticate)) -> Principal:
        if not principal.can(role):
            raise ApiProblem(403, "forbidden", "Forbidden",
                             f"This needs the {role} role; the token has {principal.role}.")
        return principal

    return check


reader = require("reader")
writer = require("writer")
admin = require("admin")
