// kevolve archive page: hash routes #/ , #/search?q= , #/kernel/<id> , #/problem/<id> , #/problems
"use strict";
const $ = (sel) => document.querySelector(sel);
const view = () => $("#view");
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const x = (v) => (v == null ? "–" : Number(v).toFixed(2) + "×");
const ms = (v) => (v == null ? "–" : Number(v).toFixed(4) + " ms");
// a speedup, marked: below 1× the kernel is slower than what it is compared with (issue 37: a 0.05× kernel read
// like any other number)
const sx = (v, than = "PyTorch eager") => (v == null ? "–" : Number(v) < 1
  ? `<span class="slower" title="slower than ${than}">${x(v)}</span>`
  : `<span class="faster" title="faster than ${than}">${x(v)}</span>`);

// The route on screen. A page still waiting on the server when the address moves on is dropped, not drawn: two quick
// moves (Back twice) drew the first page's late answer over the second, under the second's address.
let routeNo = 0;
class Stale extends Error {}

// `mine`: the route asking (null: not a page's own data). Checked after the answer arrives; the caller's continuation
// runs in the same microtask chain, so no newer route can start between the check and the drawing.
async function api(path, mine = routeNo) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  if (!r.ok) throw new Error((await r.json().catch(() => ({}))).detail || r.statusText);
  const body = await r.json();
  if (mine !== null && mine !== routeNo) throw new Stale(path);
  return body;
}

function filterParams() {
  const p = new URLSearchParams();
  if ($("#level").value) p.set("level", $("#level").value);
  if ($("#technique").value.trim()) p.set("technique", $("#technique").value.trim());
  if ($("#min-speedup").value.trim()) p.set("min_speedup", $("#min-speedup").value.trim());
  p.set("outcome", $("#outcome").value);  // "" = any outcome (the API's default is ok only)
  if ($("#run").value) p.set("run", $("#run").value);
  return p;
}

