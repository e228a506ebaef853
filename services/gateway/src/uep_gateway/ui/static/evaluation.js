// One evaluation: live progress (a short poll of GET /v1/evaluations/{id} while it runs), the actions the
// role allows (cancel, stop, retry, pin, rescore — each confirmed), and four tabs: the HTML report, the
// per-item browser, the comparison with a baseline, and downloads.

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { browser } from "./items.js";
import {
  TERMINAL, badge, confirmDialog, duration, errorBox, field, headlineText, headlineValue, json, metricName, num, pageHeader, pct, pctCi,
  progressBar, section, select, shortId, table, toast, when,
} from "./ui.js";

const POLL_MS = 1500;

function stat(k, v, id) {
  return h("div", { class: "stat" }, h("span", { class: "k" }, k), h("span", { class: "v", id }, v));
}

/** items/s and ETA from the polls seen on this page (else from started_at). */
function rate(ev, seen) {
  const p = ev.progress;
  let perS = null;
  if (seen.length >= 2) {
    const [t0, c0] = seen[0];
    const [t1, c1] = seen[seen.length - 1];
    if (t1 > t0 && c1 > c0) perS = (c1 - c0) / ((t1 - t0) / 1000);
  }
  if (perS === null && ev.started_at && p.completed) {
    const end = ev.completed_at ? new Date(ev.completed_at) : new Date();
    const s = (end - new Date(ev.started_at)) / 1000;
    if (s > 0) perS = p.completed / s;
  }
  const left = Math.max(0, p.total - p.completed);
  return { perS, eta: perS && !TERMINAL.has(ev.status) ? left / perS : null };
}

function progressPanel(ev, seen) {
  const p = ev.progress;
  const running = !TERMINAL.has(ev.status);
  // the summary's headline: the figure, interval and method every view shows, and what it leaves out
  const hl = !running && ev.headline && ev.headline.value !== null && ev.headline.value !== undefined ? ev.headline : null;
  const acc = running
    ? pctCi(p.accuracy, p.ci_low, p.ci_high)
    : hl ? headlineValue(hl)
    : ev.summary ? pctCi(ev.summary.accuracy, ev.summary.ci_low, ev.summary.ci_high) : "—";
  const { perS, eta } = rate(ev, seen);
  return h("section", { class: "panel", id: "progress", "data-status": ev.status },
    h("h2", {}, running ? "Progress" : "Result"),
    h("p", {}, progressBar(p.completed, p.total, "items done"), h("span", { id: "items-done" }, `${num(p.completed)} / ${num(p.total)} items`)),
    h("div", { class: "stats" },
      stat(running ? "Accuracy so far [95 % CI]" : hl ? `${hl.metric === "accuracy" ? "Accuracy" : metricName(hl.metric)} [95 % CI]` : "Accuracy [95 % CI]", acc, "accuracy"),
      stat("Errors", num(p.errors), "errors"),
      stat("Items/s", perS === null ? "—" : perS.toFixed(2), "rate"),
      stat(running ? "ETA" : "Took", running ? duration(eta) : duration(ev.started_at && ev.completed_at ? (new Date(ev.completed_at) - new Date(ev.started_at)) / 1000 : null), "eta"),
      p.discarded ? stat("Discarded after cancel", num(p.discarded)) : null,
    ),
    hl && hl.note ? h("p", { class: "note", id: "headline-note" }, `${ev.status} · ${hl.note}`) : null,
    ev.error ? h("p", { class: "note" }, ev.error) : null,
  );
}

function summaryPanel(ev) {
  const s = ev.summary;
  if (!s) return null;
  const rows = Object.entries(s).filter(([, v]) => v === null || ["number", "string", "boolean"].includes(typeof v));
  const nested = Object.entries(s).filter(([, v]) => v && typeof v === "object");
  return h("details", { class: "panel" }, h("summary", {}, "Summary (every field)"),
    h("dl", { class: "kv" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v === null ? "—" : typeof v === "number" ? String(Math.round(v * 1e6) / 1e6) : String(v))])),
    nested.length ? json(Object.fromEntries(nested)) : null,
  );
}

