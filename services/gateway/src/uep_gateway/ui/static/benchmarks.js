// Benchmarks: the catalogue (category, status, versions, capability dimensions, licence), one benchmark with
// its versions and a preview of rendered prompts (GET /v1/benchmarks/{ref}/samples), and the upload form
// (POST /v1/benchmarks, multipart: spec JSON + file + visibility) that shows the API's field and row errors
// next to the field they name; for llm_judge/hybrid benchmarks a judge configuration editor writes the spec's
// judge block, and the spec sent is shown (and may be edited) as JSON.

import * as api from "./api.js";
import { h, replace, uid } from "./dom.js";
import { errorBox, field, input, json, num, pageHeader, section, select, shortId, showErrors, table, when } from "./ui.js";

const CATEGORIES = ["nlp", "code", "math", "reasoning", "safety", "custom"];
const JUDGED = ["llm_judge", "hybrid"];

// The judge configuration editor (llm_judge/hybrid uploads): the spec's `judge` block, checked against
// uep_common.judge_config.JudgeConfig's plain rules before it is sent. Every part sits in a .field whose
// data-field is the API's loc ("spec.judge.dimensions.0" is a dimension's scale), so showErrors puts the
// API's 422 messages next to the part they name; "spec.judge" takes what names no part.
const JUDGE = "spec.judge";
const JUDGE_MODES = [["rubric", "rubric: scores on the dimensions"], ["reference", "reference: with the sample's reference answer"],
  ["pairwise", "pairwise: against a baseline evaluation's answer"]];
const DIMENSION_NAME = /^[a-z][a-z0-9_]{0,39}$/;
const SCORE_LABEL = /^[A-Za-z][A-Za-z0-9 _-]{0,39}$/;
const MAX_JUDGES = 7;
/** The default judge: the embedded LLM (a small model; its verdicts are grammar-constrained JSON). */
const EMBEDDED_JUDGE = "smollm2-135m-instruct";
const MAX_DIMENSIONS = 12;

/** A .field holding several controls (a list or a range); its one error slot follows them. */
function group(name, label, ...controls) {
  const id = uid("grp");
  return h("div", { class: "field", "data-field": name, role: "group", "aria-labelledby": id },
    h("span", { class: "group-label", id }, label), ...controls, h("p", { class: "field-error", "aria-live": "polite" }));
}

