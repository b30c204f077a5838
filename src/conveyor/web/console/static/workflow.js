// One workflow run: its status and steps by status, its steps as a layered dependency
// graph (SVG: each layer runs after the one above; identical side-by-side steps drawn as
// one node; long graphs a page of layers at a time), its steps as a paged table, and
// (for admins) cancel the run or retry its failed steps.

import { ApiError, get, page, post } from "./api.js";
import { fill, h, s } from "./dom.js";
import { agoNode, count, oneLine, when } from "./format.js";
import { act } from "./dialog.js";
import { statusBadge } from "./jobs.js";
import { STEP_STATUSES, countsText, runBadge, stackedBar } from "./workflows.js";

export const title = "Workflow";

const LAYERS = 12; // layers drawn at once
const WIDE = 8; // a layer with more nodes than this draws its steps grouped by task
const STEPS_PAGE = 50;
const NODE_W = 210;
const NODE_H = 50;
const GAP_X = 18;
const GAP_Y = 52;
const PAD = 14;

function read(params) {
  const int = (name) => (/^[0-9]{1,6}$/.test(params.get(name) || "") ? Number(params.get(name)) : 0);
  const status = params.get("step_status");
  return {
    from: int("from"),
    group: /^[0-9]{1,6}$/.test(params.get("group") || "") ? Number(params.get("group")) : null,
    status: STEP_STATUSES.includes(status) ? status : null,
    page: int("page"),
  };
}

export function mount(main, ctx, params, id) {
  const state = read(params);
  const heading = h("h1", { tabindex: "-1" }, `Workflow ${id}`);
  const body = h("div", { class: "workflow" });
  main.append(
    h("p", { class: "crumbs" }, h("a", { href: page("workflows") }, "Workflows"), " / ", id),
    heading,
    body,
  );
  const here = (extra) =>
    page(`workflows/${id}`, {
      from: state.from || null,
      group: state.group,
      step_status: state.status,
      page: state.page || null,
      ...extra,
    });
  let gone = false;
  let last = "";
  let scrolled = false;

  async function refresh() {
    if (gone) return;
    let run;
    try {
      run = await get(`api/workflows/${id}`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        gone = true;
        fill(body, h("p", { class: "empty" }, `Workflow ${id} does not exist.`));
        return;
      }
      throw error;
    }
    const snapshot = JSON.stringify([
      run.label,
      run.status,
      run.counts,
      run.jobs.map((j) => [j.id, j.status, j.attempts, j.max_attempts, j.error, j.depends_on]),
    ]);
    if (snapshot === last) return;
    last = snapshot;
    const graph = layout(run.jobs);
    fill(heading, `Workflow ${run.id} `, runBadge(run.status));
    fill(
      body,
      h(
        "p",
        { class: "lede" },
        h("strong", { class: "wf-label" }, run.label),
        " · created ",
        h("span", { title: when(run.created_at) }, agoNode(run.created_at)),
      ),
      ctx.admin ? actions(ctx, run) : null,
      h(
        "section",
        { class: "panel", "aria-labelledby": "wf-steps-summary" },
        h("h2", { id: "wf-steps-summary" }, "Progress"),
        stackedBar(run.counts, run.total, "stack wide"),
        h("p", { class: "progress-text", id: "wf-counts" }, countsText(run.counts, run.total)),
      ),
      drawing(graph, state, here, run),
      steps(run, graph, state, here),
    );
    if (state.group !== null && !scrolled) {
      scrolled = true;
      document.getElementById("wf-steps-title")?.scrollIntoView({ block: "start" });
    }
  }
  return { refresh, title: `Workflow ${id}` };
}

