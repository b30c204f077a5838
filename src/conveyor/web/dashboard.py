"""The dashboard: one self-contained page (no external assets) that polls the API."""

from __future__ import annotations

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>conveyor</title>
<style>
  :root { color-scheme: light dark; --muted: #888; --line: #8884; }
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; }
  h1 { font-size: 1.3rem; margin: 0 0 1rem; }
  h2 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid var(--line); }
  td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
  .muted { color: var(--muted); }
  .status { font-weight: 600; }
  .pending { color: #b58900; } .running { color: #268bd2; } .completed { color: #2aa035; }
  .failed { color: #dc322f; } .cancelled { color: var(--muted); }
  progress { width: 8rem; }
  #auth { display: none; margin-bottom: 1rem; }
  #error { color: #dc322f; }
</style>
</head>
<body>
<h1>conveyor <span class="muted" id="updated"></span></h1>
<form id="auth">
  <label>Bearer token <input id="token" type="password" autocomplete="off"></label>
  <button>Use</button>
</form>
<p id="error"></p>
<h2>Queues</h2>
<table>
  <thead><tr><th>queue</th><th class="n">pending</th><th class="n">running</th>
  <th class="n">completed</th><th class="n">failed</th><th class="n">cancelled</th>
  <th class="n">scheduled</th><th class="n">expired</th><th>oldest pending</th></tr></thead>
  <tbody id="queues"></tbody>
</table>
<h2>Recent jobs
  <select id="status"><option value="">all</option><option>pending</option>
  <option>running</option><option>completed</option><option>failed</option>
  <option>cancelled</option></select></h2>
<table>
  <thead><tr><th class="n">id</th><th>queue</th><th>task</th><th>key</th><th>status</th>
  <th class="n">attempts</th><th>progress</th><th>updated</th><th>error</th></tr></thead>
  <tbody id="jobs"></tbody>
</table>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("conveyor-token") || "";

async function api(path) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const response = await fetch(path, { headers });
  const body = await response.json();
  if (response.status === 401 || response.status === 403) {
    $("auth").style.display = "block";
  }
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const [text, cls] of cells) {
    const td = document.createElement("td");
    if (text instanceof Node) td.appendChild(text); else td.textContent = text ?? "";
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  return tr;
}

function when(iso) { return iso ? new Date(iso).toLocaleString() : ""; }

function bar(progress) {
  if (!progress.total) return "";
  const p = document.createElement("progress");
  p.max = progress.total;
  p.value = (progress.completed || 0) + (progress.failed || 0);
  p.title = p.value + " / " + progress.total;
  return p;
}

async function refresh() {
  try {
    const status = $("status").value;
    const [queues, jobs] = await Promise.all([
      api("/api/queues"),
      api("/api/jobs?newest_first=true&limit=50" + (status ? "&status=" + status : "")),
    ]);
    const qs = Object.entries(queues.queues);
    $("queues").replaceChildren(...qs.map(([name, s]) => row([
      [name], [s.pending, "n"], [s.running, "n"], [s.completed, "n"], [s.failed, "n"],
      [s.cancelled, "n"], [s.scheduled, "n"], [s.expired, "n"], [when(s.oldest_pending_at)],
    ])));
    $("jobs").replaceChildren(...jobs.jobs.map((j) => row([
      [j.id, "n"], [j.queue], [j.task], [j.key, "muted"], [j.status, "status " + j.status],
      [j.attempts + "/" + j.max_attempts, "n"], [bar(j.progress)], [when(j.updated_at)],
      [j.error, "muted"],
    ])));
    $("error").textContent = "";
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    $("error").textContent = e.message;
  }
}

$("auth").addEventListener("submit", (event) => {
  event.preventDefault();
  token = $("token").value.trim();
  sessionStorage.setItem("conveyor-token", token);
  $("auth").style.display = "none";
  refresh();
});
$("status").addEventListener("change", refresh);
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
"""