/** The editor: {el, value() → the judge block, problems() → [{loc, msg}] found here}; onChange after each edit. */
function judgeEditor(modelNames, onChange) {
  const c = {
    mode: select(JUDGE_MODES, { id: "judge-mode" }),
    aggregate: select([["mean", "mean of the jury's scores"], ["majority", "majority of the jury's verdicts"]], { id: "judge-aggregate" }),
    scoreLabel: input({ id: "judge-score-label", placeholder: "Rating" }),
    maxRetries: input({ type: "number", min: 0, max: 5, value: 2, id: "judge-max-retries" }),
    templateText: h("textarea", { rows: 3, id: "judge-template-text", placeholder: "empty: the mode's shipped template (rubric/v1, …)" }),
  };
  const judgeBoxes = modelNames.map((n) => h("input", { type: "checkbox", value: n, "data-judge": n, checked: n === EMBEDDED_JUDGE }));
  const dims = [{ name: "accuracy", description: "Is the answer factually and logically correct?", min: 0, max: 10, integer: false }];
  const rows = h("div", { id: "judge-dimensions" });
  const bind = (el, d, key, read = (x) => x.value) => el.addEventListener("input", () => { d[key] = read(el); });
  const draw = () => {
    replace(rows, dims.map((d, i) => {
      const at = `${JUDGE}.dimensions.${i}`;
      const name = input({ value: d.name, "data-dim": "name", placeholder: "accuracy" });
      const desc = input({ value: d.description, "data-dim": "description" });
      const min = input({ type: "number", step: "any", value: d.min, "data-dim": "min", id: uid("dmin") });
      const max = input({ type: "number", step: "any", value: d.max, "data-dim": "max", id: uid("dmax") });
      const integer = h("input", { type: "checkbox", checked: d.integer, "data-dim": "integer" });
      bind(name, d, "name");
      bind(desc, d, "description");
      bind(min, d, "min");
      bind(max, d, "max");
      integer.addEventListener("change", () => { d.integer = integer.checked; });
      const remove = h("button", { type: "button", class: "btn small", "aria-label": `Remove dimension ${i + 1}` }, "Remove");
      remove.addEventListener("click", () => { dims.splice(i, 1); draw(); onChange(); });
      return h("div", { class: "dimension", "data-index": i },
        field("Dimension name", name, { name: `${at}.name` }),
        field("Description (shown to the judge)", desc, { name: `${at}.description` }),
        group(at, "Scale",
          h("span", { class: "range" }, h("label", { for: min.id }, "from"), min, h("label", { for: max.id }, "to"), max,
            h("label", { class: "inline" }, integer, "integer"))),
        h("div", { class: "dimension-remove" }, remove));
    }));
  };
  const add = h("button", { type: "button", class: "btn small", id: "judge-add-dimension" }, "Add a dimension");
  add.addEventListener("click", () => {
    dims.push({ name: "", description: "", min: 0, max: 10, integer: false });
    draw();
    onChange();
    rows.lastElementChild?.querySelector("input")?.focus();
  });
  draw();
  const el = h("fieldset", { id: "judge-editor", class: "judge-editor" }, h("legend", {}, "Judge configuration"),
    group(JUDGE, "", h("span", { class: "hint" }, "Sent as the spec's judge block (see the spec below).")),
    h("div", { class: "grid" },
      field("Judge mode", c.mode, { name: `${JUDGE}.mode` }),
      field("Jury aggregation", c.aggregate, { name: `${JUDGE}.aggregate`, hint: "Used when more than one judge is chosen." }),
      field("Score label", c.scoreLabel, { name: `${JUDGE}.score_label`, hint: "Empty: the judge answers in JSON. Set (e.g. Rating): a labelled score line. Not for pairwise." }),
      field("Re-asks after an invalid answer", c.maxRetries, { name: `${JUDGE}.max_retries`, hint: "0 to 5." }),
    ),
    group(`${JUDGE}.judges`, "Judge models (several make a jury)",
      h("div", { class: "checks", id: "judge-models" }, judgeBoxes.length ? judgeBoxes.map((b) => h("label", {}, b, b.value)) : h("span", { class: "muted" }, "No model is registered."))),
    group(`${JUDGE}.dimensions`, "Rubric dimensions", h("p", { class: "hint" }, "With none, the judge uses the five default dimensions (accuracy, relevance, completeness, clarity, safety) on 0–10.")),
    rows,
    h("div", { class: "actions" }, add),
    field("Judge template (Jinja2, optional)", c.templateText, { name: `${JUDGE}.template_text` }),
  );
  el.addEventListener("change", onChange);
  el.addEventListener("input", onChange);
  const value = () => {
    const out = { mode: c.mode.value, judges: judgeBoxes.filter((b) => b.checked).map((b) => b.value), aggregate: c.aggregate.value };
    if (dims.length) {
      out.dimensions = dims.map((d) => ({ name: d.name.trim(), description: d.description, min: Number(d.min), max: Number(d.max), integer: d.integer }));
    }
    if (c.scoreLabel.value.trim()) out.score_label = c.scoreLabel.value.trim();
    out.max_retries = Number(c.maxRetries.value);
    if (c.templateText.value.trim()) out.template_text = c.templateText.value;
    return out;
  };
  const problems = () => {
    const v = value();
    const out = [];
    const at = (...loc) => ["spec", "judge", ...loc];
    if (!v.judges.length) out.push({ loc: at("judges"), msg: "choose at least one judge model" });
    if (v.judges.length > MAX_JUDGES) out.push({ loc: at("judges"), msg: `a jury has at most ${MAX_JUDGES} judges` });
    if (dims.length > MAX_DIMENSIONS) out.push({ loc: at("dimensions"), msg: `at most ${MAX_DIMENSIONS} dimensions` });
    const seen = new Set();
    (v.dimensions || []).forEach((d, i) => {
      if (!d.name) out.push({ loc: at("dimensions", i, "name"), msg: "a dimension needs a name" });
      else if (!DIMENSION_NAME.test(d.name)) out.push({ loc: at("dimensions", i, "name"), msg: "lower-case letters, digits and _, starting with a letter (40 at most)" });
      else if (seen.has(d.name)) out.push({ loc: at("dimensions", i, "name"), msg: `${d.name} is already a dimension` });
      seen.add(d.name);
      if (String(dims[i].min).trim() === "" || String(dims[i].max).trim() === "" || !Number.isFinite(d.min) || !Number.isFinite(d.max)) {
        out.push({ loc: at("dimensions", i), msg: "the scale needs a number at both ends" });
      } else if (!(d.min < d.max)) {
        out.push({ loc: at("dimensions", i), msg: `min (${d.min}) must be below max (${d.max})` });
      } else if (d.integer && !(Number.isInteger(d.min) && Number.isInteger(d.max))) {
        out.push({ loc: at("dimensions", i), msg: "an integer scale needs whole numbers at both ends" });
      }
    });
    if (v.score_label !== undefined && !SCORE_LABEL.test(v.score_label)) out.push({ loc: at("score_label"), msg: "a letter, then letters, digits, spaces, _ or - (40 at most)" });
    if (v.score_label !== undefined && v.mode === "pairwise") out.push({ loc: at("score_label"), msg: "a score label applies to rubric and reference modes, not pairwise" });
    if (!Number.isInteger(v.max_retries) || v.max_retries < 0 || v.max_retries > 5) out.push({ loc: at("max_retries"), msg: "a whole number from 0 to 5" });
    return out;
  };
  return { el, value, problems };
}

