// Building the page. Every piece of data reaches the DOM as a text node or an attribute
// value set through the DOM API, never as markup: nothing here parses HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

/** An HTML element: h("a", {href, class, on: {click}}, "text", child, [children]). */
export function h(tag, props, ...children) {
  return build(document.createElement(tag), props, children);
}

/** An SVG element, the same way. */
export function s(tag, props, ...children) {
  return build(document.createElementNS(SVG_NS, tag), props, children);
}

function build(el, props, children) {
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) el.addEventListener(event, handler);
    } else if (name === "class") {
      const names = Array.isArray(value) ? value.filter(Boolean).join(" ") : value;
      if (names) el.setAttribute("class", names);
    } else if (name === "dataset") {
      for (const [key, item] of Object.entries(value)) {
        if (item !== null && item !== undefined) el.dataset[key] = String(item);
      }
    } else if (name === "value" && "value" in el) {
      el.value = String(value);
    } else if (/^on/i.test(name) || name === "style" || name === "srcdoc") {
      // Inline handlers and styles are refused by the Content-Security-Policy anyway.
      throw new Error(`refusing to set the ${name} attribute`);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Append children: nodes as they are, anything else as text. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replace what `el` holds, keeping keyboard focus on the element with the same
 * `data-focus` key when one had it (refreshing a table must not lose the user's place). */
export function fill(el, ...children) {
  const active = document.activeElement;
  const key = active && el.contains(active) ? active.dataset.focus : undefined;
  el.replaceChildren();
  append(el, children);
  if (key !== undefined) {
    const again = [...el.querySelectorAll("[data-focus]")].find((n) => n.dataset.focus === key);
    if (again) again.focus({ preventScroll: true });
  }
  return el;
}

/** A JSON value, pretty-printed, as text. */
export function jsonBlock(value, { max = 20000 } = {}) {
  const text = value === undefined ? "" : JSON.stringify(value, null, 2);
  const pre = h("pre", { class: "json" });
  if (text.length <= max) {
    pre.textContent = text;
    return pre;
  }
  pre.textContent = text.slice(0, max) + "\n…";
  const more = h(
    "button",
    {
      type: "button",
      class: "link",
      on: {
        click: () => {
          pre.textContent = text;
          more.remove();
        },
      },
    },
    `Show all ${Math.round(text.length / 1024)} KB`,
  );
  return h("div", {}, pre, more);
}
