// Shared pieces of the pages: formatting, tables, form fields, status badges, the confirmation dialog, the
// toast, and showing an API error next to the field it names.

import { errorLines } from "./api.js";
import { h, replace, uid } from "./dom.js";

export const TERMINAL = new Set(["completed", "failed", "cancelled", "stopped", "budget_exhausted"]);
export const STATUSES = ["pending", "running", "completed", "failed", "cancelled", "interrupted", "stopped", "budget_exhausted"];
export const PRIORITIES = ["urgent", "high", "normal", "low"];

export function pct(x, digits = 1) {
  return x === null || x === undefined || Number.isNaN(x) ? "—" : `${(100 * x).toFixed(digits)} %`;
}

const METHOD_NAMES = { wilson: "Wilson", bootstrap: "bootstrap" };

/** A figure: a proportion as "72.0 %", any other score as "0.935"; "—" without one. */
export function figureText(x, proportion) {
  if (x === null || x === undefined || Number.isNaN(Number(x))) return "—";
  return proportion ? pct(x) : Number(x).toFixed(3);
}

/** Its 95 % interval: "[61.2–80.7] Wilson" for a proportion (percentage points), "[0.901–0.962] bootstrap"
 * otherwise, the method left out when unknown; "" when an end is missing. The CLI (uep_cli.figures) and the
 * report write the same text. */
export function ciText(lo, hi, proportion, method) {
  if (lo === null || lo === undefined || hi === null || hi === undefined) return "";
  const f = (x) => (proportion ? (100 * x).toFixed(1) : Number(x).toFixed(3));
  const named = method ? ` ${METHOD_NAMES[method] || method}` : "";
  return `[${f(lo)}–${f(hi)}]${named}`;
}

/** "72.0 % [61.2–80.7] Wilson": a proportion with its Wilson interval (the accuracy so far of a running
 * evaluation, an arm's accuracy). */
export function pctCi(x, lo, hi) {
  if (x === null || x === undefined) return "—";
  const ci = ciText(lo, hi, true, "wilson");
  return ci ? `${pct(x)} ${ci}` : pct(x);
}

const METRIC_NAMES = {
  accuracy: "accuracy", balanced_accuracy: "balanced accuracy", f1_macro: "F1 (macro)", f1_micro: "F1 (micro)",
  f1_weighted: "F1 (weighted)", precision_macro: "precision (macro)", recall_macro: "recall (macro)", roc_auc: "ROC-AUC",
  pr_auc: "PR-AUC", log_loss: "log loss", brier: "Brier score", ece: "ECE", mrr: "MRR",
};

/** How every view names a headline metric, as the report does (uep_reporter.report.set_name): "ndcg@10" →
 * "NDCG@10", "f1_macro" → "F1 (macro)", a per-item metric as it is. */
export function metricName(key) {
  if (!key) return "—";
  if (METRIC_NAMES[key]) return METRIC_NAMES[key];
  const [family, k] = key.split("@");
  if (k === undefined) return key;
  return `${{ ndcg: "NDCG", map: "MAP" }[family] ?? family}@${k}`;
}

/** An evaluation's headline (the API's ``headline``: uep_common.analytics.summary.headline_of), the one figure
 * and interval every view shows: accuracy as "72.0 % [61.2–80.7] Wilson", another metric as
 * "NDCG@10 0.935 [0.901–0.962] bootstrap". "—" without one. */
export function headlineText(hl) {
  const text = headlineValue(hl);
  return text === "—" || hl.metric === "accuracy" ? text : `${metricName(hl.metric)} ${text}`;
}

/** The headline's figure and interval without the metric's name (where a label names it). */
export function headlineValue(hl) {
  if (!hl || hl.value === null || hl.value === undefined) return "—";
  const proportion = hl.proportion ?? hl.metric === "accuracy";
  const ci = ciText(hl.ci_low, hl.ci_high, proportion, hl.method);
  return `${figureText(hl.value, proportion)}${ci ? ` ${ci}` : ""}`;
}

/** What a headline leaves out ("7 errors, excluded from the headline"), as a warning line; null when nothing. */
export function headlineNote(hl, id) {
  return hl && hl.note ? h("span", { class: "headline-note", id, title: "items not counted in the headline" }, hl.note) : null;
}

export function num(x, digits = 0) {
  if (x === null || x === undefined || Number.isNaN(Number(x))) return "—";
  return Number(x).toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function money(x, currency) {
  if (x === null || x === undefined) return "—";
  const v = Number(x);
  const digits = v !== 0 && Math.abs(v) < 0.01 ? 6 : 2;
  return `${v.toFixed(digits)} ${currency || ""}`.trim();
}

export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export function shortId(id) {
  return String(id || "").slice(0, 8);
}

export function badge(status) {
  return h("span", { class: `badge st-${String(status).replace(/[^a-z_]/g, "")}` }, String(status).replace("_", " "));
}

export function verdictBadge(item) {
  if (item.error) return h("span", { class: "badge st-failed" }, "error");
  if (item.is_correct === true) return h("span", { class: "badge st-completed" }, "correct");
  if (item.is_correct === false) return h("span", { class: "badge st-wrong" }, "wrong");
  return h("span", { class: "badge" }, "no verdict");
}

export function progressBar(done, total, label) {
  const fraction = total ? Math.min(1, done / total) : 0;
  const bar = h("span", { class: "bar-fill" });
  bar.style.width = `${(100 * fraction).toFixed(1)}%`;
  return h(
    "span",
    { class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": total, "aria-valuenow": done, "aria-label": label || "progress" },
    bar,
  );
}

/** A table: columns [{label, cell: (row) => node|string, class?}], rows; caption optional. */
export function table(columns, rows, { caption, empty = "Nothing here yet.", rowProps } = {}) {
  if (!rows.length) return h("p", { class: "muted empty" }, empty);
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.class }, c.label)))),
      h(
        "tbody",
        {},
        rows.map((r) => h("tr", rowProps ? rowProps(r) : {}, columns.map((c) => h("td", { class: c.class }, c.cell(r))))),
      ),
    ),
  );
}

