"""Every list endpoint pages the same way: `limit` (bounded: 422 above the maximum), `offset`, `total`,
and a stable order with ties broken by id, so the pages of a list put together are the list.

Over the session's shared demo tenant and its offline graph (read only here)."""
from __future__ import annotations

import uuid

import pytest

from api import tokens

PROBLEM = "application/problem+json"


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def tok(db, demo_tenant):
    spec = {"staff": (demo_tenant, ["public", "staff"], "reader"), "public": (demo_tenant, ["public"], "reader"),
            "admin": (demo_tenant, ["public", "staff"], "admin"),
            "other_admin": (f"pages_{uuid.uuid4().hex[:8]}", ["public", "staff", "hr"], "admin")}
    with db.connection() as conn:
        return {name: tokens.create_token(conn, t, g, r, f"pages-{name}")[0] for name, (t, g, r) in spec.items()}


def _pages(client, path: str, key: str, token: str, size: int, **params) -> tuple[list, int]:
    """Every page of a list, put together, and the total each page reported (all the same)."""
    items, totals, offset = [], set(), 0
    while True:
        r = client.get(path, params={**params, "limit": size, "offset": offset}, headers=bearer(token))
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["limit"], body["offset"]) == (size, offset)
        totals.add(body["total"])
        items += body[key]
        if len(body[key]) < size:
            break
        offset += size
    assert len(totals) == 1, totals
    return items, totals.pop()


def test_communities_pages_add_up_to_the_list(client, tok):
    whole = client.get("/v1/communities", params={"limit": 1000}, headers=bearer(tok["staff"])).json()
    assert whole["total"] == len(whole["communities"]) > 3 and whole["access_level"] == "staff"
    order = [(c["level"], c["id"]) for c in whole["communities"]]
    assert order == sorted(order)
    paged, total = _pages(client, "/v1/communities", "communities", tok["staff"], 3)
    assert paged == whole["communities"] and total == whole["total"]
    level0 = client.get("/v1/communities", params={"level": 0, "limit": 1}, headers=bearer(tok["staff"])).json()
    assert level0["total"] == sum(1 for c in whole["communities"] if c["level"] == 0) and len(level0["communities"]) == 1
    beyond = client.get("/v1/communities", params={"offset": whole["total"]}, headers=bearer(tok["staff"])).json()
    assert beyond["communities"] == [] and beyond["total"] == whole["total"]


def test_entities_pages_add_up_to_the_list_in_a_stable_order(client, tok):
    whole = client.get("/v1/entities", params={"limit": 500}, headers=bearer(tok["staff"])).json()
    assert whole["total"] >= len(whole["entities"]) > 5
    keys = [(-e["degree"], e["key"]) for e in whole["entities"]]
    assert keys == sorted(keys)  # best connected first, ties by key
    paged, total = _pages(client, "/v1/entities", "entities", tok["staff"], 7)
    assert total == whole["total"] and paged[:len(whole["entities"])] == whole["entities"]
    name = whole["entities"][0]["name"]
    found = client.get("/v1/entities", params={"q": name, "limit": 1}, headers=bearer(tok["staff"])).json()
    assert found["total"] >= 1 and found["entities"][0]["name"] == name


def test_jobs_are_listed_for_the_tenants_admin_only(client, tok):
    jobs, total = _pages(client, "/v1/jobs", "jobs", tok["admin"], 1)
    assert total == len(jobs) >= 1  # the graph build of the demo tenant
    assert [j["id"] for j in jobs] == sorted((j["id"] for j in jobs), reverse=True)
    assert all("tenant" not in j for j in jobs)
    other = client.get("/v1/jobs", headers=bearer(tok["other_admin"])).json()
    assert other["total"] == 0 and other["jobs"] == []  # another tenant's admin sees none of them
    r = client.get("/v1/jobs", headers=bearer(tok["staff"]))
    assert r.status_code == 403 and r.headers["content-type"].startswith(PROBLEM)


def test_a_reader_without_a_level_gets_empty_lists_with_zero_totals(client, tok):
    for path, key in (("/v1/communities", "communities"), ("/v1/entities", "entities")):
        body = client.get(path, headers=bearer(tok["public"])).json()
        assert body[key] == [] and body["total"] == 0 and body["access_level"] is None


@pytest.mark.parametrize("path,params", [
    ("/v1/communities", {"limit": 1001}), ("/v1/communities", {"limit": 0}), ("/v1/communities", {"offset": -1}),
    ("/v1/entities", {"limit": 501}), ("/v1/entities", {"offset": "x"}), ("/v1/documents", {"limit": 1001}),
    ("/v1/jobs", {"limit": 201}), ("/v1/jobs", {"offset": 10 ** 30}),
])
def test_limits_beyond_the_maximum_are_422_naming_the_parameter(client, tok, path, params):
    r = client.get(path, params=params, headers=bearer(tok["admin"]))
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM), r.text
    assert set(params) & {e["field"] for e in r.json()["errors"]}


def test_openapi_lists_totals_on_every_list(client):
    spec = client.get("/openapi.json").json()
    for name in ("CommunityList", "EntityList", "DocumentList", "JobList"):
        assert {"total", "limit", "offset"} <= set(spec["components"]["schemas"][name]["required"]), name
    assert {p["name"] for p in spec["paths"]["/v1/jobs"]["get"]["parameters"]} == {"limit", "offset"}
