/**
 * Changes the page asks for, on one daemon or several: a pool settings edit (validated on
 * every target first; one invalid target means nothing is written anywhere), then written
 * and applied with each daemon's zero-failure reload; and a plain reload. Our own daemon
 * and control-socket peers on this host are edited here (their config file path comes
 * from their answer to ping); a dashboard peer over HTTP does its own edit.
 */
import { readFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import { controlRequest } from '../control/client.js';
import type { ControlRequest } from '../control/protocol.js';
import { hashText, writeIfUnchanged } from './atomic-write.js';
import { configPoolPath, editPoolText, editSettingsText, settingsAt, SITE_POOL_PATH, type PoolSettings } from './config-edit.js';
import { parseDocument } from 'yaml';
import type { DiffLine } from './diff.js';
import { httpJson, peerKind } from './peers.js';

/** What the page asks of one pool: fresh workers all at once (restart), one at a time (rolling), or drain. */
export type PoolVerb = 'restart' | 'rolling' | 'drain';

/** Where a vhosts site lives: a file the dashboard may rewrite (judged by the load's checks first), or why not. */
export type SiteEditTarget = { file: string; validate(text: string): string[] } | { readOnly: string };

export interface LocalDaemon {
  configPath(): string;
  reload(): Promise<unknown>;
  /** A vhosts site's definition (undefined: no such site, or no vhosts). */
  site?(id: string): SiteEditTarget | undefined;
  /** One pool's workers (the control socket's restart, restart --rolling, drain). */
  poolAction(pool: string, verb: PoolVerb): Promise<unknown>;
}

export interface ActionContext {
  self?: LocalDaemon | undefined;
  peerToken(): string | undefined;
}

export interface TargetResult {
  id: string;
  ok: boolean;
  file?: string | undefined;
  /** sha256 of the file as the edit read it. */
  hash?: string | undefined;
  /** The file changed since the form was loaded: nothing was written. */
  conflict?: boolean | undefined;
  diff?: DiffLine[] | undefined;
  problems?: string[] | undefined;
  /** Set once the change was applied: the reload's answer or why it failed; a pool action's report. */
  reload?: { ok: boolean; error?: string | undefined; problems?: string[] | undefined; report?: unknown } | undefined;
  error?: string | undefined;
}

export interface EditRequest {
  targets: string[];
  pool: string;
  settings: PoolSettings;
  /** Validate and diff only. */
  dryRun?: boolean;
  /** Daemon id → the file's hash when the form was loaded: a file changed since is not written. */
  expect?: Record<string, string> | undefined;
}

/** Where a pool's settings live and what they are now (the edit form's current values). */
export interface PoolForm {
  id: string;
  pool: string;
  /** 'config': pools.NAME of the daemon's config file; 'site': a vhosts site's file (its `pool` settings). */
  kind?: 'config' | 'site' | undefined;
  file?: string | undefined;
  hash?: string | undefined;
  values?: Record<string, string> | undefined;
  /** Why it cannot be edited here (a site in a database table, no config file...). */
  readOnly?: string | undefined;
}

const READ_TIMEOUT_MS = 5000;
const RELOAD_TIMEOUT_MS = 120_000;

async function configPathOf(id: string, ctx: ActionContext): Promise<string> {
  if (id === 'self') {
    if (ctx.self === undefined) throw new Error('this dashboard runs without a local daemon');
    return ctx.self.configPath();
  }
  const s = await controlRequest(id, { cmd: 'ping' }, READ_TIMEOUT_MS);
  s.end();
  const r = s.response;
  const p = r.daemon?.config ?? (r.ok ? (r.result as { config?: string }).config : undefined);
  if (p === undefined) throw new Error('the daemon did not say which config file it runs');
  return p;
}

function controlOf(action: { pool: string; verb: PoolVerb } | undefined): ControlRequest {
  if (action === undefined) return { cmd: 'reload' };
  if (action.verb === 'drain') return { cmd: 'drain', pool: action.pool };
  return { cmd: 'restart', pool: action.pool, rolling: action.verb === 'rolling' };
}

/** A reload, or with `action` that pool action (its report kept for the page). */
async function reloadOf(id: string, ctx: ActionContext, action?: { pool: string; verb: PoolVerb }): Promise<NonNullable<TargetResult['reload']>> {
  try {
    if (id === 'self') {
      const report = await (action === undefined ? ctx.self!.reload() : ctx.self!.poolAction(action.pool, action.verb));
      return action === undefined ? { ok: true } : { ok: true, report };
    }
    const s = await controlRequest(id, controlOf(action), RELOAD_TIMEOUT_MS);
    s.end();
    if (!s.response.ok) return { ok: false, error: s.response.error.message, problems: s.response.error.problems };
    return action === undefined ? { ok: true } : { ok: true, report: s.response.result };
  } catch (err) {
    const e = err as { message?: string; problems?: string[] };
    return { ok: false, error: e.message ?? String(err), problems: e.problems };
  }
}

interface Planned {
  id: string;
  file: string;
  text: string;
  /** The file's hash as read: written only while it still has it. */
  hash: string;
  /** A config file is applied by a reload; a site's file by the site directory's own watch. */
  reload: boolean;
}

interface Place {
  kind: 'config' | 'site';
  file: string;
  text: string;
  path: readonly string[];
  edit(settings: PoolSettings): ReturnType<typeof editPoolText>;
}

/** A pool is edited where it lives: pools.NAME of the config file, else (our own daemon) the vhosts site's file. */
async function placeOf(id: string, pool: string, ctx: ActionContext): Promise<Place | { readOnly: string }> {
  const file = await configPathOf(id, ctx);
  if (nodePath.isAbsolute(file)) {
    const text = readFileSync(file, 'utf8');
    if (parseDocument(text).hasIn(configPoolPath(pool))) return { kind: 'config', file, text, path: configPoolPath(pool), edit: (s) => editPoolText(text, file, file, pool, s) };
  }
  const site = id === 'self' ? ctx.self?.site?.(pool) : undefined;
  if (site === undefined) {
    if (!nodePath.isAbsolute(file)) return { readOnly: `runs without a config file (${file}); there is nothing to edit` };
    return { readOnly: `pool ${pool} is not in ${file}${id === 'self' ? '' : ' (a vhosts site of that daemon is edited on its own dashboard)'}` };
  }
  if ('readOnly' in site) return site;
  const text = readFileSync(site.file, 'utf8');
  return { kind: 'site', file: site.file, text, path: SITE_POOL_PATH, edit: (s) => editSettingsText(text, site.file, SITE_POOL_PATH, s, site.validate) };
}

/** The edit form's current values of a pool on one daemon. */
export async function poolForm(id: string, pool: string, ctx: ActionContext): Promise<PoolForm> {
  if (peerKind(id) === 'http') {
    try {
      const r = (await httpJson(new URL(`api/pool?daemon=self&pool=${encodeURIComponent(pool)}`, id.endsWith('/') ? id : id + '/').href, ctx.peerToken(), undefined, READ_TIMEOUT_MS)) as PoolForm;
      return { ...r, id };
    } catch (err) {
      return { id, pool, readOnly: (err as Error).message };
    }
  }
  try {
    const p = await placeOf(id, pool, ctx);
    if ('readOnly' in p) return { id, pool, readOnly: p.readOnly };
    return { id, pool, kind: p.kind, file: p.file, hash: hashText(p.text), values: settingsAt(p.text, p.path) };
  } catch (err) {
    return { id, pool, readOnly: (err as Error).message };
  }
}

async function planLocal(id: string, req: EditRequest, ctx: ActionContext): Promise<{ result: TargetResult; plan?: Planned }> {
  try {
    const p = await placeOf(id, req.pool, ctx);
    if ('readOnly' in p) return { result: { id, ok: false, error: p.readOnly } };
    const hash = hashText(p.text);
    const expected = req.expect?.[id];
    if (expected !== undefined && expected !== hash) {
      return { result: { id, ok: false, file: p.file, hash, conflict: true, error: `${p.file} changed since the form was loaded (edited by hand?); nothing was written: load the current values and edit again` } };
    }
    const r = p.edit(req.settings);
    const result: TargetResult = { id, ok: r.problems.length === 0, file: p.file, hash, diff: r.diff, problems: r.problems };
    return { result, plan: { id, file: p.file, text: r.text, hash, reload: p.kind === 'config' } };
  } catch (err) {
    return { result: { id, ok: false, error: (err as Error).message } };
  }
}

async function remote(id: string, body: unknown, ctx: ActionContext, path: string): Promise<TargetResult[]> {
  try {
    const r = (await httpJson(new URL(path, id.endsWith('/') ? id : id + '/').href, ctx.peerToken(), body, RELOAD_TIMEOUT_MS)) as { results: TargetResult[] };
    return r.results.map((x) => ({ ...x, id }));
  } catch (err) {
    return [{ id, ok: false, error: (err as Error).message }];
  }
}

/** A peer dashboard edits as 'self': the hash the form had for it, under that name. */
function selfExpect(req: EditRequest, id: string): Record<string, string> | undefined {
  const h = req.expect?.[id];
  return h === undefined ? undefined : { self: h };
}

/** Validates on every target; writes and reloads only when all are valid and not dryRun. */
export async function editPools(req: EditRequest, ctx: ActionContext): Promise<{ applied: boolean; results: TargetResult[] }> {
  const targets = [...new Set(req.targets)];
  const planned = await Promise.all(
    targets.map(async (id) => (peerKind(id) === 'http' ? { result: (await remote(id, { ...req, targets: ['self'], dryRun: true, expect: selfExpect(req, id) }, ctx, 'api/edit'))[0]!, plan: undefined } : planLocal(id, req, ctx))),
  );
  const results = planned.map((p) => p.result);
  if (req.dryRun === true || results.some((r) => !r.ok) || targets.length === 0) return { applied: false, results };
  for (let i = 0; i < planned.length; i++) {
    const plan = planned[i]!.plan;
    if (plan === undefined) continue;
    try {
      writeIfUnchanged(plan.file, plan.hash, plan.text);
    } catch (err) {
      // Raced by a hand edit between the check and now: this one is not written (nor reloaded).
      results[i] = { ...results[i]!, ok: false, conflict: true, error: (err as Error).message };
      planned[i] = { result: results[i]! };
    }
  }
  await Promise.all(
    planned.map(async (p, i) => {
      const id = targets[i]!;
      if (peerKind(id) === 'http') results[i] = (await remote(id, { ...req, targets: ['self'], dryRun: false, expect: selfExpect(req, id) }, ctx, 'api/edit'))[0]!;
      else if (p.plan === undefined) return;
      else if (p.plan.reload) results[i]!.reload = await reloadOf(id, ctx);
      else results[i]!.reload = { ok: true };
      results[i]!.ok = results[i]!.ok && results[i]!.reload?.ok === true;
    }),
  );
  return { applied: true, results };
}

/** Reloads each target; with `action`, does that to the pool's workers on each instead (each daemon at once: they serve apart). */
export async function reloadTargets(targets: string[], ctx: ActionContext, action?: { pool: string; verb: PoolVerb }): Promise<TargetResult[]> {
  return Promise.all(
    [...new Set(targets)].map(async (id): Promise<TargetResult> => {
      if (peerKind(id) === 'http') {
        const path = action === undefined ? 'api/reload' : action.verb === 'drain' ? 'api/drain' : 'api/restart';
        return (await remote(id, { targets: ['self'], pool: action?.pool, rolling: action?.verb === 'rolling' }, ctx, path))[0]!;
      }
      if (id === 'self' && ctx.self === undefined) return { id, ok: false, error: 'this dashboard runs without a local daemon' };
      const reload = await reloadOf(id, ctx, action);
      return { id, ok: reload.ok, reload };
    }),
  );
}
