// Crossroads analysts' page. Hand-written, no framework, no third-party code, no network beyond this origin.
// Corpus text is untrusted: it only ever reaches the page through textContent / createTextNode /
// setAttribute, never through innerHTML.
"use strict";

(function () {
  const TOKEN_KEY = "crossroads.token";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const MAX_GRAPH_NODES = 60;

  const $ = (id) => document.getElementById(id);

  const state = {
    token: null,
    answer: null,          // the last full answer (Answer.to_dict())
    communities: [],       // the last list from /v1/communities
    accessLevel: null,
    asking: null,          // AbortController of the running question
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
    let response;
    try {
      response = await fetch(path, {
        method: opts.method || "GET",
        headers,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
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
    // any reader call proves the token; this one also says which access level the token is served from
    const list = await api("/v1/communities");
    sessionStorage.setItem(TOKEN_KEY, token);
    enterApp(list);
  }

  function enterApp(list) {
    show($("signin"), false);
    show($("tabs"), true);
    show($("session"), true);
    showError($("signin-error"), "");
    $("token").value = "";
    receiveCommunities(list, null);
    selectTab("ask");
  }

  function signOut() {
    if (state.asking) state.asking.abort();
    state.token = null;
    state.answer = null;
    state.communities = [];
    sessionStorage.removeItem(TOKEN_KEY);
    show($("signin"), true);
    show($("tabs"), false);
    show($("session"), false);
    show($("view-ask"), false);
    show($("view-communities"), false);
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
    if (name === "ask") $("question").focus();
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

    const container = $("answer");
    clear(container);
    const byNumber = new Map((answer.citations || []).map((c) => [Number(c.number), c]));
    const paragraphs = String(answer.answer || "").split(/\n{2,}/);
    for (const paragraph of paragraphs) {
      if (!paragraph.trim()) continue;
      container.append(renderParagraph(paragraph, byNumber));
    }

    const notes = $("answer-notes");
    clear(notes);
    for (const reason of answer.degraded_reasons || []) notes.append(el("li", { class: "note degraded", text: "Degraded: " + reason }));
    for (const error of answer.errors || []) notes.append(el("li", { class: "note error", text: error }));

    const sources = $("sources");
    clear(sources);
    for (const c of answer.citations || []) {
      const label = c.kind === "report" ? `${c.title} (community report)` : `${c.title} — ${c.doc_id || ""}`;
      sources.append(el("li", { value: c.number },
        citationButton(c, `[${c.number}]`), " ", el("span", { text: label })));
    }
    show($("sources-title"), (answer.citations || []).length > 0);
    renderUsage(answer.usage, answer.latency_ms);
  }

  const CITE = /\[(\d+(?:\s*[,;]\s*\d+)*)\]/g;

  function renderParagraph(text, byNumber) {
    const p = el("p");
    let last = 0;
    for (const match of text.matchAll(CITE)) {
      const numbers = match[1].split(/[,;]/).map((s) => Number(s.trim()));
      if (!numbers.every((n) => byNumber.has(n))) continue; // leave unknown markers as text
      p.append(document.createTextNode(text.slice(last, match.index)));
      numbers.forEach((n, i) => {
        if (i) p.append(document.createTextNode(" "));
        p.append(citationButton(byNumber.get(n), `[${n}]`));
      });
      last = match.index + match[0].length;
    }
    p.append(document.createTextNode(text.slice(last)));
    return p;
  }

  function citationButton(citation, label) {
    return el("button", {
      type: "button",
      class: "cite",
      "data-citation": citation.number,
      title: citation.title || "",
      "aria-label": `Citation ${citation.number}: ${citation.title || ""}`,
      onclick: () => openCitation(citation),
      text: label,
    });
  }

  function openCitation(c) {
    $("citation-title").textContent = `[${c.number}] ${c.title || ""}`;
    const where = c.kind === "report"
      ? [c.heading || "community report", `report ${c.id}`]
      : [c.doc_id, c.heading].filter(Boolean);
    $("citation-location").textContent = where.join(" · ");
    $("citation-quote").textContent = c.quote || "";
    const docs = $("citation-documents");
    clear(docs);
    for (const d of c.documents || []) docs.append(el("li", {}, el("code", { text: d.doc_id }), " ", d.title || ""));
    show($("citation-documents-wrap"), (c.documents || []).length > 0);
    for (const b of document.querySelectorAll(".cite")) b.classList.toggle("active", b.dataset.citation === String(c.number));
    show($("citation-panel"), true);
    document.body.classList.add("panel-open");
    $("citation-close").focus();
  }

  function closeCitation() {
    show($("citation-panel"), false);
    document.body.classList.remove("panel-open");
    for (const b of document.querySelectorAll(".cite.active")) b.classList.remove("active");
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

  // ---------------------------------------------------------------- communities

  async function loadCommunities() {
    showError($("communities-error"), "");
    $("communities-status").textContent = "Loading…";
    const depth = $("depth").value;
    try {
      const list = await api("/v1/communities" + (depth === "" ? "" : "?level=" + encodeURIComponent(depth)));
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
    renderCommunityList(communities);
  }

  function renderCommunityList(communities) {
    const list = $("community-list");
    clear(list);
    $("communities-status").textContent = state.accessLevel
      ? `${communities.length} communities`
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

  // the pure parts, for tests in the browser
  window.Crossroads = Object.freeze({ readEvents, parseFrame, layout });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
