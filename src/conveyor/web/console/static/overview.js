// Overview: where work stands per queue, throughput over the last hour, workers, and
// (for admins) pausing queues, resetting old claims and pruning.

import { get, now, page, post, workers } from "./api.js";
import { append, fill, h } from "./dom.js";
import { agoNode, count, span, when } from "./format.js";
import { act } from "./dialog.js";
import { chart, hours, minutes, RANGES } from "./chart.js";

export const title = "Overview";

export function mount(main, ctx, params) {
  const chartQueue = params.get("queue") || "";
  const rangeName = Object.hasOwn(RANGES, params.get("range")) ? params.get("range") : "hour";
  const range = RANGES[rangeName];
  const rangePicker = h(
    "select",
    {
      id: "chart-range",
      "aria-label": "Time shown in the chart",
      on: {
        change: () =>
          ctx.navigate(
            page("", {
              queue: chartQueue,
              range: rangePicker.value === "hour" ? null : rangePicker.value,
            }),
            { replace: true },
          ),
      },
    },
    [
      ["hour", "Last hour"],
      ["day", "Last 24 hours"],
      ["week", "Last 7 days"],
    ].map(([value, label]) => h("option", { value, selected: value === rangeName }, label)),
  );
  const cards = h("div", { class: "cards" });
  const chartBox = h("div", { class: "chart-box" });
  const queuePicker = h(
    "select",
    {
      id: "chart-queue",
      "aria-label": "Queue shown in the chart",
      on: {
        change: () =>
          ctx.navigate(
            page("", {
              queue: queuePicker.value,
              range: rangeName === "hour" ? null : rangeName,
            }),
            { replace: true },
          ),
      },
    },
    h("option", { value: "" }, "All queues"),
  );
  const taskBody = h("tbody");
  const tbody = h("tbody");
  // [title, class]: "n" numbers, "opt" left out on narrow screens.
  const head = [
    ["Queue", ""],
    ["State", ""],
    ["Pending", "n"],
    ["Scheduled", "n opt"],
    ["Running", "n"],
    ["Past lease", "n"],
    ["Completed", "n opt"],
    ["Failed", "n"],
    ["Cancelled", "n opt"],
    ["Oldest pending", ""],
  ];
  if (ctx.admin) head.push(["Actions", ""]);
  const table = h(
    "table",
    { class: "grid queues" },
    h("caption", { class: "sr" }, "Jobs per queue and status"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        head.map(([name, cls]) => h("th", { scope: "col", class: cls }, name)),
      ),
    ),
    tbody,
  );
  append(main, [
    h("h1", { tabindex: "-1" }, "Overview"),
    cards,
    h(
      "section",
      { class: "panel", "aria-labelledby": "throughput-title" },
      h(
        "div",
        { class: "panel-head" },
        h("h2", { id: "throughput-title" }, "Throughput"),
        h("span", { class: "pickers" }, rangePicker, queuePicker),
      ),
      chartBox,
    ),
    h(
      "section",
      { class: "panel", "aria-labelledby": "queues-title" },
      h("h2", { id: "queues-title" }, "Queues"),
      h("div", { class: "scroll" }, table),
    ),
    h(
      "section",
      { class: "panel", "aria-labelledby": "tasks-title" },
      h("h2", { id: "tasks-title" }, "Tasks, last 24 hours"),
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          { class: "grid tasks" },
          h("caption", { class: "sr" }, "Runs, failures and run times per task"),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              [
                ["Task", ""],
                ["Runs", "n"],
                ["Failed", "n"],
                ["Failure rate", "n opt"],
                ["p50 run time", "n"],
                ["p95 run time", "n"],
              ].map(([name, cls]) => h("th", { scope: "col", class: cls }, name)),
            ),
          ),
          taskBody,
        ),
      ),
      h(
        "p",
        { class: "muted small" },
        "Over the 10,000 jobs that finished last: run time is finished minus started, of completed runs.",
      ),
    ),
    ctx.admin ? maintenance(ctx) : null,
  ]);

  let known = null;
  let last = "";
  let lastChart = "";
  let lastWidth = 0;
  let points = [];
  const drawChart = () => {
    lastWidth = chartBox.clientWidth;
    const series = rangeName === "hour" ? minutes(points) : hours(points, range.span);
    fill(chartBox, chart(series, lastWidth || 720, range));
  };
  const onResize = () => chartBox.clientWidth !== lastWidth && drawChart();
  window.addEventListener("resize", onResize);

  let lastTasks = "";
  async function refresh() {
    const [queues, settings, throughput, registered, timings] = await Promise.all([
      get("api/queues"),
      get("api/queues/settings"),
      rangeName === "hour"
        ? get("api/throughput", { minutes: 60, queue: chartQueue })
        : get("api/throughput/hours", { hours: range.span, queue: chartQueue }),
      workers().then((found) => ({ workers: found })),
      get("api/tasks/timings", { hours: 24, queue: chartQueue }),
    ]);
    const taskSnapshot = JSON.stringify(timings);
    if (taskSnapshot !== lastTasks) {
      lastTasks = taskSnapshot;
      fill(
        taskBody,
        timings.tasks.length
          ? timings.tasks.map(taskRow)
          : h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No job finished in the last 24 hours.")),
      );
    }
    const minute = Math.floor(now() / 60000);
    const got = throughput.minutes || throughput.hours;
    const drawn = JSON.stringify([got, minute]);
    if (drawn !== lastChart) {
      lastChart = drawn;
      points = got;
      drawChart();
    }
    const snapshot = JSON.stringify([queues, settings, registered]);
    if (snapshot === last) return;
    last = snapshot;
    const names = [
      ...new Set([...Object.keys(queues.queues), ...Object.keys(settings.queues)]),
    ].sort();
    if (chartQueue && !names.includes(chartQueue)) names.push(chartQueue);
    if (names.join("\n") !== known) {
      // Only when the queues change: rebuilding an open drop-down would close it.
      known = names.join("\n");
      fill(
        queuePicker,
        h("option", { value: "" }, "All queues"),
        names.map((name) => h("option", { value: name, selected: name === chartQueue }, name)),
      );
    }
    fill(cards, summary(queues.total, registered.workers));
    fill(
      tbody,
      names.length
        ? names
            .filter((name) => name !== chartQueue || queues.queues[name] || settings.queues[name])
            .map((name) => row(ctx, name, queues.queues[name], settings.queues[name]))
        : h(
            "tr",
            {},
            h(
              "td",
              { colspan: head.length, class: "empty" },
              "No jobs yet. Enqueue one and it shows here.",
            ),
          ),
    );
  }
  return { refresh, destroy: () => window.removeEventListener("resize", onResize) };
}