function actions(ctx, run) {
  const buttons = [];
  if (run.status === "running") {
    buttons.push(
      h(
        "button",
        {
          type: "button",
          class: ["button", "danger"],
          "data-action": "cancel-workflow",
          "data-focus": "cancel-workflow",
          on: {
            click: () =>
              act(
                ctx,
                {
                  title: `Cancel workflow ${run.id}?`,
                  body: [
                    `Every step not yet final (${count((run.counts.pending || 0) + (run.counts.running || 0))}) is cancelled; a running step's later reports are refused. Completed steps stay completed.`,
                  ],
                  confirm: "Cancel workflow",
                  danger: true,
                },
                () => post(`api/workflows/${run.id}/cancel`),
                () => `Workflow ${run.id} was cancelled`,
              ),
          },
        },
        "Cancel workflow",
      ),
    );
  }
  if (run.counts.failed) {
    buttons.push(
      h(
        "button",
        {
          type: "button",
          class: "button",
          "data-action": "retry-workflow",
          "data-focus": "retry-workflow",
          on: {
            click: () =>
              act(
                ctx,
                {
                  title: `Retry the failed steps of workflow ${run.id}?`,
                  body: [
                    `The ${count(run.counts.failed)} failed step(s), the steps cancelled because of them and the steps after them that already ended go back to pending with fresh attempts. Completed steps are left alone.`,
                  ],
                  confirm: "Retry failed steps",
                },
                () => post(`api/workflows/${run.id}/retry`),
                () => `Workflow ${run.id}: its failed steps are pending again`,
              ),
          },
        },
        "Retry failed steps",
      ),
    );
  }
  return buttons.length ? h("div", { class: "actions" }, buttons) : null;
}

// -- the graph -----------------------------------------------------------------------------

/** Layers (each step one below its lowest-placed parent) and nodes: steps of a layer with
 * the same task, the same parents and the same children are one node; a layer still
 * wider than WIDE has its steps grouped by task. Steps come in id order, and a step
 * only runs after steps enqueued before it. */
export function layout(jobs) {
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const parents = new Map();
  const children = new Map(jobs.map((j) => [j.id, []]));
  for (const j of jobs) {
    const ps = (j.depends_on || []).filter((p) => byId.has(p));
    parents.set(j.id, ps);
    for (const p of ps) children.get(p).push(j.id);
  }
  const layerOf = new Map();
  const ordered = [...jobs].sort((a, b) => a.id - b.id);
  for (const j of ordered) {
    let layer = 0;
    for (const p of parents.get(j.id)) layer = Math.max(layer, (layerOf.get(p) ?? -1) + 1);
    layerOf.set(j.id, layer);
  }
  const layers = [];
  for (const j of ordered) {
    const l = layerOf.get(j.id);
    while (layers.length <= l) layers.push([]);
    layers[l].push(j);
  }
  const nodes = [];
  const nodeOf = new Map();
  const sig = (ids) => [...ids].sort((a, b) => a - b).join(",");
  layers.forEach((members, l) => {
    let groups = bucket(members, (j) => `${j.task}|${sig(parents.get(j.id))}|${sig(children.get(j.id))}`);
    if (groups.length > WIDE) groups = bucket(members, (j) => j.task);
    const row = groups.map((steps) => {
      const node = { index: nodes.length, layer: l, steps, name: nodeName(steps) };
      node.counts = {};
      for (const st of steps) node.counts[st.status] = (node.counts[st.status] || 0) + 1;
      node.status = ["failed", "running", "pending", "cancelled"].find((st) => node.counts[st]) || "completed";
      nodes.push(node);
      for (const st of steps) nodeOf.set(st.id, node);
      return node;
    });
    layers[l] = row;
  });
  const edges = new Map();
  for (const j of ordered) {
    for (const p of parents.get(j.id)) {
      const a = nodeOf.get(p);
      const b = nodeOf.get(j.id);
      edges.set(`${a.index}>${b.index}`, [a, b]);
    }
  }
  return { layers, nodes, edges: [...edges.values()], parents, byId, nodeOf };
}

function bucket(items, key) {
  const found = new Map();
  for (const item of items) {
    const k = key(item);
    if (!found.has(k)) found.set(k, []);
    found.get(k).push(item);
  }
  return [...found.values()];
}

function nodeName(steps) {
  if (steps.length === 1) return steps[0].step || `#${steps[0].id}`;
  const bases = new Set(steps.map((st) => String(st.step || "").replace(/-[0-9]+$/, "")));
  const base = bases.size === 1 ? [...bases][0] : steps[0].task.split(".").pop();
  return `${base} ×${count(steps.length)}`;
}

