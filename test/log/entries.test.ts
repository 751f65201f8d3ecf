import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { ENTRY_GAP_MS, EntryGrouper, MAX_ENTRY_LINES, TRACEBACK_GAP_MS } from '../../src/log/entries.js';

/** Feeds reads (arrays of lines) to a grouper; `gap` ms of mock time pass between reads. */
function group(t: TestContext, reads: (string[] | number)[]): string[] {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const entries: string[] = [];
  const g = new EntryGrouper((text) => entries.push(text));
  for (const r of reads) {
    if (typeof r === 'number') {
      t.mock.timers.tick(r);
      continue;
    }
    g.beginRead();
    for (const line of r) g.add(line);
    g.endRead();
  }
  t.mock.timers.tick(ENTRY_GAP_MS);
  return entries;
}

const TRACEBACK = [
  'Traceback (most recent call last):',
  '  File "/srv/app.py", line 7, in application',
  '    return handler(environ)',
  '  File "/srv/app.py", line 3, in handler',
  '    raise ValueError("boom")',
  'ValueError: boom',
];

test('EntryGrouper: a traceback written line by line, one read each, is one entry', (t) => {
  const entries = group(t, [...TRACEBACK.map((l) => [l]), ['next request log line']]);
  assert.deepEqual(entries, [TRACEBACK.join('\n'), 'next request log line']);
});

test('EntryGrouper: a traceback stays open for its exception line when its writer pauses past the gap', (t) => {
  const [first, ...rest] = TRACEBACK;
  const slow = [[first!], ...rest.flatMap((l) => [ENTRY_GAP_MS * 20, [l]])];
  const entries = group(t, [...slow, ['next request log line']]);
  assert.deepEqual(entries, [TRACEBACK.join('\n'), 'next request log line']);
});

test('EntryGrouper: a traceback cut short (no exception line) is logged after TRACEBACK_GAP_MS', (t) => {
  const entries = group(t, [TRACEBACK.slice(0, 3)]); // ENTRY_GAP_MS has passed
  assert.deepEqual(entries, [], 'still waiting for its exception line');
  t.mock.timers.tick(TRACEBACK_GAP_MS - ENTRY_GAP_MS - 1);
  assert.deepEqual(entries, []);
  t.mock.timers.tick(2);
  assert.deepEqual(entries, [TRACEBACK.slice(0, 3).join('\n')]);
});

test('EntryGrouper: lines of one read are one entry; a later unindented line starts the next', (t) => {
  const entries = group(t, [['PHP Warning:  Undefined variable $x in /srv/a.php on line 3', 'PHP Stack trace:', 'PHP   1. {main}() /srv/a.php:0'], ['another warning']]);
  assert.deepEqual(entries, ['PHP Warning:  Undefined variable $x in /srv/a.php on line 3\nPHP Stack trace:\nPHP   1. {main}() /srv/a.php:0', 'another warning']);
});

test('EntryGrouper: indented lines continue an entry across reads, but not after the gap', (t) => {
  const entries = group(t, [['*** uWSGI is running ***'], ['    detected cores: 2'], ENTRY_GAP_MS + 1, ['    late indented line']]);
  assert.deepEqual(entries, ['*** uWSGI is running ***\n    detected cores: 2', '    late indented line']);
});

test('EntryGrouper: an entry is capped; the rest goes on in the next one', (t) => {
  const lines = Array.from({ length: MAX_ENTRY_LINES + 5 }, (_, i) => `line ${i}`);
  const entries = group(t, [lines]);
  assert.equal(entries.length, 2);
  assert.equal(entries[0]!.split('\n').length, MAX_ENTRY_LINES);
  assert.equal(entries[1], lines.slice(MAX_ENTRY_LINES).join('\n'));
});
