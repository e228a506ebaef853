// The per-item browser of an evaluation: GET /v1/evaluations/{id}/results page by page (cursor), each item
// joined with its sample (GET /v1/benchmarks/{slug}/samples: input, reference and the rendered prompt) and
// filtered here (wrong only, no answer extracted, errors, category). Items open to show prompt, output,
// reference, extracted answer, verdict, metric details and the judge's reasoning when there is one; a
// conversation item shows its transcript as chat bubbles beside each judge's verdict (transcript.js).

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { conversationView, itemVerdicts } from "./transcript.js";
import { errorBox, field, json, num, select, verdictBadge } from "./ui.js";

const PAGE = 200;
const SHOW_STEP = 50;
const FILTERS = [
  ["", "every item"],
  ["wrong", "wrong only"],
  ["correct", "correct only"],
  ["no_answer", "no answer extracted"],
  ["errors", "errors"],
];

function categoryOf(sample) {
  if (!sample) return null;
  const i = sample.input || {};
  for (const k of ["subject", "category", "topic", "domain", "type"]) if (typeof i[k] === "string" && i[k]) return i[k];
  return null;
}

function findKey(value, key, depth = 0) {
  if (!value || typeof value !== "object" || depth > 4) return null;
  if (typeof value[key] === "string" && value[key]) return value[key];
  for (const v of Object.values(value)) {
    const found = findKey(v, key, depth + 1);
    if (found) return found;
  }
  return null;
}

function keep(item, kind, category) {
  if (category && categoryOf(item.sample) !== category) return false;
  if (kind === "wrong") return !item.error && item.is_correct === false;
  if (kind === "correct") return item.is_correct === true;
  if (kind === "no_answer") return !item.error && (item.extracted === null || item.extracted === undefined || item.extracted === "");
  if (kind === "errors") return Boolean(item.error);
  return true;
}

