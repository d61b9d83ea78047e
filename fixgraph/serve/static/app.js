// fixgraph dashboard: plain JS, no build step. Every value from the API goes into the page through
// textContent / attributes, never as HTML. Streams are read with fetch() (EventSource cannot POST).
"use strict";

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
};
const fmt = (x, d = 3) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(d));
const state = { lastChunks: [], controller: null };

// ---- API ------------------------------------------------------------------------------------
function headers() {
  const h = { "Content-Type": "application/json" };
  const key = localStorage.getItem("fixgraph-key");
  if (key) h["X-API-Key"] = key;
  return h;
}
async function api(path, body) {
  const res = await fetch(path, body === undefined ? { headers: headers() } : { method: "POST", headers: headers(), body: JSON.stringify(body) });
  if (res.status === 401) $("#key-box").hidden = false;
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(typeof data.detail === "string" ? data.detail : `HTTP ${res.status}`);
  return data;
}
// POST a request and call onEvent(event, data) for each Server-Sent Event until the stream ends.
async function stream(path, body, onEvent, signal) {
  const res = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body), signal });
  if (res.status === 401) $("#key-box").hidden = false;
  if (!res.ok) {
    const data = await res.json().catch(() => ({}));
    throw new Error(typeof data.detail === "string" ? data.detail : `HTTP ${res.status}`);
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) onEvent(event, JSON.parse(data));
    }
  }
}

// ---- tabs, header, document viewer ------------------------------------------------------------
function showTab(name) {
  document.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  document.querySelectorAll(".tab").forEach((s) => (s.hidden = s.id !== `tab-${name}`));
  if (name === "runs" && !$("#runs tbody").children.length) loadRuns();
  if (name === "graph") drawEvidence();
}
document.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
$("#api-key").addEventListener("change", (e) => { localStorage.setItem("fixgraph-key", e.target.value); init(); });

async function openDocument(docId, start, end) {
  const doc = await api(`/documents/${encodeURIComponent(docId)}`);
  $("#doc-title").textContent = doc.title;
  $("#doc-id").textContent = doc.url ? doc.doc_id + " · " : doc.doc_id;
  if (doc.url) $("#doc-id").append(el("a", { href: doc.url, target: "_blank", rel: "noopener" }, "source"));
  const pre = $("#doc-text");
  pre.replaceChildren();
  if (start !== undefined && end !== undefined && end > start) {
    const mark = el("mark", { id: "highlight" }, doc.text.slice(start, end));
    pre.append(doc.text.slice(0, start), mark, doc.text.slice(end));
    $("#doc-viewer").hidden = false;
    mark.scrollIntoView({ block: "center" });
  } else {
    pre.append(doc.text);
    $("#doc-viewer").hidden = false;
  }
}
$("#doc-close").addEventListener("click", () => ($("#doc-viewer").hidden = true));
function spanLink(label, c, title) {
  return el("a", {
    class: "cite", href: `#doc=${encodeURIComponent(c.doc_id)}&start=${c.start}&end=${c.end}`,
    title: title || `${c.title}${c.section ? " › " + c.section : ""}: “${(c.quote || c.text || "").slice(0, 160)}”`,
    "data-chunk": c.chunk_id,
    onclick: (e) => { e.preventDefault(); openDocument(c.doc_id, c.start, c.end); },
  }, label);
}

// ---- progress -----------------------------------------------------------------------------------
function progress(box, text, kind = "running") {
  box.hidden = false;
  box.className = `progress ${kind}`;
  box.textContent = text;
}

// ---- Ask ----------------------------------------------------------------------------------------
function renderAnswer(box, sentences, numbering) {
  box.replaceChildren();
  sentences.forEach((s, i) => {
    const span = el("span", { class: "sentence" + (s.supported === false ? " unsupported" : "") }, s.text);
    if (s.supported === false) span.title = "the verifier found no support for this sentence in its citations";
    box.append(span);
    for (const c of s.citations || []) {
      if (!numbering.has(c.chunk_id)) numbering.set(c.chunk_id, numbering.size + 1);
      box.append(spanLink(`[${numbering.get(c.chunk_id)}]`, c));
    }
    if (i < sentences.length - 1) box.append(" ");
  });
}

