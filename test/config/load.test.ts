import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { writeFileSync } from 'node:fs';
import { loadConfig } from '../../src/config/load.js';
import { fixture, problemsOf, tempDir } from './helpers.js';

const EXAMPLE = `
  listen:
    - { protocol: fastcgi, address: 127.0.0.1:9000, pool: php }
    - { protocol: scgi, address: "unix:/run/fcgi-pm/app.sock", pool: app, mode: "0660" }
    - { protocol: http, address: 127.0.0.1:8080, pool: php, document_root: /var/www, index: index.php }
  pools:
    php:
      backend: fastcgi                 # protocol the backends speak: fastcgi | scgi
      backends: [ "unix:/run/php.sock", "127.0.0.1:9001" ]
    app:
      command: [php-cgi]               # spawned workers (argv, no shell)
      pm: ondemand
      max_children: 4
  limits: { max_params_bytes: 64KiB, max_params_count: 1000 }
  log: { level: info, access: true }
  shutdown_timeout: 30s
  runtime_dir: /run/fcgi-pm
`;

test('the documented example loads with the values it spells', (t) => {
  const file = fixture(tempDir(t), 'fcgi-pm.yaml', EXAMPLE);
  const cfg = loadConfig(file);
  assert.equal(cfg.source, file);
  assert.deepEqual(
    cfg.listen.map((l) => [l.protocol, l.address.text, l.pool, l.mode]),
    [
      ['fastcgi', '127.0.0.1:9000', 'php', undefined],
      ['scgi', 'unix:/run/fcgi-pm/app.sock', 'app', 0o660],
      ['http', '127.0.0.1:8080', 'php', undefined],
    ],
  );
  assert.equal(cfg.listen[2]!.documentRoot, '/var/www');
  const php = cfg.pools.get('php')!;
  assert.deepEqual(php.backends.map((b) => b.text), ['unix:/run/php.sock', '127.0.0.1:9001']);
  assert.equal(php.command, undefined);
  const app = cfg.pools.get('app')!;
  assert.deepEqual(app.command, ['php-cgi']);
  assert.equal(app.pm, 'ondemand');
  assert.equal(app.maxChildren, 4);
  assert.deepEqual(app.backends, []);
  assert.deepEqual(cfg.limits, { maxParamsBytes: 65_536, maxParamsCount: 1000 });
  assert.deepEqual(cfg.log, { level: 'info', format: 'auto', access: true, file: undefined, accessFile: undefined, accessFormat: 'json' });
  assert.equal(cfg.shutdownTimeout, 30_000);
  assert.equal(cfg.runtimeDir, '/run/fcgi-pm');
});

