/**
 * docs/fcgi-pm.schema.json, the JSON Schema editors read: generated from the key tables
 * (npm run docs), every shipped example config passes it, and a typo or a wrong type fails
 * at the key, whose line the YAML locator finds. Validated with a small validator of the
 * keywords the generator uses (no dependency for a test).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { configJsonSchema } from '../../src/config/json-schema.js';
import { parseYamlText } from '../../src/config/load.js';
import { REPO_ROOT } from '../helpers/paths.js';

type Schema = Record<string, any>;
type Problem = { path: Array<string | number>; message: string };

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function validate(s: Schema, v: unknown, path: Array<string | number> = []): Problem[] {
  const out: Problem[] = [];
  const bad = (message: string): Problem[] => [{ path, message }];
  if (s.anyOf !== undefined) {
    const tries = (s.anyOf as Schema[]).map((sub) => validate(sub, v, path));
    if (!tries.some((p) => p.length === 0)) {
      // The deepest reason, for a message at the key that is wrong.
      const deepest = tries.flat().sort((a, b) => b.path.length - a.path.length)[0];
      if (deepest !== undefined && deepest.path.length > path.length) return [deepest];
      return bad('matches none of the allowed shapes');
    }
  }
  if (s.const !== undefined && v !== s.const) return bad(`must be ${JSON.stringify(s.const)}`);
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    const t = typeOf(v);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) return bad(`must be ${types.join(' or ')}, got ${t}`);
  }
  if (s.enum !== undefined && !s.enum.includes(v)) return bad(`must be one of ${s.enum.join(', ')}`);
  if (typeof v === 'number') {
    if (s.minimum !== undefined && v < s.minimum) out.push({ path, message: `below ${s.minimum}` });
    if (s.maximum !== undefined && v > s.maximum) out.push({ path, message: `above ${s.maximum}` });
  }
  if (typeof v === 'string') {
    if (s.minLength !== undefined && v.length < s.minLength) out.push({ path, message: 'too short' });
    if (s.pattern !== undefined && !new RegExp(s.pattern, 'u').test(v)) out.push({ path, message: `does not match ${s.pattern}` });
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) out.push({ path, message: 'too few items' });
    if (s.items !== undefined) v.forEach((item, i) => out.push(...validate(s.items, item, [...path, i])));
  }
  if (typeOf(v) === 'object') {
    const obj = v as Record<string, unknown>;
    for (const r of s.required ?? []) if (!(r in obj)) out.push({ path, message: `"${r}" is required` });
    for (const [k, val] of Object.entries(obj)) {
      if (s.propertyNames?.pattern !== undefined && !new RegExp(s.propertyNames.pattern).test(k)) out.push({ path: [...path, k], message: 'bad name' });
      if (s.properties?.[k] !== undefined) out.push(...validate(s.properties[k], val, [...path, k]));
      else if (Object.keys(s.patternProperties ?? {}).some((p) => new RegExp(p).test(k))) continue;
      else if (s.additionalProperties === false) out.push({ path: [...path, k], message: 'unknown key' });
      else if (typeof s.additionalProperties === 'object') out.push(...validate(s.additionalProperties, val, [...path, k]));
    }
  }
  return out;
}

function exampleConfigs(dir = join(REPO_ROOT, 'examples')): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...exampleConfigs(p));
    else if (/^fcgi-pm.*\.ya?ml$/.test(name)) out.push(p);
  }
  return out;
}

test('docs/fcgi-pm.schema.json is the schema generated from the key tables (npm run docs)', () => {
  const file = JSON.parse(readFileSync(join(REPO_ROOT, 'docs/fcgi-pm.schema.json'), 'utf8'));
  assert.deepEqual(file, JSON.parse(JSON.stringify(configJsonSchema())));
});

test('every shipped example config passes the schema', () => {
  const schema = configJsonSchema();
  const files = exampleConfigs();
  assert.ok(files.length >= 5, files.join(', '));
  for (const f of files) {
    const { obj } = parseYamlText(readFileSync(f, 'utf8'), f, 'listen and pools');
    assert.deepEqual(validate(schema, obj), [], f);
  }
});

test('a typo and a wrong type fail at their keys, on their lines', () => {
  const text = ['listen:', '  - { protocol: fastcgi, address: "127.0.0.1:9000", pool: php }', 'pools:', '  php:', '    command: [php-cgi]', '    max_childs: 8', '    pm: sometimes', '    idle_timeout: soon', ''].join('\n');
  const { obj, locate } = parseYamlText(text, 'x.yaml', 'listen and pools');
  const problems = validate(configJsonSchema(), obj);
  const at = problems.map((p) => [p.path.join('.'), locate.line(p.path)]);
  assert.deepEqual(at, [['pools.php.max_childs', 6], ['pools.php.pm', 7], ['pools.php.idle_timeout', 8]], JSON.stringify(problems));
  // Each key carries its description for the editor's hover.
  assert.match((configJsonSchema() as Schema).properties.pools.additionalProperties.properties.max_children.description, /Most workers alive at once/);
});
