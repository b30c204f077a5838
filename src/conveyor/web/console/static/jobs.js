// Jobs: filter by queue, status, task, key and creation time; keyset paging newest or
// oldest first; every filter in the URL. Admins act on the whole filtered selection.

import { get, page, post } from "./api.js";
import { append, fill, h } from "./dom.js";
import {
  agoNode,
  claimedAhead,
  count,
  oneLine,
  pastLease,
  progressText,
  runTime,
  when,
} from "./format.js";
import { confirmAction, toast } from "./dialog.js";

export const title = "Jobs";

const STATUSES = ["pending", "running", "completed", "failed", "cancelled"];
const SIZES = [20, 50, 100, 200];
const FILTERS = ["queue", "status", "task", "key", "payload", "created_after", "created_before"];
// A payload search walks this many jobs per page at most (newest first).
const SCAN = 10000;

/** "to=ada@example.org" → {field: "to", value: "ada@example.org"}, else null. */
function payloadFilter(text) {
  const match = /^([A-Za-z0-9_-]{1,100})=(.*)$/.exec(text || "");
  return match ? { field: match[1], value: match[2] } : null;
}
const RETRYABLE = ["failed", "cancelled", "completed"];
const CANCELLABLE = ["pending", "running"];

function read(params) {
  const filters = {};
  for (const name of FILTERS) {
    const value = (params.get(name) || "").trim();
    if (value) filters[name] = value;
  }
  if (filters.status && !STATUSES.includes(filters.status)) delete filters.status;
  const limit = SIZES.includes(Number(params.get("limit"))) ? Number(params.get("limit")) : 50;
  const cursor = (name) => (/^[0-9]{1,19}$/.test(params.get(name) || "") ? params.get(name) : null);
  return {
    filters,
    newest: params.get("order") !== "oldest",
    limit,
    after: cursor("after"),
    before: cursor("before"),
  };
}

function href(filters, newest, limit, extra = {}) {
  return page("jobs", {
    ...filters,
    order: newest ? null : "oldest",
    limit: limit === 50 ? null : limit,
    ...extra,
  });
}

