/// <reference lib="dom" />
/*
 * A tiny element builder. Text always goes in as text nodes, never as HTML, so names, labels and
 * error messages coming from registries cannot inject markup into the page that holds the token.
 */

/** A child: an element, text, or nothing (skipped, so that conditionals read naturally). */
export type Child = Node | string | number | null | undefined | false;

/** Attributes: strings are set as attributes, `on*` functions as listeners, booleans toggle presence. */
export type Attrs = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

/** `h('td', {class: 'num'}, 42)`. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2).toLowerCase(), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

/** Appends children, skipping the empty ones. */
export function append(el: Element, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === 'number' ? String(child) : child);
  }
}

/** Replaces the content of `el`. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** The element with this id, which the page must have. */
export function byId<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
}

/** A `<td>` whose full text shows as a tooltip when it is cut. */
export function cell(text: string, attrs: Attrs = {}, max = 0): HTMLTableCellElement {
  if (max > 0 && text.length > max) return h('td', { ...attrs, title: text }, `${text.slice(0, max - 1)}…`);
  return h('td', attrs, text);
}

/** A table with a header row (labels, or elements such as a select-all box) and a body; `empty` is shown in the body when there are no rows. */
export function table(headers: Child[], rows: HTMLTableRowElement[], empty: string, attrs: Attrs = {}): HTMLElement {
  const body = h('tbody', {}, ...rows);
  if (rows.length === 0) body.append(h('tr', { class: 'empty' }, h('td', { colspan: headers.length }, empty)));
  return h(
    'div',
    { class: 'table-wrap' },
    h('table', attrs, h('thead', {}, h('tr', {}, ...headers.map((label) => h('th', { scope: 'col' }, label)))), body),
  );
}
