// Building the page. Everything the server sends (queue names, routing keys, payloads are
// user data) reaches the document as text nodes or attribute values set one by one: the
// console never parses a string as markup, so a queue called "<img onerror=...>" shows as
// those characters. (A Rust test checks that no module uses the string-to-markup APIs.)

const SVG = 'http://www.w3.org/2000/svg';

function setProps(el, props, svg) {
  if (!props) return;
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) {
      // Handlers are functions only: an attribute string would be code.
      if (typeof value !== 'function') throw new TypeError(`${key} must be a function`);
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      const names = Array.isArray(value) ? value.filter(Boolean).join(' ') : value;
      if (svg) el.setAttribute('class', names);
      else el.className = names;
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (!svg && (key === 'value' || key === 'checked' || key === 'selected')) {
      // Properties, so that re-rendering shows the new value.
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

function addChildren(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    // append() makes a text node of a string.
    el.append(child instanceof Node ? child : String(child));
  }
}

/** An HTML element: h('td', {class: 'num'}, '42'). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props, false);
  addChildren(el, children);
  return el;
}

/** An SVG element. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG, tag);
  setProps(el, props, true);
  addChildren(el, children);
  return el;
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  addChildren(el, children);
  return el;
}

let ids = 0;
/** A unique id for label/aria references. */
export function uid(prefix = 'f') {
  ids += 1;
  return `${prefix}-${ids}`;
}

/** Text only screen readers read, e.g. "yes" beside a tick. */
export function hidden(text) {
  return h('span', { class: 'sr-only' }, text);
}

/** A labelled form field: the label is tied to the control by id. */
export function field(label, control, hint) {
  if (!control.id) control.id = uid();
  const hintEl = hint ? h('span', { class: 'hint', id: uid('hint') }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control, hintEl);
}

/** A checkbox with its label after it. */
export function checkbox(label, props = {}) {
  const input = h('input', { type: 'checkbox', ...props });
  input.id = input.id || uid();
  return h('div', { class: 'field check' }, input, h('label', { for: input.id }, label));
}

/** A <select> from [value, label] pairs. */
export function select(options, value, props = {}) {
  return h(
    'select',
    props,
    options.map(([v, label]) => h('option', { value: v, selected: String(v) === String(value) }, label)),
  );
}

/** A definition list from [term, value] pairs; values may be nodes. */
export function dl(pairs, cls = 'facts') {
  return h(
    'dl',
    { class: cls },
    pairs.filter(Boolean).map(([term, value]) => h('div', null, h('dt', null, term), h('dd', null, value))),
  );
}

/** A section with a heading, for landmarks and the outline. */
export function section(title, ...children) {
  const id = uid('sec');
  return h('section', { class: 'panel', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

/** A small label: D, AD, Excl... */
export function badge(text, title, cls = '') {
  return h('span', { class: ['badge', cls], title }, text);
}
