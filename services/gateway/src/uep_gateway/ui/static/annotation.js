// Annotation: the tenant's annotation tasks (GET /v1/annotation-tasks) with their progress, a link to the
// annotation page (/annotate/{task_id}) and, for roles that may read it, the agreement per task
// (Krippendorff's alpha per question, GET /v1/annotation-tasks/{id}/agreement).

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { badge, errorBox, num, pageHeader, progressBar, table, when } from "./ui.js";

function agreementCell(ctx, task) {
  if (!ctx.canRead) return "—";
  const cell = h("span", { class: "muted" }, "…");
  api.get(`/v1/annotation-tasks/${task.id}/agreement`).then((a) => {
    replace(cell, (a.questions || []).length
      ? h("ul", {}, a.questions.map((q) => h("li", {}, `${q.question}: α = ${q.alpha === null ? `— (${q.reason})` : q.alpha.toFixed(2)}`)))
      : "no scored question");
    cell.className = "";
  }).catch(() => replace(cell, "—"));
  return cell;
}

export async function queue(ctx, view) {
  let tasks;
  try {
    tasks = await api.get("/v1/annotation-tasks");
  } catch (err) {
    replace(view, pageHeader("Annotation"), errorBox(err));
    return;
  }
  const open = tasks.filter((t) => t.status !== "completed");
  replace(view,
    pageHeader("Annotation"),
    h("p", { class: "muted" }, ctx.canRead ? "Every annotation task of this tenant." : `Tasks to annotate as ${ctx.me.user ? ctx.me.user.username : ctx.me.name}.`),
    table([
      { label: "Task", cell: (t) => [h("strong", {}, t.name), h("div", { class: "muted" }, t.guidelines.slice(0, 120))] },
      { label: "Status", cell: (t) => badge(t.status) },
      { label: "Progress", cell: (t) => [progressBar(t.completed_items, t.total_items), `${num(t.completed_items)}/${num(t.total_items)}`] },
      { label: "Annotations", class: "num", cell: (t) => num(t.annotations) },
      { label: "Per item", class: "num hide-narrow", cell: (t) => num(t.annotations_per_item) },
      { label: "Agreement", cell: (t) => agreementCell(ctx, t) },
      { label: "Created", class: "hide-narrow", cell: (t) => when(t.created_at) },
      { label: "", cell: (t) => (t.status === "completed" ? "done" : h("a", { href: `/annotate/${t.id}`, class: "btn small primary" }, "Annotate")) },
    ], [...open, ...tasks.filter((t) => t.status === "completed")], { empty: "No annotation task." }),
  );
}