/** ISO (UTC) → the value a datetime-local input shows, in local time. */
function localValue(iso) {
  const t = Date.parse(iso || "");
  if (Number.isNaN(t)) return "";
  const d = new Date(t - new Date(t).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

export function mount(main, ctx, params) {
  const state = read(params);
  const { filters, newest, limit } = state;

  // -- the filter form (a GET form: its fields are the URL's parameters) ------------------
  const field = (label, input) =>
    h("div", { class: "field" }, h("label", { for: input.id }, label), input);
  const queues = h("datalist", { id: "queue-names" });
  const inputs = {
    queue: h("input", {
      id: "f-queue",
      name: "queue",
      list: "queue-names",
      value: filters.queue || "",
      autocomplete: "off",
      maxlength: "200",
    }),
    status: h(
      "select",
      { id: "f-status", name: "status" },
      h("option", { value: "" }, "any"),
      STATUSES.map((s) => h("option", { value: s, selected: s === filters.status }, s)),
    ),
    task: h("input", {
      id: "f-task",
      name: "task",
      value: filters.task || "",
      autocomplete: "off",
      maxlength: "200",
    }),
    payload: h("input", {
      id: "f-payload",
      name: "payload",
      value: filters.payload || "",
      placeholder: "field=value",
      title: "A top-level payload field and its value, such as to=ada@example.org",
      autocomplete: "off",
      maxlength: "1100",
    }),
    key: h("input", {
      id: "f-key",
      name: "key",
      value: filters.key || "",
      autocomplete: "off",
      maxlength: "1000",
    }),
    created_after: h("input", {
      id: "f-from",
      type: "datetime-local",
      value: localValue(filters.created_after),
    }),
    created_before: h("input", {
      id: "f-to",
      type: "datetime-local",
      value: localValue(filters.created_before),
    }),
    order: h(
      "select",
      { id: "f-order", name: "order" },
      h("option", { value: "newest", selected: newest }, "newest first"),
      h("option", { value: "oldest", selected: !newest }, "oldest first"),
    ),
    limit: h(
      "select",
      { id: "f-limit", name: "limit" },
      SIZES.map((n) => h("option", { value: n, selected: n === limit }, `${n} a page`)),
    ),
  };
  const form = h(
    "form",
    { class: "filters panel", id: "filters", "aria-label": "Filters" },
    field("Queue", inputs.queue),
    field("Status", inputs.status),
    field("Task", inputs.task),
    field("Key", inputs.key),
    field("Payload", inputs.payload),
    field("Created from", inputs.created_after),
    field("Created before", inputs.created_before),
    field("Order", inputs.order),
    field("Page size", inputs.limit),
    h(
      "div",
      { class: "field actions" },
      h("button", { type: "submit", class: "button primary" }, "Apply"),
      h("a", { class: "button", href: page("jobs") }, "Clear"),
    ),
    queues,
  );
  const apply = () => {
    const chosen = {};
    for (const name of ["queue", "status", "task", "key", "payload"]) {
      const value = inputs[name].value.trim();
      if (value) chosen[name] = value;
    }
    for (const name of ["created_after", "created_before"]) {
      const t = Date.parse(inputs[name].value); // datetime-local is local time
      if (inputs[name].value && !Number.isNaN(t)) chosen[name] = new Date(t).toISOString();
    }
    ctx.navigate(href(chosen, inputs.order.value !== "oldest", Number(inputs.limit.value)));
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    apply();
  });
  for (const name of ["status", "order", "limit"]) inputs[name].addEventListener("change", apply);

  // -- the list -------------------------------------------------------------------------
  const info = h("p", { class: "muted", id: "list-info", "aria-live": "polite" });
  const tbody = h("tbody");
  const table = h(
    "table",
    { class: "grid jobs" },
    h("caption", { class: "sr" }, "Jobs"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col", class: "n" }, "ID"),
        h("th", { scope: "col", class: "opt" }, "Queue"),
        h("th", { scope: "col" }, "Task"),
        h("th", { scope: "col", class: "opt" }, "Key"),
        h("th", { scope: "col" }, "Status"),
        h("th", { scope: "col", class: "n opt" }, "Attempts"),
        h("th", { scope: "col", class: "opt" }, "Progress"),
        h("th", { scope: "col", class: "opt" }, "Created"),
        h("th", { scope: "col", class: "opt" }, "Updated"),
        h("th", { scope: "col", class: "n opt", title: "Finished minus started" }, "Run time"),
        h("th", { scope: "col", class: "error-col" }, "Error"),
      ),
    ),
    tbody,
  );
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  append(main, [
    h("h1", { tabindex: "-1" }, "Jobs"),
    form,
    ctx.admin ? bulkBar(ctx, filters) : null,
    info,
    h("div", { class: "scroll" }, table),
    pager,
  ]);

  let last = "";
  async function refresh() {
    const base = { ...filters };
    let rows;
    let hasNewer;
    let hasOlder;
    let searched = null;
    const sought = payloadFilter(filters.payload);
    if (filters.payload && !sought) {
      throw new Error("the payload filter reads field=value, such as to=ada@example.org");
    }
    if (sought) {
      // A bounded walk, newest first: each page goes on below where the last one stopped.
      const { payload, key, created_after, created_before, ...rest } = base;
      const got = await get("api/jobs/search", {
        ...rest,
        ...sought,
        limit,
        scan: SCAN,
        before: state.after,
      });
      rows = got.jobs;
      searched = got;
      hasNewer = state.after !== null;
      hasOlder = got.next_before !== null;
      state.next = got.next_before;
    } else if (state.before) {
      // The page before a cursor: read towards it in the other order, then turn round.
      const got = await get("api/jobs", {
        ...base,
        limit: limit + 1,
        after: state.before,
        newest_first: !newest,
      });
      if (!got.jobs.length) return ctx.navigate(href(filters, newest, limit), { replace: true });
      hasNewer = got.jobs.length > limit;
      rows = got.jobs.slice(0, limit).reverse();
      hasOlder = true;
      if (!hasNewer) {
        // Back at the start: drop the cursor so new jobs show up live.
        history.replaceState(null, "", href(filters, newest, limit));
        state.before = null;
      }
    } else {
      const got = await get("api/jobs", {
        ...base,
        limit: limit + 1,
        after: state.after,
        newest_first: newest,
      });
      hasOlder = got.jobs.length > limit;
      rows = got.jobs.slice(0, limit);
      hasNewer = state.after !== null;
    }
    const stats = await get("api/queues");
    // Running jobs a worker claimed ahead are told apart by the worker's entry.
    const workers = rows.some((j) => j.status === "running")
      ? (await get("api/workers")).workers
      : [];
    const ahead = claimedAhead(workers, rows);
    const snapshot = JSON.stringify([rows, hasNewer, hasOlder, stats, [...ahead], searched]);
    if (snapshot === last) return;
    last = snapshot;
    fill(
      queues,
      Object.keys(stats.queues).map((name) => h("option", { value: name })),
    );
    fill(
      info,
      sought
        ? `${count(rows.length)} job(s) whose payload has ${sought.field} = ${sought.value}, newest first, ${searched.next_before === null ? "all jobs searched" : `searching ${count(SCAN)} jobs a page`}${filters.key || filters.created_after || filters.created_before ? " (key and creation time are not used with a payload search)" : ""}`
        : describe(filters, newest, rows, stats),
    );
    fill(
      tbody,
      rows.length
        ? rows.map((job) => row(job, ahead.has(job.id)))
        : h(
            "tr",
            {},
            h(
              "td",
              { colspan: 11, class: "empty" },
              state.after ? "No more jobs." : "No job matches these filters.",
            ),
          ),
    );
    const first = rows[0];
    const lastRow = rows[rows.length - 1];
    fill(
      pager,
      hasNewer && first && !sought
        ? h(
            "a",
            {
              class: "button",
              rel: "prev",
              href: href(filters, newest, limit, { before: first.id }),
              "data-focus": "prev",
            },
            newest ? "← Newer" : "← Earlier",
          )
        : h(
            "span",
            { class: "button disabled", "aria-disabled": "true" },
            newest ? "← Newer" : "← Earlier",
          ),
      hasNewer
        ? h(
            "a",
            { class: "button", href: href(filters, newest, limit), "data-focus": "first" },
            newest ? "Newest" : "Oldest",
          )
        : null,
      hasOlder && (lastRow || sought)
        ? h(
            "a",
            {
              class: "button",
              rel: "next",
              href: href(filters, newest, limit, { after: sought ? state.next : lastRow.id }),
              "data-focus": "next",
            },
            newest ? "Older →" : "Later →",
          )
        : h(
            "span",
            { class: "button disabled", "aria-disabled": "true" },
            newest ? "Older →" : "Later →",
          ),
    );
  }
  return { refresh };
}

