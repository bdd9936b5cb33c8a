/// <reference lib="dom" />
import { h, replace } from './dom.js';
import { parseEndpoints, parseLabels } from './format.js';
import type { Cluster, Kind, KindOption, List } from './types.js';
import { field, Messages, valueOf, type ViewContext } from './ui.js';

/**
 * The value an option's input stands for; `undefined` (not sent: the kind's default) when empty.
 * Nothing is checked here beyond what the input's shape needs: the API checks every value with the
 * kind's own parser and says which option is wrong, so an integer that is not one is sent as
 * written and refused there (`body.options.grpcPort: expected an integer ...`).
 */
export function optionValue(option: KindOption, text: string): unknown {
  const value = text.trim();
  if (value === '') return undefined;
  switch (option.type) {
    case 'integer':
      return /^-?\d+$/.test(value) ? Number(value) : value;
    case 'boolean':
      return value === 'true' ? true : value === 'false' ? false : value;
    case 'list':
      return value
        .split(/[\s,]+/)
        .map((item) => item.trim())
        .filter((item) => item !== '');
    case 'object':
      return value.startsWith('{') ? parseJsonOption(option.name, value) : parseKeyValues(option.name, value);
    default:
      return value;
  }
}

/** How a stored option value reads in its input: the inverse of {@link optionValue}. */
export function optionText(option: KindOption, value: unknown): string {
  if (value === undefined || value === null) return '';
  if (option.type === 'list' && Array.isArray(value)) return value.map(String).join(', ');
  if (option.type === 'object' && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    return entries.every(([k, v]) => typeof v === 'string' && !/[=,\s]/.test(k) && !/[,]/.test(v))
      ? entries.map(([k, v]) => `${k}=${v as string}`).join(', ')
      : JSON.stringify(value);
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function parseJsonOption(name: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(`options.${name}: not JSON (${err instanceof Error ? err.message : String(err)})`, { cause: err });
  }
}

function parseKeyValues(name: string, text: string): Record<string, string> {
  const map: Record<string, string> = {};
  for (const pair of text.split(/[,\n]+/).map((p) => p.trim()).filter((p) => p !== '')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`options.${name}: "${pair}" must be key=value (or write a JSON object)`);
    map[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return map;
}

/** The placeholder of an option's input, by its shape. */
function placeholderOf(option: KindOption): string {
  switch (option.type) {
    case 'integer':
      return 'default';
    case 'list':
      return 'a, b, c';
    case 'object':
      return 'key=value, … or {"json": …}';
    default:
      return 'default';
  }
}

/** The input of one option: a choice for booleans and closed strings (empty = default), text otherwise. */
function optionInput(option: KindOption): HTMLInputElement | HTMLSelectElement {
  const name = `option.${option.name}`;
  const data = { name, 'data-option': option.name, 'data-type': option.type };
  const choices = option.type === 'boolean' ? ['true', 'false'] : option.choices;
  if (choices !== undefined) {
    return h('select', data, h('option', { value: '' }, '(default)'), ...choices.map((c) => h('option', { value: c }, c)));
  }
  return h('input', {
    ...data,
    autocomplete: 'off',
    spellcheck: false,
    inputmode: option.type === 'integer' ? 'numeric' : null,
    placeholder: placeholderOf(option),
  });
}

/**
 * The form that adds a cluster or edits one, with the chosen kind's options as inputs fitting their
 * type (from `GET kinds`: the server says which kinds and options it serves). Fields the kind does
 * not read are hidden. Editing sends `PUT clusters/:id`; its id is read-only, and a blank password
 * keeps the stored one (the API never shows it; the box "remove" sends `null`).
 */
export class ClusterForm {
  readonly el: HTMLFormElement;
  private readonly messages = new Messages();
  private readonly legend = h('legend', {}, 'Add a cluster');
  private readonly submitButton = h('button', { type: 'submit' }, 'Add cluster');
  private readonly cancelButton = h('button', { type: 'button', hidden: true }, 'Cancel');
  private readonly id = h('input', { name: 'id', required: true, autocomplete: 'off', placeholder: 'shanghai' });
  private readonly kind = h('select', { name: 'kind', required: true });
  private readonly endpoints = h('input', { name: 'endpoints', autocomplete: 'off', placeholder: '10.1.0.10:8848, 10.1.0.11:8848' });
  private readonly namespace = h('input', { name: 'namespace', autocomplete: 'off', placeholder: 'public' });
  private readonly username = h('input', { name: 'username', autocomplete: 'off' });
  private readonly password = h('input', { name: 'password', type: 'password', autocomplete: 'new-password' });
  private readonly removePassword = h('input', { name: 'removePassword', type: 'checkbox' });
  private readonly labels = h('input', { name: 'labels', autocomplete: 'off', placeholder: 'region=east, site=x11' });
  private readonly endpointsField = field('Endpoints', this.endpoints, 'host:port, separated by commas or spaces');
  private readonly endpointsNote = h('div', { class: 'field', 'data-note': 'endpoints' }, h('span', { class: 'label' }, 'Endpoints'), h('span', {}, 'from kubeconfig'));
  private readonly credentialFields = [field('User name', this.username), field('Password', this.password)];
  private readonly removePasswordField = h('label', { class: 'field checkbox' }, this.removePassword, h('span', {}, 'Remove the stored password'));
  private readonly optionsLegend = h('legend', {}, 'Options');
  private readonly optionFields = h('div', { class: 'fields' });
  private kinds: Kind[] = [];
  private readonly loaded: Promise<void>;
  /** The cluster being edited; undefined while adding. */
  private editing: Cluster | undefined;

  constructor(private readonly ctx: ViewContext) {
    const fieldset = h(
      'fieldset',
      {},
      this.legend,
      h(
        'div',
        { class: 'fields' },
        field('Id', this.id),
        field('Kind', this.kind),
        this.endpointsField,
        this.endpointsNote,
        field('Namespace', this.namespace, 'default namespace of its tasks'),
        ...this.credentialFields,
        this.removePasswordField,
        field('Labels', this.labels, 'key=value, separated by commas'),
      ),
      h('fieldset', { class: 'cluster-options' }, this.optionsLegend, h('p', { class: 'hint' }, 'Empty: the kind\'s default.'), this.optionFields),
      h('div', { class: 'form-actions' }, this.submitButton, ' ', this.cancelButton),
    );
    this.el = h('form', { id: 'add-cluster', class: 'action-form', novalidate: true }, fieldset, this.messages.el);
    if (!ctx.canWrite()) {
      fieldset.disabled = true;
      fieldset.title = 'needs an admin token';
    }
    this.kind.addEventListener('change', () => this.showKind(this.editing?.options ?? {}));
    this.cancelButton.addEventListener('click', () => {
      this.startAdding();
      this.messages.clear();
    });
    this.el.addEventListener('submit', (event) => {
      event.preventDefault();
      this.submit();
    });
    this.loaded = this.loadKinds();
  }

  /** Opens the form on a stored cluster: its fields filled, the id read-only, the password left blank (kept). */
  async edit(cluster: Cluster): Promise<void> {
    await this.loaded;
    this.editing = cluster;
    this.legend.textContent = `Edit cluster ${cluster.id}`;
    this.submitButton.textContent = 'Save cluster';
    this.cancelButton.hidden = false;
    this.id.value = cluster.id;
    this.id.readOnly = true;
    this.kind.value = cluster.kind;
    this.endpoints.value = cluster.endpoints.join(', ');
    this.namespace.value = cluster.namespace ?? '';
    this.username.value = cluster.username ?? '';
    this.password.value = '';
    this.password.placeholder = cluster.hasPassword ? 'stored; blank keeps it' : '';
    this.removePassword.checked = false;
    this.labels.value = Object.entries(cluster.labels).map(([k, v]) => `${k}=${v}`).join(', ');
    this.showKind(cluster.options);
    this.messages.clear();
    this.el.scrollIntoView({ block: 'start' });
    this.labels.focus();
  }

  private async loadKinds(): Promise<void> {
    try {
      this.kinds = (await this.ctx.api.get<List<Kind>>('kinds')).items;
      replace(this.kind, ...this.kinds.map((k) => h('option', { value: k.name }, k.label)));
      this.showKind({});
    } catch (err) {
      this.messages.showError(err);
    }
  }

  private chosenKind(): Kind | undefined {
    return this.kinds.find((k) => k.name === this.kind.value);
  }

  /** Shows the fields and options the chosen kind reads, the options filled from `values`. */
  private showKind(values: Record<string, unknown>): void {
    const kind = this.chosenKind();
    if (kind === undefined) return;
    this.endpointsField.hidden = !kind.endpointsRequired;
    this.endpointsNote.hidden = kind.endpointsRequired;
    this.endpoints.placeholder = `10.1.0.10:${kind.defaultPort}, 10.1.0.11:${kind.defaultPort}`;
    for (const el of this.credentialFields) el.hidden = !kind.usesCredentials;
    this.removePasswordField.hidden = !kind.usesCredentials || this.editing?.hasPassword !== true;
    this.optionsLegend.textContent = `Options of ${kind.label} clusters`;
    replace(
      this.optionFields,
      ...kind.options.map((option) => {
        const input = optionInput(option);
        input.value = optionText(option, values[option.name]);
        return field(option.name, input, option.description);
      }),
    );
  }

  /** The body of the POST or PUT: empty fields and options are left out (defaults), except on edit where clearing one removes it. */
  private body(kind: Kind): Record<string, unknown> {
    const f = this.el;
    const body: Record<string, unknown> = { kind: kind.name, endpoints: parseEndpoints(valueOf(f, 'endpoints')) };
    if (this.editing === undefined) body.id = valueOf(f, 'id');
    for (const name of ['namespace', 'username']) if (valueOf(f, name) !== '') body[name] = valueOf(f, name);
    // Not trimmed: a password is what it is. Blank leaves it out, which keeps a stored one.
    if (this.editing !== undefined && this.removePassword.checked) body.password = null;
    else if (this.password.value !== '') body.password = this.password.value;
    const labels = parseLabels(valueOf(f, 'labels'));
    if (Object.keys(labels).length > 0 || this.editing !== undefined) body.labels = labels;
    const options: Record<string, unknown> = {};
    // A stored option this build's form does not show is sent back as it is.
    const shown = new Set(kind.options.map((o) => o.name));
    for (const [name, value] of Object.entries(this.editing?.options ?? {})) if (!shown.has(name)) options[name] = value;
    for (const option of kind.options) {
      const value = optionValue(option, valueOf(f, `option.${option.name}`));
      if (value !== undefined) options[option.name] = value;
    }
    if (Object.keys(options).length > 0 || this.editing !== undefined) body.options = options;
    return body;
  }

  private submit(): void {
    this.submitButton.disabled = true;
    this.save()
      .then((notice) => {
        this.startAdding();
        this.messages.showNotice(notice);
      })
      .catch((err: unknown) => this.messages.showError(err))
      .finally(() => {
        this.submitButton.disabled = false;
        this.ctx.refresh();
      });
  }

  private async save(): Promise<string> {
    const kind = this.chosenKind();
    if (kind === undefined) throw new Error('choose a kind');
    const body = this.body(kind);
    if (this.editing === undefined) {
      const created = await this.ctx.api.post<Cluster>('clusters', body);
      return `cluster ${created.id} added`;
    }
    const saved = await this.ctx.api.request<Cluster>('PUT', `clusters/${encodeURIComponent(this.editing.id)}`, body);
    return `cluster ${saved.id} saved`;
  }

  /** Back to an empty add form, keeping the chosen kind. */
  private startAdding(): void {
    const kind = this.kind.value;
    this.el.reset();
    this.editing = undefined;
    this.legend.textContent = 'Add a cluster';
    this.submitButton.textContent = 'Add cluster';
    this.cancelButton.hidden = true;
    this.id.readOnly = false;
    this.password.placeholder = '';
    if (this.kinds.some((k) => k.name === kind)) this.kind.value = kind;
    this.showKind({});
  }
}