function actions(ctx, ev, reload) {
  if (!ctx.canBuild) return [];
  const base = `/v1/evaluations/${ev.id}`;
  const out = [];
  const act = (label, id, title, text, fn) =>
    out.push(h("button", { type: "button", class: "btn", id, onclick: async () => {
      if (!(await confirmDialog(title, text, label))) return;
      try {
        await fn();
        toast(`${label}: done`);
      } catch (err) {
        toast(`${label}: ${api.errorLines(err).join("; ")}`, "error");
      }
      reload();
    } }, label));
  const running = ["pending", "running"].includes(ev.status);
  if (running) act("Cancel", "act-cancel", "Cancel this evaluation?", "Nothing more is dispatched; stored results stay; results in flight are discarded.", () => api.post(`${base}/cancel`));
  if (running || ev.status === "interrupted") act("Stop", "act-stop", "Stop this evaluation?", "Nothing more is dispatched; results in flight are still stored and it ends 'stopped' with a partial summary.", () => api.post(`${base}/stop`));
  if (TERMINAL.has(ev.status) || ev.status === "interrupted") act("Retry", "act-retry", "Retry failed and unfinished items?", "Finished items are kept; failed and unfinished ones run again.", () => api.post(`${base}/retry`));
  if (ev.status === "completed") {
    act("Pin as baseline", "act-pin", "Pin as baseline?", "It becomes the baseline of its model and benchmark in this tenant (the previous pin is removed).", () => api.post(`${base}/pin`));
    act("Unpin", "act-unpin", "Remove the pin?", "The baseline falls back to the previous completed evaluation.", () => api.del(`${base}/pin`));
  }
  if (["completed", "failed"].includes(ev.status)) act("Rescore", "act-rescore", "Rescore the stored outputs?", "Every stored output is scored again with the scorer's current metric versions (no model call).", () => api.post(`${base}/rescore`));
  return out;
}

// ---------------------------------------------------------------- report tab

async function reportTab(ctx, ev, pane) {
  if (!TERMINAL.has(ev.status)) {
    replace(pane, h("p", { class: "muted" }, "The report is written when the evaluation ends."));
    return null;
  }
  let stop = false;
  const show = async () => {
    const path = `/v1/evaluations/${ev.id}/report.html`;
    let src = path;
    if (!ctx.directLinks()) src = await api.blobUrl(path);
    replace(pane,
      h("p", { class: "actions" }, h("a", { href: path, target: "_blank", rel: "noopener", class: "btn small" }, "Open the report on its own page")),
      h("iframe", { class: "report", id: "report-frame", src, title: `Report of evaluation ${shortId(ev.id)}`, sandbox: "allow-scripts" }),
    );
  };
  const check = async () => {
    if (stop) return;
    let reports;
    try {
      reports = await api.get(`/v1/evaluations/${ev.id}/reports`);
    } catch (err) {
      replace(pane, errorBox(err));
      return;
    }
    if (reports.some((r) => r.status === "ready")) {
      await show();
      return;
    }
    const pending = reports.find((r) => r.status === "pending");
    if (pending) {
      replace(pane, h("p", { class: "muted", id: "report-pending" }, "The report is being written…"));
      setTimeout(check, 1500);
      return;
    }
    const failed = reports.find((r) => r.status === "failed");
    const justEnded = !reports.length && ev.completed_at && Date.now() - new Date(ev.completed_at) < 120_000;
    if (justEnded) setTimeout(check, 2000); // the reporter writes one on completion: wait for it a while
    replace(pane,
      justEnded ? h("p", { class: "muted", id: "report-pending" }, "Waiting for the report the reporter writes on completion…") : null,
      h("p", {}, failed ? `The last report failed: ${failed.error || "no reason given"}.` : "No report yet."),
      ctx.canBuild ? h("button", { type: "button", class: "btn primary", id: "build-report", onclick: async () => {
        try {
          await api.post(`/v1/evaluations/${ev.id}/reports`, {});
        } catch (err) {
          replace(pane, errorBox(err));
          return;
        }
        check();
      } }, "Build the report") : null,
    );
  };
  await check();
  return () => { stop = true; };
}

// ---------------------------------------------------------------- compare tab

function sign(x) {
  return x === null || x === undefined ? "—" : `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)} pts`;
}

function outcome(o) {
  if (!o) return "—";
  if (o.error) return `error (${o.error})`;
  return o.is_correct === true ? "correct" : o.is_correct === false ? "wrong" : "no verdict";
}