test('a problem names file, line and key path', (t) => {
  const file = fixture(tempDir(t), 'fcgi-pm.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: php }
    pools:
      php:
        command: [php-cgi]
        max_children: ten
  `);
  assert.deepEqual(problemsOf(() => loadConfig(file)), [`${file}:6: pools.php.max_children: must be a whole number ≥ 1, got "ten"`]);
});

test('every problem is reported, in file order, each with its own line', (t) => {
  const file = fixture(tempDir(t), 'bad.yaml', `
    listen:
      - protocol: fastcgi
        address: 127.0.0.1:99999
        pool: php
      - { protocol: gopher, address: 127.0.0.1:9001 }
    pools:
      php:
        command: [php-cgi]
        max_children: 0
        idle_timeout: soon
        keep_alive: yes
    limits:
      max_params_bytes: 12 parsecs
    shutdown_timeout: -3s
  `);
  const problems = problemsOf(() => loadConfig(file));
  assert.deepEqual(problems, [
    `${file}:3: listen[0].address: port out of range in "127.0.0.1:99999"`,
    `${file}:5: listen[1].protocol: must be one of fastcgi, scgi, http, got "gopher"`,
    `${file}:9: pools.php.max_children: must be a whole number ≥ 1, got 0`,
    `${file}:10: pools.php.idle_timeout: must be a duration such as "500ms", "10s", "5m" or "1h" (units ms, s, m, h, d), got "soon"`,
    `${file}:11: pools.php.keep_alive: must be true or false, got "yes"`,
    `${file}:13: limits.max_params_bytes: must be a size such as "64KiB", "32MiB" or "1GiB" (units B, K, M, G, T; binary), got "12 parsecs"`,
    `${file}:14: shutdown_timeout: must be a duration such as "500ms", "10s", "5m" or "1h" (units ms, s, m, h, d), got "-3s"`,
  ]);
});

test('unknown keys are errors with a suggestion when one is close', (t) => {
  const file = fixture(tempDir(t), 'typo.yaml', `
    listen:
      - { protocol: fastcgi, adress: 127.0.0.1:9000 }
    pools:
      php:
        command: [php-cgi]
        max_chilren: 4
        pm.max_children: 4
        request_terminate_timeout: 30s
        max_conns: 5
        frobnicate: 1
    shutdown_timout: 10s
  `);
  const problems = problemsOf(() => loadConfig(file));
  assert.deepEqual(problems, [
    `${file}:2: listen[0].adress: unknown key (did you mean "address"?)`,
    `${file}:2: listen[0]: "address" is required (Where to listen: "127.0.0.1:9000", "[::1]:9000", ":9000" (all interfaces) or "unix:/path.sock".)`,
    `${file}:6: pools.php.max_chilren: unknown key (did you mean "max_children"?)`,
    // PHP-FPM's spellings point to ours.
    `${file}:7: pools.php.pm.max_children: unknown key (did you mean "max_children"?)`,
    `${file}:8: pools.php.request_terminate_timeout: unknown key (did you mean "request_timeout"?)`,
    // A key of another section says where it belongs.
    `${file}:9: pools.php.max_conns: unknown key here (it belongs in listen[])`,
    problems[6]!,
    `${file}:11: shutdown_timout: unknown key (did you mean "shutdown_timeout"?)`,
  ]);
  // Nothing close: the message lists what is valid here.
  assert.match(problems[6]!, new RegExp(`^${file}:10: pools\\.php\\.frobnicate: unknown key; valid keys are: backend, backends, .*max_children`));
});

test('log settings spelt as top-level keys (log_file, access_log, PHP-FPM error_log) point to their log.* key', (t) => {
  const file = fixture(tempDir(t), 'log-keys.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: php }
    pools:
      php: { command: [php-cgi] }
    log_file: /var/log/fcgi-pm.log
    access_log: /var/log/fcgi-pm-access.log
    error_log: /var/log/fcgi-pm.log
    log:
      log_level: debug
  `);
  assert.deepEqual(problemsOf(() => loadConfig(file)), [
    `${file}:5: log_file: unknown key (did you mean "log.file"?)`,
    `${file}:6: access_log: unknown key (did you mean "log.access_file"?)`,
    `${file}:7: error_log: unknown key (did you mean "log.file"?)`,
    `${file}:9: log.log_level: unknown key (did you mean "level"?)`,
  ]);
});

test('cross-checks: listener pool, backends vs command, duplicate addresses, loops', (t) => {
  const file = fixture(tempDir(t), 'cross.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: php }
      - { protocol: scgi, address: 127.0.0.1:9000, pool: phpp }
      - { protocol: http, address: "0.0.0.0:8080", pool: none }
      - { protocol: http, address: "127.0.0.1:8080", pool: both }
      - { protocol: fastcgi, address: "unix:/tmp/x.sock", pool: php }
      - { protocol: fastcgi, address: "/tmp/x.sock", pool: php }
    pools:
      php:
        backends: [ "127.0.0.1:9001", "127.0.0.1:9000" ]
      none:
        pm: static
      both:
        backends: [ "127.0.0.1:9002" ]
        command: [php-cgi]
  `);
  assert.deepEqual(problemsOf(() => loadConfig(file)), [
    `${file}:3: listen[1].pool: no pool named "phpp" (did you mean "php"?)`,
    `${file}:3: listen[1].address: 127.0.0.1:9000 is already used by listen[0]`,
    `${file}:5: listen[3].address: 127.0.0.1:8080 is already used by listen[2] (0.0.0.0:8080)`,
    `${file}:7: listen[5].address: unix:/tmp/x.sock is already used by listen[4]`,
    `${file}:10: pools.php.backends[1]: 127.0.0.1:9000 is fcgi-pm's own listener (listen[0]); requests would loop`,
    `${file}:11: pools.none: needs either "backends" (addresses of running backends) or "command" (a program fcgi-pm spawns)`,
    `${file}:13: pools.both: has both "backends" and "command"; a pool either proxies to running backends or spawns workers, so make two pools`,
  ]);
});

test('authorizer_pool names a pool, on a fastcgi listener', (t) => {
  const file = fixture(tempDir(t), 'authz.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: php, authorizer_pool: auth }
      - { protocol: fastcgi, address: 127.0.0.1:9001, pool: php, authorizer_pool: autz }
      - { protocol: scgi, address: 127.0.0.1:9002, pool: php, authorizer_pool: auth }
    pools:
      php: { command: [php-cgi] }
      auth: { backends: [ "127.0.0.1:9100" ] }
  `);
  assert.deepEqual(problemsOf(() => loadConfig(file)), [
    `${file}:3: listen[1].authorizer_pool: no pool named "autz" (did you mean "auth"?)`,
    `${file}:4: listen[2].authorizer_pool: only applies to fastcgi listeners (SCGI and HTTP have no authorizer requests; a pool's \`authorizer\` works for any front end)`,
  ]);
});

