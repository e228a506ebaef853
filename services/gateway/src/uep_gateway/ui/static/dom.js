// Building the DOM safely. Every string from the API goes in as a text node or an attribute value set with
// setAttribute: nothing here parses HTML (no innerHTML), so a benchmark or model name is shown, never run.
// URLs in href/src are only kept when they stay on this origin (a path "/…"), are a blob: URL made by this
// page, or a fragment: a "javascript:" link from the data cannot be made.

const SVG_NS = "http://www.w3.org/2000/svg";
const URL_ATTRS = new Set(["href", "src", "action", "formaction", "xlink:href"]);
const PROPS = new Set(["value", "checked", "selected", "disabled", "multiple", "indeterminate"]);

/** True for a URL this app may put in an attribute: "/path" (not "//host"), "#frag", "?query" or "blob:". */
export function safeUrl(url) {
  const s = String(url);
  return (s.startsWith("/") && !s.startsWith("//") && !s.startsWith("/\\")) || s.startsWith("#") || s.startsWith("?") ||
    s.startsWith("blob:" + location.origin);
}

function apply(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "innerHTML" || key === "outerHTML") throw new Error("dom: HTML strings are not allowed");
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === "class") {
      el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : String(value));
    } else if (key === "text") {
      el.textContent = String(value);
    } else if (PROPS.has(key)) {
      el[key] = value;
    } else if (URL_ATTRS.has(key)) {
      if (safeUrl(value)) el.setAttribute(key, String(value));
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** An HTML element: h("a", {href: "/ui/x", class: "btn"}, "text", otherNode, [more]). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** An SVG element (same rules as h). */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** Remove every child of el, then append children. */
export function replace(el, ...children) {
  while (el.firstChild) el.removeChild(el.firstChild);
  append(el, children);
  return el;
}

let ids = 0;
/** A fresh element id (labels point at their inputs with it). */
export function uid(prefix = "f") {
  ids += 1;
  return `${prefix}-${ids}`;
}
