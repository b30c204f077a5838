// The console: sign-in, the page router, live updates and keyboard shortcuts. Each page
// is a module with mount(main, ctx, params, ...path parts) → {refresh(), destroy()?};
// refresh() re-reads the API and updates the page in place, every POLL_MS while live.

import { ApiError, clearToken, get, page, rootPath, setToken, token } from "./api.js";
import { h } from "./dom.js";
import { refreshAges, time } from "./format.js";
import { toast } from "./dialog.js";
import * as overview from "./overview.js";
import * as jobs from "./jobs.js";
import * as job from "./job.js";
import * as workflows from "./workflows.js";
import * as workflow from "./workflow.js";
import * as workers from "./workers.js";
import * as schedules from "./schedules.js";
import * as scheduled from "./scheduled.js";
import * as retention from "./retention.js";

const POLL_MS = 2000;
const ROUTES = [
  [/^$/, overview, "overview"],
  [/^jobs$/, jobs, "jobs"],
  [/^jobs\/([0-9]{1,19})$/, job, "jobs"],
  [/^workflows$/, workflows, "workflows"],
  [/^workflows\/([0-9]{1,19})$/, workflow, "workflows"],
  [/^scheduled$/, scheduled, "scheduled"],
  [/^workers$/, workers, "workers"],
  [/^schedules$/, schedules, "schedules"],
  [/^retention$/, retention, "retention"],
];

const $ = (id) => document.getElementById(id);
const ctx = { role: null, admin: false, auth: false, navigate, refresh: () => tick(true), toast };
let current = null; // {view, busy}
let paused = false;

function route(url) {
  const root = rootPath();
  if (!url.pathname.startsWith(root) && url.pathname + "/" !== root) return null;
  const rest = url.pathname.slice(root.length).replace(/\/+$/, "");
  for (const [pattern, module, section] of ROUTES) {
    const match = pattern.exec(rest);
    if (match) return { module, section, args: match.slice(1) };
  }
  return null;
}

function render() {
  const url = new URL(location.href);
  const found = route(url);
  const main = $("main");
  const focused =
    document.activeElement && main.contains(document.activeElement)
      ? document.activeElement.id
      : "";
  current?.view.destroy?.();
  current = null;
  main.replaceChildren();
  for (const a of document.querySelectorAll("nav a")) {
    if (found && a.dataset.section === found.section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!found) {
    document.title = "Not found · conveyor";
    main.append(
      h("h1", { tabindex: "-1" }, "No such page"),
      h("p", {}, h("a", { href: page() }, "Go to the overview")),
    );
    return;
  }
  const view = found.module.mount(main, ctx, url.searchParams, ...found.args);
  document.title = `${view.title || found.module.title} · conveyor`;
  current = { view, busy: false };
  const again = focused && document.getElementById(focused);
  if (again) again.focus({ preventScroll: true });
  tick(true);
}

function navigate(href, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  render();
  if (!replace && !$("main").contains(document.activeElement)) {
    // A new page: start at its top, with focus on its heading for keyboard users.
    window.scrollTo(0, 0);
    document.querySelector("main h1")?.focus({ preventScroll: true });
  }
}

async function tick(force = false) {
  const running = current;
  if (!running || running.busy) return;
  if (!force && (paused || document.hidden)) return;
  running.busy = true;
  try {
    await running.view.refresh();
    if (running === current) {
      refreshAges($("main"));
      showBanner(null);
      $("live-text").textContent = paused ? "Paused" : "Live";
      $("live-time").textContent = `· ${time(new Date().toISOString())}`;
    }
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      clearToken();
      signIn("Your token is no longer accepted: sign in again.");
    } else if (running === current) {
      showBanner(`Could not refresh: ${error.message}`);
    }
  } finally {
    running.busy = false;
  }
}

function showBanner(message) {
  const banner = $("banner");
  banner.hidden = !message;
  banner.textContent = message || "";
}

function setPaused(value) {
  paused = value;
  const button = $("live-toggle");
  button.setAttribute("aria-pressed", String(paused));
  button.textContent = paused ? "Resume" : "Pause";
  button.setAttribute("aria-label", paused ? "Resume live updates" : "Pause live updates");
  $("live").classList.toggle("paused", paused);
  $("live-text").textContent = paused ? "Paused" : "Live";
  if (!paused) tick(true);
}

// -- signing in --------------------------------------------------------------------

function chrome(visible) {
  for (const id of ["search", "live", "who"]) $(id).hidden = !visible;
  document.querySelector("header nav").hidden = !visible;
}

