// Workers: every registered worker, idle ones too, as each one last reported itself.

import { page, workers as registered } from "./api.js";
import { fill, h } from "./dom.js";
import { agoNode, count } from "./format.js";

export const title = "Workers";

export function mount(main) {
  const info = h("p", { class: "muted" });
  const tbody = h("tbody");
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
  main.append(
    h("h1", { tabindex: "-1" }, "Workers"),
    info,
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "grid workers" },
        h("caption", { class: "sr" }, "Registered workers"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            columns.map((c) =>
              h("th", { scope: "col", class: c === "PID" || c === "Running" ? "n" : "" }, c),
            ),
          ),
        ),
        tbody,
      ),
    ),
  );
  let last = "";

  async function refresh() {
    const workers = await registered();
    const snapshot = JSON.stringify(workers);
    if (snapshot === last) return;
    last = snapshot;
    const busy = workers.filter((w) => w.running > 0).length;
    fill(
      info,
      workers.length
        ? `${count(workers.length)} worker(s): ${count(busy)} busy, ${count(workers.length - busy)} idle. A worker leaves this list when it stops, or when it misses its heartbeats.`
        : "",
    );
    fill(
      tbody,
      workers.length
        ? workers.map((w) =>
            h(
              "tr",
              {},
              h("th", { scope: "row" }, w.name),
              h("td", {}, w.host),
              h("td", { class: "n" }, String(w.pid)),
              h(
                "td",
                { class: "queues" },
                w.queues.length
                  ? w.queues.map((q) =>
                      h("a", { href: page("jobs", { queue: q }), class: "tag" }, q),
                    )
                  : "all",
              ),
              h(
                "td",
                { class: "n" },
                h(
                  "span",
                  { class: "mini" },
                  h("progress", {
                    max: Math.max(1, w.concurrency),
                    value: w.running,
                    "aria-label": `${w.running} of ${w.concurrency} slots busy`,
                  }),
                  h("span", {}, `${count(w.running)}/${count(w.concurrency)}`),
                ),
              ),
              h(
                "td",
                {},
                h(
                  "span",
                  { class: ["badge", w.running ? "busy" : "idle"] },
                  w.running ? "busy" : "idle",
                ),
              ),
              h("td", {}, agoNode(w.started_at)),
              h("td", {}, agoNode(w.last_seen_at)),
              h("td", {}, w.version),
            ),
          )
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
  }
  return { refresh };
}
