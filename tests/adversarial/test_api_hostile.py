"""Hostile input over HTTP: what an unauthenticated or malicious client sends must never get a 500,
hang the server, grow its memory, or tell a writer which hidden documents exist.

In-process (TestClient) for what the app decides; a real `crossroads serve` on loopback for what only
the server sees: connections that never finish their request head, and bodies streamed past the limit.
"""
from __future__ import annotations

import json
import random
import select
import socket
import string
import subprocess
import sys
import time
import unicodedata
import uuid
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pytest
from typer.testing import CliRunner

from api import tokens
from core.settings import get_settings
from tests.conftest import ROOT

TENANT = f"hostile_{uuid.uuid4().hex[:8]}"
PROBLEM = "application/problem+json"
HEADER_TIMEOUT_S = 1.0  # the served process's CROSSROADS_API_HEADER_TIMEOUT_S
SLACK_S = 2.0  # scheduling on a shared 2-core machine
MAX_BODY = 20_000_000  # CROSSROADS_API_MAX_BODY_BYTES default
STANDARD_METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"}


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def tok(db) -> dict[str, str]:
    spec = {"staff_writer": (["staff"], "writer"), "public_writer": (["public"], "writer"),
            "reader": (["public", "staff"], "reader")}
    with db.connection() as conn:
        return {name: tokens.create_token(conn, TENANT, groups, role, name)[0] for name, (groups, role) in spec.items()}


def assert_no_server_error(r: httpx.Response, what: str) -> None:
    assert r.status_code < 500, f"{what}: {r.status_code} {r.text[:300]}"
    assert "Traceback" not in r.text and 'File "' not in r.text, what


def still_serves(client, tok) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/v1/documents", headers=bearer(tok["reader"])).status_code == 200


# --- hidden documents: the same answer as missing ones ---------------------------------------------


def _normalised(r: httpx.Response, doc_id: str) -> tuple[int, str]:
    assert r.headers["content-type"].startswith(PROBLEM) or r.status_code == 405, r.text
    return r.status_code, r.text.replace(quote(doc_id, safe="/"), "ID").replace(doc_id, "ID")


def test_a_writer_cannot_tell_a_hidden_document_from_a_missing_one(client, tok):
    hidden, missing = "hr-review.md", "no-such-review.md"
    staff, public = bearer(tok["staff_writer"]), bearer(tok["public_writer"])
    r = client.put(f"/v1/documents/{hidden}", json={"text": "# Review\n\nSalary bands for 2026.", "acl": ["staff"]},
                   headers=staff)
    assert r.status_code == 201, r.text
    before = {d["doc_id"]: d for d in client.get("/v1/documents", headers=staff).json()["documents"]}[hidden]
    probes = [("DELETE", "", None), ("PATCH", "/acl", {"acl": ["public"]}), ("GET", "", None),
              ("PATCH", "", {"acl": ["public"]}), ("POST", "", {"text": "x", "acl": ["public"]})]
    for method, suffix, body in probes:
        answers = [_normalised(client.request(method, f"/v1/documents/{doc_id}{suffix}", json=body, headers=public),
                               doc_id) for doc_id in (hidden, missing)]
        assert answers[0] == answers[1], (method, suffix, answers)
    # a PUT over the hidden id neither replaces it nor says more than DELETE says of a missing one
    put = client.put(f"/v1/documents/{hidden}", json={"text": "Overwritten.", "acl": ["public"]}, headers=public)
    delete_missing = client.delete(f"/v1/documents/{missing}", headers=public)
    assert _normalised(put, hidden) == _normalised(delete_missing, missing)
    batch = client.post("/v1/documents:batch", json={"documents": [{"doc_id": hidden, "text": "Overwritten.",
                                                                    "acl": ["public"]}]}, headers=public).json()
    assert batch["results"][0]["status"] == "rejected"
    assert "exist" not in batch["results"][0]["error"], batch
    after = {d["doc_id"]: d for d in client.get("/v1/documents", headers=staff).json()["documents"]}[hidden]
    assert after == before


# --- `crossroads levels set` with bad input --------------------------------------------------------