function chips(list) {
  return (list || []).length ? list.map((d) => h("span", { class: "chip" }, d)) : "—";
}

export async function catalogue(ctx, view, _args, params) {
  let rows;
  try {
    rows = await api.get("/v1/benchmarks");
  } catch (err) {
    replace(view, errorBox(err));
    return;
  }
  const bySlug = new Map();
  for (const b of rows) {
    if (!bySlug.has(b.slug)) bySlug.set(b.slug, { ...b, versions: [] });
    bySlug.get(b.slug).versions.push(b);
  }
  const cat = select([["", "every category"], ...CATEGORIES], { value: params.get("category") || "" });
  const status = select([["", "every status"], "active", "draft", "deprecated"], { value: params.get("status") || "" });
  const q = input({ type: "search", value: params.get("q") || "", placeholder: "slug, name, dimension…" });
  const out = h("div", { id: "benchmark-list" });
  const draw = () => {
    const words = q.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const list = [...bySlug.values()].filter((b) => (!cat.value || b.category === cat.value) && (!status.value || b.status === status.value) &&
      words.every((w) => [b.slug, b.name, b.description, ...(b.capability_dimensions || [])].join(" ").toLowerCase().includes(w)));
    replace(out, table([
      { label: "Benchmark", cell: (b) => [h("a", { href: `/ui/benchmarks/${encodeURIComponent(b.slug)}` }, b.slug), h("div", { class: "muted" }, b.name)] },
      { label: "Category", cell: (b) => b.category },
      { label: "Status", cell: (b) => b.status },
      { label: "Type", class: "hide-narrow", cell: (b) => b.evaluation_type },
      { label: "Versions", class: "num", cell: (b) => num(b.versions.length) },
      { label: "Items", class: "num", cell: (b) => num(b.sample_count) },
      { label: "Metric", class: "hide-narrow", cell: (b) => b.metric || "—" },
      { label: "Capabilities", cell: (b) => chips(b.capability_dimensions) },
      { label: "Licence", class: "hide-narrow", cell: (b) => b.license || "—" },
      { label: "Visibility", class: "hide-narrow", cell: (b) => b.visibility },
    ], list, { empty: "No benchmark matches." }));
  };
  for (const el of [cat, status, q]) el.addEventListener("input", draw);
  replace(view,
    pageHeader("Benchmarks", ctx.canBuild ? h("a", { href: "/ui/benchmarks/upload", class: "btn primary", id: "upload-benchmark" }, "Upload a benchmark") : null),
    h("form", { class: "filters", role: "search" }, h("div", { class: "field grow" }, h("label", { for: "bq" }, "Search"), Object.assign(q, { id: "bq" })),
      field("Category", cat, { name: "category" }), field("Status", status, { name: "status" })),
    out,
  );
  draw();
}

