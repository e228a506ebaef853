// The app shell: who is signed in (GET /v1/auth/me), the sign-in form when nobody is, the navigation the
// role allows, the tenant switcher, and the router that draws the page named by location.pathname.

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { errorBox, field, input, select, showErrors } from "./ui.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");

const NAV = [
  ["/ui/evaluations", "Evaluations", "read"],
  ["/ui/leaderboards", "Leaderboards", "read"],
  ["/ui/benchmarks", "Benchmarks", "read"],
  ["/ui/models", "Models", "read"],
  ["/ui/judges", "Judges", "read"],
  ["/ui/annotation", "Annotation", "annotate"],
  ["/ui/admin", "Admin", "admin"],
];

// [pattern, module, export]: pages are loaded on first use (only the page shown is fetched).
const ROUTES = [
  [/^\/ui\/?$/, null, "home"],
  [/^\/ui\/evaluations\/?$/, "./evaluations.js", "list"],
  [/^\/ui\/evaluations\/new$/, "./create.js", "create"],
  [/^\/ui\/evaluations\/([0-9a-fA-F-]{36})$/, "./evaluation.js", "detail"],
  [/^\/ui\/experiments\/([0-9a-fA-F-]{36})$/, "./evaluations.js", "experiment"],
  [/^\/ui\/batches\/([0-9a-fA-F-]{36})$/, "./evaluations.js", "batch"],
  [/^\/ui\/leaderboards\/?$/, "./leaderboards.js", "boards"],
  [/^\/ui\/leaderboards\/([^/]+)$/, "./leaderboards.js", "board"],
  [/^\/ui\/benchmarks\/?$/, "./benchmarks.js", "catalogue"],
  [/^\/ui\/benchmarks\/upload$/, "./benchmarks.js", "upload"],
  [/^\/ui\/benchmarks\/([^/]+)$/, "./benchmarks.js", "benchmark"],
  [/^\/ui\/models\/?$/, "./models.js", "models"],
  [/^\/ui\/judges\/?$/, "./judges.js", "judges"],
  [/^\/ui\/annotation\/?$/, "./annotation.js", "queue"],
  [/^\/ui\/admin\/?$/, "./admin.js", "admin"],
];

const ctx = {
  me: null,
  defaultTenant: null,
  role: null,
  canRead: false,
  canBuild: false,
  isAdmin: false,
  navigate,
  /** True when API files may be linked directly (no tenant header needed for this tenant). */
  directLinks() {
    return !api.tenant() || api.tenant() === ctx.defaultTenant;
  },
};
let cleanup = null;
let renderSeq = 0;

function allowed(need) {
  if (need === "read") return ctx.canRead;
  if (need === "admin") return ctx.isAdmin;
  if (need === "annotate") return true;
  return false;
}

function drawChrome() {
  const me = ctx.me;
  const here = location.pathname;
  replace(
    nav,
    NAV.filter(([, , need]) => allowed(need)).map(([href, label]) =>
      h("a", { href, "aria-current": here.startsWith(href) ? "page" : null }, label),
    ),
  );
  const parts = [h("span", { class: "who-name", id: "who-name" }, me.user ? me.user.username : me.name), h("span", { class: "role" }, me.role)];
  if (me.tenants.length > 1) {
    const picker = select(me.tenants.map((t) => [t.slug, `${t.name || t.slug} (${t.role})`]), { value: me.tenant.slug, id: "tenant-picker" });
    picker.addEventListener("change", async () => {
      api.setTenant(picker.value === ctx.defaultTenant ? null : picker.value);
      await boot("/ui/");
    });
    parts.push(h("label", { for: "tenant-picker", class: "sr-only" }, "Tenant"), picker);
  } else {
    parts.push(h("span", { class: "tenant", title: "tenant" }, me.tenant.slug));
  }
  if (me.kind === "user") {
    parts.push(h("button", { type: "button", class: "btn small", id: "logout", onclick: logout }, "Sign out"));
  }
  replace(who, ...parts);
}

async function logout() {
  try {
    await api.post("/v1/auth/logout");
  } catch {
    // an ended session signs out too
  }
  api.setTenant(null);
  showLogin();
}