@pytest.fixture(scope="module")
def staff_group(client, tok) -> str:
    """A group the tenant's documents hold, so a level may name it."""
    r = client.put("/v1/documents/levels.md", json={"text": "Staff level anchor.", "acl": ["staff"]},
                   headers=bearer(tok["staff_writer"]))
    assert r.status_code in (200, 201), r.text
    return "staff"


@pytest.fixture
def levels_cli(db, monkeypatch):
    """`crossroads levels set` in-process against the test database."""
    from api.cli.main import app

    monkeypatch.setenv("CROSSROADS_DATABASE_URL", db.url)
    get_settings.cache_clear()
    yield lambda *args: CliRunner().invoke(app, ["levels", "set", *args])
    get_settings.cache_clear()


@pytest.mark.parametrize("name, groups, hint", [
    ("", "staff", "letters"), ("two words", "staff", "letters"), ("it's", "staff", "letters"),
    ("x" * 65, "staff", "64"), ("all", "staff", "all"), ("ok", "sta\x01ff", "control"),
])
def test_levels_set_refuses_bad_input_with_a_usage_error(levels_cli, staff_group, name, groups, hint):
    result = levels_cli(TENANT, name, groups)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output and "psycopg" not in result.output, result.output
    assert hint in result.output, result.output


def test_levels_set_accepts_a_good_level(levels_cli, staff_group):
    result = levels_cli(TENANT, "staff-only", staff_group)
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output


def test_levels_set_warns_of_a_group_no_document_holds_yet(levels_cli, staff_group):
    """A level may be defined before its documents are indexed, but a misspelt group is pointed out."""
    result = levels_cli(TENANT, "ahead", "no-such-group")
    assert result.exit_code == 0, result.output
    assert "no-such-group" in result.output and "warning" in result.output


# --- fuzzed bodies, headers, query strings and ids -------------------------------------------------


def test_malformed_bodies_are_4xx_not_500(client, tok):
    h = {**bearer(tok["staff_writer"]), "Content-Type": "application/json"}
    bodies = {
        "non-UTF-8": b'{"text": "caf\xe9 \xff\xfe", "acl": ["staff"]}',
        "invalid JSON": b'{"text": "x", "acl": [staff]}',
        "truncated": b'{"text": "x", "acl": ["st',
        "nested 10k arrays": b"[" * 10_000 + b"]" * 10_000,
        "nested 10k objects": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
        "nested 900 in a field": b'{"text": "x", "acl": ' + b"[" * 900 + b"]" * 900 + b"}",
        "lone surrogate": b'{"text": "\\ud800", "acl": ["staff"]}',
        "NaN": b'{"text": "x", "acl": ["staff"], "title": NaN}',
        "empty": b"",
        "null": b"null",
    }
    for what, body in bodies.items():
        for method, path in (("PUT", "/v1/documents/fuzz.md"), ("POST", "/v1/documents:batch"), ("POST", "/v1/search"),
                             ("PATCH", "/v1/documents/fuzz.md/acl")):
            started = time.monotonic()
            r = client.request(method, path, content=body, headers=h)
            assert_no_server_error(r, f"{what} to {method} {path}")
            assert 400 <= r.status_code < 500 and time.monotonic() - started < 5, (what, path, r.status_code)
    batch = {"documents": [{"doc_id": "\ud800", "text": "x", "acl": ["staff"]},
                           {"doc_id": "a" + "[" * 50, "text": {"nested": [[[]]]}, "acl": ["staff"]}]}
    r = client.post("/v1/documents:batch", content=json.dumps(batch).encode(), headers=h)
    assert r.status_code == 200 and [i["status"] for i in r.json()["results"]] == ["rejected", "rejected"], r.text
    still_serves(client, tok)


def test_a_huge_body_is_refused_by_its_declared_length(client, tok):
    started = time.monotonic()
    r = client.put("/v1/documents/huge.md", content=b"x" * (MAX_BODY + 1), headers=bearer(tok["staff_writer"]))
    assert r.status_code == 413 and time.monotonic() - started < 5, r.status_code
    assert r.json()["type"].endswith("body-too-large")