function kernelTable(items, id) {
  if (!items.length) return `<p class="muted" id="${id}-empty">no kernels match</p>`;
  const rows = items.map((k) => `<tr class="kernel-row" data-id="${esc(k.id)}">
      <td><a href="#/kernel/${esc(k.id)}">${esc(k.id)}</a></td>
      <td><a href="#/problem/${esc(k.problem_id)}">${esc(k.problem_name)}</a></td><td>${esc(k.level ?? "–")}</td>
      <td class="${k.outcome === "ok" ? "ok" : "bad"}">${esc(k.outcome)}</td>
      <td class="num">${sx(k.speedup)}</td><td class="num">${sx(k.speedup_compile, "torch.compile")}</td><td class="num">${ms(k.runtime_ms)}</td>
      <td>${k.techniques.map((t) => `<span class="tag">${esc(t)}</span>`).join("")}</td><td>${esc(k.device)}</td></tr>`).join("");
  return `<table id="${id}"><thead><tr><th>kernel</th><th>problem</th><th>level</th><th>outcome</th><th>speedup</th>
    <th>vs compile</th><th>runtime</th><th>techniques</th><th>device</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function wireRows() {
  document.querySelectorAll("tr.kernel-row").forEach((tr) =>
    tr.addEventListener("click", (ev) => { if (ev.target.tagName !== "A") location.hash = "#/kernel/" + tr.dataset.id; }));
}

async function home() {
  const sort = $("#sort").value;
  const [stats, page] = await Promise.all([api("/api/stats"), api(`/api/kernels?limit=50&sort=${sort}&` + filterParams())]);
  const what = $("#outcome").value === "ok" ? "verified kernels" : $("#outcome").value ? `${$("#outcome").value} kernels` : "kernels, any outcome";
  const order = { speedup: "Fastest", runtime: "Shortest-running", created: "Newest" }[sort];
  const run = $("#run").value ? ` in run ${esc($("#run").value)}` : "";
  view().innerHTML = `<div class="cards" id="stats">
      <div class="card"><b>${stats.kernels}</b>kernels</div><div class="card"><b>${stats.ok_kernels}</b>verified ok</div>
      <div class="card"><b>${stats.problems}</b>problems</div><div class="card"><b>${x(stats.best_speedup)}</b>best speedup</div></div>
    <h2>${order} ${esc(what)}${run} <span class="muted">(${page.total})</span></h2>${kernelTable(page.items, "kernels")}`;
  wireRows();
}

async function search(q) {
  $("#q").value = q;
  const p = filterParams(); p.set("q", q); p.set("k", "25");
  const hits = await api("/api/search?" + p);
  view().innerHTML = `<h2>Search: “${esc(q)}” <span class="muted">(${hits.length})</span></h2>${kernelTable(hits, "results")}`;
  wireRows();
}

const KW = new Set(("def class return import from as if else elif for while in not and or is None True False self " +
  "with try except raise lambda pass break continue __global__ __device__ __shared__ __syncthreads const void int " +
  "float double half unsigned long bool auto template typename struct return #include #define #pragma unroll").split(" "));
const TOKENS = /("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(\/\/[^\n]*|\/\*[\s\S]*?\*\/|#(?!include|define|pragma)[^\n]*)|(\b\d+(?:\.\d+)?(?:e[+-]?\d+)?f?\b)|(#?[A-Za-z_]\w*)/g;

function highlight(src) {
  let out = "", last = 0;
  for (const m of src.matchAll(TOKENS)) {
    out += esc(src.slice(last, m.index));
    const [t, str, com, num, word] = m;
    if (str) out += `<span class="str">${esc(t)}</span>`;
    else if (com) out += `<span class="com">${esc(t)}</span>`;
    else if (num) out += `<span class="numlit">${esc(t)}</span>`;
    else if (KW.has(word)) out += `<span class="kw">${esc(t)}</span>`;
    else if (/^(torch|nn|tl|float4|half2|wmma)$/.test(word)) out += `<span class="ty">${esc(t)}</span>`;
    else out += esc(t);
    last = m.index + t.length;
  }
  return out + esc(src.slice(last));
}

function lineageSvg(edges, current, labels = []) {
  const info = Object.fromEntries(labels.map((n) => [n.id, n]));
  if (!edges.length) return `<p class="muted" id="lineage-empty">no recorded parents or children</p>`;
  const nodes = new Set(), parents = {};
  edges.forEach((e) => { nodes.add(e.parent); nodes.add(e.child); (parents[e.child] ||= []).push(e.parent); });
  const depth = {};
  const d = (n, seen = new Set()) => {
    if (n in depth) return depth[n];
    if (seen.has(n)) return 0;
    seen.add(n);
    return (depth[n] = (parents[n] || []).reduce((a, p) => Math.max(a, d(p, seen) + 1), 0));
  };
  nodes.forEach((n) => d(n));
  const cols = {}, pos = {};
  [...nodes].sort().forEach((n) => { (cols[depth[n]] ||= []).push(n); pos[n] = [depth[n], cols[depth[n]].length - 1]; });
  // each node: its id, how it was made and its best verdict (issue 37: the graph had no operator or outcome labels),
  // under the node, a column as wide as the longest label (11 px monospace: under 7 px a character) so that no label
  // runs into the next column's node, and haloed so that an edge passing under it never strikes it through
  const label = (n) => { const i = info[n];
    return i ? `${n.slice(0, 8)} ${i.origin} · ${i.outcome === "ok" ? x(i.speedup) : i.outcome}` : `${n.slice(0, 12)} (not here)`; };
  const W = Math.max(120, 24 + 7 * Math.max(...[...nodes].map((n) => label(n).length))), H = 50;
  const xy = (n) => [20 + pos[n][0] * W, 16 + pos[n][1] * H];
  const fill = (n) => (n === current ? "#d9480f" : !info[n] ? "#bbb" : info[n].outcome !== "ok" ? "#b3261e"
    : info[n].speedup != null && info[n].speedup < 1 ? "#e8a33d" : "#3b6fd4");
  const height = 16 + H * Math.max(...Object.values(cols).map((c) => c.length));
  const lines = edges.map((e) => { const [a, b] = xy(e.parent), [c, f] = xy(e.child); return `<line x1="${a}" y1="${b}" x2="${c}" y2="${f}" stroke="#99a"/>`; }).join("");
  const dots = [...nodes].map((n) => { const [a, b] = xy(n);
    return `<a href="#/kernel/${esc(n)}" class="node" data-id="${esc(n)}"><circle cx="${a}" cy="${b}" r="7" fill="${fill(n)}"/>
      <text x="${a - 7}" y="${b + 22}" class="halo">${esc(label(n))}</text></a>`; }).join("");
  return `<svg id="lineage" width="${40 + W * (Object.keys(cols).length)}" height="${height}">${lines}${dots}</svg>`;
}

// A line diff (longest common subsequence), for a kernel against its parent: what the mutation or repair changed.
function lineDiff(a, b) {
  if (a.length * b.length > 4e6) return null;  // too long to diff in the page
  const n = a.length, m = b.length, L = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
    else if (j < m && (i >= n || L[i][j + 1] > L[i + 1][j])) out.push(["+", b[j++]]);  // removals first, as diff writes them
    else out.push(["-", a[i++]]);
  }
  return out;
}

async function parentDiff(k, parentIds) {
  const box = $("#diff");
  if (!box) return;
  if (!parentIds.length) { box.innerHTML = `<p class="muted" id="diff-none">no parent: this kernel was written from the problem</p>`; return; }
  let parent;
  try { parent = (await api("/api/kernels/" + encodeURIComponent(parentIds[0]))).kernel; }
  catch (err) { if (err instanceof Stale) throw err; box.innerHTML = `<p class="muted" id="diff-none">parent ${esc(parentIds[0])} is not in this archive</p>`; return; }
  const d = lineDiff((parent.source || "").split("\n"), (k.source || "").split("\n"));
  if (d === null) { box.innerHTML = `<p class="muted" id="diff-none">too long to compare here</p>`; return; }
  const changed = d.filter((r) => r[0] !== " ").length;
  const rows = d.map(([t, line]) => `<span class="${t === "+" ? "add" : t === "-" ? "del" : "same"}">${esc(t + " " + line)}</span>`).join("\n");
  box.innerHTML = `<p>against its parent <a href="#/kernel/${esc(parent.id)}">${esc(parent.id)}</a> (${sx(parent.speedup)}):
    <span id="diff-count">${changed}</span> lines changed</p><pre class="code"><code id="diff-code">${rows}</code></pre>`;
}

// an evaluation's whole log (compiler and worker output), folded under its row (issue 37: only the reason showed)
const logRow = (log) => (!log ? "" : `<tr class="log"><td colspan="8"><details><summary>log (${log.split("\n").length} lines)</summary>
  <pre class="code">${esc(log)}</pre></details></td></tr>`);

async function kernel(id) {
  const d = await api("/api/kernels/" + encodeURIComponent(id));
  const k = d.kernel;
  const evs = d.evaluations.map((e) => `<tr><td class="when">${esc(e.created_at.slice(0, 16).replace("T", " "))}</td><td class="${e.outcome === "ok" ? "ok" : "bad"}">${esc(e.outcome)}</td>
      <td class="num">${ms(e.runtime_ms)}</td><td class="num">${ms(e.record.ref_timing?.median_ms)}</td><td class="num">${ms(e.record.compile_ref_timing?.median_ms)}</td>
      <td class="num">${sx(e.speedup)}</td><td>${esc(e.device)}</td><td>${esc(e.reason)}</td></tr>${logRow(e.record.log_tail)}`).join("");
  view().innerHTML = `<h2 id="kernel-title">${esc(k.kernel_name || k.id)} <span class="muted">${esc(k.id)}</span></h2>
    <p>problem <a href="#/problem/${esc(k.problem_id)}">${esc(k.problem_name)}</a> · level ${esc(k.level ?? "–")} ·
      ${k.techniques.map((t) => `<span class="tag">${esc(t)}</span>`).join("")}${k.techniques.length ? " · " : ""}origin ${esc(k.origin)} by ${esc(k.proposer)}</p>
    <div class="cards"><div class="card"><b id="speedup">${sx(k.speedup)}</b>vs eager</div><div class="card"><b>${sx(k.speedup_compile, "torch.compile")}</b>vs torch.compile</div>
      <div class="card"><b>${ms(k.runtime_ms)}</b>kernel</div><div class="card"><b>${ms(k.ref_runtime_ms)}</b>eager</div></div>
    <h3>Evaluations</h3><table id="evaluations"><thead><tr><th>when</th><th>outcome</th><th>kernel</th><th>eager</th><th>compile</th><th>speedup</th><th>device</th><th>reason</th></tr></thead><tbody>${evs}</tbody></table>
    <h3>Lineage</h3><div style="overflow:auto">${lineageSvg(d.lineage, k.id, d.lineage_nodes || [])}</div>
    <h3>Changes from its parent</h3><div id="diff"><p class="muted">comparing…</p></div>
    <h3>Source</h3><pre class="code"><code id="code">${highlight(k.source || "")}</code></pre>
    <details><summary>Problem source</summary><pre class="code"><code>${highlight(d.problem_source)}</code></pre></details>`;
  await parentDiff(k, d.parent_ids);
}

// The problem's kernels over time: each verified kernel's speedup (log scale), a line at 1x (eager), and the best so
// far as a step line (issue 37). Placed by the generation that made them when every kernel has one (kernels of optimize
// runs), else in the order they were made.
function speedupPlot(items) {
  const byTime = (a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0);
  const pts = items.filter((k) => k.speedup != null && k.speedup > 0).sort(byTime);
  if (pts.length < 2) return "";
  const gens = pts.every((k) => k.generation != null);
  if (gens) pts.sort((a, b) => a.generation - b.generation || byTime(a, b));
  const W = 560, H = 180, pad = 34, ys = pts.map((k) => Math.log10(k.speedup));
  const lo = Math.min(0, ...ys) - 0.05, hi = Math.max(0, ...ys) + 0.05;
  const last = gens ? Math.max(1, pts[pts.length - 1].generation) : pts.length - 1;
  const X = (v) => pad + (v * (W - 2 * pad)) / last, Y = (v) => H - pad - ((v - lo) * (H - 2 * pad)) / (hi - lo);
  const at = (k, i) => X(gens ? k.generation : i);
  let best = -Infinity;
  const step = pts.map((k, i) => { const was = best; best = Math.max(best, Math.log10(k.speedup));  // across, then up
    return `${i ? `${at(k, i)},${Y(was)} ` : ""}${at(k, i)},${Y(best)}`; }).join(" ");
  const dots = pts.map((k, i) => `<a href="#/kernel/${esc(k.id)}"><circle class="${k.speedup < 1 ? "slower" : "faster"}" cx="${at(k, i)}"
      cy="${Y(Math.log10(k.speedup))}" r="4" data-speedup="${k.speedup}" data-generation="${k.generation ?? ""}"><title>${esc(k.id.slice(0, 12))} ${x(k.speedup)}${gens ? ` (generation ${k.generation})` : ""}</title></circle></a>`).join("");
  const axis = gens ? `by the generation that made them (0 = translations, last ${pts[pts.length - 1].generation})`
    : `in the order they were made`;
  return `<svg id="speedup-plot" class="${gens ? "by-generation" : "by-time"}" width="${W}" height="${H + 14}" role="img" aria-label="speedups over ${gens ? "generations" : "time"}">
    <line id="eager-line" x1="${pad}" x2="${W - pad}" y1="${Y(0)}" y2="${Y(0)}" stroke="#999" stroke-dasharray="4 3"/>
    <text x="${W - pad + 8}" y="${Y(0) + 4}" font-size="11">1×</text>
    <polyline id="best-line" points="${step}" fill="none" stroke="#1e7b34"/>${dots}
    <text x="${pad}" y="${H - 8}" font-size="11">${pts.length} kernels ${axis};</text>
    <text x="${pad}" y="${H + 8}" font-size="11">speedup vs eager, log scale; best so far (green) ${x(10 ** best)}</text></svg>`;
}

async function problem(id) {
  const items = await api(`/api/problems/${encodeURIComponent(id)}/leaderboard?limit=50`);
  const name = items.length ? items[0].problem_name : id;
  view().innerHTML = `<h2 id="leaderboard-title">Leaderboard: ${esc(name)}</h2>${speedupPlot(items)}${kernelTable(items, "leaderboard")}`;
  wireRows();
}

async function problems() {
  const page = await api("/api/problems?limit=200");
  const rows = page.items.map((p) => `<tr><td><a href="#/problem/${esc(p.id)}">${esc(p.name)}</a></td><td>${esc(p.level ?? "–")}</td>
     <td class="num">${p.kernels}</td><td class="num">${p.ok_kernels}</td><td class="num">${sx(p.best_speedup)}</td></tr>`).join("");
  view().innerHTML = `<h2>Problems <span class="muted">(${page.total})</span></h2><table id="problems"><thead><tr><th>problem</th>
    <th>level</th><th>kernels</th><th>ok</th><th>best</th></tr></thead><tbody>${rows}</tbody></table>`;
}

// the runs that evaluated kernels, newest first, to filter by one (issue 37: no filter by run)
const runsLoaded = api("/api/runs", null).then((runs) => $("#run").insertAdjacentHTML("beforeend", runs.map((r) =>
  `<option value="${esc(r.id)}">${esc(r.id)} (${esc(r.kind || "run")}, ${r.kernels} kernels)</option>`).join("")))
  .catch(() => {});  // an archive that cannot list them still lists kernels

async function route() {
  const mine = ++routeNo;
  const h = location.hash.slice(1) || "/";
  const [path, query] = h.split("?");
  try {
    await runsLoaded;
    if (mine !== routeNo) return;  // moved on meanwhile; from here each api() call is made while this route is current
    if (path.startsWith("/kernel/")) await kernel(decodeURIComponent(path.slice(8)));
    else if (path.startsWith("/problem/")) await problem(decodeURIComponent(path.slice(9)));
    else if (path === "/problems") await problems();
    else if (path === "/search") await search(new URLSearchParams(query).get("q") || "");
    else await home();
    if (mine === routeNo) document.body.dataset.ready = "1";
  } catch (err) {
    if (err instanceof Stale || mine !== routeNo) return;  // a newer route draws the page and says when it is ready
    view().innerHTML = `<p class="bad" id="error">${esc(err.message)}</p>`;
    document.body.dataset.ready = "1";
  }
}

$("#search-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = $("#q").value.trim();
  const next = q ? "#/search?q=" + encodeURIComponent(q) : "#/";
  if (location.hash === next) { document.body.dataset.ready = ""; route(); }  // same route, new filters
  else location.hash = next;
});
window.addEventListener("hashchange", () => { document.body.dataset.ready = ""; route(); });
route();
