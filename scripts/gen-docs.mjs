#!/usr/bin/env node
// Regenerates the generated part of docs/configuration.md (the config key reference) and
// docs/fcgi-pm.schema.json (for editors) from the tables in src/config/keys.ts. `npm run docs` after adding or changing a key; a test
// fails while the document and the tables disagree. (fcgi-pm.yaml(5) renders the same
// tables: scripts/gen-manual.mjs.)
import { readFileSync, writeFileSync } from 'node:fs';
import { renderConfigReference, replaceGenerated } from '../dist/src/config/reference.js';

const path = new URL('../docs/configuration.md', import.meta.url);
const before = readFileSync(path, 'utf8');
const after = replaceGenerated(before, 'config-reference', renderConfigReference());
if (after !== before) {
  writeFileSync(path, after);
  console.log('docs/configuration.md: config reference updated');
} else {
  console.log('docs/configuration.md: config reference up to date');
}

// The JSON Schema editors read (src/config/json-schema.ts).
const { configJsonSchema } = await import('../dist/src/config/json-schema.js');
const schemaPath = new URL('../docs/fcgi-pm.schema.json', import.meta.url);
const schema = `${JSON.stringify(configJsonSchema(), null, 2)}\n`;
let old = '';
try {
  old = readFileSync(schemaPath, 'utf8');
} catch {
  // first time
}
if (old !== schema) {
  writeFileSync(schemaPath, schema);
  console.log('docs/fcgi-pm.schema.json: updated');
} else {
  console.log('docs/fcgi-pm.schema.json: up to date');
}
