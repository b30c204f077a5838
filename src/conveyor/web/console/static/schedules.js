// Schedules: every periodic schedule, with the last slot enqueued and the next one due.

import { get, page } from "./api.js";
import { fill, h } from "./dom.js";
import { agoNode } from "./format.js";

export const title = "Schedules";

export function mount(main) {
  const tbody = h("tbody");
  const columns = ["Schedule", "Task", "Queue", "Every", "Last slot", "Next slot"];
  main.append(
    h("h1", { tabindex: "-1" }, "Schedules"),
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "grid schedules" },
        h("caption", { class: "sr" }, "Periodic schedules"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            columns.map((c) => h("th", { scope: "col" }, c)),
          ),
        ),
        tbody,
      ),
    ),
  );
  let last = "";

  async function refresh() {
    const { schedules } = await get("api/schedules");
    const snapshot = JSON.stringify(schedules);
    if (snapshot === last) return;
    last = snapshot;
    fill(
      tbody,
      schedules.length
        ? schedules.map((s) =>
            h(
              "tr",
              {},
              h("th", { scope: "row" }, s.name),
              h("td", {}, h("a", { href: page("jobs", { queue: s.queue, task: s.task }) }, s.task)),
              h("td", {}, s.queue),
              h("td", {}, h("code", {}, s.spec)),
              h("td", {}, s.last_run ? agoNode(s.last_run) : "never"),
              h("td", {}, agoNode(s.next_slot)),
            ),
          )
        : h(
            "tr",
            {},
            h(
              "td",
              { colspan: columns.length, class: "empty" },
              "No periodic schedule. Declare one with @app.periodic; workers keep it here.",
            ),
          ),
    );
  }
  return { refresh };
}
