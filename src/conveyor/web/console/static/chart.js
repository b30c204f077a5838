// The throughput chart: jobs completed and failed per minute over the last hour, or per
// hour over the last day or week, as stacked bars in an SVG (attributes only, no inline
// styles).

import { s, h } from "./dom.js";
import { count, time, when } from "./format.js";
import { now } from "./api.js";

const H = 180;
const PAD = { left: 44, right: 8, top: 10, bottom: 24 };
const MINUTE = 60000;
const HOUR = 3600000;

/** What a chart shows: its bars, their width, and how ticks and captions read. */
export const RANGES = {
  hour: { span: 60, ms: MINUTE, every: "per minute", over: "the last hour", ticks: [0, 15, 30, 45, 59], tick: (n) => `−${n} min` },
  day: { span: 24, ms: HOUR, every: "per hour", over: "the last 24 hours", ticks: [0, 6, 12, 18, 23], tick: (n) => `−${n} h` },
  week: { span: 168, ms: HOUR, every: "per hour", over: "the last 7 days", ticks: [0, 24, 48, 72, 96, 120, 144, 167], tick: (n) => `−${n / 24} d` },
};

/** Fill the hours without jobs; the last bar is the current hour. */
export function hours(points, span) {
  const last = Math.floor(now() / HOUR) * HOUR;
  const byHour = new Map(points.map((p) => [Math.floor(Date.parse(p.hour) / HOUR) * HOUR, p]));
  const out = [];
  for (let i = span - 1; i >= 0; i--) {
    const t = last - i * HOUR;
    const p = byHour.get(t);
    out.push({ t, completed: p ? p.completed : 0, failed: p ? p.failed : 0 });
  }
  return out;
}

/** Fill the minutes without jobs; the last bar is the current minute. */
export function minutes(points, span = 60) {
  const last = Math.floor(now() / MINUTE) * MINUTE;
  const byMinute = new Map(
    points.map((p) => [Math.floor(Date.parse(p.minute) / MINUTE) * MINUTE, p]),
  );
  const out = [];
  for (let i = span - 1; i >= 0; i--) {
    const t = last - i * MINUTE;
    const p = byMinute.get(t);
    out.push({ t, completed: p ? p.completed : 0, failed: p ? p.failed : 0 });
  }
  return out;
}

function niceMax(value) {
  if (value <= 5) return 5;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * magnitude >= value) return step * magnitude;
  }
  return 10 * magnitude;
}

/** The chart, drawn for a box `width` pixels wide (text keeps its size). */
export function chart(series, width = 720, range = RANGES.hour) {
  const W = Math.max(280, Math.round(width));
  const top = niceMax(Math.max(...series.map((m) => m.completed + m.failed), 0));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / series.length;
  const y = (v) => PAD.top + plotH - (v / top) * plotH;
  const completed = series.reduce((a, m) => a + m.completed, 0);
  const failed = series.reduce((a, m) => a + m.failed, 0);
  const label = `Jobs ${range.every} over ${range.over}: ${count(completed)} completed, ${count(failed)} failed`;
  const grid = [0, top / 2, top].map((v) =>
    s(
      "g",
      { class: "grid" },
      s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
      s("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, count(v)),
    ),
  );
  const bars = series.map((m, i) => {
    const x = PAD.left + i * slot + slot * 0.15;
    const w = Math.max(1, slot * 0.7);
    const parts = [
      s(
        "title",
        {},
        `${range.ms === MINUTE ? time(new Date(m.t).toISOString()) : when(new Date(m.t).toISOString())}: ${count(m.completed)} completed, ${count(m.failed)} failed`,
      ),
    ];
    // A transparent full-height target, so every minute has a tooltip.
    parts.push(
      s("rect", { class: "hit", x: PAD.left + i * slot, y: PAD.top, width: slot, height: plotH }),
    );
    if (m.completed) {
      parts.push(
        s("rect", { class: "ok", x, y: y(m.completed), width: w, height: y(0) - y(m.completed) }),
      );
    }
    if (m.failed) {
      const base = y(m.completed);
      parts.push(
        s("rect", {
          class: "bad",
          x,
          y: base - (y(0) - y(m.failed)),
          width: w,
          height: y(0) - y(m.failed),
        }),
      );
    }
    return s("g", {}, parts);
  });
  const n = series.length;
  const chosen = W < 500 ? [0, range.ticks[Math.floor(range.ticks.length / 2)], n - 1] : range.ticks;
  const ticks = chosen.map((i) =>
    s(
      "text",
      {
        class: "tick",
        x: PAD.left + i * slot + slot / 2,
        y: H - 6,
        "text-anchor": i === n - 1 ? "end" : i === 0 ? "start" : "middle",
      },
      i === n - 1 ? "now" : range.tick(n - i),
    ),
  );
  return h(
    "figure",
    { class: "chart" },
    s(
      "svg",
      { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": label },
      grid,
      bars,
      ticks,
    ),
    h(
      "figcaption",
      {},
      h("span", { class: "swatch swatch-ok" }, `${count(completed)} completed`),
      h("span", { class: "swatch swatch-bad" }, `${count(failed)} failed`),
      h("span", { class: "muted" }, `in ${range.over}, ${range.every}`),
    ),
  );
}
