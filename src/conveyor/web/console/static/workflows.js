// Workflows: every run with its label, its steps by status and its status; filter by
// status and label, keyset paging newest or oldest first, every filter in the URL.

import { get, page } from "./api.js";
import { append, fill, h, s } from "./dom.js";
import { agoNode, count } from "./format.js";

export const title = "Workflows";

export const RUN_STATUSES = ["running", "completed", "failed", "cancelled"];
// The order steps are counted and drawn in: done first, then what failed, then the rest.
export const STEP_STATUSES = ["completed", "failed", "cancelled", "running", "pending"];
const SIZES = [20, 50, 100, 200];

function read(params) {
  const filters = {};
  const label = (params.get("label") || "").trim();
  if (label) filters.label = label.slice(0, 200);
  if (RUN_STATUSES.includes(params.get("status"))) filters.status = params.get("status");
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
  return page("workflows", {
    ...filters,
    order: newest ? null : "oldest",
    limit: limit === 50 ? null : limit,
    ...extra,
  });
}

/** A run's status as a badge (the same colours as a job's). */
export function runBadge(status) {
  return h("span", { class: ["badge", `status-${status}`] }, status);
}

/** "300 steps: 290 completed, 2 failed, 8 running" */
export function countsText(counts, total) {
  const parts = STEP_STATUSES.filter((st) => counts[st]).map((st) => `${count(counts[st])} ${st}`);
  return `${count(total)} step${total === 1 ? "" : "s"}${parts.length ? `: ${parts.join(", ")}` : ""}`;
}

/** The steps by status as one stacked bar (SVG rectangles sized by attributes: the
 * policy allows no inline style). */
export function stackedBar(counts, total, cls = "stack") {
  let x = 0;
  const rects = [s("rect", { class: "track", x: "0", width: "100%", height: "100%" })];
  for (const st of STEP_STATUSES) {
    const n = counts[st] || 0;
    if (!n || !total) continue;
    rects.push(
      s("rect", {
        class: `seg-${st}`,
        x: `${(100 * x) / total}%`,
        width: `${(100 * n) / total}%`,
        height: "100%",
      }),
    );
    x += n;
  }
  return s(
    "svg",
    { class: cls, role: "img", "aria-label": countsText(counts, total) },
    s("title", {}, countsText(counts, total)),
    rects,
  );
}

