// One job: what it carries, where it stands, its claim and lease (never the claim id: a
// secret of the worker holding it), its attempts and their errors, its progress, its
// dependencies and subscribers, and (for admins) retry, cancel and release.

import { ApiError, del, get, now, page, post } from "./api.js";
import { fill, h, jsonBlock, s } from "./dom.js";
import {
  agoNode,
  claimedAhead,
  count,
  item,
  oneLine,
  parse,
  pastLease,
  progressText,
  runTime,
  when,
} from "./format.js";
import { act } from "./dialog.js";
import { statusBadge } from "./jobs.js";

export const title = "Job";

export function mount(main, ctx, params, id) {
  const heading = h("h1", { tabindex: "-1" }, `Job ${id}`);
  const body = h("div", { class: "job" });
  main.append(
    h("p", { class: "crumbs" }, h("a", { href: page("jobs") }, "Jobs"), " / ", id),
    heading,
    body,
  );
  let gone = false;
  let last = "";

  async function refresh() {
    if (gone) return;
    let job;
    try {
      job = await get(`api/jobs/${id}`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        gone = true;
        fill(
          body,
          h(
            "p",
            { class: "empty" },
            `Job ${id} does not exist: it was never enqueued, or it was pruned or deleted.`,
          ),
        );
        return;
      }
      throw error;
    }
    const [subscribers, dependents, registered] = await Promise.all([
      get(`api/jobs/${id}/subscribers`),
      get(`api/jobs/${id}/dependents`),
      job.status === "running" ? get("api/workers") : { workers: [] },
    ]);
    const ahead = claimedAhead(registered.workers, [job]).has(job.id);
    const snapshot = JSON.stringify([job, subscribers, dependents, ahead]);
    if (snapshot === last) return; // unchanged: leave the page (and any selection) alone
    last = snapshot;
    const open = new Set([...body.querySelectorAll("details[open]")].map((d) => d.dataset.key));
    fill(heading, `Job ${job.id} `, statusBadge(job, ahead));
    fill(
      body,
      h(
        "p",
        { class: "lede" },
        h("code", { class: "task-name" }, job.task),
        " in queue ",
        h("a", { href: page("jobs", { queue: job.queue }) }, job.queue),
        job.key
          ? [" · key ", h("a", { href: page("jobs", { queue: job.queue, key: job.key }) }, job.key)]
          : null,
      ),
      ctx.admin ? actions(ctx, job) : null,
      ahead
        ? h(
            "p",
            { class: "notice", id: "claimed-ahead" },
            `Worker ${job.worker} claimed this job ahead of a free slot; its task has not started yet.`,
          )
        : null,
      progress(job.progress),
      h(
        "div",
        { class: "columns" },
        h(
          "div",
          {},
          facts(job),
          claim(job),
          links(job, dependents.dependents, subscribers.subscribers),
        ),
        h("div", {}, timeline(job)),
      ),
      attempts(job),
      section("Payload", "payload", jsonBlock(job.payload)),
      job.status === "completed" || job.result !== null
        ? section("Result", "result", jsonBlock(job.result))
        : null,
    );
    for (const details of body.querySelectorAll("details"))
      details.open = open.has(details.dataset.key);
  }
  return { refresh, title: `Job ${id}` };
}

function section(name, id, ...content) {
  return h(
    "section",
    { class: "panel", "aria-labelledby": `${id}-title` },
    h("h2", { id: `${id}-title` }, name),
    content,
  );
}

function dl(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.filter(Boolean).map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]),
  );
}

function stamp(iso) {
  return iso ? h("span", {}, when(iso), " (", agoNode(iso), ")") : "–";
}