/** "Jobs 1,234 to 1,185 of 1,204 failed in mail" — the total only when the counts kept per
 * queue and status answer it exactly (never a COUNT over the table). */
function describe(filters, newest, rows, stats) {
  const order = newest ? "newest first" : "oldest first";
  const only = Object.keys(filters).every((k) => k === "queue" || k === "status");
  let total = null;
  if (only) {
    const s = filters.queue ? stats.queues[filters.queue] : stats.total;
    total = s ? (filters.status ? s[filters.status] : s.total) : 0;
  }
  if (!rows.length)
    return total === null
      ? `No job on this page · ${order}`
      : `${count(total)} job(s) match · ${order}`;
  const range = `IDs ${rows[0].id} to ${rows[rows.length - 1].id}`;
  return total === null
    ? `${range} · ${order}`
    : `${range} · ${count(total)} job(s) match · ${order}`;
}

export function statusBadge(job, ahead = false) {
  const late = pastLease(job);
  if (ahead && !late) {
    return h(
      "span",
      {
        class: ["badge", "status-claimed"],
        title: "Its worker claimed it ahead and has not started it: it waits for a free slot",
      },
      "claimed · waiting",
    );
  }
  return h(
    "span",
    {
      class: ["badge", `status-${job.status}`, late ? "late" : ""],
      title: late ? "Its lease ran out: the worker is presumed gone" : null,
    },
    late ? "running · past lease" : job.status,
  );
}

