// The one way the UI talks to the platform: the public /v1 API on this origin. The session cookie travels by
// itself (same origin); writes echo the uep_csrf cookie in X-CSRF-Token; the tenant picked in the header
// switcher is sent as X-UEP-Tenant. Errors come back as ApiError with the API's detail list
// ({loc, msg, type}), so forms can show each message next to the field it names.

const TENANT_KEY = "uep.tenant";

export class ApiError extends Error {
  constructor(status, detail, path) {
    const list = Array.isArray(detail) ? detail : [{ loc: [], msg: String(detail || `HTTP ${status}`), type: "http" }];
    super(list.map((d) => d.msg).join("; "));
    this.status = status;
    this.detail = list;
    this.path = path;
  }
}

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return decodeURIComponent(v.join("="));
  }
  return "";
}

/** The tenant slug chosen in the switcher (null: the user's default tenant). */
export function tenant() {
  return sessionStorage.getItem(TENANT_KEY) || localStorage.getItem(TENANT_KEY);
}

export function setTenant(slug) {
  if (slug) {
    localStorage.setItem(TENANT_KEY, slug);
    sessionStorage.setItem(TENANT_KEY, slug);
  } else {
    localStorage.removeItem(TENANT_KEY);
    sessionStorage.removeItem(TENANT_KEY);
  }
}

/** path + "?" + query (null, undefined and "" left out; arrays repeated). */
export function withQuery(path, query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v === null || v === undefined || v === "") continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, String(one));
  }
  const text = q.toString();
  return text ? `${path}${path.includes("?") ? "&" : "?"}${text}` : path;
}

function headersFor(method, extra, useTenant = true) {
  const headers = { Accept: "application/json", ...(extra || {}) };
  const t = tenant();
  if (t && useTenant) headers["X-UEP-Tenant"] = t;
  if (method !== "GET" && method !== "HEAD") headers["X-CSRF-Token"] = cookie("uep_csrf");
  return headers;
}

/** Call the API. options: query, json (body), form (FormData), headers, raw (return the Response),
 *  noTenant (do not send X-UEP-Tenant). Resolves to the parsed JSON (null for 204); rejects with ApiError. */
export async function call(method, path, options = {}) {
  const headers = headersFor(method, options.headers, !options.noTenant);
  let body;
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.json);
  } else if (options.form) {
    body = options.form;
  }
  const url = withQuery(path, options.query);
  const res = await fetch(url, { method, headers, body, credentials: "same-origin" });
  if (!res.ok) {
    let detail = null;
    try {
      detail = (await res.json()).detail;
    } catch {
      detail = `${res.status} ${res.statusText}`;
    }
    if (res.status === 401 && !path.startsWith("/v1/auth/")) window.dispatchEvent(new CustomEvent("uep:signed-out"));
    throw new ApiError(res.status, detail, path);
  }
  if (options.raw) return res;
  if (res.status === 204) return null;
  const type = res.headers.get("content-type") || "";
  return type.includes("json") ? res.json() : res.text();
}

export const get = (path, query, options = {}) => call("GET", path, { ...options, query });
export const post = (path, json, options = {}) => call("POST", path, { ...options, json });
export const put = (path, json) => call("PUT", path, { json });
export const patch = (path, json) => call("PATCH", path, { json });
export const del = (path) => call("DELETE", path);

/** A blob: URL of a GET answer (fetched with the tenant header; for <img>, <iframe> and downloads). */
export async function blobUrl(path, query) {
  const res = await call("GET", path, { query, raw: true, headers: { Accept: "*/*" } });
  return URL.createObjectURL(await res.blob());
}

/** Save a Blob (or a blob: URL) as a file named filename. */
export function saveBlob(blobOrUrl, filename) {
  const url = typeof blobOrUrl === "string" ? blobOrUrl : URL.createObjectURL(blobOrUrl);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** Every item of a cursor-paginated list (``{items, next_cursor}``), page by page, at most maxPages pages. */
export async function* pages(path, query = {}, maxPages = 1000) {
  let cursor = null;
  for (let i = 0; i < maxPages; i += 1) {
    const page = await get(path, { ...query, cursor });
    yield page.items;
    cursor = page.next_cursor;
    if (!cursor) return;
  }
}

/** "loc: msg" lines of an error (any error: ApiError or not). */
export function errorLines(err) {
  if (err instanceof ApiError) {
    return err.detail.map((d) => {
      const loc = (d.loc || []).filter((x) => x !== "body" && x !== "query" && x !== "path").join(" · ");
      return loc ? `${loc}: ${d.msg}` : d.msg;
    });
  }
  return [String(err && err.message ? err.message : err)];
}