async function runAnswer({ path, body, progressBox, answerBox, onMeta, onDone, label }) {
  const started = performance.now();
  let tokens = 0, stage = "retrieving";
  const sentences = [];
  const numbering = new Map();
  answerBox.replaceChildren();
  const live = el("span", { class: "live" });
  answerBox.append(live);
  const tick = () => progress(progressBox, `${label}: ${stage} · ${tokens} tokens · ${((performance.now() - started) / 1000).toFixed(1)} s`);
  tick();
  const timer = setInterval(tick, 200);
  state.controller = new AbortController();
  $("#ask-stop").hidden = path !== "/ask/stream";
  try {
    await stream(path, body, (event, data) => {
      if (event === "progress") stage = data.stage;
      else if (event === "meta") onMeta(data);
      else if (event === "token") { tokens += 1; live.append(data.text); answerBox.dataset.tokens = tokens; $("#ask-progress").dataset.tokens = tokens; }
      else if (event === "citation") sentences[data.sentence] = { text: data.text, citations: data.citations };
      else if (event === "done") {
        const payload = data.explanation === undefined ? data : data.explanation;
        if (payload) {
          renderAnswer(answerBox, payload.sentences, numbering);
          if (payload.abstained) answerBox.append(el("em", {}, `(abstained: ${payload.abstain_reason})`));
          state.lastChunks = [...new Set(payload.sentences.flatMap((s) => s.citations.map((c) => c.chunk_id)))];
          if (!state.lastChunks.length) state.lastChunks = payload.context_ids || [];
        }
        onDone(data);
        stage = "done";
      } else if (event === "error") {
        stage = "error";
        progress(progressBox, `error (${data.code}): ${data.message}`, "error");
      }
      if (event === "citation" && sentences.length) {
        // re-render finished sentences with their citation links, keep streaming into `live`
        const done = el("span", {});
        renderAnswer(done, sentences.filter(Boolean), numbering);
        answerBox.replaceChildren(done, " ");
        live.replaceChildren();
        answerBox.append(live);
      }
    }, state.controller.signal);
    if (stage === "done") progress(progressBox, `${label}: done · ${tokens} tokens · ${((performance.now() - started) / 1000).toFixed(1)} s`, "done");
  } catch (err) {
    if (err.name === "AbortError") progress(progressBox, `${label}: stopped`, "done");
    else progress(progressBox, `error: ${err.message}`, "error");
  } finally {
    clearInterval(timer);
    $("#ask-stop").hidden = true;
  }
}

$("#ask-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const button = $("#ask-button");
  button.disabled = true;
  $("#retrieved").replaceChildren();
  $("#answer-meta").textContent = "";
  await runAnswer({
    path: "/ask/stream", label: "answer", progressBox: $("#ask-progress"), answerBox: $("#answer"),
    body: { question: $("#question").value, system: $("#ask-system").value || null, verify: $("#ask-verify").checked },
    onMeta: (m) => {
      $("#retrieved").replaceChildren(...m.retrieved.map((h) => el("li", {},
        spanLink(h.title, { ...h, quote: "" }, `${h.doc_id} ${h.section}`), " ",
        el("span", { class: "meta" }, h.section), " ", el("span", { class: "score" }, fmt(h.score)))));
    },
    onDone: (d) => {
      const v = d.verification, u = d.usage, l = d.latency;
      $("#answer-meta").textContent = `${d.system} · ${u.total_tokens} tokens · first token ${fmt(l.first_token_ms, 0)} ms · total ${fmt(l.total_ms, 0)} ms` +
        (v.enabled ? ` · verified: ${fmt(v.citation_recall, 2)} of sentences supported` : " · not verified");
    },
  });
  button.disabled = false;
});
$("#ask-stop").addEventListener("click", () => state.controller && state.controller.abort());

// ---- Diagnose -----------------------------------------------------------------------------------
function renderDiagnosis(d) {
  $("#signatures").replaceChildren(...d.signatures.filter((s) => s.kind !== "message")
    .map((s) => el("span", { title: s.detail || s.text }, el("b", {}, s.kind), s.value)));
  $("#causes").replaceChildren(...d.causes.map((c) => {
    const item = el("li", {}, spanLink(c.title, c.passage || c, `${c.doc_id} ${c.section}`), " ",
      el("span", { class: "meta" }, c.section), " ",
      el("span", { class: "score" }, c.matched.map((m) => `${m.how}:${m.value}`).join(", ")));
    for (const q of c.cause) item.append(el("span", { class: "quote" }, "cause · ", spanLink(q.label, q), " ", q.text.slice(0, 240)));
    for (const q of c.fixes) item.append(el("span", { class: "quote" }, "fix · ", spanLink(q.label, q), " ", q.text.slice(0, 240)));
    return item;
  }));
  state.lastChunks = d.causes.map((c) => c.chunk_id);
}
$("#diagnose-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("#diagnose-button").disabled = true;
  $("#causes").replaceChildren();
  $("#signatures").replaceChildren();
  const body = { log: $("#log").value, system: $("#diagnose-system").value || null };
  if ($("#diagnose-explain").checked) {
    await runAnswer({ path: "/diagnose/stream", label: "diagnosis", body, progressBox: $("#diagnose-progress"),
      answerBox: $("#explanation"), onMeta: renderDiagnosis, onDone: () => {} });
  } else {
    progress($("#diagnose-progress"), "diagnosing…");
    try { renderDiagnosis(await api("/diagnose", body)); progress($("#diagnose-progress"), "done", "done"); }
    catch (err) { progress($("#diagnose-progress"), `error: ${err.message}`, "error"); }
  }
  $("#diagnose-button").disabled = false;
});

