"""The analysts' web page, end to end: the real app under uvicorn, driven in headless Chromium.

Debian's `chromium` is driven through Playwright's Python package with `executable_path` (no
`playwright install`, no network). `.ci/run` installs chromium when it is missing; on a machine
without it the browser tests are skipped, saying so. The static checks (no external resource, the
security headers) need no browser. Browser tests are slow, so each page session checks several features.
"""
from __future__ import annotations

import json
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
from api.http.app import create_app
from api.http.web import WEB_DIR

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


def test_vendored_libraries_are_recorded_with_their_licences():
    """Every vendored file is named in vendor/README.md with its npm version and has a licence text."""
    vendor = WEB_DIR / "vendor"
    readme = (vendor / "README.md").read_text(encoding="utf-8")
    shipped = sorted(p.name for p in vendor.iterdir() if p.suffix in (".js", ".css"))
    assert shipped == sorted(["marked.umd.js", "purify.min.js", "cytoscape.min.js", "swagger-ui-bundle.js",
                              "swagger-ui.css", "redoc.standalone.js"])
    for name in shipped:
        assert f"| {name} |" in readme, name
    licences = {p.name.split(".")[0] for p in (vendor / "licenses").iterdir()}
    assert {"marked", "dompurify", "cytoscape", "swagger-ui-dist", "redoc"} <= licences
    html = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    for lib in ("marked.umd.js", "purify.min.js", "cytoscape.min.js"):
        assert f'src="/static/vendor/{lib}"' in html


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
        # the API docs load their assets from this server, not a CDN
        for path, assets in (("/docs", ("/static/vendor/swagger-ui-bundle.js", "/static/vendor/swagger-ui.css")),
                             ("/redoc", ("/static/vendor/redoc.standalone.js",))):
            r = client.get(path)
            assert r.status_code == 200, path
            assert "cdn." not in r.text and "fonts.googleapis" not in r.text, path
            for asset in assets:
                assert asset in r.text and client.get(asset).status_code == 200, asset
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
def writer_token(db) -> str:
    """A writer of a tenant of its own (the shared demo tenant is read-only)."""
    with db.connection() as conn:
        token, _ = tokens.create_token(conn, "web_upload", ["public", "team"], "writer", "web page test")
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


def _wait_until(page, expression: str, expected, timeout_s: float = 5.0) -> None:
    """Poll `expression` until it equals `expected`. Not `page.wait_for_function`: when its first check
    fails it polls by `eval` inside the page, which the page's Content-Security-Policy (no
    'unsafe-eval') refuses; `page.evaluate` runs through the debugging protocol, outside the CSP."""
    deadline = time.monotonic() + timeout_s
    while (value := page.evaluate(expression)) != expected:
        assert time.monotonic() < deadline, f"{expression} stayed {value!r}, expected {expected!r}"
        page.wait_for_timeout(50)