function actions(ctx, job) {
  const buttons = [];
  const add = (verb, label, question, path, done, danger = false) =>
    buttons.push(
      h(
        "button",
        {
          type: "button",
          class: ["button", danger ? "danger" : ""],
          "data-action": verb,
          "data-focus": verb,
          on: {
            click: () =>
              act(
                ctx,
                { confirm: label, ...question, danger },
                typeof path === "function" ? path : () => post(path),
                done,
              ),
          },
        },
        label,
      ),
    );
  if (["failed", "cancelled", "completed"].includes(job.status)) {
    add(
      "retry",
      "Retry",
      {
        title: `Retry job ${job.id}?`,
        body: ["It goes back to pending with its attempts reset; its checkpoint is kept."],
      },
      `api/jobs/${job.id}/retry`,
      () => `Job ${job.id} is pending again`,
    );
  }
  // Not yet due: run_at ahead of now, and of the job's last change (run now sets both to
  // the database's now, which this browser's clock may trail a little).
  if (
    job.status === "pending" &&
    parse(job.run_at) > now() &&
    parse(job.run_at) > parse(job.updated_at)
  ) {
    add(
      "run-now",
      "Run now",
      {
        title: `Run job ${job.id} now?`,
        body: [
          job.attempts
            ? "It stops waiting out its retry back-off and is due now; its attempts are kept."
            : "It is due now instead of at its scheduled time.",
        ],
      },
      `api/jobs/${job.id}/run-now`,
      () => `Job ${job.id} is due now`,
    );
  }
  if (job.status === "running") {
    add(
      "release",
      "Release",
      {
        title: `Release job ${job.id}?`,
        body: [
          "It goes back to pending now, whoever holds it; the holder's later writes are refused.",
        ],
      },
      `api/jobs/${job.id}/release`,
      () => `Job ${job.id} was released`,
    );
  }
  if (job.status === "pending" || job.status === "running") {
    add(
      "cancel",
      "Cancel",
      {
        title: `Cancel job ${job.id}?`,
        confirm: "Cancel job",
        body: [
          job.status === "running" ? "The task's later reports are refused." : "It will not run.",
        ],
      },
      `api/jobs/${job.id}/cancel`,
      () => `Job ${job.id} was cancelled`,
      true,
    );
  }
  if (["failed", "cancelled", "completed"].includes(job.status)) {
    add(
      "delete",
      "Delete",
      {
        title: `Delete job ${job.id}?`,
        confirm: "Delete job",
        body: [
          "The job, its history, its subscribers and its dependency links are deleted for good.",
        ],
      },
      () => del(`api/jobs/${job.id}`),
      () => {
        // The job is gone: show the list it was in.
        ctx.navigate(page("jobs", { queue: job.queue }), { replace: true });
        return `Job ${job.id} was deleted`;
      },
      true,
    );
  }
  return buttons.length ? h("div", { class: "actions" }, buttons) : null;
}

function progress(p) {
  const text = progressText(p);
  if (!text) return null;
  const rows = [];
  if (p.checkpoint !== null && p.checkpoint !== undefined)
    rows.push(["Checkpoint", `resumes after ${item(p.checkpoint)}`]);
  if (p.detail !== null && p.detail !== undefined) rows.push(["Detail", jsonBlock(p.detail)]);
  return section(
    "Progress",
    "progress",
    p.total ? svgBar(p) : null,
    h("p", { class: "progress-text" }, text),
    rows.length ? dl(rows) : null,
  );
}

/** The bar, as SVG rectangles sized by attributes (no inline styles under the CSP). */
function svgBar(p) {
  const total = p.total;
  const done = Math.min(total, p.completed || 0);
  const failed = Math.min(total - done, p.failed || 0);
  const rect = (cls, x, w) =>
    s("rect", {
      class: cls,
      x: `${(100 * x) / total}%`,
      width: `${(100 * w) / total}%`,
      height: "100%",
    });
  return s(
    "svg",
    {
      class: "bar",
      role: "progressbar",
      "aria-valuemin": "0",
      "aria-valuemax": String(total),
      "aria-valuenow": String(done + failed),
      "aria-valuetext": progressText(p),
    },
    rect("track", 0, total),
    rect("ok", 0, done),
    rect("bad", done, failed),
  );
}