function clip(text, max) {
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

function drawing(graph, state, here, run) {
  const total = graph.layers.length;
  const from = Math.min(state.from, Math.max(0, total - 1));
  const shown = graph.layers.slice(from, from + LAYERS);
  const widest = Math.max(1, ...shown.map((row) => row.length));
  const width = Math.max(2 * PAD + widest * (NODE_W + GAP_X) - GAP_X, 320);
  const height = 2 * PAD + shown.length * (NODE_H + GAP_Y) - GAP_Y;
  const at = new Map(); // node index -> [x, y]
  shown.forEach((row, r) => {
    const rowWidth = row.length * (NODE_W + GAP_X) - GAP_X;
    const x0 = (width - rowWidth) / 2;
    row.forEach((node, i) => at.set(node.index, [x0 + i * (NODE_W + GAP_X), PAD + r * (NODE_H + GAP_Y)]));
  });
  const paths = [];
  for (const [a, b] of graph.edges) {
    const pa = at.get(a.index);
    const pb = at.get(b.index);
    if (!pa && !pb) continue;
    let x1, y1, x2, y2, cls = "edge";
    if (pa && pb) {
      [x1, y1] = [pa[0] + NODE_W / 2, pa[1] + NODE_H];
      [x2, y2] = [pb[0] + NODE_W / 2, pb[1]];
    } else if (pb) {
      // From a layer above the ones drawn.
      [x2, y2] = [pb[0] + NODE_W / 2, pb[1]];
      [x1, y1] = [x2, Math.max(0, y2 - GAP_Y / 2)];
      cls = "edge out";
    } else {
      [x1, y1] = [pa[0] + NODE_W / 2, pa[1] + NODE_H];
      [x2, y2] = [x1, y1 + GAP_Y / 2];
      cls = "edge out";
    }
    const mid = (y1 + y2) / 2;
    paths.push(
      s("path", {
        class: [cls, `from-${a.status}`],
        d: `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}`,
        "marker-end": "url(#wf-arrow)",
      }),
    );
  }
  const boxes = shown.flat().map((node) => {
    const [x, y] = at.get(node.index);
    const single = node.steps.length === 1 ? node.steps[0] : null;
    const sub = single
      ? `${single.status} · job ${single.id}`
      : [
          `${count(node.counts.completed || 0)}/${count(node.steps.length)} done`,
          node.counts.failed ? `${count(node.counts.failed)} failed` : null,
          node.counts.running ? `${count(node.counts.running)} running` : null,
        ]
          .filter(Boolean)
          .join(" · ");
    const label = single
      ? `Step ${single.step}, job ${single.id}: ${single.status}`
      : `${node.name}: ${countsText(node.counts, node.steps.length)}. Show these steps`;
    return s(
      "a",
      {
        href: single ? page(`jobs/${single.id}`) : here({ group: node.index, page: null }),
        class: ["node", `status-${node.status}`, state.group === node.index ? "chosen" : ""],
        "aria-label": label,
        "data-node": node.name,
      },
      s("title", {}, label),
      s("rect", { class: "box", x, y, width: NODE_W, height: NODE_H, rx: 7 }),
      s("text", { class: "name", x: x + 10, y: y + 20 }, clip(node.name, 25)),
      s("text", { class: "sub", x: x + 10, y: y + 38 }, clip(sub, 31)),
      single
        ? null
        : (() => {
            const bar = stackedBar(node.counts, node.steps.length, "node-bar");
            for (const [k, v] of Object.entries({ x: x + 1, y: y + NODE_H - 6, width: NODE_W - 2, height: 5 }))
              bar.setAttribute(k, String(v));
            bar.removeAttribute("role");
            return bar;
          })(),
    );
  });
  const pager =
    total > LAYERS
      ? h(
          "nav",
          { class: "pager", "aria-label": "Layers" },
          h("span", { class: "muted" }, `Layers ${from + 1} to ${Math.min(total, from + LAYERS)} of ${count(total)}`),
          from > 0
            ? h("a", { class: "button", href: here({ from: Math.max(0, from - LAYERS) || null }), "data-focus": "layers-up" }, "↑ Earlier layers")
            : h("span", { class: "button disabled", "aria-disabled": "true" }, "↑ Earlier layers"),
          from + LAYERS < total
            ? h("a", { class: "button", href: here({ from: from + LAYERS }), "data-focus": "layers-down" }, "Later layers ↓")
            : h("span", { class: "button disabled", "aria-disabled": "true" }, "Later layers ↓"),
        )
      : null;
  return h(
    "section",
    { class: "panel", "aria-labelledby": "wf-graph-title" },
    h("h2", { id: "wf-graph-title" }, "Steps and what they run after"),
    h(
      "p",
      { class: "muted small" },
      `${count(run.total)} steps in ${count(total)} layer(s); each layer runs after the one above. Side-by-side steps alike are one node: select it to list them.`,
    ),
    pager,
    h(
      "div",
      { class: "scroll dag-box" },
      s(
        "svg",
        {
          class: "dag",
          width,
          height,
          viewBox: `0 0 ${width} ${height}`,
          "aria-label": "Dependency graph of the steps",
        },
        s(
          "defs",
          {},
          s(
            "marker",
            { id: "wf-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
            s("path", { class: "arrow", d: "M0,0 L10,5 L0,10 z" }),
          ),
        ),
        paths,
        boxes,
      ),
    ),
  );
}

// -- the steps, as a table ---------------------------------------------------------------------

function steps(run, graph, state, here) {
  const node = state.group !== null ? graph.nodes[state.group] : null;
  let chosen = node ? node.steps : [...graph.byId.values()].sort((a, b) => a.id - b.id);
  if (state.status) chosen = chosen.filter((j) => j.status === state.status);
  const pages = Math.max(1, Math.ceil(chosen.length / STEPS_PAGE));
  const at = Math.min(state.page, pages - 1);
  const rows = chosen.slice(at * STEPS_PAGE, (at + 1) * STEPS_PAGE);
  const nameOf = (jid) => graph.byId.get(jid)?.step || `#${jid}`;
  const after = (j) => {
    const ps = graph.parents.get(j.id) || [];
    if (!ps.length) return "–";
    const names = ps.slice(0, 3).map(nameOf).join(", ");
    return ps.length > 3 ? `${names} and ${count(ps.length - 3)} more` : names;
  };
  const tabs = h(
    "div",
    { class: "tabs", role: "group", "aria-label": "Steps by status" },
    h("a", { href: here({ step_status: null, page: null }), "aria-current": state.status ? null : "page" }, "all"),
    STEP_STATUSES.filter((st) => run.counts[st]).map((st) =>
      h(
        "a",
        { href: here({ step_status: st, page: null }), "aria-current": state.status === st ? "page" : null },
        `${st} (${count(node ? node.counts[st] || 0 : run.counts[st])})`,
      ),
    ),
    node ? h("a", { class: "button small", href: here({ group: null, page: null }) }, `Every step, not only ${node.name}`) : null,
  );
  const pager =
    pages > 1
      ? h(
          "nav",
          { class: "pager", "aria-label": "Pages of steps" },
          h("span", { class: "muted" }, `Page ${at + 1} of ${count(pages)}`),
          at > 0
            ? h("a", { class: "button", rel: "prev", href: here({ page: at - 1 || null }), "data-focus": "steps-prev" }, "← Previous")
            : h("span", { class: "button disabled", "aria-disabled": "true" }, "← Previous"),
          at + 1 < pages
            ? h("a", { class: "button", rel: "next", href: here({ page: at + 1 }), "data-focus": "steps-next" }, "Next →")
            : h("span", { class: "button disabled", "aria-disabled": "true" }, "Next →"),
        )
      : null;
  return h(
    "section",
    { class: "panel", "aria-labelledby": "wf-steps-title" },
    h("h2", { id: "wf-steps-title" }, node ? `Steps of ${node.name}` : "Steps"),
    tabs,
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "grid steps" },
        h("caption", { class: "sr" }, "The run's steps"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Step", "Job", "Task", "Status", "Attempts", "Runs after", "Error"].map((c) =>
              h("th", { scope: "col" }, c),
            ),
          ),
        ),
        h(
          "tbody",
          {},
          rows.length
            ? rows.map((j) =>
                h(
                  "tr",
                  { "data-step": j.step || "" },
                  h("th", { scope: "row" }, h("a", { href: page(`jobs/${j.id}`), "data-row-link": "", "data-focus": `step-${j.id}` }, j.step || `#${j.id}`)),
                  h("td", { class: "n" }, String(j.id)),
                  h("td", { class: "task" }, j.task),
                  h("td", {}, statusBadge(j)),
                  h("td", { class: "n" }, `${j.attempts}/${j.max_attempts}`),
                  h("td", {}, after(j)),
                  h("td", { class: "error-col", title: oneLine(j.error) || null }, oneLine(j.error)),
                ),
              )
            : h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No step here.")),
        ),
      ),
    ),
    pager,
  );
}