function signIn(message = "") {
  current?.view.destroy?.();
  current = null;
  chrome(false);
  document.title = "Sign in · conveyor";
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    maxlength: "4096",
  });
  const problem = h("p", { class: "error", role: "alert", id: "signin-error" }, message);
  const form = h(
    "form",
    { class: "signin panel", id: "signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title", tabindex: "-1" }, "Sign in"),
    h(
      "p",
      { class: "muted" },
      "This server asks for an access token (admin, worker or reader). The console keeps it in this browser tab only and forgets it when the tab closes.",
    ),
    h("label", { for: "token" }, "Access token"),
    input,
    problem,
    h("button", { type: "submit", class: "button primary" }, "Sign in"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (!value) return;
    setToken(value);
    try {
      signedIn(await get("api/whoami"));
    } catch (error) {
      clearToken();
      problem.textContent =
        error.status === 401 ? "That token is not valid." : `Could not sign in: ${error.message}`;
      input.select();
    }
  });
  $("main").replaceChildren(form);
  input.focus();
}

function signedIn(me) {
  ctx.role = me.role;
  ctx.admin = me.role === "admin";
  ctx.auth = Boolean(me.auth);
  const who = $("who");
  const parts = [h("span", { class: "role", title: "The role your access grants" }, me.role)];
  if (ctx.auth) {
    parts.push(
      h(
        "button",
        {
          type: "button",
          class: "button small",
          on: {
            click: () => {
              clearToken();
              signIn();
            },
          },
        },
        "Sign out",
      ),
    );
  }
  who.replaceChildren(...parts);
  chrome(true);
  render();
}

async function boot() {
  wire();
  try {
    signedIn(await get("api/whoami"));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      const hadToken = Boolean(token());
      clearToken();
      signIn(hadToken ? "Your token is no longer accepted: sign in again." : "");
    } else {
      $("main").replaceChildren(
        h("h1", { tabindex: "-1" }, "The console cannot start"),
        h("p", { class: "error" }, error.message),
      );
    }
  }
}

// -- links, search, keys ----------------------------------------------------------------

function wire() {
  document.addEventListener("click", (event) => {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const a = event.target.closest("a[href]");
    if (!a || a.target || a.hasAttribute("download")) return;
    // An SVG link's href is an object: read the attribute.
    const target = typeof a.href === "string" ? a.href : a.getAttribute("href");
    const url = new URL(target, location.href);
    if (url.origin !== location.origin || !route(url)) return;
    event.preventDefault();
    navigate(url.pathname + url.search);
  });
  window.addEventListener("popstate", () => current !== null && render());
  $("live-toggle").addEventListener("click", () => setPaused(!paused));
  document.addEventListener("visibilitychange", () => !document.hidden && tick());
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    const box = $("search-box");
    const text = box.value.trim();
    if (!text) return;
    box.value = "";
    box.blur();
    const id = text.replace(/^#/, "");
    navigate(/^[0-9]{1,19}$/.test(id) ? page(`jobs/${id}`) : page("jobs", { key: text }));
  });
  document.addEventListener("keydown", shortcut);
  setInterval(() => tick(), POLL_MS);
}

let pendingG = false;

function shortcut(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || current === null) return;
  const target = event.target;
  if (
    target.closest("input, textarea, select, [contenteditable]") ||
    document.querySelector("dialog[open]")
  )
    return;
  const key = event.key;
  if (pendingG) {
    pendingG = false;
    const to = { o: "", j: "jobs", f: "workflows", d: "scheduled", w: "workers", s: "schedules" }[
      key
    ];
    if (to !== undefined) {
      event.preventDefault();
      navigate(page(to));
    }
    return;
  }
  if (key === "g") {
    pendingG = true;
    setTimeout(() => (pendingG = false), 1500);
  } else if (key === "/") {
    event.preventDefault();
    $("search-box").focus();
  } else if (key === "p") {
    setPaused(!paused);
  } else if (key === "r") {
    tick(true);
  } else if (key === "j" || key === "k") {
    moveRow(key === "j" ? 1 : -1);
  } else if (key === "?") {
    toast(
      "Keys: / search · p pause · r refresh · j/k next/previous row · g o, g j, g f, g d, g w, g s go to a section",
    );
  }
}

/** j/k: focus the next or previous row's link in the page's main table. */
function moveRow(step) {
  const links = [...document.querySelectorAll("main table [data-row-link]")];
  if (!links.length) return;
  const at = links.indexOf(document.activeElement);
  const next =
    at < 0 ? (step > 0 ? 0 : links.length - 1) : Math.min(links.length - 1, Math.max(0, at + step));
  links[next].focus();
}

boot();
