// Judges: every judge model of the tenant (GET /v1/judges) with its verdicts, cost charged and cost per verdict,
// its agreement with people (newest calibration; flagged under the site threshold) and its calibration history,
// one row per snapshot (an annotation task over judged items). Rows of one snapshot's questions come from the
// same answer.

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { errorBox, money, num, pageHeader, shortId, table, when } from "./ui.js";

function standing(j, threshold) {
  if (j.agreement === null || j.agreement === undefined) return h("span", { class: "badge" }, "not calibrated");
  return j.flagged
    ? h("span", { class: "badge st-failed", title: `agreement below ${threshold}` }, "flagged")
    : h("span", { class: "badge st-completed" }, "calibrated");
}

function agreement(x) {
  return x === null || x === undefined ? "—" : num(x, 2);
}

function history(j, threshold) {
  if (!j.history.length) return h("p", { class: "muted" }, "No calibration yet: create an annotation task with a calibration sample of a judged evaluation.");
  return table([
    { label: "When", cell: (s) => when(s.computed_at) },
    { label: "Evaluation", cell: (s) => h("a", { href: `/ui/evaluations/${s.evaluation_id}`, class: "mono" }, shortId(s.evaluation_id)) },
    { label: "Items", class: "num", cell: (s) => num(s.items) },
    { label: "κ", class: "num", title: "lowest question", cell: (s) => agreement(s.agreement) },
    { label: "α", class: "num hide-narrow", cell: (s) => agreement(s.alpha) },
    { label: "Per question", class: "hide-narrow", cell: (s) => s.questions.map((q) => h("span", { class: "chip" }, `${q.question}: κ ${agreement(q.agreement)}`)) },
    { label: "", cell: (s) => (s.flagged ? h("span", { class: "badge st-failed", title: `below ${threshold}` }, "below") : "") },
  ], j.history);
}

export async function judges(ctx, view) {
  let body;
  try {
    body = await api.get("/v1/judges");
  } catch (err) {
    replace(view, pageHeader("Judges"), errorBox(err));
    return;
  }
  const cur = body.currency;
  replace(view,
    pageHeader("Judges"),
    h("p", { class: "muted" },
      `Agreement = Cohen's κ of the judge with each annotator (quadratic-weighted for ratings), averaged over annotators, lowest over questions. `
      + `A judge under ${num(body.threshold, 2)} is flagged in reports and leaderboards.`),
    table([
      { label: "Judge", cell: (j) => h("strong", { class: "mono" }, j.judge_model) },
      { label: "Standing", cell: (j) => standing(j, body.threshold) },
      { label: "κ", class: "num", cell: (j) => agreement(j.agreement) },
      { label: "Verdicts", class: "num hide-narrow", cell: (j) => [num(j.verdicts), j.invalid_verdicts ? h("div", { class: "muted" }, `${num(j.invalid_verdicts)} invalid`) : null] },
      { label: "Evaluations", class: "num hide-narrow", cell: (j) => num(j.evaluations) },
      { label: "Cost", class: "num", cell: (j) => money(j.cost, cur) },
      { label: "Per verdict", class: "num", cell: (j) => money(j.cost_per_verdict, cur) },
      { label: "Last used", class: "hide-narrow", cell: (j) => when(j.last_used) },
    ], body.judges, { empty: "No judge has judged this tenant's evaluations yet." }),
    ...body.judges.map((j) => h("section", { class: "judge-history" }, h("h2", {}, `${j.judge_model}: calibration history`), history(j, body.threshold))),
  );
}