function progressCell(p) {
  if (!p || !p.total) return p && p.completed != null ? progressText(p) : "";
  const done = Math.min(p.total, (p.completed || 0) + (p.failed || 0));
  return h(
    "span",
    { class: "mini" },
    h("progress", { max: p.total, value: done, "aria-label": progressText(p) }),
    h("span", {}, `${count(p.completed || 0)}/${count(p.total)}`),
  );
}

function row(job, ahead) {
  const link = page(`jobs/${job.id}`);
  const error = oneLine(job.error);
  return h(
    "tr",
    {},
    h(
      "td",
      { class: "n" },
      h("a", { href: link, "data-row-link": "", "data-focus": `job-${job.id}` }, String(job.id)),
    ),
    h("td", { class: "opt" }, job.queue),
    h("td", { class: "task" }, h("a", { href: link, tabindex: "-1" }, job.task)),
    h("td", { class: "opt key" }, job.key || ""),
    h("td", {}, statusBadge(job, ahead)),
    h("td", { class: "n opt" }, `${job.attempts}/${job.max_attempts}`),
    h("td", { class: "opt" }, progressCell(job.progress)),
    h("td", { class: "opt" }, agoNode(job.created_at)),
    h("td", { class: "opt" }, agoNode(job.updated_at)),
    h("td", { class: "n opt", "data-col": "run-time" }, ahead ? "" : runTime(job)),
    h("td", { class: "error-col", title: error || null }, error),
  );
}

// -- bulk actions on the filtered selection (admins) ---------------------------------------

function bulkBar(ctx, filters) {
  const status = filters.status;
  const what = Object.entries(filters)
    .map(([k, v]) => `${k.replace("_", " ")} ${k.startsWith("created") ? when(v) : v}`)
    .join(", ");
  const bar = h("div", { class: "bulk", id: "bulk" });
  if (!status) {
    bar.append(
      h("span", { class: "muted" }, "Pick a status to retry or cancel every matching job at once."),
    );
    return bar;
  }
  const verb = RETRYABLE.includes(status)
    ? "retry"
    : CANCELLABLE.includes(status)
      ? "cancel"
      : null;
  const label = verb === "retry" ? `Retry all ${status}…` : `Cancel all ${status}…`;
  bar.append(
    h(
      "button",
      {
        type: "button",
        class: ["button", verb === "cancel" ? "danger" : ""],
        "data-action": `bulk-${verb}`,
        on: { click: () => bulk(ctx, verb, filters, what) },
      },
      label,
    ),
    h("span", { class: "muted" }, `Acts on every job matching: ${what}.`),
  );
  return bar;
}

async function bulk(ctx, verb, filters, what) {
  const ok = await confirmAction({
    title:
      verb === "retry"
        ? `Retry every matching ${filters.status} job?`
        : `Cancel every matching ${filters.status} job?`,
    body: [
      `Filters: ${what}.`,
      verb === "retry"
        ? "Each goes back to pending with its attempts reset. A job that changed meanwhile is skipped."
        : "Each is cancelled; a running task's later reports are refused. A job that changed meanwhile is skipped.",
    ],
    confirm: verb === "retry" ? "Retry all" : "Cancel all",
    danger: verb === "cancel",
  });
  if (!ok) return;
  const body = { ...filters };
  let changed = 0;
  let skipped = 0;
  try {
    // The server handles up to 1,000 jobs a request and says where to go on.
    for (let round = 0; round < 10000; round++) {
      const answer = await post(`api/jobs/bulk/${verb}`, body);
      changed += answer.changed_count;
      skipped += answer.skipped.length;
      if (answer.next_after === null) break;
      body.after = answer.next_after;
      toast(`${verb === "retry" ? "Retried" : "Cancelled"} ${count(changed)} so far…`);
    }
    const done = `${verb === "retry" ? "Retried" : "Cancelled"} ${count(changed)} job(s)`;
    toast(skipped ? `${done}; ${count(skipped)} skipped (they changed meanwhile)` : done, "ok");
  } catch (error) {
    toast(`Stopped after ${count(changed)} job(s): ${error.message}`, "error");
  }
  await ctx.refresh();
}