test('keys for another kind of pool or listener are errors', (t) => {
  const file = fixture(tempDir(t), 'scope.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: ext, document_root: /srv, mode: "0600" }
      - { protocol: http, address: "unix:/tmp/h.sock", pool: spawned, mode: "0600", document_root: /srv }
    pools:
      ext:
        backends: [ "127.0.0.1:9001" ]
        max_children: 3
        connect_timeout: 1s
      spawned:
        command: [php-cgi]
        max_conns_per_backend: 3
        queue_limit: 10
  `);
  assert.deepEqual(problemsOf(() => loadConfig(file)), [
    `${file}:2: listen[0].document_root: only applies to http listeners`,
    `${file}:2: listen[0].mode: only applies to unix: socket addresses`,
    `${file}:7: pools.ext.max_children: only applies to pools with "command" (this pool has "backends")`,
    `${file}:11: pools.spawned.max_conns_per_backend: only applies to pools with "backends" (this pool has "command")`,
  ]);
});

test('defaults are applied to everything the file leaves out', (t) => {
  const file = fixture(tempDir(t), 'min.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000 }
    pools:
      app:
        command: [/usr/bin/env, python3, app.py]
  `);
  const cfg = loadConfig(file);
  const l = cfg.listen[0]!;
  assert.equal(l.pool, 'app', 'the only pool is the default');
  assert.equal(l.idleTimeout, 60_000);
  assert.equal(l.maxConns, 1024);
  assert.equal(l.index, 'index.php');
  assert.deepEqual(l.params, {});
  assert.equal(l.mode, undefined);
  const p = cfg.pools.get('app')!;
  assert.equal(p.name, 'app');
  assert.equal(p.backend, 'fastcgi');
  assert.equal(p.maxConnsPerBackend, 16);
  assert.equal(p.backendDownTime, 5000);
  assert.equal(p.connectTimeout, 5000);
  assert.equal(p.readTimeout, 60_000);
  assert.equal(p.keepAlive, true);
  assert.equal(p.socket, 'fd0');
  assert.deepEqual(p.env, {}, 'no php-cgi defaults for other programs');
  assert.deepEqual(p.inheritEnv, ['PATH', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR']);
  assert.equal(p.pm, 'ondemand');
  assert.equal(p.maxChildren, 5);
  assert.equal(p.startChildren, 0);
  assert.equal(p.minSpare, 1);
  assert.equal(p.maxSpare, 3);
  assert.equal(p.maxSpawnRate, 32);
  assert.equal(p.spawnTimeout, 10_000);
  assert.equal(p.idleTimeout, 10_000);
  assert.equal(p.maxRequests, 0);
  assert.equal(p.maxLifetime, 0);
  assert.equal(p.requestTimeout, 0);
  assert.equal(p.killTimeout, 5000);
  assert.equal(p.crashLimit, 5);
  assert.equal(p.crashWindow, 60_000);
  assert.equal(p.queueLimit, 1024);
  assert.equal(p.queueTimeout, 5000);
  assert.equal(p.queueMaxWait, 300);
  assert.deepEqual(cfg.limits, { maxParamsBytes: 64 * 1024, maxParamsCount: 1000 });
  assert.deepEqual(cfg.log, { level: 'info', format: 'auto', access: true, file: undefined, accessFile: undefined, accessFormat: 'json' });
  assert.equal(cfg.shutdownTimeout, 30_000);
  assert.equal(cfg.runtimeDir, undefined);
});

test('pm decides start_children; dynamic spare counts are checked', (t) => {
  const dir = tempDir(t);
  const cfg = loadConfig(fixture(dir, 'pm.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: s }
    pools:
      s: { command: [php-cgi], pm: static, max_children: 7 }
      d: { command: [php-cgi], pm: dynamic, max_children: 2 }
      d2: { command: [php-cgi], pm: dynamic, min_spare: 2, max_spare: 4, start_children: 3 }
  `));
  assert.equal(cfg.pools.get('s')!.startChildren, 7);
  // Default spare counts give way to a small max_children instead of failing.
  assert.deepEqual([cfg.pools.get('d')!.minSpare, cfg.pools.get('d')!.maxSpare, cfg.pools.get('d')!.startChildren], [1, 2, 1]);
  assert.equal(cfg.pools.get('d2')!.startChildren, 3);

  const bad = fixture(dir, 'pm-bad.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: d }
    pools:
      d:
        command: [php-cgi]
        pm: dynamic
        max_children: 4
        min_spare: 3
        max_spare: 2
        start_children: 9
  `);
  assert.deepEqual(problemsOf(() => loadConfig(bad)), [
    `${bad}:8: pools.d.min_spare: must be ≤ max_spare (2), got 3`,
    `${bad}:10: pools.d.start_children: must be from min_spare (3) to max_spare (2) with pm dynamic, got 9`,
  ]);
});

test('php-cgi gets PHP_FCGI_CHILDREN=0 and PHP_FCGI_MAX_REQUESTS=0 unless the pool sets them', (t) => {
  const file = fixture(tempDir(t), 'php.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: a }
    pools:
      a: { command: [php-cgi] }
      b: { command: [/usr/bin/php-cgi8.2, -d, "memory_limit=64M"], env: { PHP_FCGI_MAX_REQUESTS: 100, APP_ENV: prod } }
      c: { command: [python3, app.py] }
  `);
  const cfg = loadConfig(file);
  assert.deepEqual(cfg.pools.get('a')!.env, { PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0' });
  assert.deepEqual(cfg.pools.get('b')!.env, { PHP_FCGI_MAX_REQUESTS: '100', APP_ENV: 'prod', PHP_FCGI_CHILDREN: '0' });
  assert.deepEqual(cfg.pools.get('c')!.env, {});
});

test('JSON is accepted by the same parser, with lines in errors', (t) => {
  const dir = tempDir(t);
  const good = path.join(dir, 'fcgi-pm.json');
  writeFileSync(good, JSON.stringify({
    listen: [{ protocol: 'scgi', address: 'unix:/tmp/app.sock', mode: '0600' }],
    pools: { app: { backend: 'scgi', backends: ['127.0.0.1:4000'], connect_timeout: '250ms' } },
    limits: { max_params_bytes: '1MiB' },
  }, null, '\t'));
  const cfg = loadConfig(good);
  assert.equal(cfg.listen[0]!.mode, 0o600);
  assert.equal(cfg.pools.get('app')!.backend, 'scgi');
  assert.equal(cfg.pools.get('app')!.connectTimeout, 250);
  assert.equal(cfg.limits.maxParamsBytes, 1024 * 1024);

  const bad = path.join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ listen: [{ protocol: 'fastcgi', address: ':9000' }], pools: { app: { backends: ['x:1'], read_timeout: 'forever' } } }, null, 2));
  assert.deepEqual(problemsOf(() => loadConfig(bad)), [
    `${bad}:13: pools.app.read_timeout: must be a duration such as "500ms", "10s", "5m" or "1h" (units ms, s, m, h, d), got "forever"`,
  ]);
});

test('file modes: quoted octal, YAML octal, and a bare decimal is refused', (t) => {
  const dir = tempDir(t);
  const load = (mode: string): unknown => loadConfig(fixture(dir, 'm.yaml', `
    listen:
      - { protocol: fastcgi, address: "unix:/tmp/a.sock", mode: ${mode} }
    pools:
      p: { backends: ["127.0.0.1:9001"] }
  `)).listen[0]!.mode;
  assert.equal(load('"0660"'), 0o660);
  assert.equal(load('"660"'), 0o660);
  assert.equal(load('0660'), 0o660, 'YAML 1.2 reads 0660 as decimal 660; the raw text is what was meant');
  assert.equal(load('0o640'), 0o640);
  assert.match(problemsOf(() => load('660'))[0]!, /listen\[0\]\.mode: must be an octal file mode in quotes, e.g. "0660", got 660$/);
  assert.match(problemsOf(() => load('"0999"'))[0]!, /listen\[0\]\.mode: must be an octal file mode/);
});

test('relative paths are relative to the config file', (t) => {
  const dir = tempDir(t);
  const file = fixture(dir, 'rel.yaml', `
    listen:
      - { protocol: http, address: 127.0.0.1:0, document_root: public }
    pools:
      app: { command: [./bin/app.fcgi, --flag], cwd: . }
    runtime_dir: ../run
  `);
  const cfg = loadConfig(file);
  assert.equal(cfg.listen[0]!.documentRoot, path.join(dir, 'public'));
  assert.deepEqual(cfg.pools.get('app')!.command, [path.join(dir, 'bin/app.fcgi'), '--flag']);
  assert.equal(cfg.pools.get('app')!.cwd, dir);
  assert.equal(cfg.runtimeDir, path.resolve(dir, '../run'));
});

test('socket: argv needs {socket} or {port} in the arguments', (t) => {
  const dir = tempDir(t);
  const file = fixture(dir, 'argv.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:0 }
    pools:
      app: { command: [php-cgi, -b], socket: argv }
  `);
  assert.deepEqual(problemsOf(() => loadConfig(file)), [
    `${file}:4: pools.app.command: needs "{socket}" (a Unix socket path) or "{port}" (a loopback port) in its arguments when socket is argv, e.g. [php-cgi, -b, "{socket}"]`,
  ]);
  const ok = fixture(dir, 'argv-ok.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:0 }
    pools:
      app: { command: "./app.fcgi --listen {socket}", socket: argv, cwd: www }
    runtime_dir: run
  `);
  const cfg = loadConfig(ok);
  const app = cfg.pools.get('app')!;
  assert.deepEqual(app.command, [path.join(dir, 'app.fcgi'), '--listen', '{socket}'], 'a string command is split at spaces; ./ is relative to the file');
  assert.equal(app.cwd, path.join(dir, 'www'));
  assert.equal(cfg.runtimeDir, path.join(dir, 'run'));
  const port = loadConfig(fixture(dir, 'argv-port.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:0 }
    pools:
      app: { command: [python3, app.py, "--bind=127.0.0.1:{port}"], socket: argv }
  `));
  assert.equal(port.pools.get('app')!.socket, 'argv');
});

test('YAML syntax errors, duplicate keys, empty and unreadable files', (t) => {
  const dir = tempDir(t);
  const syntax = fixture(dir, 'syntax.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000
    pools: {}
  `);
  const [p] = problemsOf(() => loadConfig(syntax));
  assert.match(p!, new RegExp(`^${syntax.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+: `));

  const dup = fixture(dir, 'dup.yaml', `
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000 }
    pools:
      a: { command: [php-cgi] }
      a: { command: [php-cgi] }
  `);
  assert.match(problemsOf(() => loadConfig(dup))[0]!, /dup\.yaml:5: .*unique/i);

  const empty = fixture(dir, 'empty.yaml', '\n# nothing\n');
  assert.deepEqual(problemsOf(() => loadConfig(empty)), [`${empty}: the file is empty; it needs at least "listen" and "pools"`]);

  const missing = path.join(dir, 'nope.yaml');
  assert.deepEqual(problemsOf(() => loadConfig(missing)), [`${missing}: cannot read config: no such file`]);

  const list = fixture(dir, 'list.yaml', '- a\n- b\n');
  assert.deepEqual(problemsOf(() => loadConfig(list)), [`${list}:1: the configuration must be a mapping with "listen" and "pools", got a list`]);

  const bare = fixture(dir, 'bare.yaml', 'log: { level: debug }\n');
  assert.deepEqual(problemsOf(() => loadConfig(bare)), [
    `${bare}:1: "pools" is required: at least one pool of backends or workers (or "vhosts")`,
    `${bare}:1: "listen" is required: at least one listener`,
  ]);
});

test('anchors and merge keys share settings; x- keys hold them', (t) => {
  const file = fixture(tempDir(t), 'anchors.yaml', `
    x-php: &php
      command: [php-cgi]
      pm: dynamic
      max_children: 8
    listen:
      - { protocol: fastcgi, address: 127.0.0.1:9000, pool: a }
      - { protocol: fastcgi, address: 127.0.0.1:9001, pool: b }
    pools:
      a: { <<: *php }
      b:
        <<: *php
        max_children: 2
        max_chiildren: 3
  `);
  const problems = problemsOf(() => loadConfig(file));
  assert.deepEqual(problems, [`${file}:13: pools.b.max_chiildren: unknown key (did you mean "max_children"?)`]);
});

test('the top-level CPU keys reach the config (daemon_cpu_weight was read, then dropped)', (t) => {
  const file = fixture(tempDir(t), 'fcgi-pm.yaml', 'listen: [{ protocol: fastcgi, address: 127.0.0.1:9000, pool: app }]\npools:\n  app: { command: [php-cgi] }\ndaemon_cpu_weight: 0\ndaemon_short_slice: false\n');
  const cfg = loadConfig(file);
  assert.equal(cfg.daemonCpuWeight, 0);
  assert.equal(cfg.daemonShortSlice, false);
  const defaults = loadConfig(fixture(tempDir(t), 'fcgi-pm.yaml', 'listen: [{ protocol: fastcgi, address: 127.0.0.1:9000, pool: app }]\npools:\n  app: { command: [php-cgi] }\n'));
  assert.equal(defaults.daemonCpuWeight, 300);
  assert.equal(defaults.daemonShortSlice, true);
});
