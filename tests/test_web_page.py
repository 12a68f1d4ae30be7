"""The analysts' web page, end to end: the real app under uvicorn, driven in headless Chromium.

Debian's `chromium` is driven through Playwright's Python package with `executable_path` (no
`playwright install`, no network). `.ci/run` installs chromium when it is missing; on a machine
without it the browser tests are skipped, saying so. The static checks (no external resource, the
security headers) need no browser.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from api import tokens
from api.app import create_app
from api.web import WEB_DIR

QUESTION = "What does error ERR_2043 mean in the Carrier Connector?"
CITED_DOC = "services/carrier-connector.md"


def _chromium() -> str | None:
    for candidate in (os.environ.get("CROSSROADS_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


# --- the page's files, without a browser ---------------------------------------------------------------


def test_page_references_no_external_resource():
    """Works offline: no http(s)/protocol-relative URL in the HTML, CSS or script (no CDN, no web font)."""
    external = re.compile(r"""(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}""", re.IGNORECASE)
    for name in ("index.html", "app.js", "style.css"):
        text = (WEB_DIR / name).read_text(encoding="utf-8")
        # the SVG namespace is an identifier, never fetched
        text = text.replace('"http://www.w3.org/2000/svg"', '""')
        assert not external.search(text), f"{name} references {external.search(text).group(0)}"
    html = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    for ref in re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", html):
        assert ref.startswith("/static/") or ref.startswith("data:"), ref


def test_script_never_renders_data_as_html():
    script = (WEB_DIR / "app.js").read_text(encoding="utf-8")
    for sink in (r"\.innerHTML\b", r"\.outerHTML\b", r"insertAdjacentHTML", r"\beval\(", r"document\.write",
                 r"new Function\(", r"createContextualFragment"):
        assert not re.search(sink, script), sink


def test_index_and_assets_are_served_with_a_strict_policy(db, settings, local_embedder):
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings, db, embedder=local_embedder)) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert '<script src="/static/app.js"' in page.text
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
        for asset, media in (("/static/app.js", "javascript"), ("/static/style.css", "text/css")):
            r = client.get(asset)
            assert r.status_code == 200 and media in r.headers["content-type"], asset
            assert r.headers["x-content-type-options"] == "nosniff"
        assert client.get("/static/missing.js").status_code == 404
        # the API is still the API
        assert client.get("/v1/communities").status_code == 401


# --- the page in a browser ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def live_server(db, settings, local_embedder, demo_tenant):
    """The app under a real uvicorn on 127.0.0.1, in a background thread."""
    port = _free_port()
    app = create_app(settings, db, embedder=local_embedder)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, name="uvicorn-web-test", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    assert httpx.get(url + "/healthz", timeout=10).status_code == 200
    yield url
    server.should_exit = True
    thread.join(timeout=15)


@pytest.fixture(scope="module")
def staff_token(db, demo_tenant) -> str:
    with db.connection() as conn:
        token, _ = tokens.create_token(conn, demo_tenant, ["public", "staff"], "reader", "web page test")
    return token


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    if executable is None:
        pytest.skip("no chromium binary (apt-get install chromium; .ci/run does it): the browser tests cannot run")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, headless=True,
                               args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(20_000)
    problems: list[str] = []
    p.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    p.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    # nothing may leave this origin: every request is checked
    outside: list[str] = []
    p.on("request", lambda req: None if req.url.startswith(live_server) or req.url.startswith("data:")
         else outside.append(req.url))
    p.goto(live_server + "/")
    yield p
    context.close()
    assert not outside, f"the page requested other origins: {outside}"
    # a 401 from the bad-token test is logged by Chromium as a failed resource; anything else is a bug
    unexpected = [m for m in problems if "401" not in m]
    assert not unexpected, unexpected


def _screenshot(page, name: str) -> None:
    """With CROSSROADS_WEB_SCREENSHOTS=dir, keep a picture of each step (for looking at the page)."""
    folder = os.environ.get("CROSSROADS_WEB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def _sign_in(page, token: str) -> None:
    page.fill("#token", token)
    page.click("#signin-button")


def test_sign_in_ask_and_click_a_citation(page, live_server, staff_token):
    from playwright.sync_api import expect

    _sign_in(page, staff_token)
    expect(page.locator("#session")).to_be_visible()
    expect(page.locator("#session-label")).to_contain_text("staff")
    expect(page.locator("#signin")).to_be_hidden()

    page.fill("#question", QUESTION)
    page.click("#ask-button")
    # the answer (streamed by default) is complete when its usage line and citation buttons are drawn
    expect(page.locator("#usage")).to_contain_text("latency", timeout=120_000)
    expect(page.locator("#route-name")).to_have_text("local")
    expect(page.locator("#route-confidence")).to_contain_text("confidence")
    assert page.locator("#route-reason").inner_text().strip()
    expect(page.locator("#badges .badge.offline")).to_be_visible()
    expect(page.locator("#usage")).to_contain_text("tokens")
    expect(page.locator("#usage")).to_contain_text("cost")
    assert "ERR_2043" in page.locator("#answer").inner_text()

    first = page.locator("#answer button.cite[data-citation='1']").first
    expect(first).to_be_visible()
    first.click()
    panel = page.locator("#citation-panel")
    expect(panel).to_be_visible()
    expect(page.locator("#citation-location")).to_contain_text(CITED_DOC)
    _screenshot(page, "ask-citation")
    quote = page.locator("#citation-quote").inner_text()
    assert "ERR_2043" in quote and len(quote) > 20
    # the quote shown is the API's quote of citation 1, verbatim (rendered as text, not HTML)
    api_answer = httpx.post(live_server + "/v1/ask", json={"question": QUESTION},
                            headers={"Authorization": f"Bearer {staff_token}"}, timeout=120).json()
    cited = next(c for c in api_answer["citations"] if c["number"] == 1)
    assert cited["doc_id"] == CITED_DOC
    assert quote.strip() == cited["quote"].strip()
    page.click("#citation-close")
    expect(panel).to_be_hidden()

    # the token survives a reload (sessionStorage) and sign-out forgets it
    page.reload()
    expect(page.locator("#session")).to_be_visible()
    page.click("#signout")
    expect(page.locator("#signin")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


def test_communities_findings_and_entity_graph(page, staff_token):
    from playwright.sync_api import expect

    _sign_in(page, staff_token)
    page.click("#tab-communities")
    expect(page.locator("#access-level")).to_have_text("staff")
    items = page.locator(".community-item")
    expect(items.first).to_be_visible()
    # pick a community level (the root level) from the selector: the list is reloaded for it
    page.select_option("#depth", "0")
    expect(page.locator("#communities-status")).to_contain_text("communities")
    levels = page.locator(".community-item .small").all_inner_texts()
    assert levels and all(t.startswith("level 0") for t in levels), levels

    items.first.click()
    expect(page.locator("#community")).to_be_visible()
    assert page.locator("#community-title").inner_text().strip()
    expect(page.locator("#community-meta")).to_contain_text("access level staff")
    expect(page.locator("#findings li.finding").first).to_be_visible()
    assert page.locator("#findings li.finding strong").first.inner_text().strip()
    svg = page.locator("#graph svg.entity-graph")
    expect(svg).to_be_visible()
    nodes = svg.locator("g.node")
    assert nodes.count() >= 2
    assert (nodes.first.locator("text").text_content() or "").strip()
    nodes.first.locator("circle").click()
    expect(page.locator("#entity-info strong")).not_to_be_empty()
    _screenshot(page, "community")
    # the layout is deterministic: drawing the same community again gives the same picture
    before = svg.inner_html()
    items.first.click()
    page.wait_for_function("document.querySelector('#graph svg') !== null")
    assert page.locator("#graph svg.entity-graph").inner_html() == before


def test_bad_token_shows_the_api_error(page):
    from playwright.sync_api import expect

    _sign_in(page, "cr_000000000000_" + "x" * 43)
    error = page.locator("#signin-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("unknown or was revoked")  # the problem+json `detail`
    expect(page.locator("#session")).to_be_hidden()
    assert page.evaluate("sessionStorage.length") == 0


def test_corpus_text_is_shown_as_text_never_run(page, live_server, staff_token):
    """Untrusted corpus text (here, answers and reports carrying markup) is displayed, never interpreted."""
    import json

    from playwright.sync_api import expect

    evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b>'
    citation = {"number": 1, "kind": "report", "id": 7, "doc_id": None, "title": evil, "heading": evil,
                "quote": "quoted " + evil, "documents": [{"doc_id": "a/<i>b</i>.md", "title": evil}]}
    answer = {"question": "q", "answer": f"Answer {evil} [1] and [9].", "citations": [citation],
              "route": {"route": "global", "confidence": 0.5, "reason": evil, "classifier": "heuristic", "features": {}},
              "offline": True, "degraded": True, "degraded_reasons": [evil], "partial": True, "no_answer": False,
              "errors": [evil], "usage": {"input_tokens": 1200, "output_tokens": 80, "llm_calls": 2, "cost_usd": 0.0123},
              "latency_ms": 1534.2, "trace": {}}
    community = {"access_level": "staff", "id": 3, "level": 0, "parent": None, "title": evil, "summary": evil,
                 "rating": 7.5, "rating_explanation": evil, "findings": [{"summary": evil, "explanation": evil}],
                 "model": "", "members": [{"key": "a", "name": evil, "type": "x", "description": evil, "degree": 2},
                                          {"key": "b", "name": "B", "type": "y", "description": "", "degree": 1}],
                 "relationships": [{"source": "a", "target": "b", "description": evil, "weight": 2.0}],
                 "documents": [{"doc_id": "d.md", "title": evil}]}
    listing = {"access_level": "staff", "communities": [
        {"id": 3, "level": 0, "parent": None, "title": evil, "rating": 7.5, "size": 2}]}

    def fulfil(route):
        path = route.request.url.split(live_server, 1)[1]
        if path.startswith("/v1/ask"):
            body = json.loads(route.request.post_data or "{}")
            if body.get("question") == "fail mid-stream":
                frames = (f"event: route\ndata: {json.dumps(answer['route'])}\n\n"
                          'event: error\ndata: {"title": "Answering failed", "detail": "The model <b>broke</b>."}\n\n')
                return route.fulfill(status=200, content_type="text/event-stream", body=frames)
            if not body.get("stream"):
                return route.fulfill(status=200, content_type="application/json",
                                     body=json.dumps({**answer, "latency_ms": 42.0}))
            # CRLF line ends, as any SSE server may send them
            frames = "".join(f"event: {n}\r\ndata: {json.dumps(d)}\r\n\r\n" for n, d in (
                ("route", answer["route"]), ("token", {"text": answer["answer"]}), ("done", answer)))
            return route.fulfill(status=200, content_type="text/event-stream", body=frames)
        if path.startswith("/v1/communities/"):
            return route.fulfill(status=200, content_type="application/json", body=json.dumps(community))
        if path.startswith("/v1/communities"):
            return route.fulfill(status=200, content_type="application/json", body=json.dumps(listing))
        return route.continue_()

    page.route("**/v1/**", fulfil)
    _sign_in(page, staff_token)
    page.fill("#question", "anything")
    page.click("#ask-button")
    expect(page.locator("#usage")).to_contain_text("latency: 1.53 s")
    expect(page.locator("#usage")).to_contain_text("1,200 in")
    expect(page.locator("#usage")).to_contain_text("$0.0123")
    for kind in ("offline", "degraded", "partial"):
        expect(page.locator(f"#badges .badge.{kind}")).to_be_visible()
    expect(page.locator("#answer")).to_contain_text("<script>")
    expect(page.locator("#answer")).to_contain_text("[9]")  # out-of-range markers stay plain text
    assert page.locator("#answer button.cite").count() == 1
    page.click("#answer button.cite")
    expect(page.locator("#citation-quote")).to_contain_text("quoted <img")
    expect(page.locator("#citation-documents")).to_contain_text("a/<i>b</i>.md")
    page.click("#citation-close")
    # without streaming: one JSON answer
    page.uncheck("#stream")
    page.click("#ask-button")
    expect(page.locator("#usage")).to_contain_text("latency: 42 ms")
    expect(page.locator("#answer button.cite")).to_have_count(1)
    # an `error` event in the stream is shown, as text
    page.check("#stream")
    page.fill("#question", "fail mid-stream")
    page.click("#ask-button")
    expect(page.locator("#ask-error")).to_have_text("The model <b>broke</b>.")
    page.click("#tab-communities")
    page.click(".community-item")
    expect(page.locator("#findings")).to_contain_text("<b>bold</b>")
    assert page.locator("#graph svg line.edge").count() == 1 and page.locator("#graph svg g.node").count() == 2
    assert page.locator("img, script:not([src]), b").count() == 0
    assert page.evaluate("window.__pwned === undefined")


def test_event_stream_parser_survives_any_chunking(page):
    """SSE frames split anywhere (inside CRLF, inside a UTF-8 character) parse to the same events."""
    events = page.evaluate("""async () => {
        const text = 'event: route\\r\\ndata: {"route":"local"}\\r\\n\\r\\n'
            + ': a comment\\n\\nevent: token\\ndata: {"text":"Ошибка ERR_2043 — "}\\n\\n'
            + 'event: token\\r\\ndata: {"text":"лимит"}\\r\\n\\r\\nevent: done\\ndata: {"answer":"x"}';
        const bytes = new TextEncoder().encode(text);
        const results = [];
        for (const size of [1, 2, 3, 7, bytes.length]) {
            const stream = new ReadableStream({ start(c) {
                for (let i = 0; i < bytes.length; i += size) c.enqueue(bytes.slice(i, i + size));
                c.close();
            } });
            const got = [];
            for await (const e of window.Crossroads.readEvents(new Response(stream))) got.push(e);
            results.push(JSON.stringify(got));
        }
        return results;
    }""")
    import json

    expected = [{"name": "route", "data": {"route": "local"}}, {"name": "token", "data": {"text": "Ошибка ERR_2043 — "}},
                {"name": "token", "data": {"text": "лимит"}}, {"name": "done", "data": {"answer": "x"}}]
    assert [json.loads(e) for e in events] == [expected] * 5
