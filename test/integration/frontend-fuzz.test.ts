/**
 * A bounded fuzz run of each front end against a real daemon on loopback: a few
 * thousand bent requests per protocol; every input gets at most one response, and
 * after every batch the daemon still serves a valid request. bench/frontend-fuzz.ts
 * runs the same with 10^5 inputs and more.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTrivialBackend } from '../../bench/trivial-backend.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { fuzzFrontend, type FuzzProtocol } from '../helpers/frontend-fuzz.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';

const INPUTS = Number(process.env.FCGI_PM_FUZZ_INPUTS ?? 2000);
const OK_BODY = 'x'.repeat(7);

describe('front-end fuzz against a running daemon', { timeout: 170_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  const ports = {} as Record<FuzzProtocol, number>;

  before(async () => {
    const backend = await startTrivialBackend({ protocol: 'fastcgi', address: '127.0.0.1:0', size: OK_BODY.length });
    scope.after(() => backend.close());
    for (const p of ['fastcgi', 'scgi', 'http'] as const) ports[p] = await freePort();
    const short = { idle_timeout: '300ms', header_timeout: '300ms', body_timeout: '300ms', max_conns: 4096 };
    daemon = await startDaemon(scope, {
      listen: (['fastcgi', 'scgi', 'http'] as const).map((p) => ({ protocol: p, address: `127.0.0.1:${ports[p]}`, pool: 'b', ...short })),
      pools: { b: { backends: [backend.address], max_conns_per_backend: 64 } },
      log: { level: 'error' },
    });
  });
  after(() => scope.run());

  for (const protocol of ['fastcgi', 'scgi', 'http'] as const) {
    it(`${protocol}: ${INPUTS} inputs, at most one response each, the daemon serves on`, async () => {
      const counts = await fuzzFrontend({ protocol, port: ports[protocol], okBody: OK_BODY }, { inputs: INPUTS, seed: 7, maxMs: 45_000 }, () => daemon.running);
      console.log(`fuzz ${protocol}: ${JSON.stringify(counts)}`);
      assert.ok(counts.inputs >= Math.min(INPUTS, 500), `ran ${counts.inputs} inputs`);
      assert.ok(counts.answered > 0 && counts.closed > 0, 'both answers and closes happened');
      assert.equal(counts.probes > 0, true);
      assert.ok(daemon.running);
    });
  }
});
