/**
 * The dashboard's HTTP listener, served by the daemon itself (or by `fcgi-pm dashboard`
 * without one). allowed_clients is checked at accept (src/frontend/client-gate.ts), then
 * every page and API call needs the token, a user, or a session cookie from the login
 * form: without, 401. API calls that change something take JSON bodies only, so a
 * cross-site form cannot send them.
 *
 *   GET  /                 the page (static/index.html, app.js, app.css)
 *   POST /login            form: token, or user + password → session cookie
 *   GET  /api/cluster      every daemon's snapshot, merged (merge.ts)
 *   GET  /api/snapshot     this daemon's own snapshot (how a peer dashboard reads us)
 *   GET  /api/warnings     this process's recent warnings (how a peer dashboard reads them)
 *   GET  /api/events       server-sent events: the settings once, then per sample the table
 *                          (rows.ts: one small row per daemon and pool) and the cluster's
 *                          warnings when they changed
 *   GET  /api/pool?daemon=ID&pool=NAME
 *                          one pool on demand: its full status, chart points, and the edit
 *                          form's current values with where they live (poolForm)
 *   GET  /favicon.ico      the icon
 *   POST /api/edit         {targets, pool, settings, dryRun, expect} → per-daemon diff, problems,
 *                          reload; `expect`: the file hashes the form was loaded with
 *   POST /api/reload       {targets}
 *   POST /api/restart      {targets, pool, rolling}: fresh workers for the pool, no request failed;
 *                          rolling: one at a time, each once its replacement is ready
 *   POST /api/drain        {targets, pool}: the pool's workers retired after their requests
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { DashboardConfig, ListenerConfig } from '../config/types.js';
import type { StatusSnapshot } from '../control/types.js';
import { ErrorCodes } from '../errors.js';
import { ClientGate } from '../frontend/client-gate.js';
import { listenOn, releaseUnixPath, type BindSocket } from '../frontend/listen.js';
import { EpisodeLimiter } from '../log/episode-limiter.js';
import type { Logger } from '../log/log.js';
import type { WarningRing } from '../log/warning-ring.js';
import { editPools, poolForm, reloadTargets, type ActionContext, type EditRequest, type LocalDaemon } from './actions.js';
import { COOKIE, DashboardAuth, SESSION_MS } from './auth.js';
import { EDITABLE_KEYS } from './config-edit.js';
import { SentRows, tableOf } from './rows.js';
import { ClusterSampler, type Tick } from './sampler.js';
import type { ReadWhat } from './peers.js';

export interface DashboardDeps {
  config(): DashboardConfig;
  logger: Logger;
  /** The daemon serving the page; absent for `fcgi-pm dashboard` on its own. */
  self?: (LocalDaemon & { snapshot(what: ReadWhat): Promise<StatusSnapshot> }) | undefined;
  warnings?: WarningRing | undefined;
  /** Binds the page's socket (the daemon's socket owner); default listenOn. */
  listen?: BindSocket | undefined;
}

const STATIC: Record<string, string> = { '/': 'index.html', '/app.js': 'app.js', '/app.css': 'app.css' };
const TYPES: Record<string, string> = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };
/** Two bars of a gauge; browsers take SVG at /favicon.ico by its content type. */
const FAVICON = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#234"/><rect x="3" y="8" width="3" height="5" fill="#6c6"/><rect x="7" y="5" width="3" height="8" fill="#6c6"/><rect x="11" y="3" width="2" height="10" fill="#fc6"/></svg>');
const MAX_BODY = 64 * 1024;
/** Refused credentials: one line, then one count per minute while they go on. */
const REFUSAL_LOG_MS = 60_000;

function loadStatic(): Map<string, Buffer> {
  // dist/src/dashboard/server.js → src/dashboard/static/ in the package.
  const dir = new URL('../../../src/dashboard/static/', import.meta.url);
  return new Map(Object.values(STATIC).map((f) => [f, readFileSync(new URL(f, dir))]));
}

