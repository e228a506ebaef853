// The create form: benchmark, model(s) (several = a batch), A/B arms, sample limit and sampling, repeats,
// few-shot, priority, max cost. Every change asks POST /v1/evaluations/estimate for the cost and the budget
// check, shown before the submit button; the API's refusals appear next to the field they name.

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { PRIORITIES, debounce, duration, errorBox, field, input, money, num, pageHeader, select, showErrors } from "./ui.js";

function intOrNull(el) {
  const v = el.value.trim();
  return v === "" ? null : Number(v);
}

export async function create(ctx, view) {
  if (!ctx.canBuild) {
    replace(view, pageHeader("New evaluation"), h("p", { class: "note" }, `Your role (${ctx.role}) may not create evaluations.`));
    return;
  }
  let benches, models;
  try {
    [benches, models] = await Promise.all([api.get("/v1/benchmarks", { status: "active" }), api.get("/v1/models")]);
  } catch (err) {
    replace(view, errorBox(err));
    return;
  }
  const slugs = [];
  for (const b of benches) if (!slugs.some((x) => x[0] === b.slug)) slugs.push([b.slug, `${b.slug} — ${b.name} (${b.sample_count} items)`]);
  const names = [...new Set(models.map((m) => m.name))].sort();

  const benchmark = select(slugs, { name: "benchmark", required: true });
  const modelBoxes = names.map((n) => h("input", { type: "checkbox", value: n, name: "models", "data-model": n }));
  const modelsSet = h("fieldset", { class: "field", "data-field": "model" },
    h("legend", {}, "Model(s) — one evaluation per model; several make a batch"),
    h("div", { class: "checks" }, modelBoxes.map((b) => h("label", {}, b, b.value))),
    h("p", { class: "field-error", "aria-live": "polite" }),
  );
  const sampleLimit = input({ type: "number", min: 1, step: 1, inputmode: "numeric", placeholder: "all items" });
  const sampling = select([["", "default (the API's)"], ["first", "first N (benchmark order)"], ["random", "random (seeded)"], ["stratified", "stratified by category"]]);
  const repeats = input({ type: "number", min: 1, step: 1, value: 1 });
  const fewshot = input({ type: "number", min: 0, max: 16, step: 1, placeholder: "benchmark default" });
  const priority = select(PRIORITIES, { value: "normal" });
  const maxCost = input({ type: "number", min: 0, step: "any", placeholder: "no cap of its own" });
  const arms = h("div", { class: "arms" });
  const armRows = [];

  function addArm() {
    const i = armRows.length;
    const row = {
      name: input({ value: i === 0 ? "control" : `variant${i}`, pattern: "[A-Za-z0-9][A-Za-z0-9_.-]{0,63}" }),
      model: select([["", "the model above"], ...names]),
      fewshot: input({ type: "number", min: 0, max: 16, placeholder: "as above" }),
      release: h("input", { type: "checkbox" }),
    };
    const el = h("fieldset", { class: "grid arm" }, h("legend", {}, `Arm ${i + 1}`),
      field("Arm name", row.name, { name: `arms.${i}.name` }),
      field("Model", row.model, { name: `arms.${i}.model` }),
      field("Few-shot k", row.fewshot, { name: `arms.${i}.fewshot_k` }),
      h("label", { class: "checks" }, row.release, "release run (enters the leaderboards)"),
      h("button", { type: "button", class: "btn small", onclick: () => { el.remove(); armRows.splice(armRows.indexOf(row), 1); refresh(); } }, "Remove arm"),
    );
    row.el = el;
    armRows.push(row);
    arms.appendChild(el);
    for (const c of [row.name, row.model, row.fewshot, row.release]) c.addEventListener("change", refresh);
  }

  function body() {
    const chosen = modelBoxes.filter((b) => b.checked).map((b) => b.value);
    const out = { benchmark: benchmark.value, priority: priority.value, repeats: intOrNull(repeats) ?? 1 };
    if (armRows.length >= 2) {
      out.model = chosen[0] || undefined;
      out.arms = armRows.map((r) => {
        const arm = { name: r.name.value.trim() };
        if (r.model.value) arm.model = r.model.value;
        if (r.fewshot.value !== "") arm.fewshot_k = Number(r.fewshot.value);
        if (r.release.checked) arm.release = true;
        return arm;
      });
    } else if (chosen.length > 1) {
      out.models = chosen;
    } else {
      out.model = chosen[0];
    }
    const limit = intOrNull(sampleLimit);
    if (limit !== null) out.sample_limit = limit;
    if (sampling.value) out.sampling = sampling.value;
    const k = intOrNull(fewshot);
    if (k !== null) out.fewshot_k = k;
    const cost = maxCost.value.trim();
    if (cost !== "") out.max_cost = Number(cost);
    return out;
  }

  const estimateBox = h("div", { id: "estimate", class: "panel", "aria-live": "polite" }, h("p", { class: "muted" }, "Pick a benchmark and a model to see the cost estimate."));
  const summary = h("div");
  const submit = h("button", { type: "submit", class: "btn primary", id: "create-submit" }, "Create evaluation");
  const form = h("form", { id: "create-form", novalidate: true },
    h("div", { class: "grid" }, field("Benchmark", benchmark, { name: "benchmark" })),
    modelsSet,
    h("div", { class: "grid" },
      field("Sample limit", sampleLimit, { name: "sample_limit", hint: "Evaluate N items; empty = every item." }),
      field("Sampling", sampling, { name: "sampling", hint: "Which N items: the first, a seeded random draw, or stratified by category." }),
      field("Repeats", repeats, { name: "repeats", hint: "Attempts per item (pass@k, stability)." }),
      field("Few-shot k", fewshot, { name: "fewshot_k" }),
      field("Priority", priority, { name: "priority" }),
      field("Max cost", maxCost, { name: "max_cost", hint: "Cap of each evaluation; it stops budget_exhausted at the cap." }),
    ),
    h("details", { class: "panel" }, h("summary", {}, "A/B experiment: arms (two or more)"),
      h("p", { class: "hint" }, "Each arm is its own evaluation over the same items, dispatched together; an arm's model or few-shot overrides the form's."),
      arms,
      h("button", { type: "button", class: "btn small", id: "add-arm", onclick: () => { addArm(); if (armRows.length === 1) addArm(); refresh(); } }, "Add arm"),
    ),
    h("h2", {}, "Cost and budget"),
    estimateBox,
    summary,
    h("div", { class: "actions" }, submit, h("a", { href: "/ui/evaluations", class: "btn" }, "Cancel")),
  );

  let estimateSeq = 0;
  const refresh = debounce(async () => {
    const b = body();
    if (!b.benchmark || (!b.model && !b.models && !b.arms)) return;
    const seq = ++estimateSeq;
    try {
      const est = await api.post("/v1/evaluations/estimate", b);
      if (seq !== estimateSeq) return;
      showErrors(form, null, summary);
      const per = est.evaluations || [];
      replace(estimateBox,
        h("p", {}, h("strong", { id: "estimate-total" }, `Estimated cost: ${money(est.estimate, est.currency)}`),
          ` for ${num(est.items)} items in ${per.length} evaluation${per.length === 1 ? "" : "s"}.`),
        h("p", {}, h("strong", { id: "estimate-time" }, `Estimated time: ${est.seconds < 1 ? "under 1 s" : `about ${duration(est.seconds)}`}`),
          " at the models' expected latency and capacity, before any queueing."),
        per.length > 1 ? h("ul", {}, per.map((p) => h("li", {}, `${p.model} on ${p.benchmark}: ${num(p.items)} items × ${money(p.per_item, est.currency)} = ${money(p.estimate, est.currency)}, about ${duration(p.seconds)}`))) : null,
        est.refusal
          ? h("p", { class: "alert", id: "budget-check", role: "alert" }, `Budget check: this would be refused (${est.refusal.status}): ${est.refusal.msg}`)
          : h("p", { class: "ok-box", id: "budget-check" }, "Budget check: within every cap."),
      );
    } catch (err) {
      if (seq !== estimateSeq) return;
      replace(estimateBox, h("p", { class: "muted" }, "No estimate for these settings:"));
      showErrors(form, err, summary);
    }
  }, 300);

  form.addEventListener("input", refresh);
  form.addEventListener("change", refresh);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    submit.disabled = true;
    try {
      const made = await api.post("/v1/evaluations", body(), { headers: { "Idempotency-Key": newKey() } });
      if (made.experiment_id) ctx.navigate(`/ui/experiments/${made.experiment_id}`);
      else if (made.batch_id) ctx.navigate(`/ui/batches/${made.batch_id}`);
      else ctx.navigate(`/ui/evaluations/${made.id}`);
    } catch (err) {
      showErrors(form, err, summary);
      submit.disabled = false;
    }
  });
  replace(view, pageHeader("New evaluation"), form);
}

function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}
