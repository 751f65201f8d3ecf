// Table-driven over keys.ts: a wrong value for ANY key is reported once, as
// "file:line: key.path: message", with the line where that key is written.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/load.js';
import type { KeySpec } from '../../src/config/key-spec.js';
import { LIMITS_KEYS, LISTENER_KEYS, LOG_KEYS, POOL_KEYS, TOP_KEYS } from '../../src/config/keys.js';
import { fixture, problemsOf, tempDir } from './helpers.js';

/** A YAML value of the wrong type or shape for each kind of key. */
function wrongValue(spec: KeySpec): string {
  switch (spec.type.kind) {
    case 'string':
    case 'path':
      return '[1, 2]';
    case 'argv':
    case 'string-list':
    case 'paths':
      return '{ a: 1 }';
    case 'address':
    case 'addresses':
      return '"no-port-here"';
    default:
      return '"not-a-valid-value"';
  }
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

test('every pool key: a bad value names file, line and pools.<name>.<key>', (t) => {
  const dir = tempDir(t);
  for (const spec of POOL_KEYS) {
    const external = spec.scope === 'external' || spec.key === 'backends';
    const base = external ? '    backends: ["127.0.0.1:9001"]' : '    command: [php-cgi]';
    const lines = ['listen:', '  - { protocol: fastcgi, address: "127.0.0.1:9000", pool: p }', 'pools:', '  p:'];
    if (spec.key !== 'backends' && spec.key !== 'command') lines.push(base);
    lines.push(`    ${spec.key}: ${wrongValue(spec)}`);
    const file = fixture(dir, `pool-${spec.key}.yaml`, lines.join('\n') + '\n');
    const problems = problemsOf(() => loadConfig(file));
    assert.equal(problems.length, 1, `${spec.key}: ${problems.join(' | ')}`);
    assert.match(problems[0]!, new RegExp(`^${escape(file)}:${lines.length}: pools\\.p\\.${spec.key}(\\.\\w+|\\[\\d+\\])?: `), spec.key);
  }
});

test('every listener, limits, log and top-level key: the same', (t) => {
  const dir = tempDir(t);
  for (const spec of LISTENER_KEYS) {
    const fields: Record<string, string> = { protocol: 'http', address: '"unix:/tmp/l.sock"', pool: 'p' };
    fields[spec.key] = wrongValue(spec);
    const lines = ['pools:', '  p: { backends: ["127.0.0.1:9001"] }', 'listen:', '  - protocol: ' + fields.protocol];
    for (const [k, v] of Object.entries(fields)) if (k !== 'protocol') lines.push(`    ${k}: ${v}`);
    if (spec.key === 'protocol') lines[3] = `  - protocol: ${fields.protocol}`;
    const line = lines.findIndex((l) => l.includes(`${spec.key}: `)) + 1;
    const file = fixture(dir, `listener-${spec.key}.yaml`, lines.join('\n') + '\n');
    const problems = problemsOf(() => loadConfig(file));
    assert.equal(problems.length, 1, `${spec.key}: ${problems.join(' | ')}`);
    assert.match(problems[0]!, new RegExp(`^${escape(file)}:${line}: listen\\[0\\]\\.${spec.key}: `), spec.key);
  }
  const sections: Array<[string, readonly KeySpec[]]> = [['limits', LIMITS_KEYS], ['log', LOG_KEYS], ['', TOP_KEYS]];
  for (const [section, specs] of sections) {
    for (const spec of specs) {
      const lines = ['listen:', '  - { protocol: fastcgi, address: "127.0.0.1:9000" }', 'pools:', '  p: { command: [php-cgi] }'];
      lines.push(section === '' ? `${spec.key}: ${wrongValue(spec)}` : `${section}:\n  ${spec.key}: ${wrongValue(spec)}`);
      const line = section === '' ? 5 : 6;
      const file = fixture(dir, `${section || 'top'}-${spec.key}.yaml`, lines.join('\n') + '\n');
      const problems = problemsOf(() => loadConfig(file));
      const keyPath = section === '' ? spec.key : `${section}\\.${spec.key}`;
      assert.equal(problems.length, 1, `${spec.key}: ${problems.join(' | ')}`);
      assert.match(problems[0]!, new RegExp(`^${escape(file)}:${line}: ${keyPath}: `), spec.key);
    }
  }
});