export function mount(main, ctx, params) {
  const state = read(params);
  const { filters, newest, limit } = state;

  const field = (label, input) =>
    h("div", { class: "field" }, h("label", { for: input.id }, label), input);
  const inputs = {
    status: h(
      "select",
      { id: "wf-status", name: "status" },
      h("option", { value: "" }, "any"),
      RUN_STATUSES.map((st) => h("option", { value: st, selected: st === filters.status }, st)),
    ),
    label: h("input", {
      id: "wf-label",
      name: "label",
      value: filters.label || "",
      autocomplete: "off",
      maxlength: "200",
      title: "The run's label, exactly",
    }),
    order: h(
      "select",
      { id: "wf-order", name: "order" },
      h("option", { value: "newest", selected: newest }, "newest first"),
      h("option", { value: "oldest", selected: !newest }, "oldest first"),
    ),
    limit: h(
      "select",
      { id: "wf-limit", name: "limit" },
      SIZES.map((n) => h("option", { value: n, selected: n === limit }, `${n} a page`)),
    ),
  };
  const form = h(
    "form",
    { class: "filters panel", id: "filters", "aria-label": "Filters" },
    field("Status", inputs.status),
    field("Label", inputs.label),
    field("Order", inputs.order),
    field("Page size", inputs.limit),
    h(
      "div",
      { class: "field actions" },
      h("button", { type: "submit", class: "button primary" }, "Apply"),
      h("a", { class: "button", href: page("workflows") }, "Clear"),
    ),
  );
  const apply = () => {
    const chosen = {};
    if (inputs.status.value) chosen.status = inputs.status.value;
    if (inputs.label.value.trim()) chosen.label = inputs.label.value.trim();
    ctx.navigate(href(chosen, inputs.order.value !== "oldest", Number(inputs.limit.value)));
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    apply();
  });
  for (const name of ["status", "order", "limit"]) inputs[name].addEventListener("change", apply);

  const info = h("p", { class: "muted", id: "list-info", "aria-live": "polite" });
  const tbody = h("tbody");
  const columns = 6;
  const table = h(
    "table",
    { class: "grid workflows" },
    h("caption", { class: "sr" }, "Workflow runs"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col", class: "n" }, "ID"),
        h("th", { scope: "col" }, "Label"),
        h("th", { scope: "col" }, "Status"),
        h("th", { scope: "col" }, "Progress"),
        h("th", { scope: "col", class: "opt" }, "Steps by status"),
        h("th", { scope: "col", class: "opt" }, "Created"),
      ),
    ),
    tbody,
  );
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  append(main, [
    h("h1", { tabindex: "-1" }, "Workflows"),
    form,
    info,
    h("div", { class: "scroll" }, table),
    pager,
  ]);

  let last = "";
  async function refresh() {
    let rows;
    let hasNewer;
    let hasOlder;
    if (state.before) {
      // The page before a cursor: read towards it in the other order, then turn round.
      const got = await get("api/workflows", {
        ...filters,
        limit: limit + 1,
        after: state.before,
        newest_first: !newest,
      });
      if (!got.workflows.length)
        return ctx.navigate(href(filters, newest, limit), { replace: true });
      hasNewer = got.workflows.length > limit;
      rows = got.workflows.slice(0, limit).reverse();
      hasOlder = true;
      if (!hasNewer) {
        history.replaceState(null, "", href(filters, newest, limit));
        state.before = null;
      }
    } else {
      const got = await get("api/workflows", {
        ...filters,
        limit: limit + 1,
        after: state.after,
        newest_first: newest,
      });
      hasOlder = got.workflows.length > limit;
      rows = got.workflows.slice(0, limit);
      hasNewer = state.after !== null;
    }
    const snapshot = JSON.stringify([rows, hasNewer, hasOlder]);
    if (snapshot === last) return;
    last = snapshot;
    const what = [
      filters.status ? `${filters.status}` : null,
      filters.label ? `labelled “${filters.label}”` : null,
    ]
      .filter(Boolean)
      .join(", ");
    fill(
      info,
      rows.length
        ? `Runs ${rows[0].id} to ${rows[rows.length - 1].id}${what ? ` · ${what}` : ""} · ${newest ? "newest first" : "oldest first"}`
        : `No run on this page${what ? ` · ${what}` : ""}`,
    );
    fill(
      tbody,
      rows.length
        ? rows.map(row)
        : h(
            "tr",
            {},
            h(
              "td",
              { colspan: columns, class: "empty" },
              state.after
                ? "No more runs."
                : what
                  ? "No workflow run matches these filters."
                  : "No workflow run yet. Enqueue one with q.enqueue_workflow(…) or POST /api/workflows.",
            ),
          ),
    );
    const first = rows[0];
    const lastRow = rows[rows.length - 1];
    const button = (ok, rel, target, focus, label) =>
      ok
        ? h("a", { class: "button", rel, href: target, "data-focus": focus }, label)
        : h("span", { class: "button disabled", "aria-disabled": "true" }, label);
    fill(
      pager,
      button(
        hasNewer && first,
        "prev",
        first ? href(filters, newest, limit, { before: first.id }) : "",
        "prev",
        newest ? "← Newer" : "← Earlier",
      ),
      hasNewer
        ? h(
            "a",
            { class: "button", href: href(filters, newest, limit), "data-focus": "first" },
            newest ? "Newest" : "Oldest",
          )
        : null,
      button(
        hasOlder && lastRow,
        "next",
        lastRow ? href(filters, newest, limit, { after: lastRow.id }) : "",
        "next",
        newest ? "Older →" : "Later →",
      ),
    );
  }
  return { refresh };
}

function row(run) {
  const link = page(`workflows/${run.id}`);
  const done = run.counts.completed || 0;
  return h(
    "tr",
    { "data-workflow": String(run.id) },
    h(
      "td",
      { class: "n" },
      h("a", { href: link, "data-row-link": "", "data-focus": `wf-${run.id}` }, String(run.id)),
    ),
    h("td", { class: "label" }, h("a", { href: link, tabindex: "-1" }, run.label)),
    h("td", {}, runBadge(run.status)),
    h(
      "td",
      {},
      h(
        "span",
        { class: "mini" },
        stackedBar(run.counts, run.total),
        h("span", {}, `${count(done)}/${count(run.total)}`),
      ),
    ),
    h(
      "td",
      { class: "opt counts" },
      STEP_STATUSES.filter((st) => run.counts[st]).map((st) =>
        h("span", { class: ["chip", `status-${st}`] }, `${count(run.counts[st])} ${st}`),
      ),
    ),
    h("td", { class: "opt" }, agoNode(run.created_at)),
  );
}
