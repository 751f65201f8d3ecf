// The key table (keys.ts) is the single description of the config: it must cover every
// field of the contract types, and its defaults must be valid values.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONFIG_KEYS, LIMITS_KEYS, LISTENER_KEYS, LOG_KEYS, POOL_KEYS, TOP_KEYS } from '../../src/config/keys.js';
import { configFromObject, poolConfigFromObject } from '../../src/config/schema.js';
import type { Config, DashboardConfig, ListenerConfig, LimitsConfig, PoolConfig } from '../../src/config/types.js';
import { DASHBOARD_KEYS } from '../../src/config/dashboard-keys.js';
import { VHOSTS_KEYS } from '../../src/config/vhosts-keys.js';
import { problemsOf } from './helpers.js';

// Compile-time lists: adding a field to types.ts without listing it here fails the build,
// and the tests below then demand a row in keys.ts for it.
const POOL_FIELDS: Record<Exclude<keyof PoolConfig, 'name'>, true> = {
  backend: true, backends: true, maxConnsPerBackend: true, backendDownTime: true, connectTimeout: true, readTimeout: true,
  keepAlive: true, authorizerRole: true, command: true, socket: true, env: true, inheritEnv: true, cwd: true, user: true, group: true, pm: true,
  maxChildren: true, accept: true, directListen: true, directBacklog: true, directSocketMode: true,
  groupSize: true, residentParent: true, opcacheFileCache: true,
  preload: true,
  preloadIdleTimeout: true, startChildren: true, minSpare: true, maxSpare: true, maxSpawnRate: true, spawnTimeout: true,
  idleTimeout: true, maxRequests: true, maxRequestsJitter: true, maxLifetime: true, requestTimeout: true, slowRequest: true,
  killTimeout: true, crashLimit: true, crashWindow: true, queueLimit: true, queueTimeout: true, queueMaxWait: true,
  maxMemory: true, maxMemoryHard: true, memoryLimit: true, expectedWorkerMemory: true, rlimitAs: true, memorySampleInterval: true, oomScoreAdj: true, cpuWeight: true, busyCpuSlice: true,
  rlimitFiles: true, rlimitCore: true, processPriority: true, phpValue: true, phpAdmin: true,
  limitExtensions: true, scriptRoots: true,
  authorizer: true, authorizerCache: true, authorizerCacheKey: true, script: true,
};
const LISTENER_FIELDS: Record<keyof ListenerConfig, true> = {
  protocol: true, address: true, pool: true, authorizerPool: true, mode: true, owner: true, group: true, allowedClients: true, documentRoot: true, index: true, bodyBufferSize: true, maxBodySize: true, idleTimeout: true, headerTimeout: true, bodyTimeout: true, maxConns: true, backlog: true, params: true,
  name: true, statusPath: true, pingPath: true, readyPath: true, pingResponse: true, statusAllow: true, vhosts: true, rewrite: true,
};
const LIMITS_FIELDS: Record<keyof LimitsConfig, true> = { maxParamsBytes: true, maxParamsCount: true };
const LOG_FIELDS: Record<keyof Config['log'], true> = { level: true, format: true, access: true, file: true, accessFile: true, accessFormat: true };
const TOP_FIELDS: Record<Exclude<keyof Config, 'source' | 'origin' | 'listen' | 'pools' | 'limits' | 'log' | 'vhosts' | 'dashboard'>, true> = {
  shutdownTimeout: true, shutdownDelay: true, runtimeDir: true, opcacheDir: true, controlSocket: true, controlSocketMode: true, pidFile: true, upgrade: true, memoryBudget: true, memorySampleInterval: true, oomScoreAdj: true, maxChildrenTotal: true, daemonCpuWeight: true, daemonShortSlice: true,
};

const DASHBOARD_FIELDS: Record<keyof DashboardConfig, true> = {
  address: true, allowedClients: true, token: true, users: true, peers: true, peerToken: true, history: true, sampleInterval: true, idleSampleInterval: true,
};

const camel = (snake: string): string => snake.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

