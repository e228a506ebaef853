// Administration of the tenant (admin role): members and roles (/v1/members), invitations (/v1/invitations:
// the invited user accepts them; the answer is the same whether the name exists), API keys (a new key is shown
// once; revoke), caps (/v1/caps, the tenant's daily cap), spend by tenant/day/role/evaluation with a bar
// chart (GET /v1/spend?group_by=…) and the audit log (GET /v1/audit, cursor pages).

import * as api from "./api.js";
import { barChart } from "./charts.js";
import { h, replace } from "./dom.js";
import { confirmDialog, errorBox, field, input, money, num, pageHeader, section, select, showErrors, table, toast, when } from "./ui.js";

const ROLES = ["admin", "builder", "viewer", "annotator"];

async function members(ctx, pane) {
  const [list, pending] = await Promise.all([api.get("/v1/members"), api.get("/v1/invitations")]);
  const username = input({ required: true, autocomplete: "off" });
  const role = select(ROLES, { value: "viewer" });
  const summary = h("div");
  const form = h("form", { class: "filters", id: "member-form" }, field("Username", username, { name: "username" }), field("Role", role, { name: "role" }),
    h("button", { type: "submit", class: "btn primary" }, "Invite"), summary);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api.post("/v1/invitations", { username: username.value.trim(), role: role.value });
      toast(`invitation sent to ${username.value}: they join once they accept it`);
      await members(ctx, pane);
    } catch (err) {
      showErrors(form, err, summary);
    }
  });
  const invitations = table([
    { label: "Invited", cell: (i) => h("strong", {}, i.username) },
    { label: "Role", cell: (i) => i.role },
    { label: "By", cell: (i) => i.invited_by },
    { label: "Expires", cell: (i) => when(i.expires_at) },
    { label: "", cell: (i) => h("button", { type: "button", class: "btn small", onclick: async () => {
      try {
        await api.del(`/v1/invitations/${i.id}`);
      } catch (err) {
        toast(api.errorLines(err).join("; "), "error");
      }
      await members(ctx, pane);
    } }, "Withdraw") },
  ], pending);
  const roleCell = (m) => {
    const sel = select(ROLES, { value: m.role, "aria-label": `role of ${m.username}` });
    sel.addEventListener("change", async () => {
      if (!(await confirmDialog("Change role?", `${m.username} becomes ${sel.value}.`, "Change"))) {
        sel.value = m.role;
        return;
      }
      try {
        await api.patch(`/v1/members/${m.user_id}`, { role: sel.value });
        toast(`${m.username} is now ${sel.value}`);
      } catch (err) {
        toast(api.errorLines(err).join("; "), "error");
      }
      await members(ctx, pane);
    });
    return sel;
  };
  replace(pane,
    table([
      { label: "User", cell: (m) => [h("strong", {}, m.username), m.display_name && m.display_name !== m.username ? h("div", { class: "muted" }, m.display_name) : null] },
      { label: "Role", cell: roleCell },
      { label: "Member since", cell: (m) => when(m.created_at) },
      { label: "", cell: (m) => h("button", { type: "button", class: "btn small", onclick: async () => {
        if (!(await confirmDialog("Remove member?", `${m.username} loses access to this tenant.`, "Remove"))) return;
        try {
          await api.del(`/v1/members/${m.user_id}`);
        } catch (err) {
          toast(api.errorLines(err).join("; "), "error");
        }
        await members(ctx, pane);
      } }, "Remove") },
    ], list),
    h("h3", {}, "Invite a member"),
    form,
    h("h3", {}, "Pending invitations"),
    pending.length ? invitations : h("p", { class: "muted" }, "None."),
  );
}