function card(label, value, href, note, tone) {
  const body = [
    h("span", { class: "card-label" }, label),
    h("span", { class: "card-value" }, value),
  ];
  if (note) body.push(h("span", { class: "card-note" }, note));
  const key = label.toLowerCase().replace(/ /g, "-");
  return href
    ? h("a", { class: ["card", tone], href, "data-focus": `card-${key}`, "data-card": key }, body)
    : h("div", { class: ["card", tone], "data-card": key }, body);
}

function summary(total, workers) {
  const busy = workers.filter((w) => w.running > 0).length;
  const slots = workers.reduce((a, w) => a + w.concurrency, 0);
  const running = workers.reduce((a, w) => a + w.running, 0);
  return [
    card(
      "Pending",
      count(total.pending),
      page("jobs", { status: "pending" }),
      total.scheduled ? `${count(total.scheduled)} not yet due` : "ready to run",
    ),
    card(
      "Scheduled",
      count(total.scheduled),
      page("scheduled"),
      "not yet due, or waiting to retry",
    ),
    card(
      "Running",
      count(total.running),
      page("jobs", { status: "running" }),
      total.expired ? `${count(total.expired)} past their lease` : "all within their lease",
      total.expired ? "warn" : "",
    ),
    card(
      "Failed",
      count(total.failed),
      page("jobs", { status: "failed" }),
      "for good: retry them from Jobs",
      total.failed ? "bad" : "",
    ),
    card(
      "Oldest pending",
      agoNode(total.oldest_pending_at, "age"),
      null,
      total.oldest_pending_at ? `due since ${when(total.oldest_pending_at)}` : "nothing due waits",
    ),
    card(
      "Workers",
      count(workers.length),
      page("workers"),
      workers.length
        ? `${busy} busy · ${count(running)}/${count(slots)} slots in use`
        : "none registered",
    ),
  ];
}

