// Scheduled: pending jobs that are not due yet, soonest first: scheduled for later
// (never tried) or waiting out the back-off after a failed attempt. Admins make one job,
// or every job of the view, due now.

import { get, page, post } from "./api.js";
import { append, fill, h } from "./dom.js";
import { agoNode, count, oneLine } from "./format.js";
import { act, confirmAction, toast } from "./dialog.js";

export const title = "Scheduled";

const KINDS = [
  ["", "All not yet due"],
  ["scheduled", "Scheduled"],
  ["retrying", "Waiting to retry"],
];
const SHOWN = 100;
const BATCH = 1000; // the most jobs one run-now request makes due

export function mount(main, ctx, params) {
  const kind = ["scheduled", "retrying"].includes(params.get("kind")) ? params.get("kind") : "";
  const filters = {};
  for (const name of ["queue", "task"]) {
    const value = (params.get(name) || "").trim();
    if (value) filters[name] = value;
  }
  const here = (extra) => page("scheduled", { ...filters, kind, ...extra });
  const tabs = h(
    "nav",
    { class: "tabs", "aria-label": "Which jobs" },
    KINDS.map(([value, label]) =>
      h(
        "a",
        {
          class: "button small",
          href: page("scheduled", { ...filters, kind: value }),
          "aria-current": value === kind ? "page" : null,
          "data-kind": value || "all",
        },
        label,
      ),
    ),
  );
  const info = h("p", { class: "muted", id: "deferred-info", "aria-live": "polite" });
  const tbody = h("tbody");
  const columns = ["ID", "Queue", "Task", "Kind", "Due", "Attempts", "Last error", "Created"];
  if (ctx.admin) columns.push("Actions");
  const scope = Object.entries(filters)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  append(main, [
    h("h1", { tabindex: "-1" }, "Scheduled"),
    h(
      "p",
      { class: "muted" },
      "Pending jobs that are not due yet: scheduled for later, or waiting out the back-off after a failed attempt. Soonest first.",
      scope ? [" Only ", h("strong", {}, scope), ". ", h("a", { href: here({ queue: null, task: null }) }, "Show all")] : null,
    ),
    tabs,
    ctx.admin ? runAllBar(ctx, filters, kind) : null,
    info,
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "grid deferred" },
        h("caption", { class: "sr" }, "Jobs not yet due"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            columns.map((c) =>
              h("th", { scope: "col", class: c === "ID" || c === "Attempts" ? "n" : "" }, c),
            ),
          ),
        ),
        tbody,
      ),
    ),
  ]);

  let last = "";
  async function refresh() {
    const [{ jobs }, stats] = await Promise.all([
      get("api/jobs/deferred", { ...filters, kind, limit: SHOWN }),
      get("api/queues"),
    ]);
    const snapshot = JSON.stringify([jobs, stats]);
    if (snapshot === last) return;
    last = snapshot;
    const counted = filters.queue ? stats.queues[filters.queue]?.scheduled : stats.total.scheduled;
    const total = filters.task || kind ? null : (counted ?? 0);
    fill(
      info,
      jobs.length < SHOWN
        ? `${count(jobs.length)} job(s)`
        : total === null
          ? `The ${count(SHOWN)} due soonest`
          : `The ${count(SHOWN)} due soonest of ${count(total)}`,
    );
    fill(
      tbody,
      jobs.length
        ? jobs.map((job) => row(ctx, job))
        : h(
            "tr",
            {},
            h(
              "td",
              { colspan: columns.length, class: "empty" },
              "No job waits: every pending job is due.",
            ),
          ),
    );
  }
  return { refresh };
}

function row(ctx, job) {
  const link = page(`jobs/${job.id}`);
  const retrying = job.attempts > 0;
  const error = oneLine(job.error);
  const cells = [
    h(
      "td",
      { class: "n" },
      h("a", { href: link, "data-row-link": "", "data-focus": `job-${job.id}` }, String(job.id)),
    ),
    h("td", {}, job.queue),
    h("td", { class: "task" }, h("a", { href: link, tabindex: "-1" }, job.task)),
    h(
      "td",
      {},
      h(
        "span",
        { class: ["badge", retrying ? "status-failed" : "status-pending"] },
        retrying ? "retrying" : "scheduled",
      ),
    ),
    h("td", { "data-col": "due" }, agoNode(job.run_at)),
    h("td", { class: "n" }, `${job.attempts}/${job.max_attempts}`),
    h("td", { class: "error-col", title: error || null }, error),
    h("td", {}, agoNode(job.created_at)),
  ];
  if (ctx.admin) {
    cells.push(
      h(
        "td",
        {},
        h(
          "button",
          {
            type: "button",
            class: "button small",
            "data-action": "run-now",
            "data-focus": `run-${job.id}`,
            on: {
              click: () =>
                act(
                  ctx,
                  {
                    title: `Run job ${job.id} now?`,
                    body: [
                      retrying
                        ? "It stops waiting out its retry back-off and is due now; its attempts are kept."
                        : "It is due now instead of at its scheduled time.",
                    ],
                    confirm: "Run now",
                  },
                  () => post(`api/jobs/${job.id}/run-now`),
                  () => `Job ${job.id} is due now`,
                ),
            },
          },
          "Run now",
        ),
      ),
    );
  }
  return h("tr", { "data-job": String(job.id) }, cells);
}

function runAllBar(ctx, filters, kind) {
  const what = [
    kind === "retrying" ? "waiting to retry" : kind === "scheduled" ? "scheduled" : "not yet due",
    ...Object.entries(filters).map(([k, v]) => `${k} ${v}`),
  ].join(", ");
  return h(
    "div",
    { class: "bulk", id: "bulk" },
    h(
      "button",
      {
        type: "button",
        class: "button",
        "data-action": "run-all-now",
        on: { click: () => runAll(ctx, filters, kind, what) },
      },
      "Run all now…",
    ),
    h("span", { class: "muted" }, `Makes every matching job due now: ${what}.`),
  );
}

async function runAll(ctx, filters, kind, what) {
  const ok = await confirmAction({
    title: "Run every matching job now?",
    body: [
      `Jobs: ${what}.`,
      "Each becomes due now, soonest first, a thousand at a time; attempts are kept, dependencies still hold.",
    ],
    confirm: "Run all now",
  });
  if (!ok) return;
  const body = { ...filters, kind: kind || null, limit: BATCH };
  let changed = 0;
  try {
    for (let round = 0; round < 10000; round++) {
      const answer = await post("api/jobs/bulk/run-now", body);
      changed += answer.changed_count;
      if (answer.changed_count < BATCH) break;
      toast(`${count(changed)} due now so far…`);
    }
    toast(`${count(changed)} job(s) due now`, "ok");
  } catch (error) {
    toast(`Stopped after ${count(changed)} job(s): ${error.message}`, "error");
  }
  await ctx.refresh();
}
