// Crossroads analysts' page. Hand-written, no framework, no network beyond this origin. Three vendored
// libraries (api/web/vendor): marked (Markdown), DOMPurify (sanitiser), cytoscape (graph explorer).
// Corpus text is untrusted: it reaches the page through textContent / createTextNode / setAttribute,
// or, for Markdown, through marked with raw HTML and images turned into plain text and then DOMPurify
// (returning DOM nodes), never through innerHTML.
"use strict";

(function () {
  const TOKEN_KEY = "crossroads.token";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const MAX_GRAPH_NODES = 60;
  const HISTORY_MAX = 50;
  const COMMUNITIES_PAGE = 1000;       // the API's largest page: the list and its level selector want them all
  const EXPLORER_MAX_NODES = 500;      // entities drawn, the best connected (cose's cost grows with their square)
  const EXPLORER_MAX_EDGES = 2000;     // relationships fetched, the strongest
  const ENTITIES_PAGE = 500;           // the API's largest pages of /v1/entities and /v1/relationships
  const RELATIONSHIPS_PAGE = 1000;
  const EXPLORER_LABELS = 25;          // only the best-connected nodes carry a label (and the selected ones)

  const $ = (id) => document.getElementById(id);

  const state = {
    token: null,
    answer: null,          // the last full answer (Answer.to_dict())
    communities: [],       // the last list from /v1/communities
    accessLevel: null,
    asking: null,          // AbortController of the running question
    me: null,              // /v1/me: tenant, groups, role, subject
    documentsOffset: 0,
    explorer: null,        // the cytoscape instance, made on first visit of the graph tab
    openCitation: null,
  };

  // ---------------------------------------------------------------- helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = String(value);
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  function showError(node, message) {
    node.textContent = message || "";
    show(node, Boolean(message));
  }

  function fmtNumber(n) {
    return Number(n || 0).toLocaleString("en-US");
  }

  function fmtCost(usd) {
    const v = Number(usd || 0);
    return "$" + (v === 0 ? "0" : v < 0.01 ? v.toFixed(6) : v.toFixed(4));
  }

  // ---------------------------------------------------------------- API

  class ApiError extends Error {
    constructor(status, title, detail) {
      super(detail || title || `HTTP ${status}`);
      this.status = status;
      this.title = title;
      this.detail = detail;
    }
  }

  async function problemOf(response) {
    // RFC 9457 problem details: show `detail` (fall back to the title, then the status line)
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    const title = (body && body.title) || response.statusText || "Error";
    const detail = (body && (body.detail || body.title)) || `${response.status} ${response.statusText}`;
    return new ApiError(response.status, title, detail);
  }

  async function api(path, options) {
    const opts = options || {};
    const headers = { Accept: "application/json", Authorization: "Bearer " + state.token };
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    if (opts.file !== undefined) headers["Content-Type"] = opts.fileType; // a file's bytes, sent as they are
    let response;
    try {
      response = await fetch(path, {
        method: opts.method || "GET",
        headers,
        body: opts.file !== undefined ? opts.file : opts.body === undefined ? undefined : JSON.stringify(opts.body),
        signal: opts.signal,
        cache: "no-store",
      });
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw new ApiError(0, "Network error", "The server could not be reached: " + err.message);
    }
    if (!response.ok) {
      const problem = await problemOf(response);
      if (response.status === 401) onUnauthorized(problem);
      throw problem;
    }
    return opts.raw ? response : response.json();
  }

  function onUnauthorized(problem) {
    // the token was revoked or expired while signed in: back to the sign-in form, with the reason
    if (!state.token) return;
    signOut();
    showError($("signin-error"), problem.detail);
  }

  // Server-sent events over fetch (EventSource cannot send an Authorization header).
  async function* readEvents(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder("utf-8");
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      // normalise line ends; a trailing "\r" waits for the next chunk (it may be half of "\r\n")
      const held = !done && buffer.endsWith("\r");
      buffer = (held ? buffer.slice(0, -1) : buffer).replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const parsed = parseFrame(frame);
        if (parsed) yield parsed;
      }
      if (held) buffer += "\r";
      if (done) break;
    }
    const last = parseFrame(buffer);
    if (last) yield last;
  }

  function parseFrame(frame) {
    let name = "message";
    const data = [];
    for (const line of frame.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return null;
    let payload;
    try {
      payload = JSON.parse(data.join("\n"));
    } catch (_) {
      payload = { text: data.join("\n") };
    }
    return { name, data: payload };
  }

  // ---------------------------------------------------------------- session

  async function signIn(token) {
    state.token = token;
    // /v1/me proves the token and names its tenant, groups and role; the list, its access level
    const me = await api("/v1/me");
    const list = await api(`/v1/communities?limit=${COMMUNITIES_PAGE}`);
    sessionStorage.setItem(TOKEN_KEY, token);
    enterApp(me, list);
  }

  function isWriter() {
    return Boolean(state.me) && (state.me.role === "writer" || state.me.role === "admin");
  }

  function enterApp(me, list) {
    state.me = me;
    show($("signin"), false);
    show($("tabs"), true);
    show($("session"), true);
    showError($("signin-error"), "");
    $("token").value = "";
    $("tenant").textContent = "tenant: " + me.tenant;
    show($("tenant"), true);
    $("role").textContent = `${me.role} · ${me.groups.join(", ")}`;
    renderAclChoices(me.groups);
    show($("upload-form"), isWriter());
    renderHistory();
    receiveCommunities(list, null);
    selectTab("ask");
  }

  function signOut() {
    if (state.asking) state.asking.abort();
    state.token = null;
    state.answer = null;
    state.communities = [];
    state.me = null;
    state.documentsOffset = 0;
    if (state.explorer) state.explorer.destroy();
    state.explorer = null;
    sessionStorage.removeItem(TOKEN_KEY);
    show($("tenant"), false);
    show($("upload-form"), false);
    for (const id of ["history-list", "document-list", "entity-results", "legend", "explorer-info", "upload-acl"]) clear($(id));
    $("explorer-status").textContent = "";
    show($("signin"), true);
    show($("tabs"), false);
    show($("session"), false);
    show($("view-ask"), false);
    show($("view-communities"), false);
    show($("view-documents"), false);
    show($("view-graph"), false);
    show($("result"), false);
    show($("community"), false);
    closeCitation();
    clear($("community-list"));
    showError($("ask-error"), "");
    showError($("communities-error"), "");
  }

  function selectTab(name) {
    for (const tab of document.querySelectorAll(".tab")) {
      tab.setAttribute("aria-selected", String(tab.dataset.tab === name));
    }
    show($("view-ask"), name === "ask");
    show($("view-communities"), name === "communities");
    show($("view-documents"), name === "documents");
    show($("view-graph"), name === "graph");
    if (name === "ask") $("question").focus();
    if (name === "documents" && !$("document-list").firstChild) loadDocuments(0);
    if (name === "graph" && !state.explorer) loadExplorer();
  }

  // ---------------------------------------------------------------- asking

  async function ask(question, route, stream) {
    if (state.asking) state.asking.abort();
    const controller = new AbortController();
    state.asking = controller;
    const button = $("ask-button");
    button.disabled = true;
    button.textContent = "Asking…";
    showError($("ask-error"), "");
    closeCitation();
    startResult();
    remember(question, route);
    try {
      if (stream) await askStreaming(question, route, controller.signal);
      else renderAnswer(await api("/v1/ask", { method: "POST", body: { question, route }, signal: controller.signal }));
    } catch (err) {
      if (err.name === "AbortError") return;
      show($("result"), Boolean(state.answer));
      showError($("ask-error"), err.detail || err.message);
    } finally {
      if (state.asking === controller) {
        state.asking = null;
        button.disabled = false;
        button.textContent = "Ask";
      }
    }
  }

  async function askStreaming(question, route, signal) {
    const response = await api("/v1/ask", { method: "POST", body: { question, route, stream: true }, signal, raw: true });
    const type = response.headers.get("content-type") || "";
    if (!type.startsWith("text/event-stream")) {
      renderAnswer(await response.json());
      return;
    }
    let text = "";
    let finished = false;
    for await (const event of readEvents(response)) {
      if (event.name === "route") {
        renderRoute(event.data);
      } else if (event.name === "token") {
        text += event.data.text || "";
        const answer = $("answer");
        const note = answer.querySelector(".withdrawn");
        clear(answer);
        if (note) answer.append(note);
        answer.append(el("p", { class: "streaming", text }));
      } else if (event.name === "withdraw") {
        // the streamed answer failed its citation check (or broke off): none of it may stay on screen
        text = "";
        const answer = $("answer");
        clear(answer);
        answer.append(el("p", { class: "muted withdrawn", text: "The answer shown was withdrawn: " + (event.data.reason || "it failed its citation check") + "." }));
      } else if (event.name === "usage") {
        renderUsage(event.data, event.data.latency_ms);
      } else if (event.name === "done") {
        renderAnswer(event.data);
        finished = true;
      } else if (event.name === "error") {
        throw new ApiError(0, event.data.title, event.data.detail || event.data.title);
      }
    }
    if (!finished) throw new ApiError(0, "Incomplete answer", "The answer stream ended early; ask again.");
  }

  function startResult() {
    state.answer = null;
    show($("result"), true);
    $("route-name").textContent = "…";
    for (const id of ["route-confidence", "route-classifier", "route-reason", "usage"]) $(id).textContent = "";
    clear($("badges"));
    clear($("answer"));
    clear($("answer-notes"));
    clear($("sources"));
    clear($("evidence-body"));
    show($("sources-title"), false);
    $("answer").append(el("p", { class: "muted", text: "Searching…" }));
  }

  function renderRoute(route) {
    if (!route) return;
    $("route-name").textContent = route.route;
    $("route-name").dataset.route = route.route;
    const confidence = Number(route.confidence);
    $("route-confidence").textContent = Number.isFinite(confidence) ? `confidence ${Math.round(confidence * 100)}%` : "";
    $("route-classifier").textContent = route.classifier ? `by ${route.classifier}` : "";
    $("route-reason").textContent = route.reason || "";
  }

  function badge(text, kind, title) {
    return el("span", { class: "badge " + kind, title, text });
  }

  function renderAnswer(answer) {
    state.answer = answer;
    show($("result"), true);
    renderRoute(answer.route);

    const badges = $("badges");
    clear(badges);
    if (answer.offline) badges.append(badge("offline", "offline", "No LLM wrote this: an extractive answer of quoted sentences."));
    if (answer.degraded) badges.append(badge("degraded", "degraded", (answer.degraded_reasons || []).join("; ")));
    if (answer.partial) badges.append(badge("partial", "partial", "The multi-hop search stopped on its budget."));
    if (answer.no_answer) badges.append(badge("no answer in the corpus", "noanswer", "Nothing this token may read answers it."));

    const citations = numberCitations(String(answer.answer || ""), answer.citations || []);
    const byNumber = new Map(citations.map((c) => [Number(c.number), c]));
    const container = $("answer");
    clear(container);
    container.append(renderMarkdown(String(answer.answer || "")));
    linkCitations(container, byNumber);

    const notes = $("answer-notes");
    clear(notes);
    for (const reason of answer.degraded_reasons || []) notes.append(el("li", { class: "note degraded", text: "Degraded: " + reason }));
    for (const error of answer.errors || []) notes.append(el("li", { class: "note error", text: error }));

    const sources = $("sources");
    clear(sources);
    for (const c of citations) {
      const label = c.kind === "report" ? `${c.title} (community report)` : `${c.title} — ${c.doc_id || ""}`;
      sources.append(el("li", { value: c.shown },
        citationButton(c, `[${c.shown}]`), " ", el("span", { text: label })));
    }
    show($("sources-title"), citations.length > 0);
    renderUsage(answer.usage, answer.latency_ms);
    renderEvidence(answer, citations);
  }

  // ---------------------------------------------------------------- Markdown (marked + DOMPurify)

  const CITE = /\[(\d+(?:\s*[,;]\s*\d+)*)\]/g;

  // The citations, numbered 1..n without gaps in the order the answer first cites them (then the
  // uncited ones by their number); `number` stays the API's, `shown` is what the reader sees.
  function numberCitations(text, citations) {
    const known = new Map(citations.map((c) => [Number(c.number), c]));
    const order = [];
    for (const match of text.matchAll(CITE)) {
      const numbers = match[1].split(/[,;]/).map((s) => Number(s.trim()));
      if (!numbers.every((n) => known.has(n))) continue;
      for (const n of numbers) if (!order.includes(n)) order.push(n);
    }
    for (const c of [...citations].sort((a, b) => a.number - b.number)) if (!order.includes(Number(c.number))) order.push(Number(c.number));
    return order.map((n, i) => ({ ...known.get(n), shown: i + 1 }));
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]);
  }

  let markdown = null;
  function markdownParser() {
    if (markdown) return markdown;
    // raw HTML in the source is shown as the text it is; an image would fetch its URL, so only its
    // alt text is kept
    markdown = new window.marked.Marked({
      gfm: true,
      breaks: false,
      renderer: {
        html(token) {
          const text = escapeHtml(token.text || token.raw || "");
          return token.block ? `<p>${text}</p>` : text;
        },
        image(token) {
          return escapeHtml(token.text ? `[image: ${token.text}]` : "[image]");
        },
      },
    });
    return markdown;
  }

  let purifyHooked = false;
  function purify(html) {
    const DOMPurify = window.DOMPurify;
    if (!purifyHooked) {
      // links leave in a new tab without a referrer or a handle on this page
      DOMPurify.addHook("afterSanitizeAttributes", (node) => {
        if (node.tagName === "A") {
          node.setAttribute("target", "_blank");
          node.setAttribute("rel", "noopener noreferrer nofollow");
        }
      });
      purifyHooked = true;
    }
    return DOMPurify.sanitize(html, {
      RETURN_DOM_FRAGMENT: true,
      FORBID_TAGS: ["img", "style", "form", "input", "button", "iframe", "object", "embed", "svg", "math", "video", "audio", "source", "picture"],
      FORBID_ATTR: ["style", "id", "class"],
      ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
    });
  }

  // Markdown to sanitised DOM nodes (a fragment); falls back to plain text if a library is missing.
  function renderMarkdown(text) {
    if (!window.marked || !window.DOMPurify) {
      const fragment = document.createDocumentFragment();
      for (const para of text.split(/\n{2,}/)) if (para.trim()) fragment.append(el("p", { text: para }));
      return fragment;
    }
    return purify(markdownParser().parse(text));
  }

  // Turns [N] markers in text nodes (not in code or links) into citation buttons; unknown ones stay text.
  function linkCitations(root, byNumber) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => (node.parentElement && node.parentElement.closest("code, pre, a") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
    });
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    for (const node of nodes) {
      const text = node.nodeValue;
      let last = 0;
      const parts = [];
      for (const match of text.matchAll(CITE)) {
        const numbers = match[1].split(/[,;]/).map((s) => Number(s.trim()));
        if (!numbers.every((n) => byNumber.has(n))) continue;
        parts.push(document.createTextNode(text.slice(last, match.index)));
        numbers.forEach((n, i) => {
          if (i) parts.push(document.createTextNode(" "));
          const c = byNumber.get(n);
          parts.push(citationButton(c, `[${c.shown}]`));
        });
        last = match.index + match[0].length;
      }
      if (!parts.length) continue;
      parts.push(document.createTextNode(text.slice(last)));
      node.replaceWith(...parts);
    }
  }

  // Corpus text is hard-wrapped: joins the lines of each paragraph, keeping list items, headings,
  // tables and quotes on their own lines.
  function unwrap(text) {
    return String(text || "").replace(/\r\n?/g, "\n").split(/\n{2,}/).map((para) => {
      const lines = para.split("\n");
      let out = lines[0] || "";
      for (const line of lines.slice(1)) {
        const own = /^\s*(?:[-*+]\s|\d+[.)]\s|#|\||>|```)/.test(line) || /^\s*(?:#|\||```)/.test(out.split("\n").pop());
        out += (own ? "\n" : " ") + line.trim();
      }
      return out.trim();
    }).filter(Boolean).join("\n\n");
  }

  function citationButton(citation, label) {
    return el("button", {
      type: "button",
      class: "cite",
      "data-citation": citation.shown,
      "data-number": citation.number,
      title: citation.title || "",
      "aria-label": `Citation ${citation.shown}: ${citation.title || ""}`,
      onclick: () => openCitation(citation),
      text: label,
    });
  }

  function openCitation(c) {
    state.openCitation = c;
    $("citation-title").textContent = `[${c.shown}] ${c.title || ""}`;
    const where = c.kind === "report"
      ? [c.heading || "community report", `report ${c.id}`]
      : [c.doc_id, c.heading].filter(Boolean);
    $("citation-location").textContent = where.join(" · ");
    $("citation-quote").textContent = unwrap(c.quote);
    const docs = $("citation-documents");
    clear(docs);
    for (const d of c.documents || []) {
      docs.append(el("li", {}, el("button", { type: "button", class: "linkish", onclick: () => openDocument(d.doc_id, null) },
        el("code", { text: d.doc_id })), " ", d.title || ""));
    }
    show($("citation-documents-wrap"), (c.documents || []).length > 0);
    show($("citation-open"), c.kind !== "report" && Boolean(c.doc_id));
    show($("document-view"), false);
    showError($("citation-error"), "");
    for (const b of document.querySelectorAll(".cite")) b.classList.toggle("active", b.dataset.citation === String(c.shown));
    show($("citation-panel"), true);
    document.body.classList.add("panel-open");
    $("citation-close").focus();
  }

  function docPath(docId) {
    return "/v1/documents/" + String(docId).split("/").map(encodeURIComponent).join("/");
  }

  // The whole document in the side panel, its chunks in order, the cited one marked and scrolled to.
  async function openDocument(docId, chunkId) {
    showError($("citation-error"), "");
    let doc;
    try {
      doc = await api(docPath(docId));
    } catch (err) {
      showError($("citation-error"), err.detail || err.message);
      return;
    }
    if (!state.openCitation || $("citation-panel").hidden) {
      $("citation-title").textContent = doc.title;
      $("citation-location").textContent = doc.doc_id;
      $("citation-quote").textContent = "";
      show($("citation-open"), false);
      show($("citation-documents-wrap"), false);
      show($("citation-panel"), true);
      document.body.classList.add("panel-open");
    }
    $("document-title").textContent = doc.title;
    $("document-meta").textContent = `${doc.doc_id} · version ${doc.version} · readable by ${doc.acl.join(", ")} · ${doc.chunks.length} passages`;
    const box = $("document-chunks");
    clear(box);
    let target = null;
    for (const chunk of doc.chunks) {
      const section = el("section", { class: "chunk", "data-chunk": chunk.id },
        chunk.heading ? el("p", { class: "chunk-heading muted small", text: chunk.heading }) : null);
      section.append(renderMarkdown(chunk.text));
      if (chunk.id === chunkId) {
        section.classList.add("hit");
        target = section;
      }
      box.append(section);
    }
    show($("document-view"), true);
    (target || $("document-view")).scrollIntoView({ block: "start" });
  }

  function closeCitation() {
    state.openCitation = null;
    show($("citation-panel"), false);
    show($("document-view"), false);
    clear($("document-chunks"));
    document.body.classList.remove("panel-open");
    for (const b of document.querySelectorAll(".cite.active")) b.classList.remove("active");
  }

  // ---------------------------------------------------------------- evidence panel

  function fmtScore(v) {
    const x = Number(v);
    return Number.isFinite(x) ? x.toFixed(3) : "";
  }

  function table(headers, rows) {
    const t = el("table", { class: "trace-table" });
    const head = el("tr");
    for (const h of headers) head.append(el("th", { text: h }));
    t.append(el("thead", {}, head));
    const body = el("tbody");
    for (const row of rows) {
      const tr = el("tr", { class: row.cls || null });
      for (const cell of row.cells) tr.append(el("td", {}, cell === null || cell === undefined ? "" : cell instanceof Node ? cell : String(cell)));
      body.append(tr);
    }
    t.append(body);
    return el("div", { class: "table-wrap" }, t);
  }

  function section(title, ...content) {
    return el("details", { class: "trace-section", open: true }, el("summary", { text: title }), ...content);
  }

  // Any JSON value as nested, collapsed lists (the rest of the trace, whatever its shape).
  function tree(value, depth) {
    if (value === null || typeof value !== "object") return el("code", { text: JSON.stringify(value) });
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    if (!entries.length) return el("code", { text: Array.isArray(value) ? "[]" : "{}" });
    const list = el("ul", { class: "tree" });
    for (const [key, v] of entries) {
      if (v !== null && typeof v === "object") {
        const size = Array.isArray(v) ? `[${v.length}]` : `{${Object.keys(v).length}}`;
        list.append(el("li", {}, el("details", { open: depth < 1 || null }, el("summary", {}, el("strong", { text: key }), " ", el("span", { class: "muted", text: size })), tree(v, depth + 1))));
      } else {
        list.append(el("li", {}, el("strong", { text: key }), ": ", tree(v, depth + 1)));
      }
    }
    return list;
  }

  function renderEvidence(answer, citations) {
    const body = $("evidence-body");
    clear(body);
    const trace = answer.trace || {};
    const route = answer.route || {};
    const features = route.features || {};

    const routeBits = [el("p", {}, el("strong", { text: route.route || "?" }),
      ` · confidence ${fmtScore(route.confidence)} · by ${route.classifier || "?"}`)];
    const probabilities = features.probabilities || (trace.classifier && trace.classifier.features && trace.classifier.features.probabilities);
    if (probabilities && typeof probabilities === "object") {
      routeBits.push(table(["route", "probability"], Object.entries(probabilities)
        .sort((a, b) => b[1] - a[1]).map(([name, p]) => ({ cells: [name, el("span", { class: "bar-cell" },
          el("meter", { min: 0, max: 1, value: Number(p) || 0 }), " " + fmtScore(p))] }))));
    }
    if (trace.route_hint) routeBits.push(el("p", { class: "muted", text: trace.route_hint }));
    body.append(section("Route", ...routeBits));

    const cited = new Map(citations.map((c) => [`${c.kind}:${c.id}`, c]));
    const scores = new Map((trace.extracted || []).map((e) => [Number(e.passage), e.score]));
    const passages = trace.passages || [];
    if (passages.length) {
      body.append(section(`Passages sent to the answer (${passages.length})`, table(["#", "document", "passage id", "score", "cited as"],
        passages.map((p) => {
          const c = cited.get(`chunk:${p.id}`) || cited.get(`report:${p.id}`);
          return { cls: c ? "reached" : null, cells: [p.number, p.doc_id || "report", p.id, fmtScore(scores.get(Number(p.number))), c ? `[${c.shown}]` : ""] };
        }))));
    }

    const searches = trace.searches || [];
    if (searches.length) {
      body.append(section(`Searches (${searches.length})`, table(["query", "k", "hits", "latency"],
        searches.map((s) => ({ cls: s.degraded ? "degraded" : null,
          cells: [s.query, s.k, Array.isArray(s.hits) ? s.hits.length : s.hits, `${Math.round(Number(s.latency_ms) || 0)} ms`] })))));
    }

    const agentic = trace.agentic;
    if (agentic && Array.isArray(agentic.rounds)) {
      const rounds = agentic.rounds.map((r) => el("li", {},
        el("strong", { text: `hop ${r.round}` }), ` · ${r.new_evidence ?? 0} new passages` + (r.decision ? ` · ${typeof r.decision === "string" ? r.decision : JSON.stringify(r.decision)}` : ""),
        table(["query", "hits", "new"], (r.queries || []).map((q) => ({ cls: q.error ? "degraded" : null, cells: [q.query + (q.error ? ` (${q.error})` : ""), q.hits, q.new] })))));
      body.append(section(`Agentic hops (${agentic.rounds.length})`,
        el("p", { class: "muted", text: `stopped: ${agentic.stop_reason || "?"} · ${agentic.searches ?? 0} searches · ${agentic.evidence ?? 0} passages found` + (agentic.partial ? " · partial" : "") }),
        el("ol", { class: "hops" }, ...rounds)));
    } else if (Array.isArray(trace.queries) && trace.queries.length) {
      body.append(section("Queries", el("ol", {}, ...trace.queries.map((q) => el("li", { text: typeof q === "string" ? q : JSON.stringify(q) })))));
    }

    body.append(section(`Reached the answer (${citations.length})`, citations.length
      ? el("ol", { class: "reached-list" }, ...citations.map((c) => el("li", { value: c.shown },
        citationButton(c, `[${c.shown}]`), " ", c.kind === "report" ? `community report ${c.id}: ${c.title}` : `${c.doc_id} · ${c.heading || c.title}`)))
      : el("p", { class: "muted", text: "No passage was cited." })));

    const rest = el("details", { class: "trace-section" }, el("summary", { text: "Full trace (JSON)" }), tree(trace, 0));
    body.append(rest);
  }

  function renderUsage(usage, latency) {
    const u = usage || {};
    const parts = [
      `tokens: ${fmtNumber(u.input_tokens)} in / ${fmtNumber(u.output_tokens)} out`,
    ];
    if (u.cache_read_tokens || u.cache_write_tokens) {
      parts.push(`cache: ${fmtNumber(u.cache_read_tokens)} read / ${fmtNumber(u.cache_write_tokens)} written`);
    }
    parts.push(`LLM calls: ${fmtNumber(u.llm_calls)}`);
    parts.push(`cost: ${fmtCost(u.cost_usd)}`);
    const ms = Number(latency);
    if (Number.isFinite(ms)) parts.push(`latency: ${ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : Math.round(ms) + " ms"}`);
    $("usage").textContent = parts.join(" · ");
  }

  // ---------------------------------------------------------------- history (this browser, per tenant and token)

  function historyKey() {
    return state.me ? `crossroads.history:${state.me.tenant}:${state.me.subject}` : null;
  }

  function readHistory() {
    const key = historyKey();
    if (!key) return [];
    try {
      const items = JSON.parse(localStorage.getItem(key) || "[]");
      return Array.isArray(items) ? items.filter((i) => i && typeof i.question === "string") : [];
    } catch (_) {
      return []; // a damaged entry is replaced by the next question
    }
  }

  function remember(question, route) {
    const key = historyKey();
    if (!key) return;
    const items = readHistory().filter((i) => !(i.question === question && i.route === route));
    items.unshift({ question, route, at: new Date().toISOString() });
    try {
      localStorage.setItem(key, JSON.stringify(items.slice(0, HISTORY_MAX)));
    } catch (_) {
      // storage full or disabled: the question is still asked, only not remembered
    }
    renderHistory();
  }

  function renderHistory() {
    const list = $("history-list");
    clear(list);
    const items = readHistory();
    $("history-count").textContent = items.length ? `(${items.length})` : "(empty)";
    for (const item of items) {
      list.append(el("li", {}, el("button", {
        type: "button", class: "linkish history-item", title: `asked ${item.at || ""} · route ${item.route}`,
        onclick: () => {
          $("question").value = item.question;
          $("route").value = item.route || "auto";
          ask(item.question, $("route").value, $("stream").checked);
        },
      }, item.question), " ", el("span", { class: "muted small", text: item.route })));
    }
    $("history-clear").disabled = !items.length;
  }

  function clearHistory() {
    const key = historyKey();
    if (key) localStorage.removeItem(key);
    renderHistory();
  }

  // ---------------------------------------------------------------- documents (list: reader; upload, delete: writer)

  const DOCUMENTS_PAGE = 100;

  function renderAclChoices(groups) {
    const box = $("upload-acl");
    clear(box);
    box.append(el("legend", { text: "Readable by (your groups)" }));
    for (const g of groups) {
      box.append(el("label", { class: "check" }, el("input", { type: "checkbox", name: "acl", value: g }), g));
    }
  }

  async function loadDocuments(offset) {
    showError($("documents-error"), "");
    $("documents-status").textContent = "Loading…";
    let page;
    try {
      page = await api(`/v1/documents?limit=${DOCUMENTS_PAGE}&offset=${offset}`);
    } catch (err) {
      $("documents-status").textContent = "";
      showError($("documents-error"), err.detail || err.message);
      return;
    }
    const list = $("document-list");
    if (offset === 0) clear(list);
    for (const d of page.documents) {
      list.append(el("li", { class: "document-item", "data-doc": d.doc_id },
        el("button", { type: "button", class: "linkish", onclick: () => { state.openCitation = null; openDocument(d.doc_id, null); } },
          el("code", { text: d.doc_id })),
        " ", el("span", { text: d.title }),
        el("span", { class: "muted small", text: ` · ${d.chunks} passages · ${d.acl.join(", ")}` }),
        isWriter() ? el("button", { type: "button", class: "secondary danger", "aria-label": `Delete ${d.doc_id}`,
          onclick: () => deleteDocument(d.doc_id) }, "Delete") : null));
    }
    state.documentsOffset = offset + page.documents.length;
    $("documents-status").textContent = `${fmtNumber(Math.min(state.documentsOffset, page.total))} of ${fmtNumber(page.total)} readable documents`;
    show($("documents-more"), state.documentsOffset < page.total);
  }

  async function deleteDocument(docId) {
    if (!window.confirm(`Delete ${docId} and its passages? It is removed from search at once.`)) return;
    showError($("documents-error"), "");
    try {
      const result = await api(docPath(docId), { method: "DELETE" });
      $("upload-status").textContent = `Deleted ${result.doc_id} (${result.chunks_deleted} passages).`;
    } catch (err) {
      showError($("documents-error"), err.detail || err.message);
    }
    await loadDocuments(0);
  }

  // Files the server converts (POST /v1/documents:upload), by suffix: browsers give .eml and .mbox no
  // reliable type of their own. Markdown and plain text are read here and sent as JSON text.
  const UPLOAD_TYPES = {
    pdf: "application/pdf",
    docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    html: "text/html",
    htm: "text/html",
    eml: "message/rfc822",
    mbox: "application/mbox",
  };

  function uploadRequest(file, docId, acl) {
    const suffix = (file.name.match(/\.([^.]+)$/) || ["", ""])[1].toLowerCase();
    const fileType = UPLOAD_TYPES[suffix];
    if (!fileType) return file.text().then((text) => api(docPath(docId), { method: "PUT", body: { text, acl } }));
    const query = new URLSearchParams([["doc_id", docId], ...acl.map((g) => ["acl", g])]);
    return api("/v1/documents:upload?" + query.toString(), { method: "POST", file, fileType });
  }

  async function uploadDocument() {
    const file = $("upload-file").files[0];
    const docId = $("upload-id").value.trim();
    const acl = [...document.querySelectorAll("#upload-acl input:checked")].map((i) => i.value);
    const status = $("upload-status");
    showError($("documents-error"), "");
    if (!file || !docId) return;
    if (!acl.length) {
      showError($("documents-error"), "Tick at least one group that may read the document.");
      return;
    }
    const button = $("upload-button");
    button.disabled = true;
    status.textContent = `Uploading ${file.name}…`;
    try {
      const result = await uploadRequest(file, docId, acl);
      status.textContent = `${result.doc_id}: ${result.status} (${fmtNumber(result.embeddings_computed)} passages embedded).`;
      $("upload-form").reset();
      await loadDocuments(0);
    } catch (err) {
      status.textContent = "";
      showError($("documents-error"), err.detail || err.message);
    } finally {
      button.disabled = false;
    }
  }

  // ---------------------------------------------------------------- whole-graph explorer (cytoscape)

  // The graph of the caller's access level, a page at a time: its best-connected entities from
  // /v1/entities and its strongest relationships from /v1/relationships, up to the caps (the status
  // line says when one cut the graph). A relationship is drawn when both its entities are.
  async function fetchPages(path, key, pageSize, cap) {
    const items = [];
    let total = 0;
    while (items.length < cap) {
      const page = await api(`${path}?limit=${Math.min(pageSize, cap - items.length)}&offset=${items.length}`);
      total = page.total;
      items.push(...page[key]);
      if (!page[key].length || items.length >= total) break;
    }
    return { items, total };
  }

  async function fetchGraph() {
    const [entities, relationships] = await Promise.all([
      fetchPages("/v1/entities", "entities", ENTITIES_PAGE, EXPLORER_MAX_NODES),
      fetchPages("/v1/relationships", "relationships", RELATIONSHIPS_PAGE, EXPLORER_MAX_EDGES),
    ]);
    const keys = new Set(entities.items.map((e) => e.key));
    return { nodes: entities.items, edges: relationships.items.filter((r) => keys.has(r.source) && keys.has(r.target)),
      totalNodes: entities.total, totalEdges: relationships.total, fetchedEdges: relationships.items.length };
  }

  async function loadExplorer() {
    showError($("graph-error"), "");
    $("explorer-status").textContent = "Loading the graph…";
    if (!window.cytoscape) {
      showError($("graph-error"), "The graph library did not load; reload the page.");
      return;
    }
    let graph;
    try {
      graph = await fetchGraph();
    } catch (err) {
      $("explorer-status").textContent = "";
      showError($("graph-error"), err.detail || err.message);
      return;
    }
    drawExplorer(graph);
  }

  function drawExplorer(graph) {
    if (state.explorer) state.explorer.destroy();
    const nodes = [...graph.nodes].sort((a, b) => String(a.key).localeCompare(String(b.key)));
    const maxDegree = Math.max(1, ...nodes.map((n) => n.degree || 0));
    const labelled = new Set([...nodes].sort((a, b) => (b.degree || 0) - (a.degree || 0) || String(a.key).localeCompare(String(b.key)))
      .slice(0, EXPLORER_LABELS).map((n) => n.key));
    const types = [...new Set(nodes.map((n) => n.type || "entity"))].sort();
    // colours by place in the sorted types, so no two of the first eight types share one
    const typeColor = new Map(types.map((t, i) => [t, PALETTE[i % PALETTE.length]]));
    // deterministic start: a circle in key order (the layout below adds no randomness)
    const elements = nodes.map((n, i) => {
      const a = (2 * Math.PI * i) / Math.max(nodes.length, 1);
      return { group: "nodes", data: { id: n.key, name: String(n.name || n.key).slice(0, 40), type: n.type || "entity",
        color: typeColor.get(n.type || "entity"), size: 8 + 22 * Math.sqrt((n.degree || 0) / maxDegree), entity: n },
      position: { x: 400 * Math.cos(a), y: 400 * Math.sin(a) }, classes: labelled.has(n.key) ? "labelled" : "" };
    });
    graph.edges.forEach((e, i) => elements.push({ group: "edges", data: { id: "e" + i, source: e.source, target: e.target,
      width: 0.5 + Math.min(3, Math.log1p(e.weight || 1)) } }));
    const cy = window.cytoscape({
      container: $("cy"),
      elements,
      minZoom: 0.05,
      maxZoom: 4,
      textureOnViewport: nodes.length > 200,
      hideEdgesOnViewport: nodes.length > 200,
      style: [
        { selector: "node", style: { "background-color": "data(color)", width: "data(size)", height: "data(size)", label: "",
          "font-size": 11, color: "#1d232b", "text-outline-color": "#fbfcfd", "text-outline-width": 2, "min-zoomed-font-size": 7 } },
        { selector: "node.labelled, node.focus, node:selected", style: { label: "data(name)" } },
        { selector: "node:selected", style: { "border-width": 3, "border-color": "#1d232b" } },
        { selector: "edge", style: { width: "data(width)", "line-color": "#9aa7b5", opacity: 0.6, "curve-style": "haystack" } },
        { selector: ".faded", style: { opacity: 0.12, label: "" } },
        { selector: ".gone", style: { display: "none" } },
      ],
      // cose's cost grows with the square of the nodes: fewer iterations keep a few hundred under a second or two
      layout: { name: "cose", randomize: false, animate: false, numIter: nodes.length > 150 ? 150 : 600, nodeRepulsion: () => 8000, idealEdgeLength: () => 60 },
    });
    state.explorer = cy;
    cy.on("tap", "node", (ev) => focusEntity(ev.target.id()));
    cy.on("tap", (ev) => { if (ev.target === cy) focusEntity(null); });

    const legend = $("legend");
    clear(legend);
    for (const t of types) {
      const count = nodes.filter((n) => (n.type || "entity") === t).length;
      legend.append(el("li", { "data-type": t }, el("span", { class: "swatch", "data-color": typeColor.get(t) }), `${t} (${count})`));
    }
    // colours set through CSSOM (the policy allows no inline style attributes)
    for (const swatch of legend.querySelectorAll(".swatch")) swatch.style.backgroundColor = swatch.dataset.color;
    const cut = [];
    if (nodes.length < graph.totalNodes) cut.push(`the ${nodes.length} best-connected of ${graph.totalNodes} entities, and only relationships among them`);
    if (graph.fetchedEdges < graph.totalEdges) cut.push(`the ${graph.fetchedEdges} strongest of ${graph.totalEdges} relationships fetched`);
    $("explorer-status").textContent = `${nodes.length} entities, ${graph.edges.length} relationships` +
      (cut.length ? ` (capped: ${cut.join("; ")})` : "") + "; labels on the best-connected and the selected";
    $("cy").dataset.nodes = String(nodes.length);
  }

  function focusEntity(key) {
    const cy = state.explorer;
    if (!cy) return;
    cy.elements().removeClass("faded gone focus");
    cy.nodes().unselect();
    const info = $("explorer-info");
    clear(info);
    delete info.dataset.entity;
    if (!key) return;
    const node = cy.getElementById(key);
    if (node.empty()) {
      info.append(el("p", { text: `${key} is not among the entities drawn.` }));
      return;
    }
    const hops = Number($("hops").value);
    let hood = node;
    for (let i = 0; i < hops; i++) hood = hood.closedNeighborhood();
    if (hops > 0) {
      cy.elements().not(hood).addClass("gone");
      hood.nodes().addClass("focus");
      cy.fit(hood, 40);
      if (cy.zoom() > 1.5) cy.zoom({ level: 1.5, position: node.position() }); // a small neighbourhood is not blown up
      cy.center(hood);
    } else {
      cy.elements().not(node.closedNeighborhood()).addClass("faded");
      node.closedNeighborhood().nodes().addClass("focus");
      cy.center(node);
    }
    node.select();
    const m = node.data("entity");
    info.append(el("strong", { text: m.name }), ` · ${m.type || "entity"} · degree ${m.degree ?? 0}`);
    if (m.description) info.append(el("p", { text: m.description }));
    info.dataset.entity = key;
  }

  async function searchEntities() {
    const q = $("entity-q").value.trim();
    const list = $("entity-results");
    clear(list);
    showError($("graph-error"), "");
    if (!q) return;
    let found;
    try {
      found = await api("/v1/entities?limit=20&q=" + encodeURIComponent(q));
    } catch (err) {
      showError($("graph-error"), err.detail || err.message);
      return;
    }
    if (!found.entities.length) list.append(el("li", { class: "muted", text: `No entity named like “${q}”.` }));
    for (const m of found.entities) {
      list.append(el("li", {}, el("button", { type: "button", class: "linkish entity-result", "data-key": m.key,
        onclick: () => focusEntity(m.key) }, m.name), el("span", { class: "muted small", text: ` ${m.type} · degree ${m.degree}` })));
    }
    if (found.entities.length === 1) focusEntity(found.entities[0].key);
  }

  // ---------------------------------------------------------------- communities

  async function loadCommunities() {
    showError($("communities-error"), "");
    $("communities-status").textContent = "Loading…";
    const depth = $("depth").value;
    try {
      const list = await api(`/v1/communities?limit=${COMMUNITIES_PAGE}` + (depth === "" ? "" : "&level=" + encodeURIComponent(depth)));
      receiveCommunities(list, depth);
    } catch (err) {
      $("communities-status").textContent = "";
      showError($("communities-error"), err.detail || err.message);
    }
  }

  function receiveCommunities(list, depth) {
    state.accessLevel = list.access_level;
    // the token's groups decide the access level (the server picks it): shown, not chosen
    $("access-level").textContent = list.access_level || "none";
    $("session-label").textContent = list.access_level ? `access level: ${list.access_level}` : "signed in (no graph for your groups)";
    const communities = list.communities || [];
    if (depth === null || depth === undefined || depth === "") {
      // the unfiltered list tells which hierarchy levels exist
      state.communities = communities;
      const select = $("depth");
      const keep = select.value;
      clear(select);
      select.append(el("option", { value: "", text: "all levels" }));
      const levels = [...new Set(communities.map((c) => c.level))].sort((a, b) => a - b);
      for (const l of levels) select.append(el("option", { value: String(l), text: l === 0 ? "level 0 (root)" : `level ${l}` }));
      select.value = levels.map(String).includes(keep) ? keep : "";
    }
    renderCommunityList(communities, list);
  }

  function renderCommunityList(communities, page) {
    const list = $("community-list");
    clear(list);
    $("communities-status").textContent = state.accessLevel
      ? `${communities.length} communities` + (page.total > communities.length ? ` (the first ${communities.length} of ${page.total})` : "")
      : "No access level fits this token's groups, so there is no graph to browse.";
    const sorted = [...communities].sort((a, b) => a.level - b.level || b.rating - a.rating || a.id - b.id);
    for (const c of sorted) {
      const item = el("li", {},
        el("button", { type: "button", class: "community-item", "data-community": c.id, onclick: () => openCommunity(c.id) },
          el("span", { class: "community-name", text: c.title }),
          el("span", { class: "rating", title: "impact rating (0-10)", text: Number(c.rating).toFixed(1) }),
          el("span", { class: "muted small", text: `level ${c.level} · ${c.size ?? "?"} entities` }),
          c.summary ? el("span", { class: "community-summary", text: c.summary }) : null));
      list.append(item);
    }
  }

  async function openCommunity(id) {
    showError($("communities-error"), "");
    for (const b of document.querySelectorAll(".community-item")) b.classList.toggle("active", b.dataset.community === String(id));
    let report;
    try {
      report = await api("/v1/communities/" + encodeURIComponent(id));
    } catch (err) {
      showError($("communities-error"), err.detail || err.message);
      return;
    }
    $("community-title").textContent = report.title;
    $("community-meta").textContent =
      `community ${report.id} · hierarchy level ${report.level}` + (report.parent !== null && report.parent !== undefined ? ` · parent ${report.parent}` : "") +
      ` · access level ${report.access_level}` + (report.model ? ` · written by ${report.model}` : " · offline extractive report");
    $("community-summary").textContent = report.summary || "";
    $("community-rating").textContent = `rating ${Number(report.rating).toFixed(1)}` + (report.rating_explanation ? `: ${report.rating_explanation}` : "");

    const findings = $("findings");
    clear(findings);
    for (const f of report.findings || []) {
      const summary = typeof f === "string" ? f : f.summary || "";
      const explanation = typeof f === "string" ? "" : f.explanation || "";
      findings.append(el("li", { class: "finding" }, el("strong", { text: summary }), explanation ? el("p", { text: explanation }) : null));
    }
    if (!(report.findings || []).length) findings.append(el("li", { class: "muted", text: "No findings." }));

    const docs = $("community-docs");
    clear(docs);
    for (const d of report.documents || []) docs.append(el("li", {}, el("code", { text: d.doc_id }), " ", d.title || ""));
    show($("community-docs-title"), (report.documents || []).length > 0);

    drawGraph(report.members || [], relationshipsOf(report));
    show($("community"), true);
  }

  function relationshipsOf(report) {
    const raw = report.relationships || report.edges || [];
    return raw.map((r) => ({
      source: r.source ?? r.source_key,
      target: r.target ?? r.target_key,
      weight: Number(r.weight ?? 1) || 1,
      description: r.description || "",
    })).filter((r) => r.source !== undefined && r.target !== undefined);
  }

  // ---------------------------------------------------------------- entity graph

  // A deterministic Fruchterman-Reingold layout: nodes start on a circle in key order, no randomness,
  // so the same community always draws the same picture.
  function layout(nodes, edges, width, height) {
    const n = nodes.length;
    const pos = nodes.map((_, i) => {
      const a = (2 * Math.PI * i) / Math.max(n, 1) - Math.PI / 2;
      return { x: Math.cos(a) * width * 0.35, y: Math.sin(a) * height * 0.35 };
    });
    if (n < 3 || !edges.length) return pos;
    const index = new Map(nodes.map((node, i) => [node.key, i]));
    const links = edges.map((e) => [index.get(e.source), index.get(e.target), e.weight]);
    const k = Math.sqrt((width * height) / n) * 0.9;
    const iterations = 300;
    let temperature = width / 8;
    for (let it = 0; it < iterations; it++) {
      const disp = pos.map(() => ({ x: 0, y: 0 }));
      for (let i = 0; i < n; i++) {
        for (let j = i + 1; j < n; j++) {
          let dx = pos[i].x - pos[j].x;
          let dy = pos[i].y - pos[j].y;
          let d2 = dx * dx + dy * dy;
          if (d2 < 0.01) { dx = 0.1 * (i - j); dy = 0.1; d2 = dx * dx + dy * dy; }
          const f = (k * k) / d2; // (k^2 / d) / d, applied to (dx, dy)
          disp[i].x += dx * f; disp[i].y += dy * f;
          disp[j].x -= dx * f; disp[j].y -= dy * f;
        }
      }
      for (const [a, b, w] of links) {
        const dx = pos[a].x - pos[b].x;
        const dy = pos[a].y - pos[b].y;
        const d = Math.sqrt(dx * dx + dy * dy) || 0.01;
        const f = (d / k) * Math.min(1 + Math.log1p(w) * 0.3, 2); // (d^2 / k) / d
        disp[a].x -= dx * f; disp[a].y -= dy * f;
        disp[b].x += dx * f; disp[b].y += dy * f;
      }
      for (let i = 0; i < n; i++) {
        // a little gravity keeps unconnected parts on screen
        disp[i].x -= pos[i].x * 0.01;
        disp[i].y -= pos[i].y * 0.01;
        const len = Math.sqrt(disp[i].x ** 2 + disp[i].y ** 2) || 1;
        const step = Math.min(len, temperature);
        pos[i].x += (disp[i].x / len) * step;
        pos[i].y += (disp[i].y / len) * step;
      }
      temperature *= 0.985;
    }
    return pos;
  }

  // Pushes overlapping nodes apart (a few deterministic passes), keeping them inside the box.
  function separate(points, radius, box) {
    const gap = 16;
    for (let pass = 0; pass < 60; pass++) {
      let moved = false;
      for (let i = 0; i < points.length; i++) {
        for (let j = i + 1; j < points.length; j++) {
          const min = radius[i] + radius[j] + gap;
          let dx = points[j].x - points[i].x;
          let dy = points[j].y - points[i].y;
          let d = Math.sqrt(dx * dx + dy * dy);
          if (d >= min) continue;
          if (d < 0.01) { dx = 1; dy = (j - i) % 2 ? 1 : -1; d = Math.SQRT2; }
          const push = (min - d) / 2;
          points[i].x -= (dx / d) * push; points[i].y -= (dy / d) * push;
          points[j].x += (dx / d) * push; points[j].y += (dy / d) * push;
          moved = true;
        }
      }
      for (const p of points) {
        p.x = Math.min(box.right, Math.max(box.left, p.x));
        p.y = Math.min(box.bottom, Math.max(box.top, p.y));
      }
      if (!moved) break;
    }
  }

  const PALETTE = ["#3b6ea5", "#c0504d", "#4f9a55", "#8064a2", "#d28a2c", "#2f9c9c", "#a05d7a", "#6b7a2e"];

  function colorOf(type) {
    let h = 0;
    for (const ch of String(type || "")) h = (h * 31 + ch.codePointAt(0)) >>> 0;
    return PALETTE[h % PALETTE.length];
  }

  function drawGraph(members, relationships) {
    const box = $("graph");
    clear(box);
    $("entity-info").textContent = "";
    const sorted = [...members].sort((a, b) => (b.degree || 0) - (a.degree || 0) || String(a.key).localeCompare(String(b.key)));
    const shown = sorted.slice(0, MAX_GRAPH_NODES).sort((a, b) => String(a.key).localeCompare(String(b.key)));
    const keys = new Set(shown.map((m) => m.key));
    const edges = relationships.filter((r) => keys.has(r.source) && keys.has(r.target) && r.source !== r.target)
      .sort((a, b) => String(a.source).localeCompare(String(b.source)) || String(a.target).localeCompare(String(b.target)));
    const notes = [];
    if (members.length > shown.length) notes.push(`showing the ${shown.length} best-connected of ${members.length} entities`);
    if (!relationships.length) notes.push("the API returned no relationships for this community, so entities are drawn without edges");
    $("graph-note").textContent = notes.join("; ");

    const width = 640;
    const height = 440;
    const pos = layout(shown, edges, width, height);
    // fit into the view box
    const padX = 120; // room for the labels, which sit outside their nodes
    const padY = 30;
    const xs = pos.map((p) => p.x);
    const ys = pos.map((p) => p.y);
    const minX = Math.min(...xs, 0), maxX = Math.max(...xs, 0), minY = Math.min(...ys, 0), maxY = Math.max(...ys, 0);
    const scale = Math.min((width - 2 * padX) / ((maxX - minX) || 1), (height - 2 * padY) / ((maxY - minY) || 1), 3);
    const maxDegree = Math.max(1, ...shown.map((m) => m.degree || 0));
    const radius = shown.map((m) => 5 + 9 * Math.sqrt((m.degree || 0) / maxDegree));
    const screen = pos.map((p) => ({
      x: width / 2 + (p.x - (minX + maxX) / 2) * scale,
      y: height / 2 + (p.y - (minY + maxY) / 2) * scale,
    }));
    separate(screen, radius, { left: padX / 2, right: width - padX / 2, top: padY / 2, bottom: height - padY / 2 });
    const at = (i) => screen[i];
    const index = new Map(shown.map((m, i) => [m.key, i]));

    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "entity-graph" });
    const label = svg("title");
    label.textContent = `Entity graph: ${shown.length} entities, ${edges.length} relationships`;
    root.append(label);
    const edgeLayer = svg("g", { class: "edges" });
    const maxWeight = Math.max(1, ...edges.map((e) => e.weight));
    for (const e of edges) {
      const a = at(index.get(e.source));
      const b = at(index.get(e.target));
      const line = svg("line", { x1: a.x.toFixed(1), y1: a.y.toFixed(1), x2: b.x.toFixed(1), y2: b.y.toFixed(1),
        "stroke-width": (1 + 3 * (e.weight / maxWeight)).toFixed(2), class: "edge" });
      const tip = svg("title");
      tip.textContent = `${e.source} — ${e.target}` + (e.description ? `: ${e.description}` : "");
      line.append(tip);
      edgeLayer.append(line);
    }
    root.append(edgeLayer);

    const nodeLayer = svg("g", { class: "nodes" });
    shown.forEach((m, i) => {
      const p = at(i);
      const r = radius[i];
      const g = svg("g", { class: "node", transform: `translate(${p.x.toFixed(1)},${p.y.toFixed(1)})`, tabindex: 0, "data-key": m.key });
      const circle = svg("circle", { r: r.toFixed(1), fill: colorOf(m.type) });
      const tip = svg("title");
      tip.textContent = `${m.name} (${m.type || "entity"}, degree ${m.degree ?? 0})`;
      // labels point away from the centre, so they stay inside the picture
      const left = p.x < width / 2;
      const text = svg("text", { x: ((left ? -1 : 1) * (r + 3)).toFixed(1), y: "4", "text-anchor": left ? "end" : "start" });
      const name = String(m.name || m.key);
      text.textContent = name.length > 28 ? name.slice(0, 27) + "…" : name;
      g.append(circle, tip, text);
      const select = () => showEntity(m);
      g.addEventListener("click", select);
      g.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select(); } });
      nodeLayer.append(g);
    });
    root.append(nodeLayer);
    box.append(root);
  }

  function showEntity(m) {
    const info = $("entity-info");
    clear(info);
    info.append(el("strong", { text: m.name }), ` · ${m.type || "entity"} · degree ${m.degree ?? 0}`);
    if (m.description) info.append(el("p", { text: m.description }));
  }

  // ---------------------------------------------------------------- wiring

  function init() {
    $("signin-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const token = $("token").value.trim();
      if (!token) return;
      const button = $("signin-button");
      button.disabled = true;
      showError($("signin-error"), "");
      try {
        await signIn(token);
      } catch (err) {
        state.token = null;
        sessionStorage.removeItem(TOKEN_KEY);
        showError($("signin-error"), err.detail || err.message);
      } finally {
        button.disabled = false;
      }
    });
    $("signout").addEventListener("click", signOut);
    for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => selectTab(tab.dataset.tab));
    $("ask-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const question = $("question").value.trim();
      if (!question) return;
      ask(question, $("route").value, $("stream").checked);
    });
    $("question").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) $("ask-form").requestSubmit();
    });
    $("citation-close").addEventListener("click", closeCitation);
    $("citation-open").addEventListener("click", () => {
      const c = state.openCitation;
      if (c && c.doc_id) openDocument(c.doc_id, c.id);
    });
    $("history-clear").addEventListener("click", clearHistory);
    $("upload-form").addEventListener("submit", (ev) => { ev.preventDefault(); uploadDocument(); });
    $("upload-file").addEventListener("change", () => {
      const file = $("upload-file").files[0];
      if (file && !$("upload-id").value.trim()) $("upload-id").value = file.name;
    });
    $("documents-more").addEventListener("click", () => loadDocuments(state.documentsOffset));
    $("entity-search").addEventListener("submit", (ev) => { ev.preventDefault(); searchEntities(); });
    $("hops").addEventListener("change", () => focusEntity($("explorer-info").dataset.entity || null));
    $("zoom-in").addEventListener("click", () => state.explorer && state.explorer.zoom({ level: state.explorer.zoom() * 1.4, renderedPosition: { x: $("cy").clientWidth / 2, y: $("cy").clientHeight / 2 } }));
    $("zoom-out").addEventListener("click", () => state.explorer && state.explorer.zoom({ level: state.explorer.zoom() / 1.4, renderedPosition: { x: $("cy").clientWidth / 2, y: $("cy").clientHeight / 2 } }));
    $("graph-fit").addEventListener("click", () => state.explorer && state.explorer.fit(undefined, 30));
    $("graph-reload").addEventListener("click", loadExplorer);
    document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") closeCitation(); });
    $("depth").addEventListener("change", loadCommunities);
    $("load-communities").addEventListener("click", loadCommunities);

    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved) {
      signIn(saved).catch((err) => {
        state.token = null;
        sessionStorage.removeItem(TOKEN_KEY);
        showError($("signin-error"), err.detail || err.message);
      });
    }
  }

  // the pure parts, and the graph explorer, for tests in the browser
  window.Crossroads = Object.freeze({ readEvents, parseFrame, layout, unwrap, numberCitations, explorer: () => state.explorer });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