test('every contract field has exactly one key, named as its snake_case', () => {
  const pairs: Array<[string, readonly { key: string; field: string }[], object]> = [
    ['pool', POOL_KEYS, POOL_FIELDS],
    ['listener', LISTENER_KEYS, LISTENER_FIELDS],
    ['limits', LIMITS_KEYS, LIMITS_FIELDS],
    ['log', LOG_KEYS, LOG_FIELDS],
    ['top', TOP_KEYS, TOP_FIELDS],
    ['dashboard', DASHBOARD_KEYS, DASHBOARD_FIELDS],
  ];
  for (const [what, keys, fields] of pairs) {
    assert.deepEqual(keys.map((k) => k.field).sort(), Object.keys(fields).sort(), `${what} keys vs fields`);
    for (const k of keys) assert.equal(camel(k.key), k.field, `${what}.${k.key} maps 1:1`);
    assert.equal(new Set(keys.map((k) => k.key)).size, keys.length, `${what} keys are unique`);
  }
});

test('the key reference lists every key once, each with a type and a description', () => {
  const paths = CONFIG_KEYS.map((k) => k.path);
  assert.equal(new Set(paths).size, paths.length);
  assert.ok(paths.includes('pools.<name>.max_children'));
  assert.ok(paths.includes('listen[].address'));
  assert.ok(paths.includes('limits.max_params_bytes'));
  assert.ok(paths.includes('shutdown_timeout'));
  assert.equal(CONFIG_KEYS.length, 6 + POOL_KEYS.length + LISTENER_KEYS.length + LIMITS_KEYS.length + LOG_KEYS.length + VHOSTS_KEYS.length + TOP_KEYS.length + DASHBOARD_KEYS.length);
  assert.ok(paths.includes('dashboard.peers'));
  for (const k of CONFIG_KEYS) {
    assert.ok(k.type.length > 0 && k.description.length > 0, k.path);
    assert.ok(!k.description.includes('\n'), `${k.path}: one line`);
  }
  const maxChildren = CONFIG_KEYS.find((k) => k.path === 'pools.<name>.max_children')!;
  assert.equal(maxChildren.default, '5');
  assert.equal(CONFIG_KEYS.find((k) => k.path === 'limits.max_params_bytes')!.default, '64KiB');
});

test('a built PoolConfig has every field, so pools never see a missing key', () => {
  const pool = poolConfigFromObject('p', { command: ['php-cgi'] });
  assert.deepEqual(Object.keys(pool).sort(), ['name', ...Object.keys(POOL_FIELDS)].sort());
  assert.equal(pool.name, 'p');
  assert.equal(pool.env.PHP_FCGI_CHILDREN, '0');
  // Defaults are copies: editing one pool's lists cannot change another's.
  pool.inheritEnv.push('HOME');
  assert.ok(!poolConfigFromObject('q', { command: ['php-cgi'] }).inheritEnv.includes('HOME'));
});

test('configFromObject: objects from code are validated the same, without line numbers', () => {
  const cfg = configFromObject(
    { listen: [{ protocol: 'fastcgi', address: '127.0.0.1:0', pool: 'p' }], pools: { p: { backends: ['127.0.0.1:9001'], keep_alive: false } } },
    '<test>',
  );
  assert.equal(cfg.source, '<test>');
  assert.equal(cfg.pools.get('p')!.keepAlive, false);
  assert.deepEqual(
    problemsOf(() => configFromObject({ listen: [{ protocol: 'fastcgi', address: '127.0.0.1:0' }], pools: { p: { backends: [], max_conns_per_backend: 'many' } } }, '<test>')),
    ['<test>: pools.p.backends: must list at least one address', '<test>: pools.p.max_conns_per_backend: must be a whole number ≥ 1, got "many"'],
  );
  assert.deepEqual(problemsOf(() => configFromObject({ listen: [], pools: { 'bad name': { command: ['x'] } } }, '<test>')), [
    '<test>: pools.bad name: pool names may use letters, digits, "_", "-" and "." (and start with a letter or digit)',
    '<test>: listen: must list at least one listener',
  ]);
});