def _screenshot(page, name: str) -> None:
    """With CROSSROADS_WEB_SCREENSHOTS=dir, keep a picture of each step (for looking at the page)."""
    folder = os.environ.get("CROSSROADS_WEB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def _sign_in(page, token: str) -> None:
    page.fill("#token", token)
    page.click("#signin-button")


def test_sign_in_ask_and_click_a_citation(page, live_server, staff_token, demo_tenant):
    """Ask, sources numbered without gaps, the evidence panel, a citation opening its document at the
    passage, the question history (kept across reloads, re-asked by a click, cleared), sign-out."""
    from playwright.sync_api import expect

    _sign_in(page, staff_token)
    expect(page.locator("#session")).to_be_visible()
    expect(page.locator("#session-label")).to_contain_text("staff")
    expect(page.locator("#signin")).to_be_hidden()
    expect(page.locator("#tenant")).to_have_text(f"tenant: {demo_tenant}")
    # a reader sees no upload form and no delete buttons
    page.click("#tab-documents")
    expect(page.locator(".document-item").first).to_be_visible()
    expect(page.locator("#upload-form")).to_be_hidden()
    assert page.locator(".document-item .danger").count() == 0
    page.click("#tab-ask")

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
    # sources are numbered 1..n without gaps, and every marker in the answer names one of them
    shown = [int(v) for v in page.locator("#sources > li").evaluate_all("items => items.map(i => i.value)")]
    assert shown == list(range(1, len(shown) + 1)) and shown
    markers = {int(v) for v in page.locator("#answer button.cite").evaluate_all("bs => bs.map(b => b.dataset.citation)")}
    assert markers and markers <= set(shown)
    # the evidence panel: route, the passages sent (those cited marked), what reached the answer, the raw trace
    page.click("#evidence > summary")
    evidence = page.locator("#evidence-body")
    expect(evidence).to_contain_text("Route")
    expect(evidence.locator("tr.reached").first).to_be_visible()
    expect(evidence).to_contain_text("Reached the answer")
    expect(evidence).to_contain_text(CITED_DOC)
    expect(evidence.locator("summary", has_text="Full trace")).to_be_visible()

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
    # shown [1] is the first citation the answer makes
    first_number = int(re.search(r"\[(\d+)", api_answer["answer"]).group(1))
    cited = next(c for c in api_answer["citations"] if c["number"] == first_number)
    assert cited["doc_id"] == CITED_DOC
    # the same text, its hard line breaks joined
    assert " ".join(quote.split()) == " ".join(cited["quote"].split())
    assert not re.search(r"[^\n]\n[^\n]", quote.strip()), quote
    # the citation opens its document, the cited passage marked and scrolled into view
    page.click("#citation-open")
    hit = page.locator("#document-chunks .chunk.hit")
    expect(hit).to_have_count(1)
    expect(page.locator("#document-meta")).to_contain_text(CITED_DOC)
    assert hit.get_attribute("data-chunk") == str(cited["id"])
    expect(hit).to_be_in_viewport()
    assert "ERR_2043" in hit.inner_text()
    # on a phone, the answer with its evidence tables and the open document fit the window
    page.set_viewport_size({"width": 420, "height": 860})
    _no_horizontal_overflow(page)
    _screenshot(page, "phone-answer")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.click("#citation-close")
    expect(panel).to_be_hidden()

    # the token survives a reload (sessionStorage), and so does the history (localStorage, per tenant+token)
    page.reload()
    expect(page.locator("#session")).to_be_visible()
    page.click("#history > summary")
    item = page.locator("#history-list .history-item")
    expect(item).to_have_count(1)
    expect(item).to_have_text(QUESTION)
    keys = page.evaluate("Object.keys(localStorage)")
    assert keys == [f"crossroads.history:{demo_tenant}:{staff_token.split('_')[1]}"], keys
    item.click()  # asks again
    expect(page.locator("#question")).to_have_value(QUESTION)
    expect(page.locator("#usage")).to_contain_text("latency", timeout=120_000)
    expect(item).to_have_count(1)  # the same question is not listed twice
    page.click("#history-clear")
    expect(item).to_have_count(0)
    assert page.evaluate("localStorage.length") == 0
    page.click("#signout")
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#tenant")).to_be_hidden()
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
    _wait_until(page, "document.querySelector('#graph svg') !== null", True)
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
    """Untrusted corpus text (answers, reports and documents carrying markup) is displayed, never
    interpreted; Markdown is rendered, sanitised; sources are renumbered without gaps; the evidence
    panel shows route probabilities and agentic hops."""
    from playwright.sync_api import expect

    evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b>'
    citation = {"number": 1, "kind": "report", "id": 7, "doc_id": None, "title": evil, "heading": evil,
                "quote": "quoted " + evil, "documents": [{"doc_id": "a/<i>b</i>.md", "title": evil}]}
    chunk_citation = {"number": 1, "kind": "chunk", "id": 11, "doc_id": "a.md", "title": "A", "heading": "H",
                      "quote": "first half of a sentence\nand its second half", "documents": []}
    citation["number"] = 3
    markdown = (f"Answer **strong** {evil} [3] and [9], then [1]. [click](javascript:window.__pwned=3) "
                "![pic](http://example.invalid/x.png)\n\n- one\n- two")
    trace = {"passages": [{"number": 1, "id": 11, "doc_id": "a.md"}, {"number": 3, "id": 7, "doc_id": None}],
             "agentic": {"rounds": [{"round": 1, "queries": [{"query": evil, "hits": 3, "new": 2}],
                                     "new_evidence": 2, "decision": evil}],
                         "stop_reason": "enough", "searches": 1, "evidence": 2, "partial": False}}
    answer = {"question": "q", "answer": markdown, "citations": [citation, chunk_citation],
              "route": {"route": "global", "confidence": 0.5, "reason": evil, "classifier": "heuristic",
                        "features": {"probabilities": {"local": 0.2, "global": 0.7, "multihop": 0.1}}},
              "offline": True, "degraded": True, "degraded_reasons": [evil], "partial": True, "no_answer": False,
              "errors": [evil], "usage": {"input_tokens": 1200, "output_tokens": 80, "llm_calls": 2, "cost_usd": 0.0123},
              "latency_ms": 1534.2, "trace": trace}
    document = {"doc_id": "a.md", "title": evil, "lang": "en", "acl": ["staff"], "version": 1,
                "updated_at": "2026-01-01T00:00:00Z",
                "chunks": [{"id": 10, "chunk_no": 0, "heading": "", "text": "intro"},
                           {"id": 11, "chunk_no": 1, "heading": evil,
                            "text": f"{evil}\n\n[go](javascript:window.__pwned=4) <a href=\"javascript:alert(1)\">x</a>"}]}
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
        if path.startswith("/v1/documents/a.md"):
            return route.fulfill(status=200, content_type="application/json", body=json.dumps(document))
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
    expect(page.locator("#answer strong")).to_have_text("strong")  # Markdown is rendered
    expect(page.locator("#answer li")).to_have_count(2)
    expect(page.locator("#answer")).to_contain_text("[image: pic]")  # never fetched
    assert page.locator("#answer a").get_attribute("href") is None  # javascript: dropped
    # [3] then [1] in the answer: shown as [1] and [2], the sources list numbered the same way
    cites = page.locator("#answer button.cite")
    assert cites.all_inner_texts() == ["[1]", "[2]"]
    assert cites.evaluate_all("bs => bs.map(b => b.dataset.number)") == ["3", "1"]
    assert page.locator("#sources > li").evaluate_all("items => items.map(i => i.value)") == [1, 2]
    # the evidence panel
    page.click("#evidence > summary")
    evidence = page.locator("#evidence-body")
    expect(evidence).to_contain_text("0.700")  # the route's probability
    expect(evidence.locator("meter")).to_have_count(3)
    expect(evidence).to_contain_text("Agentic hops (1)")
    expect(evidence).to_contain_text("stopped: enough")
    expect(evidence.locator(".hops")).to_contain_text("<script>")
    expect(evidence.locator("tr.reached")).to_have_count(2)
    cites.first.click()
    expect(page.locator("#citation-quote")).to_contain_text("quoted <img")
    expect(page.locator("#citation-documents")).to_contain_text("a/<i>b</i>.md")
    expect(page.locator("#citation-open")).to_be_hidden()  # a report has no single document
    cites.nth(1).click()
    expect(page.locator("#citation-quote")).to_have_text("first half of a sentence and its second half")
    page.click("#citation-open")
    expect(page.locator("#document-chunks .chunk.hit")).to_have_attribute("data-chunk", "11")
    expect(page.locator("#document-chunks .chunk.hit")).to_contain_text("<script>")
    assert page.locator("#document-chunks a[href]").count() == 0
    page.click("#citation-close")
    # without streaming: one JSON answer
    page.uncheck("#stream")
    page.click("#ask-button")
    expect(page.locator("#usage")).to_contain_text("latency: 42 ms")
    expect(page.locator("#answer button.cite")).to_have_count(2)
    # an `error` event in the stream is shown, as text
    page.check("#stream")
    page.fill("#question", "fail mid-stream")
    page.click("#ask-button")
    expect(page.locator("#ask-error")).to_have_text("The model <b>broke</b>.")
    page.click("#tab-communities")
    page.click(".community-item")
    expect(page.locator("#findings")).to_contain_text("<b>bold</b>")
    assert page.locator("#graph svg line.edge").count() == 1 and page.locator("#graph svg g.node").count() == 2
    assert page.locator("img, script:not([src]), b, iframe, [onerror]").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
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
    expected = [{"name": "route", "data": {"route": "local"}}, {"name": "token", "data": {"text": "Ошибка ERR_2043 — "}},
                {"name": "token", "data": {"text": "лимит"}}, {"name": "done", "data": {"answer": "x"}}]
    assert [json.loads(e) for e in events] == [expected] * 5


def _no_horizontal_overflow(page) -> None:
    sizes = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert sizes[0] <= sizes[1], f"the page is {sizes[0]} px wide in a {sizes[1]} px window"


def test_writer_documents_graph_explorer_phone_layout_and_offline_docs(page, live_server, writer_token, staff_token,
                                                                      demo_tenant):
    """A writer uploads (ACL from its groups), reads and deletes a document; the layout fits 420 px;
    a reader explores the whole graph (search, neighbourhood, zoom, legend); /docs and /redoc render
    with every non-loopback host blocked."""
    from playwright.sync_api import expect

    _sign_in(page, writer_token)
    expect(page.locator("#tenant")).to_have_text("tenant: web_upload")
    page.click("#tab-documents")
    expect(page.locator("#upload-form")).to_be_visible()
    assert page.locator("#upload-acl input").evaluate_all("xs => xs.map(x => x.value)") == ["public", "team"]
    evil = ("# Evil notes\n\nText <script>window.__pwned=1</script> <img src=x onerror=\"window.__pwned=2\">\n"
            "[run](javascript:window.__pwned=3) and **bold**.\n")
    page.set_input_files("#upload-file", files=[{"name": "evil.md", "mimeType": "text/markdown", "buffer": evil.encode()}])
    expect(page.locator("#upload-id")).to_have_value("evil.md")
    page.click("#upload-button")
    expect(page.locator("#documents-error")).to_contain_text("at least one group")  # no group ticked
    page.fill("#upload-id", "notes/evil.md")
    page.check("#upload-acl input[value='team']")
    page.click("#upload-button")
    expect(page.locator("#upload-status")).to_contain_text("notes/evil.md: added")
    item = page.locator(".document-item[data-doc='notes/evil.md']")
    expect(item).to_contain_text("team")
    item.locator("button.linkish").click()
    chunks = page.locator("#document-chunks")
    expect(chunks).to_contain_text("<script>")
    expect(chunks.locator("strong")).to_have_text("bold")
    assert chunks.locator("img, script, a[href]").count() == 0
    page.click("#citation-close")

    # a phone: nothing wider than the window
    page.set_viewport_size({"width": 420, "height": 860})
    _no_horizontal_overflow(page)
    page.click("#tab-ask")
    _no_horizontal_overflow(page)
    _screenshot(page, "phone-ask")
    page.set_viewport_size({"width": 1280, "height": 900})

    page.click("#tab-documents")
    page.once("dialog", lambda dialog: dialog.accept())
    item.locator("button.danger").click()
    expect(page.locator("#upload-status")).to_contain_text("Deleted notes/evil.md")
    expect(item).to_have_count(0)
    # a PDF goes as its bytes, converted by the server (POST /v1/documents:upload)
    page.set_input_files("#upload-file", str(Path(__file__).parent.parent / "fixtures" / "formats" / "report.pdf"))
    page.check("#upload-acl input[value='team']")
    page.click("#upload-button")
    expect(page.locator("#upload-status")).to_contain_text("report.pdf: added")
    expect(page.locator(".document-item[data-doc='report.pdf']")).to_contain_text("Quarterly Freight Report")
    page.click("#signout")

    # the whole-graph explorer, as a reader of the demo tenant
    _sign_in(page, staff_token)
    page.click("#tab-graph")
    expect(page.locator("#cy[data-nodes]")).to_be_attached(timeout=30_000)
    total = int(page.locator("#cy").get_attribute("data-nodes"))
    assert total >= 10
    expect(page.locator("#legend li").first).to_be_visible()
    labelled = page.evaluate("window.Crossroads.explorer().nodes('.labelled').length")
    assert 0 < labelled <= 25
    top = httpx.get(live_server + "/v1/entities?limit=1", headers={"Authorization": f"Bearer {staff_token}"}).json()
    edges = httpx.get(live_server + "/v1/relationships?limit=1", headers={"Authorization": f"Bearer {staff_token}"}).json()
    if top["total"] <= 500 and edges["total"] <= 2000:  # under the explorer's caps: every relationship drawn, across communities too
        assert page.evaluate("window.Crossroads.explorer().edges().length") == edges["total"] > 0
    name = top["entities"][0]["name"]
    page.fill("#entity-q", name)
    page.click("#entity-search button")
    result = page.locator(f".entity-result[data-key='{top['entities'][0]['key']}']")
    expect(result).to_be_visible()
    result.click()
    expect(page.locator("#explorer-info strong")).to_have_text(name)
    visible = page.evaluate("window.Crossroads.explorer().nodes(':visible').length")
    assert 1 < visible < total  # one hop around the entity
    page.select_option("#hops", "0")
    # cytoscape restyles on its next frame: wait for it (fails after the timeout if the whole graph never shows)
    _wait_until(page, "window.Crossroads.explorer().nodes(':visible').length", total, timeout_s=10)
    zoom = page.evaluate("window.Crossroads.explorer().zoom()")
    page.click("#zoom-in")
    assert page.evaluate("window.Crossroads.explorer().zoom()") > zoom
    _screenshot(page, "graph-explorer")
    page.set_viewport_size({"width": 420, "height": 860})
    _no_horizontal_overflow(page)
    _screenshot(page, "phone-graph")

    # the API docs, offline: in a context of their own, every request to another host fails
    context = page.context.browser.new_context()
    docs = context.new_page()
    outside: list[str] = []

    def only_this_server(route):
        if route.request.url.startswith(live_server):
            return route.continue_()
        outside.append(route.request.url)
        return route.abort()

    docs.route("**/*", only_this_server)
    docs.goto(live_server + "/docs")
    expect(docs.locator(".swagger-ui .opblock").first).to_be_visible(timeout=20_000)
    expect(docs.locator(".swagger-ui")).to_contain_text("/v1/ask")
    docs.goto(live_server + "/redoc")
    expect(docs.locator("redoc")).to_contain_text("Crossroads", timeout=20_000)
    context.close()
    assert not outside, f"the API docs requested other hosts: {outside}"