// ---- Compare ------------------------------------------------------------------------------------
$("#compare-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const qid = $("#compare-qid").value || null;
  const body = { qid, question: qid ? null : $("#compare-question").value, systems: [$("#compare-a").value, $("#compare-b").value], k: Number($("#compare-k").value) };
  try {
    const r = await api("/compare", body);
    const gold = new Set(r.gold.map((g) => g.chunk_id));
    $("#compare-gold").textContent = r.qid
      ? `${r.qid} (${r.qtype}): ${r.gold.length} gold chunks on ${r.answer_pages.join(", ")}; ranks searched to depth ${r.depth}`
      : "free question: no gold to place";
    $("#compare-result").replaceChildren(...r.systems.map((s) => el("div", {},
      el("h3", {}, s.system, " ", el("span", { class: "meta" }, `${fmt(s.timings.search_ms, 1)} ms`)),
      r.qid ? el("p", { class: "meta gold-ranks" }, "gold at rank: " + (Object.entries(s.gold_ranks).map(([c, rk]) => `${c} → ${rk ?? "not in top " + r.depth}`).join("; ") || "–") +
        ` · answer page at ${s.answer_page_rank ?? "–"}`) : "",
      el("ol", {}, ...s.hits.map((h) => el("li", { class: gold.has(h.chunk_id) ? "gold" : "" },
        spanLink(h.title, { ...h, quote: "" }, h.chunk_id), " ", el("span", { class: "meta" }, h.section), " ", el("span", { class: "score" }, fmt(h.score))))))));
  } catch (err) { $("#compare-gold").textContent = `error: ${err.message}`; }
});

// ---- Runs ---------------------------------------------------------------------------------------
async function loadRuns() {
  try {
    const runs = await api("/runs");
    $("#runs tbody").replaceChildren(...runs.map((r) => el("tr", { class: "clickable", onclick: () => showRun(r.run_id) },
      el("td", {}, r.name), el("td", {}, r.evaluation), el("td", {}, r.corpus), el("td", {}, new Date(r.started).toLocaleString()),
      el("td", {}, el("a", { href: r.link, target: "_blank", rel: "noopener", onclick: (e) => e.stopPropagation() }, "MLflow")))));
    if (!runs.length) $("#run-detail").textContent = "No evaluation runs in this MLflow store yet (fixgraph run).";
  } catch (err) { $("#run-detail").textContent = `error: ${err.message}`; }
}
$("#runs-refresh").addEventListener("click", loadRuns);
async function showRun(runId) {
  const d = await api(`/runs/${encodeURIComponent(runId)}`);
  const metrics = [...new Set(d.systems.flatMap((s) => Object.keys(s.metrics)))].filter((m) => !m.startsWith("precision")).slice(0, 8);
  const table = el("table", { class: "grid" }, el("tr", {}, el("th", {}, "system"), ...metrics.map((m) => el("th", {}, m))),
    ...d.systems.map((s) => el("tr", {}, el("td", {}, el("a", { href: s.link, target: "_blank", rel: "noopener" }, s.system)),
      ...metrics.map((m) => el("td", {}, s.metrics[m] ? `${fmt(s.metrics[m].mean)} [${fmt(s.metrics[m].ci_low)}, ${fmt(s.metrics[m].ci_high)}]` : "–")))));
  const parts = [el("h3", {}, d.name, " ", el("a", { href: d.link, target: "_blank", rel: "noopener" }, "open in MLflow")), table];
  if (d.comparison) {
    const rows = d.comparison.rows.filter((r) => r.system !== d.comparison.baseline);
    const head = el("tr", {}, ...["system", "metric", "Δ", "95% CI", "p", "p_Holm"].map((h) => el("th", {}, h)));
    const body = rows.map((r) => el("tr", {},
      el("td", {}, r.system), el("td", {}, r.metric), el("td", {}, fmt(r.diff)),
      el("td", {}, `[${fmt(r.diff_ci_low)}, ${fmt(r.diff_ci_high)}]`), el("td", {}, fmt(r.p, 4)),
      el("td", {}, r.in_family ? fmt(r.p_holm, 4) : "exploratory")));
    parts.push(el("h4", {}, `Paired comparison vs ${d.comparison.baseline}`), el("table", { class: "grid" }, head, ...body));
  }
  $("#run-detail").replaceChildren(...parts);
}