async function compareTab(ctx, ev, pane, params) {
  let candidates = [];
  try {
    const page = await api.get("/v1/evaluations", { benchmark: ev.benchmark.slug, status: "completed", limit: 100 });
    candidates = page.items.filter((c) => c.id !== ev.id);
  } catch {
    candidates = [];
  }
  const pick = select([["", "default: the pinned baseline, else the previous completed run"],
    ...candidates.map((c) => [c.id, `${c.model.name}${c.arm !== "main" ? ` (${c.arm})` : ""} · ${when(c.created_at)} · ${c.headline ? headlineText(c.headline) : pct(c.accuracy)} · ${shortId(c.id)}`])],
  { value: params.get("baseline") || "", id: "baseline-pick" });
  const out = h("div", { id: "compare-result", "aria-live": "polite" });
  const run = async () => {
    replace(out, h("p", { class: "muted" }, "Comparing…"));
    let c;
    try {
      c = await api.get(`/v1/evaluations/${ev.id}/compare`, { baseline: pick.value || null, limit: 200 });
    } catch (err) {
      replace(out, errorBox(err));
      return;
    }
    const t = c.table;
    const a = c.accuracy;
    replace(out,
      h("p", {}, `Baseline ${shortId(c.baseline_evaluation_id)} (${c.baseline_reason}); paired by ${c.paired_by}; `,
        `${num(c.n_paired)} of ${num(c.n_current)} items pair (${num(c.n_paired_with_verdicts)} with verdicts on both sides; `,
        `${num(c.n_current - c.n_paired)} only in this run, ${num(c.n_baseline - c.n_paired)} only in the baseline).`),
      h("div", { class: "stats" },
        stat("Accuracy: baseline → this", `${pct(a.baseline_mean)} → ${pct(a.current_mean)}`),
        stat("Difference [95 % CI]", `${sign(a.difference)} [${sign(a.ci_low)}, ${sign(a.ci_high)}]`, "compare-diff"),
        stat("McNemar exact p", `${c.mcnemar.p_value.toPrecision(3)}${c.mcnemar.significant ? " (significant)" : ""}`),
        stat("Regressions / improvements", `${c.mcnemar.b} / ${c.mcnemar.c}`, "compare-bc"),
      ),
      table([
        { label: "", cell: (r) => h("strong", {}, r[0]) },
        { label: "Baseline correct", class: "num", cell: (r) => num(r[1]) },
        { label: "Baseline wrong", class: "num", cell: (r) => num(r[2]) },
      ], [["This correct", t.both_correct, t.current_only_correct], ["This wrong", t.baseline_only_correct, t.both_wrong]], { caption: "Paired outcomes (2×2)" }),
      h("h3", {}, "Changed items"),
      table([
        { label: "Change", cell: (r) => h("span", { class: `badge ${r.kind === "regression" || r.kind === "newly_errored" ? "st-wrong" : r.kind === "improvement" || r.kind === "error_fixed" ? "st-completed" : ""}` }, r.kind.replace("_", " ")) },
        { label: "Item", cell: (r) => `#${r.ordinal}${r.external_id ? ` (${r.external_id})` : ""}${r.repeat ? ` r${r.repeat}` : ""}` },
        { label: "Baseline", cell: (r) => outcome(r.baseline) },
        { label: "This run", cell: (r) => outcome(r.current) },
        { label: "Answer: baseline → this", cell: (r) => `${(r.baseline && r.baseline.extracted) ?? "—"} → ${(r.current && r.current.extracted) ?? "—"}` },
      ], c.transitions, { empty: "No item changed." }),
      c.transitions_truncated ? h("p", { class: "hint" }, "More changed items than listed; the counts cover every item.") : null,
      h("details", {}, h("summary", {}, "What differs between the two runs (fingerprint)"), json(c.fingerprint_diff)),
    );
  };
  const form = h("form", { class: "filters", id: "compare-form" }, h("div", { class: "field grow" }, h("label", { for: "baseline-pick" }, "Baseline"), pick),
    h("button", { type: "submit", class: "btn primary", id: "compare-run" }, "Compare"));
  form.addEventListener("submit", (e) => { e.preventDefault(); run(); });
  replace(pane, form, out);
  if (params.get("baseline")) run();
  return null;
}

// ---------------------------------------------------------------- downloads tab

const CSV_COLUMNS = ["sample_ordinal", "external_id", "repeat", "arm", "is_correct", "score", "extracted", "metric_name", "metric_version", "latency_ms", "prompt_tokens", "completion_tokens", "error", "output"];

