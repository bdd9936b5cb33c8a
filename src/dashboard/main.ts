/// <reference lib="dom" />
import { ApiClient, ApiRequestError, messageOf } from './api-client.js';
import { ClustersView } from './clusters-view.js';
import { Coalescer } from './coalescer.js';
import { CmdbView, DeploymentView } from './deployment-views.js';
import { byId, replace } from './dom.js';
import { parseRoute } from './format.js';
import { LiveUpdates, type LiveMode } from './live-updates.js';
import { TaskView } from './task-view.js';
import { TasksView } from './tasks-view.js';
import type { Identity } from './types.js';
import type { View, ViewContext } from './ui.js';

/** Poll period of the event stream's fallback. */
const POLL_MS = 3_000;
/** While live: pages without events (shards, CMDB) are read this often... */
const POLL_ALWAYS_MS = 5_000;
/** ...and every page this often, for what no event announces (lags, leases, times). */
const SAFETY_REFRESH_MS = 30_000;
/** Events within this delay of the first one make a single refresh (a storm of reconciles costs one read a second). */
const COALESCE_MS = 1_000;

const TITLES: Record<string, string> = { tasks: 'Tasks', task: 'Task', clusters: 'Clusters', deployment: 'Shards and workers', cmdb: 'CMDB' };

/** The page: sign-in, navigation, the current view, live updates. */
class Dashboard {
  private identity: Identity = { scope: 'open' };
  private view: View | undefined;
  private lastRefresh = 0;
  private submittedToken = false;
  private readonly api = new ApiClient(new URL('api/v1/', document.baseURI));
  private readonly refresher = new Coalescer(() => this.refreshView(), COALESCE_MS);
  private readonly live = new LiveUpdates({
    api: this.api,
    onEvent: (event) => {
      if (this.view?.wants?.(event) ?? true) this.refresher.request();
    },
    onRefresh: () => this.refresher.request(),
    onMode: (mode) => this.showMode(mode),
    pollMs: POLL_MS,
  });
  private readonly ctx: ViewContext = {
    api: this.api,
    canWrite: () => this.identity.scope !== 'read',
    // What the operator did shows at once; events wait to be coalesced.
    refresh: () => this.refresher.request(0),
    navigate: (hash) => {
      location.hash = hash;
    },
  };

  async start(): Promise<void> {
    this.api.onUnauthorized = (err) => this.askForToken(err);
    byId<HTMLFormElement>('login-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const input = byId<HTMLInputElement>('token');
      const token = input.value.trim();
      if (token === '') {
        this.loginError('Enter an API token.');
        return;
      }
      input.value = '';
      this.api.token = token;
      this.submittedToken = true;
      void this.signIn();
    });
    byId('logout').addEventListener('click', () => {
      this.api.token = null;
      this.identity = { scope: 'open' };
      void this.signIn();
    });
    window.addEventListener('hashchange', () => {
      if (this.view !== undefined) this.mountRoute();
    });
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && this.view !== undefined) this.refresher.request(0);
    });
    setInterval(() => {
      if (this.view === undefined || this.live.mode !== 'live') return;
      if (this.view.pollAlways || Date.now() - this.lastRefresh >= SAFETY_REFRESH_MS) this.refresher.request();
    }, POLL_ALWAYS_MS);
    await this.signIn();
  }

  /** Asks the server who the token is; opens the dashboard, or asks for a token on a 401. */
  private async signIn(): Promise<void> {
    this.live.stop();
    try {
      this.identity = await this.api.whoami();
    } catch (err) {
      // A 401 has already asked for a token (onUnauthorized).
      if (err instanceof ApiRequestError && err.status === 401) return;
      this.showProblem(`${messageOf(err)}; trying again…`);
      setTimeout(() => void this.signIn(), POLL_MS);
      return;
    }
    this.submittedToken = false;
    byId('login').hidden = true;
    byId('view').hidden = false;
    byId('live').hidden = false;
    this.showProblem('');
    this.showIdentity();
    this.mountRoute();
    this.live.start();
  }

  private askForToken(err: ApiRequestError): void {
    this.live.stop();
    this.view = undefined;
    replace(byId('view'));
    byId('view').hidden = true;
    byId('login').hidden = false;
    byId('live').hidden = true;
    byId('updated').textContent = '';
    this.showIdentity();
    // The first time, the form says it all; after a refused token, the API says why.
    this.loginError(this.submittedToken ? err.message : '');
    this.submittedToken = false;
    byId<HTMLInputElement>('token').focus();
  }

  private loginError(text: string): void {
    const el = byId('login-error');
    el.textContent = text;
    el.hidden = text === '';
  }

  private showIdentity(): void {
    const who = byId('who');
    const { scope, name } = this.identity;
    const signedIn = !byId('login').hidden ? 'not signed in' : scope === 'open' ? 'no API tokens on this server' : `${name ?? 'token'} (${scope === 'read' ? 'read-only' : 'admin'})`;
    who.textContent = signedIn;
    document.body.dataset.scope = scope;
    byId('logout').hidden = this.api.token === null;
    byId('read-only').hidden = scope !== 'read' || !byId('login').hidden;
  }

  private showMode(mode: LiveMode): void {
    const el = byId('live');
    el.dataset.mode = mode;
    el.textContent = mode === 'live' ? 'live' : mode === 'polling' ? `polling every ${POLL_MS / 1000} s` : 'connecting…';
    el.title = mode === 'polling' ? 'the event stream is unavailable; the page re-reads the API instead' : 'changes arrive as server-sent events';
  }

  private showProblem(text: string): void {
    const el = byId('problem');
    el.textContent = text;
    el.hidden = text === '';
  }

  private mountRoute(): void {
    const route = parseRoute(location.hash);
    let view: View;
    switch (route.view) {
      case 'task':
        view = new TaskView(this.ctx, route.id);
        break;
      case 'clusters':
        view = new ClustersView(this.ctx, route.id);
        break;
      case 'deployment':
        view = new DeploymentView(this.ctx);
        break;
      case 'cmdb':
        view = new CmdbView(this.ctx);
        break;
      default:
        view = new TasksView(this.ctx, route.filter);
    }
    const root = byId('view');
    replace(root);
    view.mount(root);
    this.view = view;
    document.title = `${TITLES[route.view] ?? 'regsync'}${route.view === 'task' ? ` ${route.id}` : ''} · regsync`;
    const section = route.view === 'task' ? 'tasks' : route.view;
    document.querySelectorAll<HTMLAnchorElement>('header nav a').forEach((link) => {
      if (link.dataset.section === section) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    });
    this.refresher.request(0);
  }

  private async refreshView(): Promise<void> {
    const view = this.view;
    if (view === undefined || document.hidden) return;
    this.lastRefresh = Date.now();
    await view.refresh();
    byId('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  }
}

void new Dashboard().start();
