// Numbers, times and texts as an operator reads them.

import { now } from "./api.js";
import { h } from "./dom.js";

const numbers = new Intl.NumberFormat();
const clock = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});
const stamp = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});

export function count(n) {
  return n === null || n === undefined ? "–" : numbers.format(n);
}

export function parse(iso) {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

/** "3 s", "4 min", "2 h 5 min", "3 d 4 h". */
export function span(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return m % 60 ? `${hours} h ${m % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

/** How long ago (or how far ahead) a time is, by the server's clock. */
export function ago(iso) {
  const t = parse(iso);
  if (t === null) return "–";
  const seconds = (now() - t) / 1000;
  if (Math.abs(seconds) < 1) return "now";
  return seconds >= 0 ? `${span(seconds)} ago` : `in ${span(-seconds)}`;
}

/** The age of a time, as a duration ("4 min"). */
export function age(iso) {
  const t = parse(iso);
  return t === null ? "–" : span((now() - t) / 1000);
}

export function time(iso) {
  const t = parse(iso);
  return t === null ? "–" : clock.format(t);
}

export function when(iso) {
  const t = parse(iso);
  return t === null ? "–" : stamp.format(t);
}

/** An error as one line: a traceback's last line (the exception), else the first line. */
export function oneLine(text, max = 160) {
  if (!text) return "";
  const lines = String(text)
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);
  if (!lines.length) return "";
  const line = /^Traceback \(most recent call last\)/.test(lines[0])
    ? lines[lines.length - 1]
    : lines[0];
  return line.length > max ? line.slice(0, max - 1) + "…" : line;
}

/** A progress value (current item, checkpoint) in a few words: {"page": 79} → "page 79". */
export function item(value, max = 80) {
  if (value === null || value === undefined) return "";
  if (typeof value !== "object") return String(value).slice(0, max);
  const keys = Object.keys(value);
  if (!Array.isArray(value) && keys.length === 1 && typeof value[keys[0]] !== "object") {
    return `${keys[0]} ${value[keys[0]]}`.slice(0, max);
  }
  const text = JSON.stringify(value);
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

/** "78/100 pages, currently page 79, 1 failed" (the unit from progress.detail.unit). */
export function progressText(p) {
  if (!p || (p.total == null && p.completed == null && p.failed == null)) return "";
  const unit = p.detail && typeof p.detail.unit === "string" ? ` ${p.detail.unit}` : "";
  const done = p.completed ?? 0;
  const parts = [
    p.total != null ? `${count(done)}/${count(p.total)}${unit}` : `${count(done)}${unit} done`,
  ];
  if (p.current !== null && p.current !== undefined) parts.push(`currently ${item(p.current)}`);
  if (p.failed) parts.push(`${count(p.failed)} failed`);
  return parts.join(", ");
}

/** How long a job ran: finished_at − started_at for a finished one, the time so far for
 * a running one; "" when it never started. */
export function runTime(job) {
  const start = parse(job.started_at);
  if (start === null) return "";
  if (job.status === "running") return span((now() - start) / 1000);
  const end = parse(job.finished_at);
  if (end === null || end < start) return "";
  const seconds = (end - start) / 1000;
  return seconds < 10 ? `${seconds.toFixed(seconds < 1 ? 3 : 1)} s` : span(seconds);
}

/** The running jobs that were claimed ahead by their worker and wait for a free slot:
 * the worker's entry, refreshed after the claim, lists what its tasks run (`busy`), and
 * the job is not among them. An entry whose list does not add up to its running count
 * (a worker that does not list its jobs) tells nothing. */
export function claimedAhead(workers, jobs) {
  const byName = new Map(workers.map((w) => [w.name, w]));
  const ahead = new Set();
  for (const job of jobs) {
    const w = job.status === "running" ? byName.get(job.worker) : null;
    if (!w || !Array.isArray(w.busy) || w.busy.length !== w.running) continue;
    if ((parse(w.last_seen_at) ?? 0) <= (parse(job.claimed_at) ?? Infinity)) continue;
    if (!w.busy.some((b) => b.id === job.id)) ahead.add(job.id);
  }
  return ahead;
}

/** Whether a running job's lease has run out (its worker is presumed gone). */
export function pastLease(job) {
  const t = parse(job.lease_expires_at);
  return job.status === "running" && t !== null && t < now();
}

/** A time shown relative to now ("4 min ago", or as an age: "4 min"), kept current by
 * refreshAges() without rebuilding the page around it. */
export function agoNode(iso, mode = "ago") {
  if (!iso) return "–";
  return h(
    "time",
    { datetime: iso, title: when(iso), "data-ago": mode },
    mode === "age" ? age(iso) : ago(iso),
  );
}

export function refreshAges(root) {
  for (const node of root.querySelectorAll("time[data-ago]")) {
    const iso = node.getAttribute("datetime");
    const text = node.dataset.ago === "age" ? age(iso) : ago(iso);
    if (node.textContent !== text) node.textContent = text;
  }
}
