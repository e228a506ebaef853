// Evaluations: the list (filters in the URL, keyset pagination with next_cursor) and the views of an A/B
// experiment or a batch that pair each arm with the first (GET /v1/experiments/{id}, /v1/batches/{id}).

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import {
  PRIORITIES, STATUSES, TERMINAL, badge, errorBox, field, headlineNote, headlineText, input, num, pageHeader, pct, pctCi, progressBar, section,
  select, shortId, table, when,
} from "./ui.js";

const FILTERS = ["status", "benchmark", "model", "priority", "batch_id", "experiment_id", "created_after", "created_before", "q"];

function groupLink(ev) {
  if (ev.experiment_id) return h("a", { href: `/ui/experiments/${ev.experiment_id}`, title: "A/B experiment" }, `A/B ${shortId(ev.experiment_id)}`);
  if (ev.batch_id) return h("a", { href: `/ui/batches/${ev.batch_id}`, title: "batch" }, `batch ${shortId(ev.batch_id)}`);
  return "—";
}

function accuracyOf(ev) {
  const p = ev.progress || {};
  if (ev.headline && ev.headline.value !== null && ev.headline.value !== undefined) return headlineText(ev.headline);
  if (ev.accuracy !== null && ev.accuracy !== undefined) return pctCi(ev.accuracy, ev.ci_low, ev.ci_high);
  if (p.accuracy !== null && p.accuracy !== undefined) return pctCi(p.accuracy, p.ci_low, p.ci_high);
  return "—";
}

const COLUMNS = [
  { label: "Evaluation", cell: (e) => h("a", { href: `/ui/evaluations/${e.id}`, class: "mono" }, shortId(e.id)) },
  { label: "Benchmark", cell: (e) => e.benchmark.slug || shortId(e.benchmark.id) },
  { label: "Model", cell: (e) => [e.model.name || shortId(e.model.id), e.arm && e.arm !== "main" ? h("span", { class: "chip" }, e.arm) : null] },
  { label: "Status", cell: (e) => [badge(e.status), headlineNote(e.headline)] },
  { label: "Progress", cell: (e) => [progressBar(e.progress.completed, e.progress.total), `${num(e.progress.completed)}/${num(e.progress.total)}`] },
  { label: "Headline [95 % CI]", class: "num", cell: accuracyOf },
  { label: "Errors", class: "num hide-narrow", cell: (e) => num(e.progress.errors) },
  { label: "Priority", class: "hide-narrow", cell: (e) => e.priority },
  { label: "Group", class: "hide-narrow", cell: groupLink },
  { label: "Created", class: "hide-narrow", cell: (e) => when(e.created_at) },
];

function matches(ev, q, priority) {
  if (priority && ev.priority !== priority) return false;
  if (!q) return true;
  const text = [ev.id, ev.benchmark.slug, ev.benchmark.name, ev.model.name, ev.arm, ev.status, ev.error, ev.batch_id, ev.experiment_id]
    .filter(Boolean).join(" ").toLowerCase();
  return q.toLowerCase().split(/\s+/).every((w) => text.includes(w));
}

function dayStart(value) {
  return value ? `${value}T00:00:00Z` : null;
}

