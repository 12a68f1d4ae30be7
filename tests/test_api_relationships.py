"""GET /v1/relationships: the whole edge list of the caller's access level, paged like every list
(`limit` bounded, `offset`, `total`, a stable order), filtered by entity, and never an edge of a level
the token may not read.

Over the session's shared demo tenant and its offline graph (read only here): levels `staff` (public,
staff) and `all` (every group, hr included)."""
from __future__ import annotations

import pytest

from api import tokens
from graph import store

PROBLEM = "application/problem+json"
HR_ONLY = "sandpiper"  # "Project Sandpiper" appears only in hr documents (as in tests/test_graph_build.py)


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def tok(db, demo_tenant):
    spec = {"staff": ["public", "staff"], "public": ["public"], "everyone": ["public", "staff", "hr", "finance"]}
    with db.connection() as conn:
        return {name: tokens.create_token(conn, demo_tenant, groups, "reader", f"edges-{name}")[0]
                for name, groups in spec.items()}


@pytest.fixture(scope="module")
def level_keys(db, demo_tenant) -> dict[str, dict[str, str]]:
    """level -> served entity key -> name."""
    with db.connection() as conn:
        return {level: {e.key: e.name for e in store.load_entities(conn, demo_tenant, level)} for level in ("staff", "all")}


def _get(client, token: str, **params) -> dict:
    r = client.get("/v1/relationships", params=params, headers=bearer(token))
    assert r.status_code == 200, r.text
    return r.json()


def test_pages_add_up_to_the_whole_list_in_a_stable_order(client, tok, level_keys):
    whole = _get(client, tok["staff"], limit=1000)
    edges = whole["relationships"]
    assert whole["access_level"] == "staff" and whole["total"] == len(edges) > 5
    weights = [e["weight"] for e in edges]
    assert weights == sorted(weights, reverse=True)  # strongest first
    assert len({(e["source"], e["target"]) for e in edges}) == len(edges)
    names = level_keys["staff"]
    assert all(names[e["source"]] == e["source_name"] and names[e["target"]] == e["target_name"] for e in edges)
    size = len(edges) // 4 + 1  # a few pages, the last one short
    paged, offset = [], 0
    while True:
        page = _get(client, tok["staff"], limit=size, offset=offset)
        assert (page["total"], page["limit"], page["offset"]) == (whole["total"], size, offset)
        paged += page["relationships"]
        if len(page["relationships"]) < size:
            break
        offset += size
    assert paged == edges  # ties in weight broken the same way on every page
    beyond = _get(client, tok["staff"], offset=whole["total"])
    assert beyond["relationships"] == [] and beyond["total"] == whole["total"]


def test_entity_filter_lists_the_relationships_touching_it(client, tok):
    edges = _get(client, tok["staff"], limit=1000)["relationships"]
    key = edges[0]["source"]
    touching = [e for e in edges if key in (e["source"], e["target"])]
    found = _get(client, tok["staff"], entity=key, limit=1000)
    assert found["relationships"] == touching and found["total"] == len(touching) >= 1
    assert _get(client, tok["staff"], entity="no such entity")["total"] == 0


def test_a_reader_of_a_lower_level_never_sees_an_edge_of_a_higher_one(client, tok, level_keys):
    hr_only = [k for k, name in level_keys["all"].items() if HR_ONLY in name.lower() and k not in level_keys["staff"]]
    assert hr_only  # the test can fail: the hr-only entity is in the `all` graph
    touching = [_get(client, tok["everyone"], entity=k)["total"] for k in hr_only]
    assert _get(client, tok["everyone"])["access_level"] == "all" and sum(touching) > 0  # ... with edges
    staff = _get(client, tok["staff"], limit=1000)["relationships"]
    assert all(e["source"] in level_keys["staff"] and e["target"] in level_keys["staff"] for e in staff)
    assert HR_ONLY not in str(staff).lower()
    for k in hr_only:
        body = _get(client, tok["staff"], entity=k)
        assert body["relationships"] == [] and body["total"] == 0
    # a level is named only among those the token may read; an unreadable one is as unknown as a made-up one
    for name in ("all", "nosuch"):
        r = client.get("/v1/relationships", params={"level": name}, headers=bearer(tok["staff"]))
        assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM), r.text
        assert "readable: staff" in r.json()["detail"]
    lower = _get(client, tok["everyone"], level="staff", limit=1000)
    assert lower["access_level"] == "staff" and lower["relationships"] == staff


def test_a_reader_without_a_level_gets_an_empty_list(client, tok):
    body = _get(client, tok["public"])
    assert body["relationships"] == [] and body["total"] == 0 and body["access_level"] is None


@pytest.mark.parametrize("params", [
    {"limit": 1001}, {"limit": 0}, {"offset": -1}, {"entity": ""}, {"entity": "a\x00b"}, {"entity": "x" * 201},
    {"level": "../all"},
])
def test_bad_parameters_are_422_naming_the_parameter(client, tok, params):
    r = client.get("/v1/relationships", params=params, headers=bearer(tok["staff"]))
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM), r.text
    assert set(params) & {e["field"] for e in r.json()["errors"]}


def test_openapi_lists_the_endpoint_with_its_total(client):
    spec = client.get("/openapi.json").json()
    assert {"total", "limit", "offset", "relationships"} <= set(spec["components"]["schemas"]["RelationshipList"]["required"])
    get = spec["paths"]["/v1/relationships"]["get"]
    assert {p["name"] for p in get["parameters"]} == {"level", "entity", "limit", "offset"}
