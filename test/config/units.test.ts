import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatDuration, formatSize, parseDuration, parseSize } from '../../src/config/units.js';

test('durations: units, combinations, and bare numbers are seconds', () => {
  const table: Array<[unknown, number]> = [
    ['500ms', 500],
    ['10s', 10_000],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    ['1m30s', 90_000],
    ['1h 30m', 5_400_000],
    ['1.5s', 1500],
    ['.5s', 500],
    ['0s', 0],
    ['10 minutes', 600_000],
    ['2 sec', 2000],
    ['30S', 30_000],
    [10, 10_000], // bare number: seconds, as in PHP-FPM
    ['10', 10_000],
    [0.25, 250],
    [0, 0],
  ];
  for (const [input, ms] of table) assert.equal(parseDuration(input), ms, `parseDuration(${JSON.stringify(input)})`);
});

test('durations: mistakes are messages, not numbers', () => {
  for (const input of ['', 'ten', '10 parsecs', '-1', '-1s', '30s1m', '1e3', '10s!', true, null, [], {}, -5, NaN]) {
    const r = parseDuration(input);
    assert.equal(typeof r, 'string', `parseDuration(${JSON.stringify(input)}) should fail, got ${String(r)}`);
  }
  assert.match(parseDuration('ten') as string, /got "ten"/);
  assert.match(parseDuration('30s1m') as string, /largest to smallest/);
});

test('sizes: binary units, php.ini spellings, bare numbers are bytes', () => {
  const table: Array<[unknown, number]> = [
    ['64KiB', 65_536],
    ['64KB', 65_536], // binary like php.ini, not 64,000
    ['64K', 65_536],
    ['64k', 65_536],
    ['32MiB', 32 * 1024 ** 2],
    ['64M', 64 * 1024 ** 2],
    ['1GiB', 1024 ** 3],
    ['1G', 1024 ** 3],
    ['1.5M', 1.5 * 1024 ** 2],
    ['512 KiB', 512 * 1024],
    ['100B', 100],
    ['100', 100],
    [4096, 4096],
    [0, 0],
  ];
  for (const [input, bytes] of table) assert.equal(parseSize(input), bytes, `parseSize(${JSON.stringify(input)})`);
});

test('sizes: mistakes are messages', () => {
  for (const input of ['', 'big', '64 kilobytes', '-1', '1.5', 1.5, -1, true, null, '64Q']) {
    const r = parseSize(input);
    assert.equal(typeof r, 'string', `parseSize(${JSON.stringify(input)}) should fail, got ${String(r)}`);
  }
});

test('formatting gives the shortest exact spelling and round-trips', () => {
  assert.equal(formatSize(65_536), '64KiB');
  assert.equal(formatSize(1000), '1000B');
  assert.equal(formatSize(3 * 1024 ** 3), '3GiB');
  assert.equal(formatDuration(90_000), '1m30s');
  assert.equal(formatDuration(1500), '1500ms');
  assert.equal(formatDuration(0), '0s');
  assert.equal(formatDuration(3_600_000), '1h');
  for (const ms of [0, 1, 999, 1000, 61_000, 3_601_000, 86_400_000 + 1000]) assert.equal(parseDuration(formatDuration(ms)), ms);
  for (const b of [0, 1, 1023, 1024, 1536, 1024 ** 2, 5 * 1024 ** 3]) assert.equal(parseSize(formatSize(b)), b);
});