def one_per_category() -> dict[str, str]:
    """A character of every Unicode general category (the first found), surrogates included."""
    found: dict[str, str] = {}
    for code in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(code))
        found.setdefault(category, chr(code))
        if len(found) == 30:
            break
    return found


def test_every_unicode_category_in_ids_and_query_strings(client, tok):
    categories = one_per_category()
    assert len(categories) == 30
    writer, reader = bearer(tok["staff_writer"]), bearer(tok["reader"])
    for category, char in categories.items():
        text = f"a{char}b"
        encoded = quote(text.encode("utf-8", "surrogatepass"), safe="")
        for method, path, body, headers in (
            ("DELETE", f"/v1/documents/{encoded}", None, writer),
            ("PATCH", f"/v1/documents/{encoded}/acl", {"acl": ["staff"]}, writer),
            ("PUT", f"/v1/documents/{encoded}", {"text": " ", "acl": ["staff"]}, writer),
            ("GET", f"/v1/documents?limit={encoded}&offset={encoded}", None, reader),
            ("GET", f"/v1/entities?q={encoded}", None, reader),
            ("GET", f"/v1/communities?level={encoded}&{encoded}={encoded}", None, reader),
            ("GET", f"/{encoded}", None, {}),
        ):
            r = client.request(method, path, json=body, headers=headers)
            assert_no_server_error(r, f"{category} {method} {path}")
    # stored for real: every category but controls (Cc) and surrogates (Cs) is a valid id
    ids = {category: f"cat/a{char}b" for category, char in categories.items()}
    r = client.post("/v1/documents:batch", headers={**writer, "Content-Type": "application/json"}, content=json.dumps(
        {"documents": [{"doc_id": i, "text": f"Category {c}.", "acl": ["staff"]} for c, i in ids.items()]}).encode())
    assert r.status_code == 200, r.text
    rejected = {category for category, item in zip(ids, r.json()["results"])
                if item["status"] != "indexed"}
    assert rejected == {"Cc", "Cs"}, r.json()["results"]
    listed = client.get("/v1/documents", params={"limit": 1000}, headers=reader).json()["documents"]
    assert {i for c, i in ids.items() if c not in rejected} <= {d["doc_id"] for d in listed}
    still_serves(client, tok)


def test_garbage_authorization_headers_are_401s(client, tok):
    for value in ("Bearer", "Bearer ", "Bearer " + "A" * 100_000, "Bearer cr_" + "x" * 5000, "Bearer a.b.c",
                  "Bearer " + "é" * 100, "Bearer \t\t", "Basic " + "=" * 1000, "Bearer cr_0_0", "x" * 10_000,
                  "Bearer " + ".".join(["e30"] * 3), "Bearer eyJhbGciOiJub25lIn0.e30."):
        started = time.monotonic()
        r = client.get("/v1/documents", headers={"Authorization": value.encode("utf-8")})
        assert_no_server_error(r, f"Authorization {value[:30]!r}")
        assert r.status_code == 401 and time.monotonic() - started < 5, (value[:30], r.status_code)
    still_serves(client, tok)


def test_path_traversal_reaches_no_file(client, tok):
    writer = bearer(tok["staff_writer"])
    for path in ("/..%2F..%2Fetc%2Fpasswd", "/static/..%2F..%2F..%2Fetc%2Fpasswd", "/%2e%2e/%2e%2e/etc/passwd",
                 "/v1/documents/..%2F..%2Fetc%2Fpasswd", "/v1/documents/..%2F..%2Fetc%2Fpasswd/acl"):
        for method in ("GET", "DELETE", "PATCH"):
            r = client.request(method, path, headers=writer, json={"acl": ["staff"]} if method == "PATCH" else None)
            assert_no_server_error(r, f"{method} {path}")
            assert "root:" not in r.text, path
    still_serves(client, tok)


# --- a real server: slow and oversized requests ----------------------------------------------------


