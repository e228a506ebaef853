// A conversation item in the item browser: its transcript (GET /v1/evaluations/{id}/results, `transcript`) as
// chat bubbles — system, user (with a turn's reference reply when the benchmark gives one) and assistant — and,
// beside it, each judge's verdict on the item (GET /v1/judges/verdicts?sample_ordinal=): validity, overall
// score or pairwise winner, the per-dimension scores and the reasons. Every string goes in as text (dom.js).

import * as api from "./api.js";
import { h } from "./dom.js";

const ENDED = {
  answered: "the model answered the last turn",
  user_done: "the simulated user ended it",
  max_turns: "the turn limit was reached",
  time_limit: "the time limit was reached",
  length_limit: "the conversation's size limit was reached",
  model_error: "the model failed",
  simulator_error: "the simulator failed",
  simulator_silent: "the simulator wrote nothing",
};

function bubble(message, index) {
  const who = { system: "System", user: "User", assistant: "Assistant" }[message.role] || message.role;
  return h("div", { class: `bubble ${message.role}`, "data-turn": index },
    h("span", { class: "who" }, who),
    h("p", {}, message.content || "(empty)"),
    message.reference ? h("p", { class: "reference" }, h("strong", {}, "Reference reply: "), message.reference) : null,
  );
}

function verdictCard(v) {
  const scores = v.scores && typeof v.scores === "object" ? Object.entries(v.scores) : [];
  return h("div", { class: "verdict-card", "data-valid": String(v.valid) },
    h("p", {},
      h("strong", {}, v.judge_model_name), " ",
      v.position && v.position !== "-" ? h("span", { class: "chip" }, `order ${v.position}`) : null,
      h("span", { class: `badge ${v.valid ? "st-completed" : "st-failed"}` }, v.valid ? "valid" : "invalid"),
    ),
    v.overall !== null && v.overall !== undefined ? h("p", { class: "overall" }, `Overall ${v.overall}`) : null,
    v.winner ? h("p", { class: "overall" }, `Winner ${v.winner} (candidate: ${v.candidate_outcome ?? "—"})`) : null,
    scores.length ? h("table", { class: "dims" },
      h("tbody", {}, scores.map(([name, value]) => h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, String(value)))))) : null,
    v.reasoning ? h("p", { class: "reasons" }, v.reasoning) : null,
    v.error ? h("p", { class: "note" }, v.error) : null,
  );
}

/** The item's judge verdicts, or [] when it has none or they cannot be read. */
export async function itemVerdicts(evaluationId, ordinal) {
  try {
    return await api.get("/v1/judges/verdicts", { evaluation_id: evaluationId, sample_ordinal: ordinal, limit: 50 });
  } catch {
    return [];
  }
}

/** The transcript as chat bubbles beside the judges' verdicts (stacked on a narrow screen). */
export function conversationView(transcript, verdicts) {
  const t = transcript;
  return h("div", { class: "conversation" },
    h("div", { class: "chat", role: "log", "aria-label": "conversation" },
      t.simulated ? h("p", { class: "muted persona" }, h("strong", {}, "Simulated user: "), t.persona || "—", h("br"), h("strong", {}, "Goal: "), t.goal || "—") : null,
      (t.messages || []).map(bubble),
      h("p", { class: "muted" }, `${t.turns} assistant turn${t.turns === 1 ? "" : "s"} · ${ENDED[t.ended] || t.ended}`),
    ),
    h("aside", { class: "verdicts", "aria-label": "judge verdicts" },
      h("h3", {}, "Judge verdicts"),
      verdicts.length ? verdicts.map(verdictCard) : h("p", { class: "muted" }, "No judge verdict on this item."),
    ),
  );
}