/** A labelled form control with a slot for its error: field("Sample limit", input, {name, hint}). */
export function field(label, control, { name, hint } = {}) {
  const id = control.id || uid("in");
  control.id = id;
  if (name) control.name = control.name || name;
  const error = h("p", { class: "field-error", id: `${id}-error`, "aria-live": "polite" });
  const hintEl = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  control.setAttribute("aria-describedby", [hint ? `${id}-hint` : "", `${id}-error`].filter(Boolean).join(" "));
  const wrap = h("div", { class: "field", "data-field": name || "" }, h("label", { for: id }, label), control, hintEl, error);
  return wrap;
}

export function input(props) {
  return h("input", { type: "text", ...props });
}

export function select(options, props = {}) {
  // options: [[value, label]] or [value]
  return h(
    "select",
    props,
    options.map((o) => {
      const [value, label] = Array.isArray(o) ? o : [o, o];
      return h("option", { value, selected: props.value !== undefined && String(props.value) === String(value) }, label);
    }),
  );
}

/** Clear the errors of a form, then show err: each message under the field its loc names (the first loc
 *  segment after body/query that matches a field's data-field, or the joined path), the rest in summary. */
export function showErrors(form, err, summary) {
  for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  if (!err) {
    if (summary) replace(summary);
    return;
  }
  const rest = [];
  const details = err.detail || [{ loc: [], msg: errorLines(err)[0] }];
  for (const d of details) {
    const loc = (d.loc || []).map(String).filter((x) => !["body", "query", "path", "header"].includes(x));
    let target = null;
    for (let n = loc.length; n > 0 && !target; n -= 1) {
      target = form.querySelector(`.field[data-field="${CSS.escape(loc.slice(0, n).join("."))}"]`);
    }
    if (!target && loc.length) target = form.querySelector(`.field[data-field="${CSS.escape(loc[0])}"]`);
    const where = target ? loc.slice(target.dataset.field.split(".").length) : loc;
    const said = where.every((part) => String(d.msg).includes(part));
    const text = where.length && !said ? `${where.join(" · ")}: ${d.msg}` : d.msg;
    if (target) {
      const slot = target.querySelector(".field-error");
      slot.textContent = slot.textContent ? `${slot.textContent}\n${text}` : text;
      const control = target.querySelector("input, select, textarea");
      if (control) control.setAttribute("aria-invalid", "true");
    } else {
      rest.push(text);
    }
  }
  if (summary) {
    const placed = details.length - rest.length;
    replace(summary, h("div", { class: "alert", role: "alert" },
      // status "form": the page's own checks found it, nothing was sent
      h("strong", {}, err.status === "form" ? "Not sent: fix the form first" : `The API refused this (${err.status || "error"})`),
      placed ? ` — ${placed === 1 ? "one problem is" : `${placed} problems are`} shown next to ${placed === 1 ? "its field" : "their fields"}.` : ":",
      rest.length ? h("ul", {}, rest.map((t) => h("li", {}, t))) : null,
    ));
  }
}

/** A message box for a failed load. */
export function errorBox(err) {
  return h("div", { class: "alert", role: "alert" }, errorLines(err).map((t) => h("p", {}, t)));
}

let toastTimer = null;
export function toast(text, kind = "info") {
  const el = document.getElementById("toast");
  replace(el, h("span", { class: `toast toast-${kind}` }, text));
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => replace(el), 6000);
}

/** Ask before an action: resolves true when the user confirms (a modal <dialog>, Escape cancels). */
export function confirmDialog(title, text, confirmLabel = "Confirm") {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "confirm", "aria-labelledby": "confirm-title" });
    const done = (value) => {
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    const ok = h("button", { type: "button", class: "btn danger", onclick: () => done(true) }, confirmLabel);
    replace(
      dialog,
      h("h2", { id: "confirm-title" }, title),
      h("p", {}, text),
      h("div", { class: "actions" }, h("button", { type: "button", class: "btn", onclick: () => done(false) }, "Cancel"), ok),
    );
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    ok.focus();
  });
}

export function section(title, ...children) {
  return h("section", { class: "panel" }, h("h2", {}, title), ...children);
}

export function pageHeader(title, ...actions) {
  return h("div", { class: "page-head" }, h("h1", {}, title), h("div", { class: "actions" }, ...actions));
}

export function link(href, text, props = {}) {
  return h("a", { href, ...props }, text);
}

export function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}