function showLogin(message) {
  ctx.me = null;
  if (cleanup) cleanup();
  cleanup = null;
  replace(nav);
  replace(who);
  const user = input({ name: "username", autocomplete: "username", required: true, autofocus: true });
  const pass = input({ name: "password", type: "password", autocomplete: "current-password", required: true });
  const summary = h("div");
  const form = h(
    "form",
    { class: "login", id: "login-form" },
    h("h1", {}, "Sign in to uep"),
    message ? h("p", { class: "muted" }, message) : null,
    field("Username", user, { name: "username" }),
    field("Password", pass, { name: "password" }),
    summary,
    h("button", { type: "submit", class: "btn primary" }, "Sign in"),
    h("p", { class: "hint" }, "API users: the API takes Authorization: Bearer keys; the web UI uses a signed-in session."),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    showErrors(form, null, summary);
    try {
      await api.post("/v1/auth/login", { username: user.value, password: pass.value }, { noTenant: true });
      api.setTenant(null);
      await boot(location.pathname.startsWith("/ui/") ? location.pathname + location.search : "/ui/");
    } catch (err) {
      showErrors(form, err, summary);
    }
  });
  replace(main, form);
  user.focus();
}

function navigate(path, { replaceState = false } = {}) {
  if (replaceState) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  render();
}

async function render() {
  if (!ctx.me) return;
  const seq = ++renderSeq;
  if (cleanup) cleanup();
  cleanup = null;
  let path = location.pathname;
  if (!ctx.canRead && !path.startsWith("/ui/annotation")) {
    history.replaceState(null, "", "/ui/annotation");
    path = "/ui/annotation";
  }
  drawChrome();
  for (const [pattern, module, name] of ROUTES) {
    const m = path.match(pattern);
    if (!m) continue;
    if (module === null) {
      navigate(ctx.canRead ? "/ui/evaluations" : "/ui/annotation", { replaceState: true });
      return;
    }
    try {
      const page = await import(module);
      if (seq !== renderSeq) return;
      const view = h("div", { class: "view" });
      replace(main, view);
      const params = new URLSearchParams(location.search);
      const out = await page[name](ctx, view, m.slice(1).map(decodeURIComponent), params);
      if (seq !== renderSeq) {
        if (typeof out === "function") out();
        return;
      }
      cleanup = typeof out === "function" ? out : null;
    } catch (err) {
      if (seq === renderSeq) replace(main, errorBox(err));
    }
    return;
  }
  replace(main, h("h1", {}, "Not found"), h("p", {}, "There is no such page. "), h("a", { href: "/ui/" }, "Go to the start page"));
}

async function boot(target) {
  let me;
  try {
    const plain = await api.get("/v1/auth/me", undefined, { noTenant: true });
    ctx.defaultTenant = plain.tenant.slug;
    me = plain;
    const chosen = api.tenant();
    if (chosen && chosen !== plain.tenant.slug) {
      if (plain.tenants.some((t) => t.slug === chosen)) me = await api.get("/v1/auth/me");
      else api.setTenant(null);
    }
  } catch (err) {
    if (err instanceof api.ApiError && (err.status === 401 || err.status === 403)) {
      showLogin(err.status === 403 ? err.message : null);
      return;
    }
    replace(main, errorBox(err));
    return;
  }
  ctx.me = me;
  ctx.role = me.role;
  ctx.canRead = me.site_act || ["viewer", "builder", "admin"].includes(me.role);
  ctx.canBuild = me.site_act || ["builder", "admin"].includes(me.role);
  ctx.isAdmin = me.site_act || me.role === "admin";
  document.body.dataset.role = me.role;
  if (target && target !== location.pathname + location.search) history.replaceState(null, "", target);
  await render();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const href = a.getAttribute("href");
  if (!href || a.hasAttribute("download") || a.target || !href.startsWith("/ui/")) return;
  e.preventDefault();
  navigate(href);
});
window.addEventListener("popstate", render);
window.addEventListener("uep:signed-out", () => {
  if (ctx.me) showLogin("Your session has ended: sign in again.");
});

boot();
