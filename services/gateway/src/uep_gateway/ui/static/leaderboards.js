// Leaderboards: every board, one board with its tie groups (entries whose 95 % intervals cannot be told
// apart share a group and a rank), its rank history, filters by score type, item set and benchmark version,
// and a radar comparing chosen models across benchmarks (GET /v1/leaderboards/compare?format=svg).

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { ciText, errorBox, field, figureText, num, pageHeader, section, select, shortId, table, when } from "./ui.js";

/** An entry's score and interval, written as every other view writes a figure (ui.js: figureText, ciText):
 * a Wilson interval belongs to a proportion (a percentage), a bootstrap one to any other score. */
function score(e) {
  if (e.score === null || e.score === undefined) return "—";
  const proportion = e.method === "wilson";
  const ci = ciText(e.ci_low, e.ci_high, proportion, e.method);
  return `${figureText(e.score, proportion)}${ci ? ` ${ci}` : ""}`;
}

export async function boards(ctx, view) {
  let list;
  try {
    list = await api.get("/v1/leaderboards");
  } catch (err) {
    replace(view, errorBox(err));
    return;
  }
  const models = new Set();
  const radarOut = h("div", { id: "radar-out", "aria-live": "polite" });
  const modelSet = h("div", { class: "checks", id: "radar-models" });
  const benchSet = h("div", { class: "checks", id: "radar-benchmarks" });
  const form = h("form", { id: "radar-form" },
    h("fieldset", {}, h("legend", {}, "Models"), modelSet),
    h("fieldset", {}, h("legend", {}, "Benchmarks (none ticked: every board one of the models is on)"), benchSet),
    h("button", { type: "submit", class: "btn primary", id: "radar-run" }, "Compare on a radar"),
  );
  const slugs = [...new Set(list.map((b) => b.benchmark))];
  replace(benchSet, slugs.map((s) => h("label", {}, h("input", { type: "checkbox", value: s }), s)));
  // the models on the boards: from each board's entries (first board per benchmark)
  Promise.all(slugs.slice(0, 24).map((s) => api.get(`/v1/leaderboards/${encodeURIComponent(s)}`).catch(() => null))).then((got) => {
    for (const b of got) for (const e of (b && b.entries) || []) models.add(e.model);
    replace(modelSet, [...models].sort().map((m, i) => h("label", {}, h("input", { type: "checkbox", value: m, checked: i < 3 }), m)));
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const chosen = [...modelSet.querySelectorAll("input:checked")].map((i) => i.value);
    const benches = [...benchSet.querySelectorAll("input:checked")].map((i) => i.value);
    if (!chosen.length) {
      replace(radarOut, h("p", { class: "alert" }, "Tick at least one model."));
      return;
    }
    const query = { models: chosen.join(","), benchmarks: benches.join(",") || null };
    replace(radarOut, h("p", { class: "muted" }, "Drawing…"));
    try {
      const [src, data] = await Promise.all([
        api.blobUrl("/v1/leaderboards/compare", { ...query, format: "svg" }),
        api.get("/v1/leaderboards/compare", query),
      ]);
      const rows = [];
      for (const r of data.rows || []) {
        for (const [label, e] of Object.entries(r.scores || {})) rows.push({ model: r.model, board: label, ...(e || {}) });
      }
      replace(radarOut,
        h("img", { class: "radar", id: "radar-img", src, alt: `Radar of ${chosen.join(", ")} across ${benches.join(", ") || "their benchmarks"}` }),
        rows.length ? table([
          { label: "Model", cell: (r) => [r.model, ...(r.judges || []).filter((j) => j.flagged).map((j) =>
            h("a", { href: "/ui/judges", class: "badge st-failed", title: `judge ${j.judge_model}: agreement with people ${Number(j.agreement).toFixed(2)}, below the threshold` }, `judge ${j.judge_model} flagged`))] },
          { label: "Board", cell: (r) => r.board },
          { label: "Score [95 % CI]", class: "num", cell: score },
          { label: "Rank", class: "num", cell: (r) => (r.rank ?? "—") },
        ], rows) : null,
      );
    } catch (err) {
      replace(radarOut, errorBox(err));
    }
  });
  replace(view,
    pageHeader("Leaderboards"),
    section("Every board", table([
      { label: "Benchmark", cell: (b) => h("a", { href: `/ui/leaderboards/${encodeURIComponent(b.benchmark)}?score_type=${encodeURIComponent(b.score_type)}` }, b.benchmark) },
      { label: "Score type", cell: (b) => b.score_type },
      { label: "Models", class: "num", cell: (b) => num(b.models) },
      { label: "Evaluations", class: "num", cell: (b) => num(b.evaluations) },
      { label: "Last evaluated", cell: (b) => when(b.last_evaluated) },
    ], list, { empty: "No board yet: a completed release evaluation enters its benchmark's board." })),
    section("Compare models across benchmarks", form, radarOut),
  );
}