async function keys(ctx, pane) {
  const list = await api.get("/v1/api-keys");
  const name = input({ placeholder: "ci" });
  const role = select(ROLES, { value: "builder" });
  const days = input({ type: "number", min: 1, max: 3650, placeholder: "never" });
  const summary = h("div");
  const shown = h("div", { id: "new-key", "aria-live": "polite" });
  const form = h("form", { class: "filters", id: "key-form" }, field("Name", name, { name: "name" }), field("Role", role, { name: "role" }),
    field("Expires in days", days, { name: "expires_in_days" }), h("button", { type: "submit", class: "btn primary" }, "Create key"), summary);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const made = await api.post("/v1/api-keys", { name: name.value, role: role.value, ...(days.value ? { expires_in_days: Number(days.value) } : {}) });
      await keys(ctx, pane);
      const box = pane.querySelector("#new-key");
      replace(box, h("div", { class: "ok-box" },
        h("p", {}, h("strong", {}, "Copy this key now: it is shown only once."), " Only its SHA-256 digest is stored."),
        h("code", { class: "secret", id: "new-key-value" }, made.key), " ",
        h("button", { type: "button", class: "btn small", onclick: () => navigator.clipboard && navigator.clipboard.writeText(made.key).then(() => toast("copied")) }, "Copy")));
    } catch (err) {
      showErrors(form, err, summary);
    }
  });
  replace(pane,
    shown,
    table([
      { label: "Prefix", cell: (k) => h("span", { class: "mono" }, k.prefix) },
      { label: "Name", cell: (k) => k.name || "—" },
      { label: "Role", cell: (k) => `${k.role}${k.site_admin ? " (site admin)" : ""}` },
      { label: "Created", class: "hide-narrow", cell: (k) => `${when(k.created_at)} by ${k.created_by}` },
      { label: "Expires", cell: (k) => when(k.expires_at) },
      { label: "Last used", class: "hide-narrow", cell: (k) => when(k.last_used_at) },
      { label: "", cell: (k) => (k.revoked_at ? `revoked ${when(k.revoked_at)}` : h("button", { type: "button", class: "btn small", onclick: async () => {
        if (!(await confirmDialog("Revoke this key?", `Key ${k.prefix}… stops working at once.`, "Revoke"))) return;
        try {
          await api.del(`/v1/api-keys/${k.id}`);
        } catch (err) {
          toast(api.errorLines(err).join("; "), "error");
        }
        await keys(ctx, pane);
      } }, "Revoke")) },
    ], list, { empty: "No API key." }),
    h("h3", {}, "Create a key"),
    form,
  );
}

async function caps(ctx, pane) {
  const c = await api.get("/v1/caps");
  const cur = c.currency;
  const amount = input({ type: "number", min: 0, step: "any", value: c.tenant.day ?? "" });
  const summary = h("div");
  const form = h("form", { class: "filters", id: "cap-form" }, field(`Daily cap, ${cur} (empty: none)`, amount, { name: "amount" }),
    h("button", { type: "submit", class: "btn primary" }, "Save"), summary);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = amount.value.trim() === "" ? null : amount.value.trim();
    if (!(await confirmDialog("Change the daily cap?", value === null ? "The tenant will have no daily cap." : `New daily cap: ${value} ${cur}.`, "Save"))) return;
    try {
      await api.put("/v1/caps/tenant/day", { amount: value });
      toast("cap saved");
      await caps(ctx, pane);
    } catch (err) {
      showErrors(form, err, summary);
    }
  });
  replace(pane,
    h("div", { class: "stats" },
      h("div", { class: "stat" }, h("span", { class: "k" }, "Site cap per evaluation"), h("span", { class: "v" }, c.site.evaluation === null ? "none" : money(c.site.evaluation, cur))),
      h("div", { class: "stat" }, h("span", { class: "k" }, `Daily cap (${c.tenant.day_utc} UTC)`), h("span", { class: "v" }, c.tenant.day === null ? "none" : money(c.tenant.day, cur))),
      h("div", { class: "stat" }, h("span", { class: "k" }, "Used today"), h("span", { class: "v" }, money(c.tenant.used_today, cur))),
      h("div", { class: "stat" }, h("span", { class: "k" }, "Left today"), h("span", { class: "v" }, c.tenant.left_today === null ? "—" : money(c.tenant.left_today, cur))),
    ),
    form,
    table([{ label: "Benchmark", cell: (r) => r.benchmark }, { label: "Cap", class: "num", cell: (r) => money(r.amount, cur) }, { label: "Set by", cell: (r) => r.updated_by }], c.benchmarks, { caption: "Benchmark caps", empty: "No benchmark cap." }),
    table([{ label: "Evaluation", cell: (r) => h("a", { href: `/ui/evaluations/${r.evaluation_id}`, class: "mono" }, r.evaluation_id.slice(0, 8)) }, { label: "Cap", class: "num", cell: (r) => money(r.amount, cur) }, { label: "Set by", cell: (r) => r.updated_by }], c.evaluations, { caption: "Evaluation caps", empty: "No evaluation cap." }),
  );
}

