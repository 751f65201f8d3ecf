/**
 * A JSON Schema (draft 2020-12) of the config file, generated from the key tables, for
 * editors: YAML language servers complete keys, show each key's doc and default, and
 * underline a typo (`# yaml-language-server: $schema=...` at the top of the file, or
 * the editor's schema settings). It says what the tables say about each key's shape;
 * what needs the whole file or the host (a pool named by a listener, a user that
 * exists, a port in use) stays `fcgi-pm check`'s. docs/fcgi-pm.schema.json is this,
 * written by `npm run docs` and kept current by a test.
 */
import type { KeySpec, KeyType } from './key-spec.js';
import { LIMITS_KEYS, LISTENER_KEYS, LOG_KEYS, POOL_KEYS, TOP_KEYS } from './keys.js';
import { DASHBOARD_KEYS } from './dashboard-keys.js';
import { VHOSTS_KEYS } from './vhosts-keys.js';

type Schema = Record<string, unknown>;

const DURATION = '^\\s*(\\d+(\\.\\d+)?|(\\d+(\\.\\d+)?\\s*(ms|s|m|h|d)\\s*)+)\\s*$';
const SIZE = '^\\s*(\\d+(\\.\\d+)?|\\.\\d+)\\s*([kKmMgGtT]?([iI]?[bB])?|[bB])\\s*$';
const strings = (item: Schema = { type: 'string', minLength: 1 }): Schema => ({ anyOf: [item, { type: 'array', items: item }] });

function typeSchema(t: KeyType): Schema {
  switch (t.kind) {
    case 'int':
      return { type: 'integer', minimum: t.min, ...(t.max === undefined ? {} : { maximum: t.max }) };
    case 'duration':
      return { anyOf: [{ type: 'number', minimum: 0 }, { type: 'string', pattern: DURATION }] };
    case 'size':
      return { anyOf: [{ type: 'integer', minimum: t.min, maximum: t.max }, { type: 'string', pattern: SIZE }] };
    case 'bool':
      return t.auto === true ? { anyOf: [{ type: 'boolean' }, { const: 'auto' }] } : { type: 'boolean' };
    case 'string':
      return { type: ['string', 'number'], minLength: 1 };
    case 'path':
    case 'access-format':
      return { type: 'string', minLength: 1 };
    case 'path-or-off':
      return { anyOf: [{ type: 'string', minLength: 1 }, { const: false }] };
    case 'enum':
      return { type: 'string', enum: [...t.values] };
    case 'address':
      return { type: 'string', pattern: '^(unix:/.+|.*:\\d+)$' };
    case 'addresses':
      return strings({ type: 'string', pattern: '^(unix:/.+|.*:\\d+)$' });
    case 'argv':
      return { anyOf: [{ type: 'string', minLength: 1 }, { type: 'array', minItems: 1, items: { type: ['string', 'number', 'boolean'] } }] };
    case 'string-map':
      return { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean', 'null'] } };
    case 'string-list':
    case 'paths':
    case 'allow-list':
    case 'client-list':
      return strings();
    case 'mode':
      return { anyOf: [{ type: 'string', pattern: '^(0o)?[0-7]{3,4}$' }, { type: 'integer', minimum: 0 }] };
    case 'budget':
      return { anyOf: [{ type: 'string' }, { type: 'integer', minimum: 1048576 }] };
    case 'user':
    case 'group':
      return { type: ['string', 'integer'] };
    case 'extensions':
      return { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string', pattern: '^\\.[^/\\s]+$' } }, { const: false }] };
    case 'url-path':
      return { type: 'string', pattern: '^/' };
    case 'mapping':
      return { type: 'object' };
    case 'rewrite':
      return {
        type: 'array',
        items: {
          anyOf: [
            { type: 'object', properties: { match: { type: 'string' }, to: { type: 'string', pattern: '^/' } }, required: ['match', 'to'], additionalProperties: false },
            { type: 'object', properties: { front_controller: { type: 'string', pattern: '^/' } }, required: ['front_controller'], additionalProperties: false },
          ],
        },
      };
  }
}

function section(specs: readonly KeySpec[], extra: Record<string, Schema> = {}): Schema {
  const properties: Record<string, Schema> = {};
  for (const k of specs) {
    const s: Schema = { description: k.doc, ...typeSchema(k.type) };
    if (k.default !== undefined) s['default'] = k.default;
    properties[k.key] = s;
  }
  const required = specs.filter((k) => k.required === true).map((k) => k.key);
  return { type: 'object', properties: { ...properties, ...extra }, ...(required.length > 0 ? { required } : {}), additionalProperties: false };
}

export function configJsonSchema(): Schema {
  const top = section(TOP_KEYS, {
    listen: { description: 'Where fcgi-pm takes requests from the front end.', type: 'array', minItems: 1, items: section(LISTENER_KEYS) },
    pools: { description: 'Pools of backends or workers, by name.', type: 'object', propertyNames: { pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]*$' }, additionalProperties: section(POOL_KEYS) },
    limits: { description: 'Limits on what a request may send.', ...section(LIMITS_KEYS) },
    log: { description: 'The log and the access log.', ...section(LOG_KEYS) },
    vhosts: { description: 'Sites from a directory or a database, each a pool on first request (docs/vhosts.md).', ...section(VHOSTS_KEYS) },
    dashboard: { description: 'The web dashboard (docs/dashboard.md).', ...section(DASHBOARD_KEYS) },
  });
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: 'https://github.com/fcgi-pm/fcgi-pm/docs/fcgi-pm.schema.json',
    title: 'fcgi-pm configuration',
    description: 'fcgi-pm.yaml(5): every key, generated from src/config/keys.ts. `fcgi-pm check -c FILE` checks the rest (pools named, users, paths, ports).',
    ...top,
    // "x-" keys hold YAML anchors shared through "<<: *name".
    patternProperties: { '^x-': {} },
    anyOf: [{ required: ['listen', 'pools'] }, { required: ['listen', 'vhosts'] }],
  };
}
