// Retention: how long final jobs are kept, per status, queue and task; admins set and
// clear policies here. Workers prune what the policies let go, in small batches.

import { get, post, put } from "./api.js";
import { act } from "./dialog.js";
import { append, fill, h } from "./dom.js";
import { agoNode, span } from "./format.js";

export const title = "Retention";

const STATUSES = ["completed", "failed", "cancelled"];

function keepText(seconds) {
  return seconds === null ? "for ever" : span(seconds);
}

function scopeText(p) {
  const parts = [];
  if (p.queue !== null) parts.push(`queue ${p.queue}`);
  if (p.task !== null) parts.push(`task ${p.task}`);
  return parts.length ? parts.join(", ") : "every queue and task";
}

export function mount(main, ctx) {
  const tbody = h("tbody");
  const columns = ["Status", "Queue", "Task", "Kept", "Archive", "Keys", "Changed"];
  if (ctx.admin) columns.push("Actions");
  append(main, [
    h("h1", { tabindex: "-1" }, "Retention"),
    h(
      "p",
      { class: "muted" },
      "How long finished jobs are kept. A job's most specific policy wins: queue and task, " +
        "then task, then queue, then the status's default. Jobs no policy covers are kept.",
    ),
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "grid retention" },
        h("caption", { class: "sr" }, "Retention policies"),
        h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
        tbody,
      ),
    ),
    ctx.admin ? policyForm(ctx) : null,
  ]);
  let last = "";

  function row(p) {
    const cells = [
      h("th", { scope: "row", "data-col": "status" }, p.status),
      h("td", { "data-col": "queue" }, p.queue ?? "any"),
      h("td", { "data-col": "task" }, p.task ?? "any"),
      h("td", { "data-col": "keep" }, keepText(p.keep_seconds)),
      h("td", { "data-col": "archive" }, p.archive ? h("code", {}, p.archive) : "\u2013"),
      h("td", { "data-col": "keys" }, p.retire_keys ? "retired" : "\u2013"),
      h("td", { "data-col": "changed" }, p.updated_at ? agoNode(p.updated_at) : "\u2013"),
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
              "data-action": "clear",
              on: {
                click: () =>
                act(
                  ctx,
                  {
                    title: `Clear the ${p.status} policy of ${scopeText(p)}?`,
                    body: ["Its jobs then fall under the next most specific policy, if any."],
                    confirm: "Clear",
                    danger: true,
                  },
                  () =>
                    post("api/retention/clear", {
                      status: p.status,
                      queue: p.queue,
                      task: p.task,
                    }),
                  (answer) => `${answer.removed_count} policy cleared`,
                ),
              },
            },
            "Clear\u2026",
          ),
        ),
      );
    }
    return h(
      "tr",
      { "data-policy": `${p.status}/${p.queue ?? ""}/${p.task ?? ""}` },
      cells,
    );
  }

  async function refresh() {
    const { policies } = await get("api/retention");
    const snapshot = JSON.stringify(policies);
    if (snapshot === last) return;
    last = snapshot;
    fill(
      tbody,
      policies.length
        ? policies.map(row)
        : h(
            "tr",
            {},
            h(
              "td",
              { colspan: columns.length, class: "empty" },
              "No retention policy: finished jobs are kept until pruned.",
            ),
          ),
    );
  }
  return { refresh };
}

function policyForm(ctx) {
  const status = h(
    "select",
    { id: "retention-status" },
    STATUSES.map((s) => h("option", { value: s }, s)),
  );
  const queue = h("input", { id: "retention-queue", maxlength: "200", placeholder: "any" });
  const task = h("input", { id: "retention-task", maxlength: "200", placeholder: "any" });
  const days = h("input", {
    id: "retention-days",
    type: "number",
    min: "0",
    step: "any",
    value: "7",
  });
  const forever = h("input", { id: "retention-forever", type: "checkbox" });
  const archive = h("input", {
    id: "retention-archive",
    maxlength: "1000",
    placeholder: "task:NAME or file:PATH",
  });
  const retire = h("input", { id: "retention-retire", type: "checkbox" });
  forever.addEventListener("change", () => {
    days.disabled = forever.checked;
  });
  const form = h(
    "form",
    { class: "tool", id: "retention-form" },
    h("h3", {}, "Set a policy"),
    h("p", { class: "muted" }, "Replaces the policy for the same status, queue and task."),
    h("label", { for: "retention-status" }, "Status"),
    status,
    h("label", { for: "retention-queue" }, "Queue (empty: any)"),
    queue,
    h("label", { for: "retention-task" }, "Task (empty: any)"),
    task,
    h("label", { for: "retention-days" }, "Keep for (days)"),
    days,
    h("label", { class: "check" }, forever, "Keep for ever"),
    h("label", { for: "retention-archive" }, "Archive (optional)"),
    archive,
    h("label", { class: "check" }, retire, "Retire the keys of pruned jobs"),
    h("button", { type: "submit", class: "button", "data-action": "set-retention" }, "Save\u2026"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = {
      status: status.value,
      keep_seconds: forever.checked ? null : Number(days.value) * 86400,
      queue: queue.value.trim() || null,
      task: task.value.trim() || null,
      archive: archive.value.trim() || null,
      retire_keys: retire.checked,
    };
    if (body.keep_seconds !== null && !(body.keep_seconds >= 0)) {
      return ctx.toast("Keep for: a number of days, or keep for ever.", "error");
    }
    act(
      ctx,
      {
        title: `Keep ${body.status} jobs of ${scopeText(body)} ${
          body.keep_seconds === null ? "for ever" : `for ${span(body.keep_seconds)}`
        }?`,
        body: ["Workers delete the jobs it lets go at their next pass."],
        confirm: "Save",
      },
      () => put("api/retention", body),
      (answer) => `Policy saved: ${answer.status} jobs kept ${keepText(answer.keep_seconds)}`,
    );
  });
  return h(
    "section",
    { class: "panel", "aria-labelledby": "retention-set-title" },
    h("h2", { id: "retention-set-title", class: "sr" }, "Change"),
    h("div", { class: "tools" }, form),
  );
}
