// Every stable error code must be documented in README's "Error codes" table, and the
// table must not list codes that no longer exist.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ErrorCodes } from '../../src/errors.js';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
const section = readme.slice(readme.indexOf('## Error codes'));
const documented = new Set([...section.matchAll(/^\| `(ERR_[A-Z0-9_]+)`/gm)].map((m) => m[1]));

test('every error code is documented in README', () => {
  const missing = Object.values(ErrorCodes).filter((c) => !documented.has(c));
  assert.deepEqual(missing, []);
});

test('README documents no error code that does not exist', () => {
  const known = new Set<string>(Object.values(ErrorCodes));
  const stale = [...documented].filter((c) => !known.has(c!));
  assert.deepEqual(stale, []);
});
