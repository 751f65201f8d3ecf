#!/usr/bin/env node
// Regenerates the generated parts of README.md (the config key reference) from the
// tables in src/config/keys.ts. `npm run docs` after adding or changing a key; a test
// fails while README and the tables disagree.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderConfigReference, replaceGenerated } from '../dist/src/config/reference.js';

const path = new URL('../README.md', import.meta.url);
const before = readFileSync(path, 'utf8');
const after = replaceGenerated(before, 'config-reference', renderConfigReference());
if (after !== before) {
  writeFileSync(path, after);
  console.log('README.md: config reference updated');
} else {
  console.log('README.md: config reference up to date');
}