function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  if (value < 10) return `${value.toFixed(1)} s`;
  return span(value);
}

function taskRow(t) {
  const rate = t.runs ? (100 * t.failures) / t.runs : 0;
  return h(
    "tr",
    { "data-task": t.task },
    h("th", { scope: "row" }, h("a", { href: page("jobs", { task: t.task }) }, t.task)),
    h("td", { class: "n", "data-col": "runs" }, count(t.runs)),
    h(
      "td",
      { class: ["n", t.failures ? "bad" : ""], "data-col": "failures" },
      t.failures
        ? h("a", { href: page("jobs", { task: t.task, status: "failed" }) }, count(t.failures))
        : "0",
    ),
    h("td", { class: "n opt", "data-col": "rate" }, `${rate.toFixed(rate && rate < 10 ? 1 : 0)} %`),
    h("td", { class: "n", "data-col": "p50" }, seconds(t.p50_seconds)),
    h("td", { class: "n", "data-col": "p95" }, seconds(t.p95_seconds)),
  );
}

function limitsText(settings) {
  if (!settings) return "";
  const parts = [];
  if (settings.max_running) parts.push(`≤ ${count(settings.max_running)} running`);
  if (settings.group_max_running) parts.push(`≤ ${count(settings.group_max_running)} per group`);
  if (settings.rate) parts.push(rate(settings.rate));
  if (settings.group_rate) parts.push(`${rate(settings.group_rate)} per group`);
  return parts.join(" · ");
}

function rate({ limit, per }) {
  const unit = { 1: "s", 60: "min", 3600: "h", 86400: "day" }[per];
  return unit ? `${count(limit)}/${unit}` : `${count(limit)} per ${per} s`;
}

function row(ctx, name, stats, settings) {
  const s = stats || {
    pending: 0,
    running: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
    scheduled: 0,
    expired: 0,
  };
  const paused = Boolean(settings && settings.paused);
  const jobsOf = (status) => page("jobs", { queue: name, status });
  const number = (status, opt = false) =>
    h(
      "td",
      { class: ["n", opt ? "opt" : ""], "data-col": status },
      s[status]
        ? h("a", { href: jobsOf(status), "data-focus": `${name}/${status}` }, count(s[status]))
        : "0",
    );
  const cells = [
    h(
      "th",
      { scope: "row" },
      h("a", { href: page("jobs", { queue: name }), "data-focus": `${name}/all` }, name),
    ),
    h(
      "td",
      {},
      h(
        "span",
        { class: ["badge", paused ? "paused" : "active"], "data-col": "state" },
        paused ? "paused" : "active",
      ),
      limitsText(settings) ? h("span", { class: "limits" }, limitsText(settings)) : null,
    ),
    number("pending"),
    h(
      "td",
      { class: "n opt", "data-col": "scheduled" },
      s.scheduled
        ? h(
            "a",
            { href: page("scheduled", { queue: name }), "data-focus": `${name}/scheduled` },
            count(s.scheduled),
          )
        : "0",
    ),
    number("running"),
    h(
      "td",
      {
        class: ["n", s.expired ? "warn" : ""],
        "data-col": "expired",
        title:
          "Running jobs whose lease ran out: their worker is presumed gone, and they return to pending when recovered",
      },
      count(s.expired),
    ),
    number("completed", true),
    h(
      "td",
      { class: ["n", s.failed ? "bad" : ""], "data-col": "failed" },
      s.failed
        ? h("a", { href: jobsOf("failed"), "data-focus": `${name}/failed` }, count(s.failed))
        : "0",
    ),
    number("cancelled", true),
    h("td", { "data-col": "oldest" }, agoNode(s.oldest_pending_at, "age")),
  ];
  if (ctx.admin) {
    const verb = paused ? "Resume" : "Pause";
    cells.push(
      h(
        "td",
        {},
        h(
          "button",
          {
            type: "button",
            class: "button small",
            "data-focus": `${name}/${verb}`,
            "data-action": verb.toLowerCase(),
            on: {
              click: () =>
                act(
                  ctx,
                  {
                    title: `${verb} queue ${name}?`,
                    body: [
                      paused
                        ? "Workers claim from it again at their next claim."
                        : "No worker claims from it until it is resumed; running jobs finish.",
                    ],
                    confirm: verb,
                  },
                  () => post(`api/queues/${encodeURIComponent(name)}/${verb.toLowerCase()}`),
                  () => `Queue ${name} ${paused ? "resumed" : "paused"}`,
                ),
            },
          },
          verb,
        ),
      ),
    );
  }
  return h("tr", { class: paused ? "is-paused" : "", "data-queue": name }, cells);
}

