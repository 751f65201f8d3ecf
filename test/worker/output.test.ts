import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LineSplitter, MAX_LINE_BYTES, RateLimitedLog } from '../../src/worker/output.js';
import { TokenBucket } from '../../src/util/token-bucket.js';
import { captureLogger } from './helpers.js';

function fakeClock(): { now: () => number; advance: (ms: number) => void } {
  let t = 0;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

test('TokenBucket: burst, then the refill rate; drops are counted (fake clock)', () => {
  const clock = fakeClock();
  const b = new TokenBucket({ ratePerSec: 20, burst: 100, now: clock.now });
  let ok = 0;
  for (let i = 0; i < 150; i++) if (b.take()) ok++;
  assert.equal(ok, 100);
  assert.equal(b.pendingDropped, 50);
  assert.equal(b.msUntilToken(), 50);
  clock.advance(49);
  assert.equal(b.take(), false);
  clock.advance(1);
  assert.equal(b.take(), true);
  assert.equal(b.takeDropped(), 51);
  assert.equal(b.takeDropped(), 0);
  assert.equal(b.totalDropped, 51);
  clock.advance(3_600_000); // refills only up to the burst
  ok = 0;
  for (let i = 0; i < 150; i++) if (b.take()) ok++;
  assert.equal(ok, 100);
});

function split(chunks: Buffer[]): string[] {
  const lines: string[] = [];
  const s = new LineSplitter((l) => lines.push(l));
  for (const c of chunks) s.push(c);
  s.end();
  return lines;
}

test('LineSplitter: the same lines whatever the chunking (UTF-8 kept whole, CRLF and blank lines dropped)', () => {
  const text = Buffer.from('first\r\nsecond — ünïcødé ✓\n\nthird\nno newline at end');
  const want = ['first', 'second — ünïcødé ✓', 'third', 'no newline at end'];
  assert.deepEqual(split([text]), want);
  for (let i = 0; i <= text.length; i++) assert.deepEqual(split([text.subarray(0, i), text.subarray(i)]), want, `split at ${i}`);
  assert.deepEqual(split([...text].map((b) => Buffer.from([b]))), want);
});

test('LineSplitter: an over-long line is cut once and its rest skipped', () => {
  const long = 'x'.repeat(MAX_LINE_BYTES * 3);
  const lines = split([Buffer.from(`a\n${long.slice(0, 5000)}`), Buffer.from(`${long.slice(5000)}\nb\n`)]);
  assert.equal(lines.length, 3);
  assert.equal(lines[0], 'a');
  assert.ok(lines[1]!.startsWith('x'.repeat(MAX_LINE_BYTES)));
  assert.match(lines[1]!, /truncated/);
  assert.equal(lines[2], 'b');
});

test('RateLimitedLog: a flood logs the burst, then one coded line saying how many were dropped', () => {
  const clock = fakeClock();
  const { logger, records } = captureLogger();
  const out = new RateLimitedLog(logger, new TokenBucket({ ratePerSec: 20, burst: 100, now: clock.now }));
  for (let i = 0; i < 1000; i++) out.write('warn', 'stderr', `line ${i}`);
  out.flush();
  const lines = records.filter((r) => r['stream'] === 'stderr');
  assert.equal(lines.length, 100);
  assert.equal(lines[99]!.msg, 'line 99');
  const drops = records.filter((r) => r['dropped'] !== undefined);
  assert.equal(drops.length, 1);
  assert.equal(drops[0]!['dropped'], 900);
  assert.match(drops[0]!.msg, /900 entries dropped/);
  assert.equal(drops[0]!['code'], 'ERR_LOG_RATE_LIMITED');
  assert.equal(lines[0]!['code'], 'ERR_WORKER_STDERR', 'a stderr warning names its code');
  out.flush(); // nothing new to say
  assert.equal(records.filter((r) => r['dropped'] !== undefined).length, 1);
});

test('RateLimitedLog: the drop report also comes by itself, from a timer, while output is quiet', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { logger, records } = captureLogger();
  const out = new RateLimitedLog(logger, new TokenBucket({ ratePerSec: 1, burst: 2 }));
  for (let i = 0; i < 5; i++) out.write('info', 'stdout', `l${i}`);
  assert.equal(records.length, 2);
  t.mock.timers.tick(1000);
  assert.equal(records.length, 3);
  assert.equal(records[2]!['dropped'], 3);
});
