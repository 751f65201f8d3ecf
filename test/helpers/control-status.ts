/**
 * The daemon's status as its control socket gives it (`fcgi-pm status --json` reads the
 * same), for tests that wait on what the daemon itself reports.
 */
import assert from 'node:assert/strict';
import { controlRequest } from '../../src/control/client.js';
import type { PoolStatus, StatusSnapshot } from '../../src/control/types.js';

export async function statusOf(control: string, timeoutMs = 10_000): Promise<StatusSnapshot> {
  const c = await controlRequest(control, { cmd: 'status' }, timeoutMs);
  c.end();
  assert.ok(c.response.ok, JSON.stringify(c.response));
  return c.response.result as StatusSnapshot;
}

export async function poolStatusOf(control: string, pool: string, timeoutMs = 10_000): Promise<PoolStatus> {
  const p = (await statusOf(control, timeoutMs)).pools.find((s) => s.name === pool);
  assert.ok(p !== undefined, `no pool ${pool} in status`);
  return p;
}
