// Benchmarks: the catalogue (category, status, versions, capability dimensions, licence), one benchmark with
// its versions and a preview of rendered prompts (GET /v1/benchmarks/{ref}/samples), and the upload form
// (POST /v1/benchmarks, multipart: spec JSON + file + visibility) that shows the API's field and row errors
// next to the field they name.

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { errorBox, field, input, json, num, pageHeader, section, select, shortId, showErrors, table, when } from "./ui.js";

const CATEGORIES = ["nlp", "code", "math", "reasoning", "safety", "custom"];

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
  let metrics = [];
  try {
    metrics = await api.get("/v1/metrics");
  } catch {
    metrics = [];
  }
  const c = {
    slug: input({ required: true, pattern: "[a-z0-9][a-z0-9_.\\-]{1,99}", placeholder: "my-qa" }),
    name: input({ required: true, placeholder: "My QA" }),
    description: h("textarea", { rows: 2 }),
    category: select(CATEGORIES, { value: "custom" }),
    status: select(["active", "draft"]),
    dims: input({ placeholder: "reading, arithmetic" }),
    license: input({ placeholder: "CC-BY-4.0" }),
    template: h("textarea", { rows: 4, required: true, placeholder: "{{ question }}" }),
    maxTokens: input({ type: "number", min: 1, value: 64 }),
    metric: select(metrics.map((m) => [m.name, `${m.name} (v${m.version})`]), { value: "exact_match" }),
    params: h("textarea", { rows: 2, placeholder: '{"ignore_case": true}' }),
    file: h("input", { type: "file", accept: ".jsonl,.csv,.parquet,.json", required: true }),
    visibility: select([["private", "private (this tenant)"], ["shared", "shared (every tenant may read it)"]]),
  };
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
    h("div", { class: "grid" },
      field("Data file (JSONL, CSV or Parquet)", c.file, { name: "file", hint: "Rows: id, answer (or reference), other columns are inputs; or nested JSONL {id, input, reference}." }),
      field("Visibility", c.visibility, { name: "visibility" }),
    ),
    summary,
    h("div", { class: "actions" }, submit),
    result,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    showErrors(form, null, summary);
    replace(result);
    let params = {};
    if (c.params.value.trim()) {
      try {
        params = JSON.parse(c.params.value);
      } catch (err) {
        showErrors(form, { status: "form", detail: [{ loc: ["spec", "metric", "params"], msg: `not JSON: ${err.message}` }] }, summary);
        return;
      }
    }
    const spec = {
      slug: c.slug.value.trim(), name: c.name.value.trim(), description: c.description.value, category: c.category.value, status: c.status.value,
      capability_dimensions: c.dims.value.split(",").map((x) => x.trim()).filter(Boolean),
      prompt: { template: c.template.value, max_tokens: Number(c.maxTokens.value) || 64 },
      metric: { name: c.metric.value, params },
    };
    if (c.license.value.trim()) spec.license = c.license.value.trim();
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