export async function benchmark(ctx, view, [slug], params) {
  let versions;
  try {
    versions = (await api.get("/v1/benchmarks")).filter((b) => b.slug === slug);
  } catch (err) {
    replace(view, errorBox(err));
    return;
  }
  if (!versions.length) {
    replace(view, pageHeader(slug), h("p", { class: "alert" }, `Unknown benchmark ${slug}.`));
    return;
  }
  const b = versions[0];
  const ver = select(versions.map((v) => [v.version, `${v.version.slice(0, 16)} · ${when(v.created_at)} · ${v.status}`]), { value: params.get("version") || b.version, id: "preview-version" });
  const offset = input({ type: "number", min: 0, value: params.get("offset") || 0, id: "preview-offset" });
  const out = h("div", { id: "preview", "aria-live": "polite" });
  const load = async () => {
    replace(out, h("p", { class: "muted" }, "Rendering prompts…"));
    try {
      const samples = await api.get(`/v1/benchmarks/${encodeURIComponent(slug)}/samples`, { version: ver.value, offset: Number(offset.value) || 0, limit: 5 });
      replace(out, samples.length ? samples.map((s) => h("article", { class: "panel sample" },
        h("h3", {}, `#${s.ordinal}${s.external_id ? ` · ${s.external_id}` : ""}`),
        h("h4", {}, "Rendered prompt"), h("pre", { class: "prompt" }, s.prompt || s.prompt_error || ""),
        s.prompt_truncated ? h("p", { class: "hint" }, "Cut to the preview's length.") : null,
        h("h4", {}, "Reference"), json(s.reference),
      )) : h("p", { class: "muted" }, "No sample at this offset."));
    } catch (err) {
      replace(out, errorBox(err));
    }
  };
  const form = h("form", { class: "filters" }, field("Version", ver, { name: "version" }), field("From item", offset, { name: "offset" }),
    h("button", { type: "submit", class: "btn" }, "Show"));
  form.addEventListener("submit", (e) => { e.preventDefault(); load(); });
  const v = versions.find((x) => x.version === ver.value) || b;
  replace(view,
    pageHeader(`${b.name}`, ctx.canBuild ? h("a", { href: `/ui/evaluations/new`, class: "btn" }, "Evaluate a model") : null),
    h("p", { class: "muted" }, h("span", { class: "mono" }, slug), ` · ${b.category} · ${b.evaluation_type} · ${b.visibility}${b.owned ? " (yours)" : ""}`),
    b.description ? h("p", {}, b.description) : null,
    h("dl", { class: "kv panel" },
      h("dt", {}, "Metric"), h("dd", {}, v.metric || "—"),
      h("dt", {}, "Items"), h("dd", {}, num(v.sample_count)),
      h("dt", {}, "Capability dimensions"), h("dd", {}, chips(v.capability_dimensions)),
      h("dt", {}, "Licence"), h("dd", {}, v.license || "—"),
      h("dt", {}, "Versions"), h("dd", {}, versions.map((x) => h("div", { class: "mono" }, `${x.version.slice(0, 16)} (${x.status}, ${when(x.created_at)})`))),
    ),
    section("Preview of rendered prompts", form, out),
  );
  load();
}

