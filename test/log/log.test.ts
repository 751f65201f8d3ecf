import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes } from '../../src/errors.js';
import { LogFiles } from '../../src/log/files.js';
import { childLogger } from '../../src/log/log.js';
import { formatPretty } from '../../src/log/pretty.js';
import { duplicateTopLevelKeys, lineLogger } from '../helpers/log.js';

test('duplicateTopLevelKeys finds what JSON.parse hides, and only at the top level', () => {
  assert.deepEqual(duplicateTopLevelKeys('{"pool":"c","x":{"pool":1},"pool":"c"}'), ['pool']);
  assert.deepEqual(duplicateTopLevelKeys('{"a":"{\\"b\\":1,\\"b\\":2}","c":[{"a":1}]}'), []);
});

test('childLogger: a binding the parent already has is not written twice', () => {
  const raw: string[] = [];
  const pool = lineLogger('info', (s) => void raw.push(s)).child({ pool: 'c' });
  childLogger(pool, { pool: 'c', worker: 3 }).info('hello');
  childLogger(childLogger(pool, { pool: 'c' }), { worker: 4 }).info('again');
  assert.deepEqual(raw.map(duplicateTopLevelKeys), [[], []], raw.join(''));
  assert.deepEqual(raw.map((l) => JSON.parse(l).worker), [3, 4]);
});

test('a warning without a stable code does not compile', () => {
  const lines: string[] = [];
  const log = lineLogger('info', (s) => void lines.push(s));
  // @ts-expect-error warn/error/fatal need fields with a code from src/errors.ts
  log.warn({ remote: 'x' }, 'no code');
  // @ts-expect-error a code that is not in the table is refused too
  log.error({ code: 'ECONNRESET' }, 'not ours');
  // @ts-expect-error a message alone is refused
  log.warn('just text');
  log.warn({ code: ErrorCodes.QUEUE_FULL, queued: 3 }, 'coded');
  assert.equal(JSON.parse(lines[3]!).code, 'ERR_QUEUE_FULL');
});

const LINE = JSON.stringify({
  level: 40, time: '2026-12-01T10:02:03.456Z', pid: 7, pool: 'www', worker: 3, code: 'ERR_WORKER_STDERR', stream: 'stderr',
  msg: 'Traceback (most recent call last):\n  File "app.py", line 1\nValueError: boom',
});

test('formatPretty: time, level, first message line, code first then key=value; further lines indented', () => {
  assert.equal(
    formatPretty(LINE),
    '10:02:03.456 WARN  Traceback (most recent call last):  code=ERR_WORKER_STDERR pool=www worker=3 stream=stderr\n' +
      '      File "app.py", line 1\n' +
      '    ValueError: boom\n',
  );
  assert.equal(
    formatPretty(JSON.stringify({ level: 30, time: '2026-12-01T10:00:00.000Z', msg: 'GET / 200', uri: '/a b', ms: 1.5, list: ['x'] })),
    '10:00:00.000 INFO  GET / 200  uri="/a b" ms=1.5 list=["x"]\n',
  );
  const err = formatPretty(JSON.stringify({ level: 50, time: '2026-12-01T10:00:00.000Z', code: 'ERR_INTERNAL', msg: 'oops', err: { message: 'bad', stack: 'Error: bad\n    at x' } }));
  assert.equal(err, '10:00:00.000 ERROR oops  code=ERR_INTERNAL err=bad\n    Error: bad\n        at x\n');
  assert.match(formatPretty(LINE, true), /^10:02:03\.456 \x1b\[33mWARN \x1b\[0m /);
  assert.equal(formatPretty('not json'), 'not json\n');
});

test('a reload that changes log.format says it takes a restart', () => {
  const log = { level: 'info', format: 'json', access: true } as const;
  const files = new LogFiles({ ...log });
  assert.deepEqual(files.apply({ ...log }), []);
  assert.deepEqual(files.apply({ ...log, format: 'pretty' }), ['log.format changed from json to pretty: that takes a restart']);
});
