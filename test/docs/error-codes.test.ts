// Every stable error code must be documented in docs/error-codes.md's table, and the
// table must not list codes that no longer exist.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ErrorCodes } from '../../src/errors.js';

const doc = readFileSync(new URL('../../../docs/error-codes.md', import.meta.url), 'utf8');
const section = doc.slice(doc.indexOf('# Error codes'));
const documented = new Set([...section.matchAll(/^\| `(ERR_[A-Z0-9_]+)`/gm)].map((m) => m[1]));

test('every error code is documented in docs/error-codes.md', () => {
  const missing = Object.values(ErrorCodes).filter((c) => !documented.has(c));
  assert.deepEqual(missing, []);
});

test('docs/error-codes.md documents no error code that does not exist', () => {
  const known = new Set<string>(Object.values(ErrorCodes));
  const stale = [...documented].filter((c) => !known.has(c!));
  assert.deepEqual(stale, []);
});
