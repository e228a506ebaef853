// The model registry: GET /v1/models (kind/contract, visibility, backend, endpoint, serving capacity) with each model's cost model
// from GET /v1/costs/models.

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { errorBox, money, num, pageHeader, table, when } from "./ui.js";

export async function models(ctx, view) {
  let list, costs;
  try {
    [list, costs] = await Promise.all([api.get("/v1/models"), api.get("/v1/costs/models").catch(() => ({ models: [] }))]);
  } catch (err) {
    replace(view, errorBox(err));
    return;
  }
  const cost = new Map((costs.models || []).map((c) => [`${c.model}@${c.version}`, c]));
  const cur = costs.currency;
  const price = (c) => {
    if (!c) return "—";
    if (c.cost_unit === "tokens") return `${money(c.price_per_1k_input_tokens, cur)} / ${money(c.price_per_1k_output_tokens, cur)} per 1k in/out tokens`;
    if (c.cost_unit === "gpu_second") return `${money(c.price_per_gpu_second, cur)} per GPU second`;
    if (c.cost_unit === "call") return `${money(c.price_per_call, cur)} per call`;
    return "free";
  };
  replace(view,
    pageHeader("Models"),
    table([
      { label: "Model", cell: (m) => [h("strong", {}, m.name), m.description ? h("div", { class: "muted" }, m.description) : null] },
      { label: "Version", cell: (m) => m.version },
      { label: "Kind", class: "hide-narrow", cell: (m) => `${m.kind}/${m.contract}` + (m.supports_logprobs ? " + log-probs" : "") },
      { label: "Visibility", class: "hide-narrow", cell: (m) => m.visibility + (m.owned ? " (yours)" : "") + (m.active ? "" : ", deactivated") },
      { label: "Backend", cell: (m) => m.backend },
      { label: "Endpoint", cell: (m) => h("span", { class: "mono" }, [m.endpoint, m.triton_model_name ? ` · ${m.triton_model_name}` : ""].join("")) },
      { label: "Capacity (in flight)", class: "num", cell: (m) => (m.max_in_flight ?? m.capacity ?? "—") },
      { label: "Cost", cell: (m) => price(cost.get(`${m.name}@${m.version}`)) },
      { label: "Expected tokens / latency", class: "hide-narrow", cell: (m) => {
        const c = cost.get(`${m.name}@${m.version}`);
        return c ? `${num(c.expected_input_tokens)} in, ${num(c.expected_output_tokens)} out, ${num(c.expected_latency_ms)} ms` : "—";
      } },
      { label: "Registered", class: "hide-narrow", cell: (m) => when(m.created_at) },
    ], list, { empty: "No model registered." }),
  );
}