function csvCell(v) {
  if (v === null || v === undefined) return "";
  let s = typeof v === "object" ? JSON.stringify(v) : String(v);
  if (typeof v === "string" && /^[=+\-@\t\r]/.test(s)) s = `'${s}`; // a spreadsheet must not run a cell as a formula
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

async function allResults(ev, status) {
  const out = [];
  for await (const items of api.pages(`/v1/evaluations/${ev.id}/results`, { limit: 1000 })) {
    out.push(...items);
    status.textContent = `${num(out.length)} items fetched…`;
  }
  return out;
}

function downloadsTab(ctx, ev, pane) {
  const status = h("p", { class: "muted", "aria-live": "polite", id: "download-status" });
  const file = (fmt) => async () => {
    try {
      api.saveBlob(await api.blobUrl(`/v1/evaluations/${ev.id}/report.${fmt}`), `report-${ev.id}.${fmt}`);
    } catch (err) {
      status.textContent = api.errorLines(err).join("; ");
    }
  };
  const perItem = (fmt) => async () => {
    const rows = await allResults(ev, status);
    const text = fmt === "jsonl"
      ? rows.map((r) => JSON.stringify(r)).join("\n") + "\n"
      : [CSV_COLUMNS.join(","), ...rows.map((r) => CSV_COLUMNS.map((c) => csvCell(r[c])).join(","))].join("\r\n") + "\r\n";
    api.saveBlob(new Blob([text], { type: fmt === "jsonl" ? "application/x-ndjson" : "text/csv" }), `results-${ev.id}.${fmt}`);
    status.textContent = `${num(rows.length)} items saved as ${fmt.toUpperCase()}.`;
  };
  replace(pane,
    h("div", { class: "actions" },
      h("button", { type: "button", class: "btn", id: "dl-html", onclick: file("html") }, "Report (HTML)"),
      h("button", { type: "button", class: "btn", id: "dl-pdf", onclick: file("pdf") }, "Report (PDF)"),
      h("button", { type: "button", class: "btn", id: "dl-json", onclick: file("json") }, "Report (JSON)"),
      h("button", { type: "button", class: "btn", id: "dl-jsonl", onclick: perItem("jsonl") }, "Every item (JSONL)"),
      h("button", { type: "button", class: "btn", id: "dl-csv", onclick: perItem("csv") }, "Every item (CSV)"),
    ),
    h("p", { class: "hint" }, "Per-item files are built in the browser from the paginated results API."),
    status,
  );
  return null;
}

// ---------------------------------------------------------------- the page

const TABS = [["report", "Report"], ["items", "Items"], ["compare", "Compare"], ["downloads", "Downloads"]];

export async function detail(ctx, view, [id], params) {
  let timer = null;
  let tabCleanup = null;
  const seen = [];
  let ev;
  let tab = params.get("tab") || "report";
  const head = h("div");
  const progress = h("div");
  const extra = h("div");
  const tabs = h("div", { class: "tabs", role: "tablist", "aria-label": "Evaluation views" });
  const pane = h("div", { role: "tabpanel", id: "tab-pane" });

  async function openTab(name) {
    tab = name;
    if (tabCleanup) tabCleanup();
    tabCleanup = null;
    for (const b of tabs.querySelectorAll("button")) b.setAttribute("aria-selected", String(b.dataset.tab === name));
    const url = new URL(location.href);
    url.searchParams.set("tab", name);
    history.replaceState(null, "", url.pathname + url.search);
    replace(pane, h("p", { class: "muted" }, "Loading…"));
    if (name === "report") tabCleanup = await reportTab(ctx, ev, pane);
    else if (name === "items") tabCleanup = await browser(ctx, ev, pane);
    else if (name === "compare") tabCleanup = await compareTab(ctx, ev, pane, params);
    else tabCleanup = downloadsTab(ctx, ev, pane);
  }
  replace(tabs, TABS.map(([key, label]) => h("button", { type: "button", role: "tab", "data-tab": key, id: `tab-${key}`, "aria-selected": String(key === tab), onclick: () => openTab(key) }, label)));
  tabs.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
    const keys = TABS.map((t) => t[0]);
    const next = keys[(keys.indexOf(tab) + (e.key === "ArrowRight" ? 1 : keys.length - 1)) % keys.length];
    openTab(next);
    tabs.querySelector(`[data-tab="${next}"]`).focus();
  });

  function drawHead() {
    const groupLink = ev.experiment_id ? h("a", { href: `/ui/experiments/${ev.experiment_id}`, class: "btn small" }, "A/B experiment")
      : ev.batch_id ? h("a", { href: `/ui/batches/${ev.batch_id}`, class: "btn small" }, "Batch") : null;
    replace(head,
      pageHeader(`${ev.model.name} on ${ev.benchmark.slug}`, badge(ev.status), ...actions(ctx, ev, poll)),
      h("p", { class: "muted" },
        h("span", { class: "mono" }, ev.id), ` · arm ${ev.arm} · priority ${ev.priority} · repeats ${ev.repeats}`,
        ev.sample_limit ? ` · limit ${ev.sample_limit}` : "", ` · created ${when(ev.created_at)} `, groupLink),
    );
  }

  async function poll() {
    clearTimeout(timer);
    let fresh;
    try {
      fresh = await api.get(`/v1/evaluations/${id}`);
    } catch (err) {
      replace(view, errorBox(err));
      return;
    }
    const wasRunning = ev && !TERMINAL.has(ev.status);
    const first = !ev;
    ev = fresh;
    seen.push([Date.now(), ev.progress.completed]);
    if (seen.length > 20) seen.shift();
    drawHead();
    replace(progress, progressPanel(ev, seen));
    replace(extra, summaryPanel(ev));
    if (first || (wasRunning && TERMINAL.has(ev.status))) openTab(tab);
    if (!TERMINAL.has(ev.status)) timer = setTimeout(poll, POLL_MS);
  }
  replace(view, head, progress, extra, tabs, pane);
  await poll();
  return () => {
    clearTimeout(timer);
    if (tabCleanup) tabCleanup();
  };
}
