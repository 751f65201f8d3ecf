/**
 * Changes the page asks for, on one daemon or several: a pool settings edit (validated on
 * every target first; one invalid target means nothing is written anywhere), then written
 * and applied with each daemon's zero-failure reload; and a plain reload. Our own daemon
 * and control-socket peers on this host are edited here (their config file path comes
 * from their answer to ping); a dashboard peer over HTTP does its own edit.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import { controlRequest } from '../control/client.js';
import type { ControlRequest } from '../control/protocol.js';
import { editPoolText, type PoolSettings } from './config-edit.js';
import type { DiffLine } from './diff.js';
import { httpJson, peerKind } from './peers.js';

/** What the page asks of one pool: fresh workers all at once (restart), one at a time (rolling), or drain. */
export type PoolVerb = 'restart' | 'rolling' | 'drain';

export interface LocalDaemon {
  configPath(): string;
  reload(): Promise<unknown>;
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
}

async function planLocal(id: string, req: EditRequest, ctx: ActionContext): Promise<{ result: TargetResult; plan?: Planned }> {
  try {
    const file = await configPathOf(id, ctx);
    if (!nodePath.isAbsolute(file)) return { result: { id, ok: false, error: `runs without a config file (${file}); there is nothing to edit` } };
    const before = readFileSync(file, 'utf8');
    const r = editPoolText(before, file, file, req.pool, req.settings);
    const result: TargetResult = { id, ok: r.problems.length === 0, file, diff: r.diff, problems: r.problems };
    return { result, plan: { id, file, text: r.text } };
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

/** Validates on every target; writes and reloads only when all are valid and not dryRun. */
export async function editPools(req: EditRequest, ctx: ActionContext): Promise<{ applied: boolean; results: TargetResult[] }> {
  const targets = [...new Set(req.targets)];
  const planned = await Promise.all(
    targets.map(async (id) => (peerKind(id) === 'http' ? { result: (await remote(id, { ...req, targets: ['self'], dryRun: true }, ctx, 'api/edit'))[0]!, plan: undefined } : planLocal(id, req, ctx))),
  );
  const results = planned.map((p) => p.result);
  if (req.dryRun === true || results.some((r) => !r.ok) || targets.length === 0) return { applied: false, results };
  for (const p of planned) if (p.plan !== undefined) writeFileSync(p.plan.file, p.plan.text);
  await Promise.all(
    planned.map(async (p, i) => {
      const id = targets[i]!;
      if (peerKind(id) === 'http') results[i] = (await remote(id, { ...req, targets: ['self'], dryRun: false }, ctx, 'api/edit'))[0]!;
      else results[i]!.reload = await reloadOf(id, ctx);
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