const LOGIN_PAGE = (failed: boolean): string => `<!doctype html><meta charset="utf-8"><title>fcgi-pm dashboard: log in</title>
<style>body{font:15px system-ui,sans-serif;max-width:22em;margin:4em auto}input{display:block;width:100%;margin:.3em 0 .8em;padding:.4em}</style>
<h1>fcgi-pm dashboard</h1>${failed ? '<p role="alert">Not accepted.</p>' : ''}
<form method="post" action="login"><label>Token <input type="password" name="token" autocomplete="off"></label>
<p>or</p><label>User <input name="user" autocomplete="username"></label><label>Password <input type="password" name="password" autocomplete="current-password"></label>
<button>Log in</button></form>`;

export class DashboardServer {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly streams = new Set<ServerResponse>();
  private readonly auth: DashboardAuth;
  private readonly files = loadStatic();
  readonly sampler: ClusterSampler;
  private readonly actions: ActionContext;
  private readonly refusals: EpisodeLimiter<string>;
  address = '';

  constructor(private readonly deps: DashboardDeps) {
    this.auth = new DashboardAuth(() => deps.config());
    this.sampler = new ClusterSampler({
      ids: () => [...(deps.self ? ['self'] : []), ...deps.config().peers],
      peerToken: () => deps.config().peerToken,
      self: deps.self ? (what) => deps.self!.snapshot(what) : undefined,
      warnings: deps.self && deps.warnings ? () => deps.warnings!.list() : undefined,
      history: () => deps.config().history,
      interval: () => deps.config().sampleInterval,
      idleInterval: () => deps.config().idleSampleInterval,
    });
    this.actions = { self: deps.self, peerToken: () => deps.config().peerToken };
    this.refusals = new EpisodeLimiter({
      intervalMs: REFUSAL_LOG_MS,
      summary: (_k, n) => deps.logger.warn({ code: ErrorCodes.DASHBOARD_AUTH, refused: n }, `dashboard: ${n} more request(s) with wrong credentials in the last minute`),
    });
    const gate = new ClientGate({ get allowedClients() { return deps.config().allowedClients; } } as ListenerConfig, () => deps.logger);
    this.server = createServer((req, res) => void this.route(req, res).catch((err: unknown) => this.fail(res, err)));
    this.server.on('connection', (s) => {
      if (!gate.admit(s)) return;
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  async listen(): Promise<string> {
    this.address = await (this.deps.listen ?? listenOn)(this.server, this.deps.config().address);
    this.deps.logger.info({ kind: 'dashboard', address: this.address }, `dashboard on http://${this.address}/`);
    this.sampler.start();
    return this.address;
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard');
    const path = url.pathname;
    res.setHeader('cache-control', 'no-store');
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('x-frame-options', 'DENY');
    if (path === '/login' && req.method === 'POST') return this.login(req, res);
    if (path === '/favicon.ico' && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'image/svg+xml', 'cache-control': 'max-age=86400' });
      return void res.end(FAVICON);
    }
    if (!(await this.auth.allowed(req))) return this.refuse(req, res, path);
    if (req.method === 'GET' && STATIC[path] !== undefined) {
      const f = STATIC[path]!;
      res.writeHead(200, { 'content-type': TYPES[f.split('.').pop()!]! });
      return void res.end(this.files.get(f));
    }
    if (req.method === 'GET' && path === '/api/cluster') return json(res, 200, { ...(await this.sampler.cluster()), editable: EDITABLE_KEYS });
    if (req.method === 'GET' && path === '/api/snapshot') {
      if (this.deps.self === undefined) return json(res, 404, { error: 'this dashboard runs without a local daemon' });
      return json(res, 200, await this.deps.self.snapshot({ processes: url.searchParams.has('processes'), allSites: url.searchParams.has('all_sites') }));
    }
    if (req.method === 'GET' && path === '/api/events') return this.events(req, res);
    if (req.method === 'GET' && path === '/api/pool') {
      const daemon = url.searchParams.get('daemon') ?? '';
      const pool = url.searchParams.get('pool') ?? '';
      if (!this.sampler.ids().includes(daemon) || pool === '') return json(res, 400, { error: `?daemon= one of ${this.sampler.ids().join(', ')} and ?pool=NAME` });
      return json(res, 200, await this.poolDetails(daemon, pool));
    }
    if (req.method === 'GET' && path === '/api/warnings') return json(res, 200, this.deps.warnings?.list() ?? []);
    if (req.method === 'POST' && (path === '/api/edit' || path === '/api/reload' || path === '/api/restart' || path === '/api/drain')) {
      if (!(req.headers['content-type'] ?? '').startsWith('application/json')) return json(res, 415, { error: 'send JSON (content-type: application/json)' });
      const body = (await readBody(req)) as (Partial<EditRequest> & { rolling?: unknown }) | undefined;
      if (body === undefined || !Array.isArray(body.targets) || !body.targets.every((t) => typeof t === 'string')) return json(res, 400, { error: 'body must be JSON with "targets": [daemon ids]' });
      // Only daemons this dashboard shows: a caller must not make it talk to any socket or URL (with peer_token).
      const known = this.sampler.ids();
      const unknown = body.targets.filter((t) => !known.includes(t));
      if (unknown.length > 0) return json(res, 400, { error: `not a daemon of this dashboard: ${unknown.join(', ')} (known: ${known.join(', ')})` });
      if (path === '/api/reload') return json(res, 200, { results: await reloadTargets(body.targets, this.actions) });
      if (path === '/api/restart' || path === '/api/drain') {
        if (typeof body.pool !== 'string') return json(res, 400, { error: 'body needs "pool"' });
        const verb = path === '/api/drain' ? 'drain' : body.rolling === true ? 'rolling' : 'restart';
        const results = await reloadTargets(body.targets, this.actions, { pool: body.pool, verb });
        this.deps.logger.info({ kind: 'dashboard', pool: body.pool, targets: body.targets, action: verb }, `dashboard: ${verb} of pool ${body.pool} on ${body.targets.length} daemon(s)`);
        return json(res, 200, { results });
      }
      if (typeof body.pool !== 'string' || typeof body.settings !== 'object' || body.settings === null) return json(res, 400, { error: 'body needs "pool" and "settings"' });
      if (body.expect !== undefined && (typeof body.expect !== 'object' || body.expect === null || !Object.values(body.expect).every((h) => typeof h === 'string'))) return json(res, 400, { error: '"expect" maps daemon ids to file hashes' });
      const out = await editPools(body as EditRequest, this.actions);
      if (out.applied) this.deps.logger.info({ kind: 'dashboard', pool: body.pool, targets: body.targets, settings: body.settings }, `dashboard: pool ${body.pool} changed on ${body.targets.length} daemon(s)`);
      return json(res, 200, out);
    }
    json(res, 404, { error: `no such page: ${path}` });
  }

  /** Wrong credentials (not none: a first visit has none) are worth an operator's line. */
  private noteRefusal(req: IncomingMessage, how: string): void {
    if (this.refusals.hit('auth')) {
      this.deps.logger.warn({ code: ErrorCodes.DASHBOARD_AUTH, remote: req.socket.remoteAddress, how }, `dashboard: refused ${how} from ${req.socket.remoteAddress ?? '?'}; repeats are counted once a minute`);
    }
  }

  private refuse(req: IncomingMessage, res: ServerResponse, path: string): void {
    if (req.headers.authorization !== undefined) this.noteRefusal(req, req.headers.authorization.split(' ')[0]!.toLowerCase() === 'basic' ? 'a user or password' : 'a token');
    else if ((req.headers.cookie ?? '').includes(`${COOKIE}=`)) this.noteRefusal(req, 'an unknown or expired session cookie');
    const challenge = this.auth.challenge();
    if (challenge !== undefined && req.headers.authorization !== undefined) res.setHeader('www-authenticate', challenge);
    if (path.startsWith('/api/')) return json(res, 401, { error: 'log in first: a token (Authorization: Bearer) or a user' });
    res.writeHead(401, { 'content-type': 'text/html; charset=utf-8' });
    res.end(LOGIN_PAGE(false));
  }

  private async login(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readText(req);
    const sid = text === undefined ? undefined : await this.auth.login(new URLSearchParams(text));
    if (sid === undefined) {
      this.noteRefusal(req, 'a login');
      res.writeHead(401, { 'content-type': 'text/html; charset=utf-8' });
      return void res.end(LOGIN_PAGE(true));
    }
    res.writeHead(303, { location: './', 'set-cookie': `${COOKIE}=${sid}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${SESSION_MS / 1000}` });
    res.end();
  }

  private events(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', connection: 'keep-alive' });
    this.streams.add(res);
    const send = (event: string, data: unknown): void => void res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    send('hello', { intervalMs: this.deps.config().sampleInterval, historyMs: this.deps.config().history, editable: EDITABLE_KEYS });
    let warned = '';
    // Each tick sends this page the rows that changed since the last one, and the keys gone.
    const sent = new SentRows();
    // Every defined site once (the search finds idle ones too), again when a daemon's count changes.
    let defined = '';
    const sendSites = async (): Promise<void> => {
      const c = await this.sampler.cluster(undefined, { allSites: true });
      const sites = c.daemons.filter((d) => d.snapshot?.sites?.list !== undefined).map((d) => ({ d: d.id, sites: d.snapshot!.sites!.list!.map((s) => [s.id, s.names.join(' ')]) }));
      send('sites', sites);
    };
    const unsubscribe = this.sampler.subscribe(({ warnings, cluster, points }: Tick) => {
      const counts = cluster.daemons.map((d) => `${d.id}:${d.snapshot?.sites?.defined ?? '-'}`).join(',');
      if (counts !== defined) {
        defined = counts;
        void sendSites().catch(() => undefined);
      }
      const table = tableOf(cluster, points);
      const { changed, gone } = sent.next(table.rows);
      res.write(`event: tick\ndata: {"at":${cluster.at},"daemons":${JSON.stringify(table.daemons)},"rows":[${changed.join(',')}],"gone":${JSON.stringify(gone)}}\n\n`);
      const w = JSON.stringify(warnings);
      if (w !== warned) {
        warned = w;
        res.write(`event: warnings\ndata: ${w}\n\n`);
      }
    });
    const done = (): void => {
      unsubscribe();
      this.streams.delete(res);
    };
    req.on('close', done);
    res.on('error', done);
  }

  /** A row opened on the page: the pool's status with its workers, its chart points, the edit form's values. */
  private async poolDetails(daemon: string, pool: string): Promise<unknown> {
    const [cluster, form] = await Promise.all([this.sampler.cluster(daemon, { processes: true }), poolForm(daemon, pool, this.actions)]);
    const d = cluster.daemons[0];
    return { daemon, pool, status: d?.snapshot?.pools.find((p) => p.name === pool), points: this.sampler.pointsOf(daemon, pool), form };
  }

  private fail(res: ServerResponse, err: unknown): void {
    this.deps.logger.error({ code: ErrorCodes.DASHBOARD, err }, `dashboard request failed: ${(err as Error).message}`);
    if (!res.headersSent) json(res, 500, { error: (err as Error).message });
    else res.destroy();
  }

  close(): Promise<void> {
    this.sampler.stop();
    this.refusals.flush();
    for (const r of this.streams) r.end();
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      releaseUnixPath(this.server);
      for (const s of this.sockets) s.destroy();
    });
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function readText(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > MAX_BODY) {
        resolve(undefined);
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(undefined));
  });
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const text = await readText(req);
  try {
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}
