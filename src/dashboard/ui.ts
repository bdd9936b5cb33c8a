/// <reference lib="dom" />
import { ApiRequestError, messageOf, type ApiClient } from './api-client.js';
import { h, replace, type Child } from './dom.js';
import type { SyncEvent, TaskState } from './types.js';

/** What every view gets from the page. */
export interface ViewContext {
  api: ApiClient;
  /** Whether the token may act (an admin token, or a server without tokens). */
  canWrite(): boolean;
  /** Asks for a refresh of the current view now (one already running is followed by another). */
  refresh(): void;
  /** Shows another page. */
  navigate(hash: string): void;
}

/** One page of the dashboard. */
export interface View {
  /** Builds the parts that stay (headings, forms) into `root`. */
  mount(root: HTMLElement): void;
  /** Reads the API and redraws the parts that change. */
  refresh(): Promise<void>;
  /** Whether an event concerns this page (default: every event). */
  wants?(event: SyncEvent): boolean;
  /** Pages whose data changes without events (queue depths, leases) are polled even while live. */
  pollAlways?: boolean;
}

/** An error line and a notice line, for the outcome of what the operator did or of a refresh. */
export class Messages {
  readonly el: HTMLElement;
  private readonly error = h('p', { class: 'error', role: 'alert', hidden: true });
  private readonly notice = h('p', { class: 'notice', role: 'status', hidden: true });

  constructor() {
    this.el = h('div', { class: 'messages' }, this.error, this.notice);
  }

  /** Shows the API's message as it is (the code goes in `data-code`). */
  showError(err: unknown): void {
    this.notice.hidden = true;
    this.error.hidden = false;
    this.error.textContent = messageOf(err);
    if (err instanceof ApiRequestError) this.error.dataset.code = err.code;
    else delete this.error.dataset.code;
  }

  showNotice(text: string): void {
    this.error.hidden = true;
    this.notice.hidden = false;
    this.notice.textContent = text;
  }

  clear(): void {
    this.error.hidden = true;
    this.notice.hidden = true;
  }
}

/** Options of {@link actionButton}. */
export interface ActionOptions {
  /** Asked with `window.confirm` first. */
  confirm?: string;
  danger?: boolean;
  /** Shown on success. */
  done?: string;
}

/**
 * A button that calls the API: disabled without the right to act, busy while it runs, its failure
 * shown in `messages` as the API words it.
 */
export function actionButton(ctx: ViewContext, messages: Messages, label: string, run: () => Promise<unknown>, opts: ActionOptions = {}): HTMLButtonElement {
  const button = h('button', { type: 'button', class: opts.danger ? 'danger' : null }, label);
  if (!ctx.canWrite()) {
    button.disabled = true;
    button.title = 'needs an admin token';
    return button;
  }
  button.addEventListener('click', () => {
    if (opts.confirm !== undefined && !window.confirm(opts.confirm)) return;
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    run()
      .then(() => {
        if (opts.done !== undefined) messages.showNotice(opts.done);
        else messages.clear();
      })
      .catch((err: unknown) => messages.showError(err))
      .finally(() => {
        button.disabled = false;
        button.removeAttribute('aria-busy');
        ctx.refresh();
      });
  });
  return button;
}

/** A task's state as a coloured word. */
export function stateBadge(state: TaskState): HTMLElement {
  return h('span', { class: `badge state-${state}` }, state);
}

/** A badge with a tone: `ok`, `warn`, `bad` or `idle`. */
export function badge(text: string, tone: 'ok' | 'warn' | 'bad' | 'idle', title?: string): HTMLElement {
  return h('span', { class: `badge tone-${tone}`, title }, text);
}

/** A labelled form control: `<label>Text <input></label>`, with an optional hint below. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  return h('label', { class: 'field' }, h('span', { class: 'label' }, label), control, hint ? h('small', {}, hint) : null);
}

/**
 * A form that posts through `submit` (which throws to report a problem), disabled without the
 * right to act; its own messages line shows the API's answer.
 */
export function actionForm(
  ctx: ViewContext,
  attrs: { id: string; title: string; submitLabel: string },
  fields: Child[],
  submit: (form: HTMLFormElement) => Promise<string>,
): HTMLElement {
  const messages = new Messages();
  const button = h('button', { type: 'submit' }, attrs.submitLabel);
  const fieldset = h('fieldset', {}, h('legend', {}, attrs.title), h('div', { class: 'fields' }, ...fields), h('div', { class: 'form-actions' }, button));
  const form = h('form', { id: attrs.id, class: 'action-form', novalidate: true }, fieldset, messages.el);
  if (!ctx.canWrite()) {
    fieldset.disabled = true;
    fieldset.title = 'needs an admin token';
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    button.disabled = true;
    submit(form)
      .then((notice) => {
        messages.showNotice(notice);
        form.reset();
      })
      .catch((err: unknown) => messages.showError(err))
      .finally(() => {
        button.disabled = false;
        ctx.refresh();
      });
  });
  return form;
}

/** The text value of a named control of a form, trimmed. */
export function valueOf(form: HTMLFormElement, name: string): string {
  const control = form.elements.namedItem(name);
  return control instanceof HTMLInputElement || control instanceof HTMLSelectElement || control instanceof HTMLTextAreaElement
    ? control.value.trim()
    : '';
}

/** Keeps a `<select>`'s options in step with `values`, keeping what was chosen. */
export function setOptions(select: HTMLSelectElement, values: string[], placeholder: string): void {
  const chosen = select.value;
  replace(select, h('option', { value: '' }, placeholder), ...values.map((v) => h('option', { value: v }, v)));
  if (values.includes(chosen)) select.value = chosen;
}

/** A section with a heading. */
export function section(title: string, ...children: Child[]): HTMLElement {
  return h('section', {}, h('h2', {}, title), ...children);
}