function text(value) {
  if (value === null || value === undefined || value === "") return h("span", { class: "muted" }, "—");
  return h("pre", {}, typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

function itemView(item, slug, version, evaluationId) {
  const body = h("div", { class: "body" });
  const el = h("details", { class: "item", "data-ordinal": item.sample_ordinal, "data-verdict": item.error ? "error" : String(item.is_correct) },
    h("summary", {},
      h("strong", {}, `#${item.sample_ordinal}`),
      item.external_id ? h("span", { class: "muted mono" }, item.external_id) : null,
      item.repeat ? h("span", { class: "chip" }, `repeat ${item.repeat}`) : null,
      item.arm && item.arm !== "main" ? h("span", { class: "chip" }, item.arm) : null,
      item.transcript ? h("span", { class: "chip" }, item.transcript.simulated ? "simulated conversation" : "conversation") : null,
      verdictBadge(item),
      h("span", { class: "extract", title: "extracted answer" }, item.extracted ?? "no answer extracted"),
      categoryOf(item.sample) ? h("span", { class: "chip" }, categoryOf(item.sample)) : null,
    ),
    body,
  );
  const fill = async () => {
    if (!item.sample && item.sampleTried !== true) {
      item.sampleTried = true;
      try {
        const got = await api.get(`/v1/benchmarks/${encodeURIComponent(slug)}/samples`, { version, offset: item.sample_ordinal, limit: 1 });
        if (got[0] && got[0].ordinal === item.sample_ordinal) item.sample = got[0];
      } catch {
        // the prompt is optional here
      }
    }
    const sample = item.sample;
    const reasoning = findKey(item.metrics, "reasoning");
    if (item.transcript && !item.verdicts) item.verdicts = await itemVerdicts(evaluationId, item.sample_ordinal);
    const io = item.transcript
      ? [h("h3", {}, "Conversation"), conversationView(item.transcript, item.verdicts || [])]
      : [h("h3", {}, "Prompt"), sample ? text(sample.prompt || sample.prompt_error) : h("p", { class: "muted" }, "Not available."),
        h("h3", {}, "Model output"), text(item.output)];
    replace(body,
      io,
      h("h3", {}, "Reference"), sample ? text(sample.reference) : h("p", { class: "muted" }, "Not available."),
      h("dl", { class: "kv" },
        h("dt", {}, "Extracted answer"), h("dd", {}, item.extracted ?? "—"),
        h("dt", {}, "Verdict"), h("dd", {}, verdictBadge(item)),
        h("dt", {}, "Score"), h("dd", {}, item.score === null ? "—" : String(item.score)),
        h("dt", {}, "Metric"), h("dd", {}, `${item.metric_name ?? "—"} ${item.metric_version ? `v${item.metric_version}` : ""}`),
        h("dt", {}, "Latency"), h("dd", {}, item.latency_ms === null ? "—" : `${num(item.latency_ms, 1)} ms`),
        h("dt", {}, "Tokens (prompt / completion)"), h("dd", {}, `${item.prompt_tokens ?? "—"} / ${item.completion_tokens ?? "—"}`),
        h("dt", {}, "Attempt"), h("dd", {}, String(item.attempt)),
      ),
      reasoning && !item.transcript ? [h("h3", {}, "Judge reasoning"), text(reasoning)] : null,
      item.error ? [h("h3", {}, "Error"), json(item.error)] : null,
      Object.keys(item.metrics || {}).length ? [h("h3", {}, "Metric details"), json(item.metrics)] : null,
    );
  };
  el.addEventListener("toggle", () => { if (el.open) fill(); });
  return el;
}

/** Attach samples to items of one page when their ordinals span at most 400 (else each item loads its own). */
async function joinSamples(items, slug, version) {
  if (!items.length) return;
  const ords = items.map((i) => i.sample_ordinal);
  const lo = Math.min(...ords);
  const hi = Math.max(...ords);
  if (hi - lo > 400) return;
  const bySample = new Map();
  for (let offset = lo; offset <= hi; offset += 100) {
    let got;
    try {
      got = await api.get(`/v1/benchmarks/${encodeURIComponent(slug)}/samples`, { version, offset, limit: Math.min(100, hi - offset + 1) });
    } catch {
      return;
    }
    for (const s of got) bySample.set(s.ordinal, s);
    if (got.length < Math.min(100, hi - offset + 1)) break;
  }
  for (const item of items) item.sample = bySample.get(item.sample_ordinal) || item.sample;
}

export async function browser(ctx, ev, pane) {
  const slug = ev.benchmark.slug;
  const version = ev.benchmark.version;
  const all = [];
  let cursor = null;
  let done = false;
  let shownLimit = SHOW_STEP;
  const kind = select(FILTERS, { id: "item-filter" });
  const category = select([["", "every category"]], { id: "item-category" });
  const list = h("div", { id: "item-list" });
  const count = h("p", { class: "muted", id: "item-count", "aria-live": "polite" });
  const more = h("div");
  const controls = h("form", { class: "filters", id: "item-filters" }, field("Show", kind, { name: "kind" }), field("Category", category, { name: "category" }));
  controls.addEventListener("submit", (e) => e.preventDefault());

  async function fetchPage() {
    const page = await api.get(`/v1/evaluations/${ev.id}/results`, { limit: PAGE, cursor });
    await joinSamples(page.items, slug, version);
    all.push(...page.items);
    cursor = page.next_cursor;
    done = !cursor;
    const cats = [...new Set(all.map((i) => categoryOf(i.sample)).filter(Boolean))].sort();
    const current = category.value;
    replace(category, [["", "every category"], ...cats.map((c) => [c, c])].map(([v, l]) => h("option", { value: v, selected: v === current }, l)));
    category.disabled = cats.length === 0;
  }

  async function draw() {
    const k = kind.value;
    const c = category.value;
    let matching = all.filter((i) => keep(i, k, c));
    // scan further pages until a screenful matches or the results end (bounded per click)
    for (let extra = 0; matching.length < shownLimit && !done && extra < 10; extra += 1) {
      await fetchPage();
      matching = all.filter((i) => keep(i, k, c));
    }
    replace(list, matching.slice(0, shownLimit).map((i) => itemView(i, slug, version, ev.id)));
    if (!matching.length) list.appendChild(h("p", { class: "muted empty" }, "No item matches."));
    count.textContent = `${Math.min(matching.length, shownLimit)} shown · ${matching.length} of ${all.length} loaded items match${done ? "" : ` · ${num(ev.progress.total)} in the evaluation`}`;
    replace(more, matching.length > shownLimit || !done
      ? h("button", { type: "button", class: "btn", id: "items-more", onclick: () => { shownLimit += SHOW_STEP; draw(); } }, "Show more")
      : null);
  }
  kind.addEventListener("change", () => { shownLimit = SHOW_STEP; draw(); });
  category.addEventListener("change", () => { shownLimit = SHOW_STEP; draw(); });
  replace(pane, controls, count, list, more);
  try {
    await fetchPage();
    await draw();
  } catch (err) {
    replace(pane, errorBox(err));
  }
  return null;
}