@dataclass
class Served:
    port: int
    process: subprocess.Popen

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(cli_env, tmp_path_factory):
    """`crossroads serve` on loopback, with a short header timeout."""
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = dict(cli_env, CROSSROADS_API_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S))
    with open(log, "wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "api.cli.main", "serve", "--port", str(port),
                                    "--log-level", "warning"], cwd=ROOT, env=env, stdout=sink, stderr=sink)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:  # not listening yet
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"crossroads serve did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    yield Served(port, process)
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float | None:
    """Seconds until the server closed the connection (None: still open after `seconds`), sending one
    byte of `trickle` every 0.2 s meanwhile, as a slow-headers client does."""
    started = time.monotonic()
    sock.setblocking(False)
    while time.monotonic() - started < seconds:
        readable, _, _ = select.select([sock], [], [], 0.2)
        if readable:
            try:
                if sock.recv(65536) == b"":
                    return time.monotonic() - started
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - started
        if trickle:
            try:
                sock.send(trickle[:1])
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - started
            trickle = trickle[1:]
    return None


def test_connections_that_never_finish_a_request_head_are_closed(served):
    silent, half_line, trickling = served.connect(), served.connect(), served.connect()
    try:
        half_line.sendall(b"GET /heal")
        trickling.sendall(b"GET /healthz HTTP/1.1\r\n")
        bound = HEADER_TIMEOUT_S + SLACK_S
        waited = [closed_within(trickling, bound, trickle=b"X-Slow: " + b"a" * 200),
                  closed_within(half_line, bound), closed_within(silent, bound)]
    finally:
        for sock in (silent, half_line, trickling):
            sock.close()
    assert all(w is not None for w in waited), f"still open after {bound} s: {waited}"
    assert httpx.get(served.base + "/healthz", timeout=5).status_code == 200


def metric_methods(base: str) -> set[str]:
    text = httpx.get(base + "/metrics", timeout=10).text
    return {line.split('method="', 1)[1].split('"', 1)[0]
            for line in text.splitlines() if line.startswith("crossroads_http_requests_total{")}


def test_made_up_methods_leave_the_metrics_label_set_bounded(served):
    """Each label value is a time series kept for the process's life: 1,000 made-up methods must not add 1,000."""
    rng = random.Random(7)
    with httpx.Client(base_url=served.base, timeout=10) as http:
        for _ in range(1000):
            method = "".join(rng.choices(string.ascii_uppercase, k=8))
            r = http.request(method, rng.choice(["/v1/documents", "/healthz", "/nowhere"]))
            assert r.status_code in (404, 405), (method, r.status_code)
    methods = metric_methods(served.base)
    assert methods <= STANDARD_METHODS | {"other"}, sorted(methods)[:20]
    assert "other" in methods


def read_status(sock: socket.socket, seconds: float) -> int:
    sock.settimeout(seconds)
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0


def test_a_huge_declared_body_is_refused_before_it_is_sent(served):
    with served.connect() as sock:
        started = time.monotonic()
        sock.sendall(b"PUT /v1/documents/huge.md HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % (MAX_BODY * 5))
        assert read_status(sock, 5) == 413 and time.monotonic() - started < 5


def test_a_streamed_body_is_cut_off_at_the_limit(served):
    chunk = b"x" * 65536
    frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    sent = 0
    with served.connect() as sock:
        sock.sendall(b"PUT /v1/documents/huge.md HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        sock.setblocking(False)
        deadline = time.monotonic() + 20
        while sent < 3 * MAX_BODY and time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock], [], 0.5)
            if readable:
                break
            if writable:
                try:
                    sent += sock.send(frame)
                except (BlockingIOError, ConnectionResetError, BrokenPipeError):
                    break
        sock.setblocking(True)
        assert read_status(sock, 5) == 413
    assert sent < MAX_BODY + 8_000_000, f"the server read {sent:,} bytes before refusing"


def test_a_huge_header_is_refused_and_the_server_still_serves(served):
    with served.connect() as sock:
        sock.sendall(b"GET /v1/documents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"A" * 200_000 + b"\r\n\r\n")
        assert read_status(sock, 5) in (400, 431)
    assert httpx.get(served.base + "/healthz", timeout=5).status_code == 200
