"""Tokens from the CLI, JWT verification, and the API while its database is down."""
from __future__ import annotations

import json
import os
import time
import uuid

import jwt
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api import tokens
from api.http.app import create_app
from core.settings import Settings
from tests.conftest import crossroads

PROBLEM = "application/problem+json"
SECRET = "hs256-secret-for-the-api-tests-0123456789"


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}




def test_token_cli_create_list_revoke(make_database, tmp_path, settings, local_embedder):
    url = make_database()
    env = {**os.environ, "CROSSROADS_DATABASE_URL": url, "CROSSROADS_STATE_DIR": str(tmp_path)}
    token = crossroads(env, "token", "create", "--tenant", "acme", "--groups", "staff, hr", "--role", "writer").stdout
    token = token.strip()
    assert tokens.looks_like_token(token) and "\n" not in token  # only the token is printed
    listed = json.loads(crossroads(env, "token", "list", "--tenant", "acme", "--json").stdout)["tokens"]
    assert len(listed) == 1
    record = listed[0]
    assert record["tenant"] == "acme" and record["groups"] == ["hr", "staff"] and record["role"] == "writer"
    assert record["id"] in token and token not in json.dumps(listed) and not record["revoked"]
    crossroads(env, "token", "create", "--tenant", "acme", "--groups", "staff", "--role", "root", rc=1)

    from core.database import open_database

    with open_database(settings, url=url) as db:
        with TestClient(create_app(settings, db, embedder=local_embedder), raise_server_exceptions=False) as client:
            assert client.get("/v1/documents", headers=bearer(token)).status_code == 200
            crossroads(env, "token", "revoke", record["id"])
            r = client.get("/v1/documents", headers=bearer(token))
            assert r.status_code == 401 and r.headers["content-type"].startswith(PROBLEM)
    crossroads(env, "token", "revoke", token, rc=1)  # already revoked
    listed = json.loads(crossroads(env, "token", "list", "--json").stdout)["tokens"]
    assert [t["revoked"] for t in listed] == [True]


# --- JWT ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rsa_keys():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    def pair():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
        public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        return private, public

    return pair(), pair()


@pytest.fixture(scope="module")
def jwt_client(db, settings, local_embedder, rsa_keys, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("jwt") / "public.pem"
    key_file.write_text(rsa_keys[0][1])
    configured = settings.model_copy(update={"jwt_secret": SecretStr(SECRET), "jwt_public_key": str(key_file),
                                             "jwt_audience": "crossroads"})
    with TestClient(create_app(configured, db, embedder=local_embedder), raise_server_exceptions=False) as client:
        yield client


def claims(**overrides) -> dict:
    base = {"tenant": f"jwt_{uuid.uuid4().hex[:6]}", "groups": ["staff"], "role": "writer", "aud": "crossroads",
            "exp": int(time.time()) + 300, "sub": "svc-1"}
    return {k: v for k, v in {**base, **overrides}.items() if v is not None}


def test_jwt_hs256_and_rs256_are_verified(jwt_client, rsa_keys):
    (private, _), (other_private, _) = rsa_keys
    good_hs = jwt.encode(claims(), SECRET, algorithm="HS256")
    good_rs = jwt.encode(claims(), private, algorithm="RS256")
    for token in (good_hs, good_rs):
        assert jwt_client.get("/v1/documents", headers=bearer(token)).status_code == 200
    doc = {"text": "JWT writers can write.", "acl": ["staff"]}
    assert jwt_client.put("/v1/documents/jwt.md", json=doc, headers=bearer(good_hs)).status_code == 201
    reader = jwt.encode(claims(role="reader"), SECRET, algorithm="HS256")
    assert jwt_client.put("/v1/documents/jwt.md", json=doc, headers=bearer(reader)).status_code == 403

    bad = {
        "expired": jwt.encode(claims(exp=int(time.time()) - 3600), SECRET, algorithm="HS256"),
        "wrong secret": jwt.encode(claims(), SECRET[::-1], algorithm="HS256"),
        "wrong audience": jwt.encode(claims(aud="someone-else"), SECRET, algorithm="HS256"),
        "no exp": jwt.encode(claims(exp=None), SECRET, algorithm="HS256"),
        "no groups": jwt.encode(claims(groups=[]), SECRET, algorithm="HS256"),
        "no tenant": jwt.encode(claims(tenant=None), SECRET, algorithm="HS256"),
        "bad role": jwt.encode(claims(role="root"), SECRET, algorithm="HS256"),
        "other key": jwt.encode(claims(), other_private, algorithm="RS256"),
        "alg none": jwt.encode(claims(), None, algorithm="none"),
        "NUL in a group": jwt.encode(claims(groups=["public\u0000staff"]), SECRET, algorithm="HS256"),
        "control character group": jwt.encode(claims(groups=["staff", "\u0000"]), SECRET, algorithm="HS256"),
    }
    for why, token in bad.items():
        r = jwt_client.get("/v1/documents", headers=bearer(token))
        assert r.status_code == 401, why
        assert r.headers["content-type"].startswith(PROBLEM) and "invalid_token" in r.headers["www-authenticate"]


# --- degraded, not down -----------------------------------------------------------------------------------


def test_database_down_means_not_ready_and_503_not_500(tmp_path):
    down = Settings(state_dir=tmp_path, database_url="postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    with TestClient(create_app(down), raise_server_exceptions=False) as client:
        assert client.get("/healthz").status_code == 200
        r = client.get("/readyz")
        assert r.status_code == 503 and r.headers["content-type"].startswith(PROBLEM)
        r = client.post("/v1/search", json={"query": "retry"}, headers=bearer("cr_0123456789ab_" + "A" * 43))
        assert r.status_code == 503 and r.headers["content-type"].startswith(PROBLEM)
        assert "127.0.0.1" not in r.text and r.headers.get("retry-after")
