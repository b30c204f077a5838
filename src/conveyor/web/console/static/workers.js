// Workers: every registered worker, idle ones too, and what each one runs right now.
//
// The registry says who is there and which jobs their tasks run (refreshed with each
// worker's heartbeat); the running jobs, read on every poll like the other pages, say
// which worker holds what now. A running job its worker has not started (claimed ahead
// of a free slot) is shown as waiting, not as running.

import { get, page, workers as registered } from "./api.js";
import { append, fill, h } from "./dom.js";
import { agoNode, claimedAhead, count, pastLease, progressText } from "./format.js";

export const title = "Workers";

// Running jobs read per poll; past this the counts fall back to what workers reported.
const RUNNING_SHOWN = 200;

export function mount(main) {
  const info = h("p", { class: "muted" });
  const tbody = h("tbody");
  const busyInfo = h("p", { class: "muted", id: "busy-info" });
  const busyBody = h("tbody");
  const columns = [
    "Worker",
    "Host",
    "PID",
    "Queues",
    "Running",
    "State",
    "Started",
    "Last seen",
    "Version",
  ];
  const busyColumns = ["Worker", "Job", "Task", "Queue", "State", "Started", "Progress"];
  const table = (cls, caption, names, body, numeric) =>
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: ["grid", cls] },
        h("caption", { class: "sr" }, caption),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            names.map((c) => h("th", { scope: "col", class: numeric.includes(c) ? "n" : "" }, c)),
          ),
        ),
        body,
      ),
    );
  append(main, [
    h("h1", { tabindex: "-1" }, "Workers"),
    info,
    table("workers", "Registered workers", columns, tbody, ["PID", "Running"]),
    h(
      "section",
      { class: "panel", "aria-labelledby": "busy-title" },
      h("h2", { id: "busy-title" }, "Running now"),
      busyInfo,
      table("running-now", "The job each worker runs", busyColumns, busyBody, ["Job"]),
    ),
  ]);
  let last = "";

  async function refresh() {
    const [workers, { jobs }] = await Promise.all([
      registered(),
      get("api/jobs", { status: "running", limit: RUNNING_SHOWN }),
    ]);
    const complete = jobs.length < RUNNING_SHOWN;
    const ahead = claimedAhead(workers, jobs);
    const snapshot = JSON.stringify([workers, jobs, [...ahead]]);
    if (snapshot === last) return;
    last = snapshot;
    // Jobs per worker, live: started ones, and those claimed ahead.
    const held = new Map(workers.map((w) => [w.name, { running: 0, waiting: 0 }]));
    for (const job of jobs) {
      const entry = held.get(job.worker);
      if (entry) entry[ahead.has(job.id) ? "waiting" : "running"] += 1;
    }
    // Live from the running jobs when the worker lists what its tasks run (and the list
    // of running jobs is whole); else as the worker last reported.
    const listed = (w) => Array.isArray(w.busy) && w.busy.length === w.running;
    const runningOf = (w) => (complete && listed(w) ? held.get(w.name).running : w.running);
    const waitingOf = (w) => (complete && listed(w) ? held.get(w.name).waiting : 0);
    const busy = workers.filter((w) => runningOf(w) > 0).length;
    fill(
      info,
      workers.length
        ? `${count(workers.length)} worker(s): ${count(busy)} busy, ${count(workers.length - busy)} idle. A worker leaves this list when it stops, or when it misses its heartbeats.`
        : "",
    );
    fill(
      tbody,
      workers.length
        ? workers.map((w) => workerRow(w, runningOf(w), waitingOf(w)))
        : h(
            "tr",
            {},
            h(
              "td",
              { colspan: columns.length, class: "empty" },
              "No worker is registered. Workers register themselves when they start and leave when they stop.",
            ),
          ),
    );
    const waiting = jobs.filter((j) => ahead.has(j.id)).length;
    fill(
      busyInfo,
      jobs.length
        ? `${count(jobs.length - waiting)} running${waiting ? `, ${count(waiting)} claimed ahead and waiting for a free slot` : ""}${complete ? "" : ` (the first ${count(RUNNING_SHOWN)})`}.`
        : "",
    );
    // When each task started, as its worker reported (the job's started_at is its claim).
    const started = new Map(workers.flatMap((w) => (w.busy || []).map((b) => [b.id, b.started_at])));
    const order = (j) => [j.worker || "", ahead.has(j.id) ? 1 : 0, j.started_at || ""];
    const sorted = [...jobs].sort((a, b) => {
      const x = order(a);
      const y = order(b);
      return x[0].localeCompare(y[0]) || x[1] - y[1] || x[2].localeCompare(y[2]);
    });
    fill(
      busyBody,
      sorted.length
        ? sorted.map((job) => busyRow(job, ahead.has(job.id), started.get(job.id)))
        : h(
            "tr",
            {},
            h("td", { colspan: busyColumns.length, class: "empty" }, "No job is running."),
          ),
    );
  }
  return { refresh };
}

function workerRow(w, running, waiting) {
  return h(
    "tr",
    { "data-worker": w.name },
    h("th", { scope: "row" }, w.name),
    h("td", {}, w.host),
    h("td", { class: "n" }, String(w.pid)),
    h(
      "td",
      { class: "queues" },
      w.queues.length
        ? w.queues.map((q) => h("a", { href: page("jobs", { queue: q }), class: "tag" }, q))
        : "all",
    ),
    h(
      "td",
      { class: "n", "data-col": "running" },
      h(
        "span",
        { class: "mini" },
        h("progress", {
          max: Math.max(1, w.concurrency),
          value: running,
          "aria-label": `${running} of ${w.concurrency} slots busy`,
        }),
        h("span", {}, `${count(running)}/${count(w.concurrency)}`),
      ),
      waiting ? h("span", { class: "muted small" }, ` +${count(waiting)} waiting`) : null,
    ),
    h(
      "td",
      {},
      h("span", { class: ["badge", running ? "busy" : "idle"] }, running ? "busy" : "idle"),
    ),
    h("td", {}, agoNode(w.started_at)),
    h("td", {}, agoNode(w.last_seen_at)),
    h("td", {}, w.version),
  );
}

function busyRow(job, ahead, start) {
  const link = page(`jobs/${job.id}`);
  return h(
    "tr",
    { "data-job": String(job.id), class: ahead ? "is-waiting" : "" },
    h("th", { scope: "row" }, job.worker || "–"),
    h(
      "td",
      { class: "n" },
      h("a", { href: link, "data-row-link": "", "data-focus": `busy-${job.id}` }, `#${job.id}`),
    ),
    h("td", { class: "task" }, h("a", { href: link, tabindex: "-1" }, job.task)),
    h("td", {}, job.queue),
    h(
      "td",
      {},
      ahead
        ? h("span", { class: ["badge", "status-claimed"] }, "claimed · waiting")
        : pastLease(job)
          ? h(
              "span",
              {
                class: ["badge", "late"],
                title: "Its lease ran out: the worker is presumed gone",
              },
              "running · past lease",
            )
          : h("span", { class: ["badge", "status-running"] }, "running"),
    ),
    h(
      "td",
      { "data-col": "started" },
      ahead ? ["claimed ", agoNode(job.claimed_at)] : agoNode(start || job.started_at),
    ),
    h("td", {}, progressText(job.progress)),
  );
}
