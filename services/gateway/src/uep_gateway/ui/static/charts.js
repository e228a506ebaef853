// A bar chart drawn as inline SVG (no library): one horizontal bar per row, its value at the end. Labels and
// values go in as text nodes (see dom.js), so they are never parsed as markup.

import { s } from "./dom.js";

/** rows: [{label, value}]; returns an <svg> with role="img" and a <title> per bar. */
export function barChart(rows, { title = "", format = (v) => String(v), width = 640 } = {}) {
  const bar = 22;
  const gap = 8;
  const labelW = Math.min(240, Math.max(60, ...rows.map((r) => Math.min(30, String(r.label).length) * 7.5 + 16)));
  const valueW = 110;
  const plotW = Math.max(80, width - labelW - valueW);
  const height = Math.max(1, rows.length) * (bar + gap) + 28;
  const max = Math.max(0, ...rows.map((r) => Number(r.value) || 0)) || 1;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": title || "bar chart" },
    title ? s("title", {}, title) : null);
  rows.forEach((r, i) => {
    const y = 20 + i * (bar + gap);
    const w = Math.max(1, (plotW * (Number(r.value) || 0)) / max);
    const label = String(r.label);
    svg.appendChild(s("text", { x: labelW - 6, y: y + bar * 0.68, "text-anchor": "end" }, label.length > 30 ? `${label.slice(0, 29)}…` : label));
    svg.appendChild(s("rect", { x: labelW, y, width: w, height: bar, rx: 3, fill: "#0b5cad" }, s("title", {}, `${label}: ${format(r.value)}`)));
    svg.appendChild(s("text", { x: labelW + w + 6, y: y + bar * 0.68 }, format(r.value)));
  });
  if (!rows.length) svg.appendChild(s("text", { x: 10, y: 20 }, "no data"));
  return svg;
}