function boardTable(board) {
  if (!board.entries.length) return h("p", { class: "muted empty" }, "No entry on this item set.");
  const groups = [];
  for (const e of board.entries) {
    const last = groups[groups.length - 1];
    if (last && last.key === e.tie_group && e.tie_group !== null) last.entries.push(e);
    else groups.push({ key: e.tie_group, entries: [e] });
  }
  const head = h("thead", {}, h("tr", {}, ["Rank", "Model", "Version", "Score [95 % CI]", "Items", "Runs", "Last evaluated", "Evaluation"].map((t) => h("th", { scope: "col" }, t))));
  const bodies = groups.map((g, i) =>
    h("tbody", { class: `tie-group ${i % 2 ? "odd" : ""}`, "data-tie-group": g.key ?? "none" },
      g.entries.length > 1 ? h("tr", {}, h("td", { colspan: 8, class: "tie-label" }, `Tie group ${g.key}: ${g.entries.length} entries whose intervals overlap share rank ${g.entries[0].rank}`)) : null,
      g.entries.map((e) => h("tr", { "data-model": e.model },
        h("td", { class: "num" }, e.rank ?? "—"),
        h("td", {}, e.model),
        h("td", {}, e.model_version),
        h("td", { class: "num", title: e.method_detail }, score(e)),
        h("td", { class: "num" }, num(e.n)),
        h("td", { class: "num" }, num(e.evaluations)),
        h("td", {}, when(e.last_evaluated)),
        h("td", {}, h("a", { href: `/ui/evaluations/${e.evaluation_id}`, class: "mono" }, shortId(e.evaluation_id))),
      )),
    ),
  );
  return h("div", { class: "table-wrap" }, h("table", { id: "board-table" }, head, bodies));
}

export async function board(ctx, view, [slug], params) {
  const query = { score_type: params.get("score_type"), item_set: params.get("item_set"), benchmark_version: params.get("benchmark_version") };
  let b, hist, all;
  try {
    [b, hist, all] = await Promise.all([
      api.get(`/v1/leaderboards/${encodeURIComponent(slug)}`, query),
      api.get(`/v1/leaderboards/${encodeURIComponent(slug)}/history`, { score_type: query.score_type, limit: 20 }),
      api.get(`/v1/leaderboards/${encodeURIComponent(slug)}`, { score_type: query.score_type }),
    ]);
  } catch (err) {
    replace(view, pageHeader(`Leaderboard: ${slug}`), errorBox(err));
    return;
  }
  const versions = [...new Set(all.item_sets.map((s) => s.benchmark_version))];
  const st = select(b.score_types.map((t) => [t, t]), { value: b.score_type || "" });
  const set = select(b.item_sets.map((s) => [s.key, `${s.benchmark_version.slice(0, 12)} · ${s.samples ?? "all"} samples · ${s.entries} entries`]), { value: b.item_set || "" });
  const ver = select([["", "every version"], ...versions.map((v) => [v, v.slice(0, 16)])], { value: query.benchmark_version || "" });
  const go = (extra) => ctx.navigate(api.withQuery(`/ui/leaderboards/${encodeURIComponent(slug)}`, { score_type: st.value, ...extra }));
  st.addEventListener("change", () => go({}));
  set.addEventListener("change", () => go({ item_set: set.value, benchmark_version: ver.value }));
  ver.addEventListener("change", () => go({ benchmark_version: ver.value }));
  replace(view,
    pageHeader(`Leaderboard: ${slug}`, h("a", { href: "/ui/leaderboards", class: "btn small" }, "Every board")),
    h("form", { class: "filters" }, field("Score type", st, { name: "score_type" }), field("Item set", set, { name: "item_set" }), field("Benchmark version", ver, { name: "benchmark_version" })),
    section(`Ranking (${b.total} entries)`, boardTable(b), h("p", { class: "hint" }, `Tie rule: ${b.tie_rule}.`)),
    section("Rank history", table([
      { label: "When", cell: (s) => when(s.created_at) },
      { label: "Recorded evaluation", cell: (s) => (s.evaluation_id ? h("a", { href: `/ui/evaluations/${s.evaluation_id}`, class: "mono" }, shortId(s.evaluation_id)) : "—") },
      { label: "Entries", class: "num", cell: (s) => num(s.entries.length) },
      { label: "Changes", cell: (s) => (s.changes.length ? h("ul", {}, s.changes.map((c) => h("li", {},
        `${c.model} ${c.model_version}: ${c.from_rank === null ? "new" : `rank ${c.from_rank}`} → rank ${c.to_rank ?? "—"}${c.from_tie_group !== c.to_tie_group ? ` (tie group ${c.from_tie_group ?? "—"} → ${c.to_tie_group ?? "—"})` : ""}`))) : "no change") },
    ], hist.snapshots, { empty: "No snapshot yet." })),
  );
}
