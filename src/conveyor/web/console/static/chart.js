// The throughput chart: jobs completed and failed per minute over the last hour, as
// stacked bars in an SVG (attributes only, no inline styles).

import { s, h } from "./dom.js";
import { count, time } from "./format.js";
import { now } from "./api.js";

const H = 180;
const PAD = { left: 44, right: 8, top: 10, bottom: 24 };
const MINUTE = 60000;

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
export function chart(series, width = 720) {
  const W = Math.max(280, Math.round(width));
  const top = niceMax(Math.max(...series.map((m) => m.completed + m.failed), 0));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / series.length;
  const y = (v) => PAD.top + plotH - (v / top) * plotH;
  const completed = series.reduce((a, m) => a + m.completed, 0);
  const failed = series.reduce((a, m) => a + m.failed, 0);
  const label = `Jobs per minute over the last hour: ${count(completed)} completed, ${count(failed)} failed`;
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
        `${time(new Date(m.t).toISOString())}: ${count(m.completed)} completed, ${count(m.failed)} failed`,
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
  const ticks = (W < 500 ? [0, 30, 59] : [0, 15, 30, 45, 59]).map((i) =>
    s(
      "text",
      {
        class: "tick",
        x: PAD.left + i * slot + slot / 2,
        y: H - 6,
        "text-anchor": i === 59 ? "end" : "middle",
      },
      i === 59 ? "now" : `−${60 - i} min`,
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
      h("span", { class: "muted" }, "in the last hour, per minute"),
    ),
  );
}