async function spend(ctx, pane, groupBy = "day") {
  const by = select([["day", "day"], ["tenant", "tenant"], ["role", "role (inference / judge)"], ["evaluation", "evaluation"]], { value: groupBy, id: "spend-group" });
  const out = h("div", { id: "spend-out" });
  by.addEventListener("change", () => spend(ctx, pane, by.value));
  replace(pane, h("form", { class: "filters" }, field("Group by", by, { name: "group_by" })), out);
  const data = await api.get("/v1/spend", { group_by: groupBy });
  const cur = data.currency;
  replace(out,
    barChart(data.rows.map((r) => ({ label: groupBy === "evaluation" ? String(r[groupBy]).slice(0, 8) : r[groupBy], value: r.spent })),
      { title: `Spend by ${groupBy} (${cur})`, format: (v) => money(v, cur) }),
    table([
      { label: groupBy, cell: (r) => String(r[groupBy]) },
      { label: "Spent", class: "num", cell: (r) => money(r.spent, cur) },
      { label: "Settled", class: "num", cell: (r) => money(r.settled, cur) },
      { label: "Open reservations", class: "num", cell: (r) => money(r.open_reserved, cur) },
      { label: "Items settled", class: "num", cell: (r) => num(r.items_settled) },
      { label: "Calls", class: "num", cell: (r) => num(r.calls) },
    ], data.rows, { empty: "Nothing spent yet." }),
    h("p", { class: "muted" }, `Total spent: ${money(data.totals.spent, cur)} (settled ${money(data.totals.settled, cur)}).`),
  );
}

async function audit(ctx, pane) {
  const outcome = select([["", "every outcome"], "success", "denied", "refused", "rate_limited", "error"]);
  const action = input({ placeholder: "e.g. createEvaluation" });
  const out = h("div", { id: "audit-out" });
  const more = h("div");
  const rows = [];
  const load = async (cursor) => {
    const page = await api.get("/v1/audit", { outcome: outcome.value, action: action.value.trim(), cursor, limit: 50 });
    rows.push(...page.items);
    replace(out, table([
      { label: "When", cell: (r) => when(r.occurred_at) },
      { label: "Who", cell: (r) => `${r.principal}${r.role ? ` (${r.role})` : ""}` },
      { label: "Action", cell: (r) => r.action },
      { label: "Path", class: "hide-narrow", cell: (r) => h("span", { class: "mono" }, `${r.method} ${r.path}`) },
      { label: "Status", class: "num", cell: (r) => `${r.status_code} ${r.outcome}` },
      { label: "Client", class: "hide-narrow", cell: (r) => r.client },
    ], rows, { empty: "No audit entry." }));
    replace(more, page.next_cursor ? h("button", { type: "button", class: "btn", onclick: () => load(page.next_cursor) }, "Older entries") : null);
  };
  const form = h("form", { class: "filters" }, field("Outcome", outcome, { name: "outcome" }), field("Action", action, { name: "action" }),
    h("button", { type: "submit", class: "btn" }, "Filter"));
  form.addEventListener("submit", (e) => { e.preventDefault(); rows.length = 0; load(null); });
  replace(pane, form, out, more);
  await load(null);
}

const SECTIONS = [["members", "Members and roles", members], ["keys", "API keys", keys], ["caps", "Caps", caps], ["spend", "Spend", spend], ["audit", "Audit log", audit]];

export async function admin(ctx, view) {
  if (!ctx.isAdmin) {
    replace(view, pageHeader("Admin"), h("p", { class: "note" }, `Administration needs the admin role; yours is ${ctx.role}.`));
    return;
  }
  replace(view, pageHeader(`Admin · tenant ${ctx.me.tenant.slug}`));
  for (const [id, title, fn] of SECTIONS) {
    const pane = h("div", { id: `admin-${id}` }, h("p", { class: "muted" }, "Loading…"));
    view.appendChild(section(title, pane));
    fn(ctx, pane).catch((err) => replace(pane, errorBox(err)));
  }
}
