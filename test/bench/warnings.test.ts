// The report warns when its figures are suspect: a target that stopped answering
// (whole seconds at 0 req/s, the php-fpm keep-alive trap) shows as a stall.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildReport, renderReport } from '../../src/bench/report.js';
import { runBench, type BenchOptions } from '../../src/bench/runner.js';
import { parseTarget } from '../../src/bench/target.js';

test('a server that stops answering: stalled seconds and a warning', { timeout: 30_000 }, async (t) => {
  let answered = 0;
  const held: ServerResponse[] = [];
  const server = createServer((_req, res) => {
    if (answered < 3) {
      answered++;
      res.end('ok');
    } else held.push(res); // never answered: like a php-fpm worker busy with another kept connection
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  const opts: BenchOptions = {
    target: parseTarget(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`),
    request: { method: 'GET', body: undefined, headers: [], params: [], keepAlive: true },
    concurrency: 2,
    durationMs: 2500,
    timeoutMs: 1200,
  };
  const report = buildReport(opts, await runBench(opts));
  assert.equal(report.requests.replies, 3);
  assert.ok(report.errors.timeout >= 2, JSON.stringify(report.errors));
  // Replies only in the first second; the run lasts until the last timeout (> 2 s).
  assert.ok(report.stalled_s >= 1, `stalled ${report.stalled_s} s in ${report.elapsed_ms} ms`);
  assert.equal(report.warnings.length, 1, report.warnings.join('\n'));
  assert.match(report.warnings[0]!, new RegExp(`throughput stalled: ${report.stalled_s} s at 0 req/s \\(the first from 1 s`));
  assert.match(renderReport(report), /^Warning: +throughput stalled/m);
});