function facts(job) {
  return section(
    "Details",
    "details",
    dl([
      ["Status", job.status],
      ["Attempts", `${job.attempts} of ${job.max_attempts}`],
      job.workflow_id
        ? [
            "Workflow",
            h(
              "span",
              { id: "job-workflow" },
              h("a", { href: page(`workflows/${job.workflow_id}`) }, `Workflow ${job.workflow_id}`),
              job.step ? [" · step ", h("code", {}, job.step)] : null,
            ),
          ]
        : null,
      ["Priority", String(job.priority)],
      job.group ? ["Group", job.group] : null,
      ["Run at", stamp(job.run_at)],
      runTime(job)
        ? [job.status === "running" ? "Running for" : "Run time", h("span", { id: "run-time" }, runTime(job))]
        : null,
      job.error_kind ? ["Last error", `${job.error_kind}: ${oneLine(job.error)}`] : null,
    ]),
  );
}

function claim(job) {
  if (!job.claimed_at && !job.worker) return null;
  const late = pastLease(job);
  const lease = job.lease_expires_at
    ? h(
        "span",
        { class: late ? "warn" : "" },
        late ? "ran out " : "expires ",
        agoNode(job.lease_expires_at),
      )
    : "–";
  return section(
    job.status === "running" ? "Claim" : "Last claim",
    "claim",
    dl([
      ["Worker", job.worker || "–"],
      ["Claimed", stamp(job.claimed_at)],
      ["Lease", lease],
      ["Heartbeat", stamp(job.heartbeat_at)],
    ]),
    h(
      "p",
      { class: "muted small" },
      "The claim id is a secret of the worker holding the claim and is not shown.",
    ),
  );
}

function links(job, dependents, subscribers) {
  const jobLinks = (ids) =>
    ids.length
      ? h(
          "span",
          { class: "ids" },
          ids.map((n) => h("a", { href: page(`jobs/${n}`) }, `#${n}`)),
        )
      : "none";
  const rows = [
    ["Runs after", jobLinks(job.depends_on || [])],
    job.waiting_for ? ["Waiting for", `${count(job.waiting_for)} of them`] : null,
    ["Runs before", jobLinks(dependents)],
    [
      "Subscribers",
      subscribers.length
        ? h(
            "ul",
            { class: "plain" },
            subscribers.map((s) => h("li", {}, s)),
          )
        : "none",
    ],
  ];
  return section("Dependencies and subscribers", "links", dl(rows));
}

function timeline(job) {
  const events = [["Created", job.created_at]];
  if (parse(job.run_at) > parse(job.created_at) + 1000)
    events.push([job.status === "pending" ? "Due" : "Was due", job.run_at]);
  // started_at is the latest attempt's start (a retry resets the attempts to 0).
  if (job.started_at)
    events.push([
      job.attempts ? `Started (attempt ${job.attempts})` : "Last started",
      job.started_at,
    ]);
  for (const e of job.errors || []) events.push([`Attempt ${e.attempt} failed (${e.kind})`, e.at]);
  if (job.claimed_at && job.claimed_at !== job.started_at) events.push(["Claimed", job.claimed_at]);
  if (job.heartbeat_at) events.push(["Last heartbeat", job.heartbeat_at]);
  if (job.finished_at) events.push([`Finished: ${job.status}`, job.finished_at]);
  events.push(["Last change", job.updated_at]);
  events.sort((a, b) => parse(a[1]) - parse(b[1]));
  return section(
    "Timeline",
    "timeline",
    h(
      "ol",
      { class: "timeline" },
      events.map(([what, iso]) => h("li", {}, h("span", { class: "what" }, what), stamp(iso))),
    ),
  );
}

function attempts(job) {
  const history = [...(job.errors || [])].reverse();
  if (!history.length && job.error) {
    history.push({
      attempt: job.attempts,
      error: job.error,
      kind: job.error_kind || "error",
      at: job.updated_at,
      worker: null,
    });
  }
  if (!history.length) return null;
  return section(
    `Errors (${history.length})`,
    "errors",
    history.map((e) =>
      h(
        "details",
        { class: "attempt", "data-key": `attempt-${e.attempt}-${e.at}` },
        h(
          "summary",
          {},
          h(
            "span",
            { class: "attempt-head" },
            `Attempt ${e.attempt} · ${e.kind} · ${when(e.at)}${e.worker ? ` · ${e.worker}` : ""}`,
          ),
          h("span", { class: "attempt-line" }, oneLine(e.error)),
        ),
        h("pre", { class: "trace" }, e.error),
      ),
    ),
  );
}