// ---- Graph --------------------------------------------------------------------------------------
const COLORS = { Article: "#2458c6", Problem: "#b42318", Cause: "#dc6803", Fix: "#16794c", Step: "#12b76a", Task: "#7a5af8", App: "#0e9384", UIElement: "#667085", Command: "#344054", File: "#98a2b3", Key: "#c11574", Concept: "#a3a3a3" };
async function drawEvidence() {
  const svg = $("#graph-svg");
  svg.replaceChildren();
  if (!state.lastChunks.length) { $("#graph-note").textContent = "Ask a question (or diagnose a log) first: its evidence subgraph appears here."; return; }
  let g;
  try { g = await api("/graph/evidence", { chunk_ids: state.lastChunks.slice(0, 50) }); }
  catch (err) { $("#graph-note").textContent = `error: ${err.message}`; return; }
  $("#graph-note").textContent = `${g.nodes.length} nodes, ${g.edges.length} edges stated in ${g.chunks.length} cited chunks` + (g.truncated ? ` (${g.truncated} more nodes not shown)` : "");
  const ns = "http://www.w3.org/2000/svg";
  const pos = new Map();
  g.nodes.forEach((n, i) => {
    const a = (2 * Math.PI * i) / Math.max(g.nodes.length, 1);
    pos.set(n.node_id, [400 + 220 * Math.cos(a), 260 + 210 * Math.sin(a)]);
  });
  for (const e of g.edges) {
    const [x1, y1] = pos.get(e.source), [x2, y2] = pos.get(e.target);
    const line = document.createElementNS(ns, "line");
    Object.entries({ x1, y1, x2, y2 }).forEach(([k, v]) => line.setAttribute(k, v));
    const title = document.createElementNS(ns, "title");
    title.textContent = e.relation;
    line.append(title);
    svg.append(line);
  }
  for (const n of g.nodes) {
    const [x, y] = pos.get(n.node_id);
    const c = document.createElementNS(ns, "circle");
    c.setAttribute("cx", x); c.setAttribute("cy", y); c.setAttribute("r", 7);
    c.setAttribute("fill", COLORS[n.type] || "#999");
    c.setAttribute("data-node", n.node_id);
    c.addEventListener("click", () => showNode(n.node_id));
    const title = document.createElementNS(ns, "title");
    title.textContent = `${n.type}: ${n.name}`;
    c.append(title);
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", x + 9); t.setAttribute("y", y + 3);
    t.textContent = n.name.length > 28 ? n.name.slice(0, 27) + "…" : n.name;
    svg.append(c, t);
  }
}
async function showNode(nodeId) {
  const n = await api(`/graph/${encodeURIComponent(nodeId)}`);
  $("#graph-detail").replaceChildren(el("h3", {}, `${n.node.type}: ${n.node.name}`),
    el("p", { class: "meta" }, `${n.node.n_mentions} mentions; ${n.edges.length} edges` + (n.truncated ? ` (+${n.truncated})` : "")),
    el("ul", {}, ...n.edges.map((e) => {
      const other = e.source === nodeId ? e.target : e.source;
      const m = e.mentions[0];
      return el("li", {}, `${e.source === nodeId ? "→" : "←"} ${e.relation} `, el("b", {}, other.split("|").pop()), " ",
        m ? spanLink("evidence", { ...m, title: m.doc_id, quote: m.evidence }) : "");
    })));
}

// ---- start-up -----------------------------------------------------------------------------------
async function init() {
  try {
    const cfg = await api("/config");
    const origin = cfg.origin.kind === "study" ? `study ${cfg.origin.study} / ${cfg.origin.finalist}` : cfg.origin.kind === "run" ? `run ${cfg.origin.run_id.slice(0, 8)}` : "composed config";
    const dev = (cfg.origin.figures && cfg.origin.figures.dev) || [];
    const first = Array.isArray(dev) ? dev[0] : null;
    $("#served").textContent = `system ${cfg.system} · ${cfg.config.corpus.name} · ${origin} · answerer ${cfg.answerer} · llm ${cfg.llm}` +
      (first ? ` · dev ${first.metric} ${fmt(first.mean)} [${fmt(first.ci_low)}, ${fmt(first.ci_high)}]` : "");
    for (const sel of ["#ask-system", "#diagnose-system", "#compare-a", "#compare-b"]) {
      $(sel).replaceChildren(...cfg.systems.map((s) => el("option", { value: s }, s)));
      $(sel).value = cfg.system;
    }
    $("#ask-verify").checked = cfg.verify;  // the server's default (serve.verify and answer.verify.enabled)
    if (cfg.systems.length > 1) $("#compare-b").value = cfg.systems.find((s) => s !== cfg.system);
    const questions = await api("/questions");
    $("#compare-qid").replaceChildren(el("option", { value: "" }, "— a question of the served split (optional) —"),
      ...questions.map((q) => el("option", { value: q.qid }, `${q.qid} · ${q.question.slice(0, 90)}`)));
  } catch (err) {
    $("#served").textContent = `error: ${err.message}`;
  }
}
init();
