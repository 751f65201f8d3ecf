// docs/configuration.md's key reference must be exactly what the key tables render, so a key
// added or changed in src/config/keys.ts without `npm run docs` fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { renderConfigReference, replaceGenerated } from '../../src/config/reference.js';

test('docs/configuration.md matches src/config/keys.ts (run `npm run docs`)', () => {
  const doc = readFileSync(new URL('../../../docs/configuration.md', import.meta.url), 'utf8');
  assert.equal(replaceGenerated(doc, 'config-reference', renderConfigReference()), doc);
});

test('replaceGenerated refuses a document without the markers', () => {
  assert.throws(() => replaceGenerated('no markers', 'config-reference', 'x'), /config-reference:start/);
});
