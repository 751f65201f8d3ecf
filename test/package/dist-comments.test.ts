/**
 * The daemon's modules are built without comments. V8 keeps every module's source text
 * on the heap for as long as the process lives, two bytes a character when the file holds
 * one character past Latin-1 (an arrow or a dash in a comment was enough): with comments,
 * about 1 MiB of an idle daemon's RssAnon (docs/BENCHMARKS.md, "The cost budget").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../helpers/paths.js';

function builtFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) builtFiles(p, out);
    else if (p.endsWith('.js')) out.push(p);
  }
  return out;
}

test('dist/src holds no doc comments (tsconfig removeComments)', () => {
  const files = builtFiles(join(REPO_ROOT, 'dist', 'src'));
  assert.ok(files.length > 100, `only ${files.length} built files: build first`);
  const commented = files.filter((f) => /^\s*\/\*\*\s*$|^\s*\/\*\* /m.test(readFileSync(f, 'utf8'))).map((f) => relative(REPO_ROOT, f));
  assert.deepEqual(commented, []);
});