function maintenance(ctx) {
  const minutes = h("input", {
    id: "reset-minutes",
    type: "number",
    min: "0",
    step: "1",
    value: "30",
    required: true,
  });
  const resetForm = h(
    "form",
    { class: "tool", id: "reset-form" },
    h("h3", {}, "Reset old claims"),
    h(
      "p",
      { class: "muted" },
      "Running jobs claimed longer ago than this go back to pending; their workers' later writes are refused.",
    ),
    h("label", { for: "reset-minutes" }, "Claimed more than (minutes)"),
    minutes,
    h(
      "button",
      { type: "submit", class: "button", "data-action": "reset-claims" },
      "Reset claims…",
    ),
  );
  resetForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const n = Number(minutes.value);
    act(
      ctx,
      {
        title: `Reset claims older than ${n} minutes?`,
        body: ["Every running job claimed before then, in every queue, goes back to pending."],
        confirm: "Reset claims",
        danger: true,
      },
      () => post("api/claims/reset?" + new URLSearchParams({ older_than_minutes: String(n) })),
      (answer) => `${count(answer.reset_count)} claim(s) reset`,
    );
  });

  const days = h("input", {
    id: "prune-days",
    type: "number",
    min: "0",
    step: "any",
    value: "7",
    required: true,
  });
  const boxes = ["completed", "failed", "cancelled"].map((status) =>
    h(
      "label",
      { class: "check" },
      h("input", {
        type: "checkbox",
        name: "status",
        value: status,
        checked: status === "completed",
      }),
      status,
    ),
  );
  const pruneForm = h(
    "form",
    { class: "tool", id: "prune-form" },
    h("h3", {}, "Prune finished jobs"),
    h("p", { class: "muted" }, "Deletes final jobs for good, with their history."),
    h("fieldset", {}, h("legend", {}, "Statuses"), boxes),
    h("label", { for: "prune-days" }, "Finished more than (days) ago"),
    days,
    h("button", { type: "submit", class: "button", "data-action": "prune" }, "Prune…"),
  );
  pruneForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const statuses = boxes
      .map((b) => b.querySelector("input"))
      .filter((i) => i.checked)
      .map((i) => i.value);
    if (!statuses.length) return ctx.toast("Pick at least one status to prune.", "error");
    const n = Number(days.value);
    act(
      ctx,
      {
        title: `Delete ${statuses.join(", ")} jobs finished more than ${n} days ago?`,
        body: ["They cannot be brought back."],
        confirm: "Prune",
        danger: true,
      },
      () => post("api/prune", { older_than_seconds: n * 86400, statuses }),
      (answer) => `${count(answer.removed_count)} job(s) deleted`,
    );
  });
  return h(
    "section",
    { class: "panel", "aria-labelledby": "maintenance-title" },
    h("h2", { id: "maintenance-title" }, "Maintenance"),
    h("div", { class: "tools" }, resetForm, pruneForm),
  );
}