export async function upload(ctx, view) {
  if (!ctx.canBuild) {
    replace(view, pageHeader("Upload a benchmark"), h("p", { class: "note" }, `Your role (${ctx.role}) may not upload benchmarks.`));
    return;
  }
  const [metrics, models] = await Promise.all([api.get("/v1/metrics").catch(() => []), api.get("/v1/models").catch(() => [])]);
  const c = {
    slug: input({ required: true, pattern: "[a-z0-9][a-z0-9_.\\-]{1,99}", placeholder: "my-qa" }),
    name: input({ required: true, placeholder: "My QA" }),
    description: h("textarea", { rows: 2 }),
    category: select(CATEGORIES, { value: "custom" }),
    status: select(["active", "draft"]),
    type: select([["automatic", "automatic (the metric)"], ["llm_judge", "LLM judge"], ["hybrid", "hybrid (metric, then judge, then people)"]], { id: "evaluation-type" }),
    dims: input({ placeholder: "reading, arithmetic" }),
    license: input({ placeholder: "CC-BY-4.0" }),
    template: h("textarea", { rows: 4, required: true, placeholder: "{{ question }}" }),
    maxTokens: input({ type: "number", min: 1, value: 64 }),
    metric: select(metrics.map((m) => [m.name, `${m.name} (v${m.version})`]), { value: "exact_match" }),
    params: h("textarea", { rows: 2, placeholder: '{"ignore_case": true}' }),
    file: h("input", { type: "file", accept: ".jsonl,.csv,.parquet,.json", required: true }),
    visibility: select([["private", "private (this tenant)"], ["shared", "shared (every tenant may read it)"]]),
    raw: h("textarea", { rows: 8, id: "spec-json", class: "mono", spellcheck: "false" }),
  };
  const judges = models.filter((m) => m.active !== false && (m.kind || "generation") === "generation");
  const judge = judgeEditor([...new Set(judges.map((m) => m.name))], () => {
    syncSpec();
    showErrors(judge.el, judge.problems().length ? { status: "form", detail: judge.problems() } : null);
  });
  const judged = () => JUDGED.includes(c.type.value);
  const showJudge = () => { judge.el.hidden = !judged(); };
  c.type.addEventListener("change", showJudge);
  showJudge();
  const paramHelp = h("p", { class: "hint", id: "metric-params-help" });
  const showParams = () => {
    const m = metrics.find((x) => x.name === c.metric.value);
    paramHelp.textContent = m ? `Parameters: ${Object.keys(m.params || {}).join(", ") || "none"}${m.required_params.length ? ` (required: ${m.required_params.join(", ")})` : ""}` : "";
  };
  c.metric.addEventListener("change", showParams);
  showParams();
  const summary = h("div");
  const result = h("div", { id: "upload-result", "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "btn primary", id: "upload-submit" }, "Upload");
  const form = h("form", { id: "upload-form", novalidate: true },
    h("div", { class: "grid" },
      field("Slug", c.slug, { name: "spec.slug", hint: "Lower-case URL name; versions share it." }),
      field("Name", c.name, { name: "spec.name" }),
      field("Category", c.category, { name: "spec.category" }),
      field("Status", c.status, { name: "spec.status" }),
      field("Evaluation type", c.type, { name: "spec.evaluation_type" }),
      field("Capability dimensions", c.dims, { name: "spec.capability_dimensions", hint: "Comma-separated." }),
      field("Licence", c.license, { name: "spec.license" }),
    ),
    field("Description", c.description, { name: "spec.description" }),
    field("Prompt template (Jinja2 over each row's input fields)", c.template, { name: "spec.prompt" }),
    h("div", { class: "grid" },
      field("Max tokens", c.maxTokens, { name: "spec.prompt.max_tokens" }),
      field("Metric", c.metric, { name: "spec.metric" }),
      field("Metric parameters (JSON)", c.params, { name: "spec.metric.params" }),
    ),
    paramHelp,
    judge.el,
    field("Spec (JSON, as sent)", c.raw, { name: "spec", hint: "Written from the fields above on every change; keys added here are kept and sent." }),
    h("div", { class: "grid" },
      field("Data file (JSONL, CSV or Parquet)", c.file, { name: "file", hint: "Rows: id, answer (or reference), other columns are inputs; or nested JSONL {id, input, reference}." }),
      field("Visibility", c.visibility, { name: "visibility" }),
    ),
    summary,
    h("div", { class: "actions" }, submit),
    result,
  );
  // The spec from the fields, over what the JSON box holds (its other keys are kept); the judge block only
  // for judged types.
  const syncSpec = () => {
    let spec = {};
    try {
      spec = JSON.parse(c.raw.value || "{}");
    } catch {
      spec = {};
    }
    let params = spec.metric?.params || {};
    try {
      params = c.params.value.trim() ? JSON.parse(c.params.value) : {};
    } catch {
      // keep the last parsable parameters while they are typed
    }
    Object.assign(spec, {
      slug: c.slug.value.trim(), name: c.name.value.trim(), description: c.description.value, category: c.category.value, status: c.status.value,
      evaluation_type: c.type.value,
      capability_dimensions: c.dims.value.split(",").map((x) => x.trim()).filter(Boolean),
      prompt: { ...(spec.prompt || {}), template: c.template.value, max_tokens: Number(c.maxTokens.value) || 64 },
      metric: { name: c.metric.value, params },
    });
    if (c.license.value.trim()) spec.license = c.license.value.trim();
    else delete spec.license;
    if (judged()) spec.judge = judge.value();
    else delete spec.judge;
    c.raw.value = JSON.stringify(spec, null, 2);
  };
  form.addEventListener("input", (e) => { if (e.target !== c.raw && !judge.el.contains(e.target)) syncSpec(); });
  form.addEventListener("change", (e) => { if (e.target !== c.raw && !judge.el.contains(e.target)) syncSpec(); });
  syncSpec();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    showErrors(form, null, summary);
    replace(result);
    if (c.params.value.trim()) {
      try {
        JSON.parse(c.params.value);
      } catch (err) {
        showErrors(form, { status: "form", detail: [{ loc: ["spec", "metric", "params"], msg: `not JSON: ${err.message}` }] }, summary);
        return;
      }
    }
    if (judged() && judge.problems().length) {
      showErrors(form, { status: "form", detail: judge.problems() }, summary);
      return;
    }
    let spec;
    try {
      spec = JSON.parse(c.raw.value);
    } catch (err) {
      showErrors(form, { status: "form", detail: [{ loc: ["spec"], msg: `not JSON: ${err.message}` }] }, summary);
      return;
    }
    if (!c.file.files.length) {
      showErrors(form, { status: "form", detail: [{ loc: ["file"], msg: "choose a data file" }] }, summary);
      return;
    }
    const data = new FormData();
    data.append("spec", JSON.stringify(spec));
    data.append("file", c.file.files[0]);
    data.append("visibility", c.visibility.value);
    submit.disabled = true;
    try {
      const b = await api.call("POST", "/v1/benchmarks", { form: data });
      replace(result, h("div", { class: "ok-box", role: "status", id: "upload-ok" },
        `Uploaded ${b.slug} version ${shortId(b.version)} with ${num(b.sample_count)} items. `,
        h("a", { href: `/ui/benchmarks/${encodeURIComponent(b.slug)}` }, "Preview its rendered prompts")));
    } catch (err) {
      showErrors(form, err, summary);
    } finally {
      submit.disabled = false;
    }
  });
  replace(view, pageHeader("Upload a benchmark"), form);
}
