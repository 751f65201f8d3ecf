/** Config test helpers: fixtures are real files in a fresh temp dir. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { ConfigError } from '../../src/errors.js';

export function tempDir(t: TestContext): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fcgi-pm-config-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes `text` (leading newline and common indentation removed) and returns the path. */
export function fixture(dir: string, name: string, text: string): string {
  const lines = text.replace(/^\n/, '').split('\n');
  const indent = Math.min(...lines.filter((l) => l.trim() !== '').map((l) => /^ */.exec(l)![0].length));
  const file = path.join(dir, name);
  writeFileSync(file, lines.map((l) => l.slice(indent)).join('\n'));
  return file;
}

/** Runs fn, which must throw ConfigError, and returns its problems. */
export function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.code, 'ERR_CONFIG_INVALID');
    return err.problems;
  }
  assert.fail('expected a ConfigError');
}
