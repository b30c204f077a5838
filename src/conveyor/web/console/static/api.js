// Talking to the JSON API. URLs are relative to the app's root, found from this
// module's own URL, so the console works wherever the app is mounted.

const ROOT = new URL("..", import.meta.url);
const TOKEN_KEY = "conveyor.token";
let offset = 0; // server clock minus this browser's clock, in ms

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The path of the app's root ("/" or "/queue/"). */
export function rootPath() {
  return ROOT.pathname;
}

/** The address of a console page: page("jobs", {status: "failed"}). */
export function page(path = "", params = {}) {
  const url = new URL(path, ROOT);
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, value);
  }
  return url.pathname + url.search;
}

// The token lives in this tab's session storage: other tabs, and this one once closed,
// never see it.
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** The server's clock, estimated from the Date header of its answers. */
export function now() {
  return Date.now() + offset;
}

async function request(method, path, { params = {}, body, signal } = {}) {
  const url = new URL(path, ROOT);
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, value);
  }
  const headers = { Accept: "application/json" };
  const secret = token();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  const init = { method, headers, cache: "no-store", credentials: "same-origin", signal };
  if (method !== "GET") {
    // JSON only (a cross-site form cannot send it), with {} for actions without a body.
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body ?? {});
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "unreachable", "the server cannot be reached");
  }
  const date = Date.parse(response.headers.get("Date") || "");
  if (!Number.isNaN(date)) offset = date + 500 - Date.now(); // the header has whole seconds
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    const message = typeof error.message === "string" ? error.message : `HTTP ${response.status}`;
    throw new ApiError(response.status, error.code || "http_error", message);
  }
  return data;
}

/** Every registered worker: the server lists them a page at a time (`next_after`). */
export async function workers() {
  const found = [];
  let after = null;
  do {
    const listed = await get("api/workers", { after });
    found.push(...listed.workers);
    after = listed.next_after;
  } while (after !== null && after !== undefined);
  return found;
}

export function get(path, params, options = {}) {
  return request("GET", path, { ...options, params });
}

export function post(path, body, options = {}) {
  return request("POST", path, { ...options, body });
}

export function del(path, options = {}) {
  return request("DELETE", path, options);
}

export function put(path, body, options = {}) {
  return request("PUT", path, { ...options, body });
}