/** /ui/evaluations?status=&benchmark=&model=&priority=&batch_id=&experiment_id=&created_after=&created_before=&q= */
export async function list(ctx, view, _args, params) {
  const f = Object.fromEntries(FILTERS.map((k) => [k, params.get(k) || ""]));
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter evaluations" });
  const benchSel = select([["", "any benchmark"], ...(f.benchmark ? [[f.benchmark, f.benchmark]] : [])], { value: f.benchmark });
  const modelSel = select([["", "any model"], ...(f.model ? [[f.model, f.model]] : [])], { value: f.model });
  const controls = {
    q: input({ type: "search", value: f.q, placeholder: "id, model, benchmark, arm…" }),
    status: select([["", "any status"], ...STATUSES], { value: f.status }),
    benchmark: benchSel,
    model: modelSel,
    priority: select([["", "any priority"], ...PRIORITIES], { value: f.priority }),
    group: input({ value: f.experiment_id || f.batch_id, placeholder: "batch or experiment id" }),
    created_after: input({ type: "date", value: (f.created_after || "").slice(0, 10) }),
    created_before: input({ type: "date", value: (f.created_before || "").slice(0, 10) }),
  };
  const groupKind = select([["experiment_id", "experiment"], ["batch_id", "batch"]], { value: f.batch_id ? "batch_id" : "experiment_id" });
  replace(
    form,
    h("div", { class: "field grow" }, h("label", { for: "f-q" }, "Search"), Object.assign(controls.q, { id: "f-q" })),
    field("Status", controls.status, { name: "status" }),
    field("Benchmark", controls.benchmark, { name: "benchmark" }),
    field("Model", controls.model, { name: "model" }),
    field("Priority", controls.priority, { name: "priority" }),
    field("Group kind", groupKind, { name: "group_kind" }),
    field("Group id", controls.group, { name: "group" }),
    field("Created from", controls.created_after, { name: "created_after" }),
    field("Created before", controls.created_before, { name: "created_before" }),
    h("button", { type: "submit", class: "btn" }, "Apply"),
    h("a", { href: "/ui/evaluations", class: "btn" }, "Clear"),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = {
      q: controls.q.value.trim(), status: controls.status.value, benchmark: controls.benchmark.value, model: controls.model.value,
      priority: controls.priority.value, created_after: controls.created_after.value, created_before: controls.created_before.value,
    };
    if (controls.group.value.trim()) q[groupKind.value] = controls.group.value.trim();
    ctx.navigate(api.withQuery("/ui/evaluations", q));
  });
  const results = h("div", { id: "evaluation-list", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading evaluations…"));
  const more = h("div");
  replace(
    view,
    pageHeader("Evaluations", ctx.canBuild ? h("a", { href: "/ui/evaluations/new", class: "btn primary", id: "new-evaluation" }, "New evaluation") : null),
    form,
    results,
    more,
  );

  // filter options load beside the list (the list never waits for them)
  Promise.all([api.get("/v1/benchmarks").catch(() => []), api.get("/v1/models").catch(() => [])]).then(([benches, models]) => {
    const slugs = [...new Set(benches.map((b) => b.slug))].sort();
    const names = [...new Set(models.map((m) => m.name))].sort();
    replace(benchSel, [["", "any benchmark"], ...slugs].map((o) => {
      const [v, l] = Array.isArray(o) ? o : [o, o];
      return h("option", { value: v, selected: v === f.benchmark }, l);
    }));
    replace(modelSel, [["", "any model"], ...names].map((o) => {
      const [v, l] = Array.isArray(o) ? o : [o, o];
      return h("option", { value: v, selected: v === f.model }, l);
    }));
  });

  const query = {
    status: f.status, benchmark: f.benchmark, model: f.model, batch_id: f.batch_id, experiment_id: f.experiment_id,
    created_after: dayStart(f.created_after.slice(0, 10)), created_before: dayStart(f.created_before.slice(0, 10)), limit: 50,
  };
  const shown = [];
  let loaded = 0;
  async function load(cursor) {
    let page;
    try {
      page = await api.get("/v1/evaluations", { ...query, cursor });
    } catch (err) {
      replace(results, errorBox(err));
      return;
    }
    loaded += page.items.length;
    shown.push(...page.items.filter((ev) => matches(ev, f.q, f.priority)));
    const filteredNote = f.q || f.priority ? ` (${shown.length} of ${loaded} loaded match the search)` : "";
    replace(
      results,
      table(COLUMNS, shown, { empty: loaded ? "No evaluation matches the search." : "No evaluations yet.", rowProps: (e) => ({ "data-id": e.id, "data-status": e.status }) }),
      h("p", { class: "muted", id: "list-count" }, `${shown.length} shown${filteredNote}`),
    );
    replace(more, page.next_cursor ? h("button", { type: "button", class: "btn", id: "load-more", onclick: () => load(page.next_cursor) }, "Load more") : null);
  }
  await load(null);
}

// ---------------------------------------------------------------- experiment and batch views

function memberColumns() {
  return [
    { label: "Arm", cell: (m) => m.arm },
    { label: "Model", cell: (m) => m.model.name || shortId(m.model.id) },
    { label: "Status", cell: (m) => badge(m.status) },
    { label: "Progress", cell: (m) => [progressBar(m.progress.completed, m.progress.total), `${num(m.progress.completed)}/${num(m.progress.total)}`] },
    { label: "Headline", class: "num", cell: (m) => (m.headline && m.headline.value !== null ? headlineText(m.headline) : pct(m.accuracy ?? m.progress.accuracy)) },
    { label: "Release", cell: (m) => (m.release ? "yes" : "—") },
    { label: "Evaluation", cell: (m) => h("a", { href: `/ui/evaluations/${m.evaluation_id}`, class: "mono" }, shortId(m.evaluation_id)) },
  ];
}

function comparisonColumns() {
  return [
    { label: "Arm", cell: (c) => `${c.arm} (${c.model})` },
    { label: "vs baseline", cell: (c) => `${c.baseline_arm} (${c.baseline_model})` },
    { label: "Paired items", class: "num", cell: (c) => (c.comparison ? num(c.comparison.n_paired_with_verdicts) : "—") },
    { label: "Accuracy: arm − baseline [95 % CI]", class: "num", cell: (c) => {
      const a = c.comparison && c.comparison.accuracy;
      if (!a || a.difference === null) return c.pending || "—";
      return `${a.difference >= 0 ? "+" : ""}${(100 * a.difference).toFixed(1)} pts [${(100 * a.ci_low).toFixed(1)}, ${(100 * a.ci_high).toFixed(1)}]`;
    } },
    { label: "Only baseline right / only arm right", class: "num", cell: (c) => (c.comparison ? `${c.comparison.mcnemar.b} / ${c.comparison.mcnemar.c}` : "—") },
    { label: "McNemar p", class: "num", cell: (c) => (c.comparison ? [c.comparison.mcnemar.p_value.toPrecision(3), c.comparison.mcnemar.significant ? h("span", { class: "badge st-running" }, "significant") : null] : "—") },
    { label: "Compare", cell: (c) => h("a", { href: `/ui/evaluations/${c.evaluation_id}?tab=compare&baseline=${c.baseline_evaluation_id}` }, "items") },
  ];
}

async function group(kind, ctx, view, [id]) {
  const path = kind === "experiment" ? `/v1/experiments/${id}` : `/v1/batches/${id}`;
  const title = kind === "experiment" ? "A/B experiment" : "Batch";
  let timer = null;
  async function draw() {
    let g;
    try {
      g = await api.get(path);
    } catch (err) {
      if (err.status === 404 || err.status === 405) {
        // without the group endpoint: the arms from the list
        const page = await api.get("/v1/evaluations", { [kind === "experiment" ? "experiment_id" : "batch_id"]: id, limit: 50 });
        replace(view, pageHeader(`${title} ${shortId(id)}`), section("Arms", table(COLUMNS, page.items)));
        return;
      }
      replace(view, errorBox(err));
      return;
    }
    replace(
      view,
      pageHeader(`${title} ${shortId(id)}`, badge(g.status)),
      h("p", { class: "muted" }, `Benchmark ${g.benchmark.slug || ""} · ${num(g.progress.completed)}/${num(g.progress.total)} items`),
      section(kind === "experiment" ? "Arms" : "Models", table(memberColumns(), g.members)),
      section(
        "Paired comparisons with the first " + (kind === "experiment" ? "arm" : "model"),
        h("p", { class: "hint" }, "Each row pairs the same items of two evaluations: exact McNemar test on the discordant pairs, paired bootstrap interval of the accuracy difference."),
        table(comparisonColumns(), g.comparisons, { empty: "No comparison yet (the group has one member)." }),
      ),
    );
    if (!TERMINAL.has(g.status) && g.status !== "ended") timer = setTimeout(draw, 2000);
  }
  await draw();
  return () => clearTimeout(timer);
}

export const experiment = (ctx, view, args) => group("experiment", ctx, view, args);
export const batch = (ctx, view, args) => group("batch", ctx, view, args);
