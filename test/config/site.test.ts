// Site definitions and the vhosts section: validated with the main config's tables,
// every problem with its file:line (or row label), defaults under the site's own settings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { siteFromText, siteFromObject, sitePool } from '../../src/config/site.js';
import { configFromObject } from '../../src/config/schema.js';
import { parseConfigText } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

const problems = (fn: () => unknown): string[] => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  assert.fail('expected a ConfigError');
};

const NO_BASE = { defaults: {}, siteMaxChildren: 0 };

test('a site file: names (one string may list several), document_root, pool over the defaults; script_roots default to the root', () => {
  const s = siteFromText('shop', 'names: "Shop.Example.org, *.shop.example.org."\ndocument_root: www\npool: { max_children: 3 }\n', { defaults: { command: ['php-cgi'], max_children: 9, user: 'nobody' }, siteMaxChildren: 0 }, '/etc/sites/shop.yaml', '/srv');
  assert.deepEqual(s.names, ['shop.example.org', '*.shop.example.org']);
  assert.equal(s.documentRoot, '/srv/www');
  const pool = sitePool(s);
  assert.equal(pool.name, 'shop');
  assert.equal(pool.maxChildren, 3);
  assert.equal(pool.user, 'nobody');
  assert.equal(pool.pm, 'ondemand');
  assert.equal(pool.startChildren, 0);
  assert.deepEqual(pool.scriptRoots, ['/srv/www']);
  assert.deepEqual(pool.limitExtensions, ['.php', '.phar']);
});

test('a broken site file names file:line for each problem', () => {
  const text = 'names: [ok.test, "bad name"]\ndocument_root: /srv\npool:\n  max_children: -1\n  nonsense: 1\nrewrite:\n  - { match: "(", to: /x.php }\n';
  const p = problems(() => siteFromText('s1', text, { defaults: { command: ['php-cgi'] }, siteMaxChildren: 0 }, 'sites/s1.yaml', '/'));
  assert.equal(p.length, 4, p.join('\n'));
  assert.equal(p[0], 'sites/s1.yaml:1: names[1]: "bad name" is not a host name or a "*.domain" wildcard');
  assert.equal(p[1], 'sites/s1.yaml:4: pool.max_children: must be a whole number ≥ 1, got -1');
  assert.match(p[2]!, /^sites\/s1\.yaml:5: pool\.nonsense: unknown key/);
  assert.match(p[3]!, /^sites\/s1\.yaml:7: rewrite\[0\]\.match: is not a regular expression/);
  assert.match(problems(() => siteFromText('s1', 'document_root: /srv\n', NO_BASE, 'x.yaml', '/'))[0]!, /^x\.yaml:1: "names" is required/);
  assert.match(problems(() => siteFromText('s1', '', NO_BASE, 'x.yaml', '/'))[0]!, /x\.yaml: the file is empty; it needs "names" and "document_root"/);
  assert.match(problems(() => siteFromObject('bad id!', { names: 'a.test', document_root: '/' }, { defaults: { command: ['php-cgi'] }, siteMaxChildren: 0 }, { label: 'db row bad id!', baseDir: '/' }))[0]!, /^db row bad id!: site id "bad id!" may use/);
});

test('the vhosts section: one source; no pools needed; a vhosts listener needs no pool; bad keys have lines', () => {
  const cfg = configFromObject({ listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', vhosts: true }], vhosts: { dir: 'sites', idle_timeout: '5m' } }, '/etc/fcgi-pm/fcgi-pm.yaml');
  assert.deepEqual(cfg.vhosts?.source, { kind: 'dir', dir: '/etc/fcgi-pm/sites' });
  assert.equal(cfg.vhosts?.idleTimeout, 300_000);
  assert.equal(cfg.pools.size, 0);
  const text = 'listen:\n  - { protocol: http, address: "127.0.0.1:8080", vhosts: true, rewrite: [{ to: /x }] }\nvhosts:\n  sqlite: a.db\n  dir: sites\n';
  assert.deepEqual(problems(() => parseConfigText(text, 'f.yaml', '/etc/f.yaml')), [
    'f.yaml:2: listen[0].rewrite[0]: must be { match: REGEX, to: "/path?query" } or { front_controller: "/script" }, got a mapping',
    'f.yaml:3: vhosts: has dir and sqlite; sites come from one source',
  ]);
  const defaults = problems(() => parseConfigText('listen: [{ protocol: fastcgi, address: "127.0.0.1:9000", vhosts: true }]\nvhosts:\n  dir: sites\n  defaults: { max_childs: 2 }\n', 'd.yaml', '/etc/d.yaml'));
  assert.match(defaults[0]!, /^d\.yaml:4: vhosts\.defaults\.max_childs: unknown key/);
  const table = problems(() => parseConfigText('listen: [{ protocol: fastcgi, address: "127.0.0.1:9000", vhosts: true }]\nvhosts: { sqlite: a.db, table: "x; drop" }\n', 'g.yaml', '/etc/g.yaml'));
  assert.deepEqual(table, ['g.yaml:2: vhosts.table: must be a plain SQL name (letters, digits, "_"), got "x; drop"']);
  assert.deepEqual(problems(() => configFromObject({ listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', vhosts: true }], pools: { a: { backends: '127.0.0.1:9001' } } }, 'h')), ['h: listen[0].vhosts: needs a "vhosts" section (where the sites are defined)']);
});

test('site_max_children holds every site to it, whatever its own settings or the defaults ask', () => {
  const base = { defaults: { command: ['php-cgi'], pm: 'dynamic', max_spare: 6 }, siteMaxChildren: 4 };
  const greedy = sitePool(siteFromText('greedy', 'names: a.test\ndocument_root: /srv\npool: { max_children: 50, start_children: 10, min_spare: 5 }\n', base, 'greedy.yaml', '/'));
  assert.deepEqual([greedy.maxChildren, greedy.startChildren, greedy.minSpare, greedy.maxSpare], [4, 4, 4, 4]);
  // No max_children of its own: the default (5) is above the cap too.
  const plain = sitePool(siteFromText('plain', 'names: b.test\ndocument_root: /srv\n', { ...base, siteMaxChildren: 2 }, 'plain.yaml', '/'));
  assert.equal(plain.maxChildren, 2);
  // Below the cap: the site's own.
  const small = sitePool(siteFromText('small', 'names: c.test\ndocument_root: /srv\npool: { max_children: 3, max_spare: 2 }\n', base, 'small.yaml', '/'));
  assert.equal(small.maxChildren, 3);
  // A cap below the spares' defaults (dynamic: max_spare 3) still makes a valid pool.
  const tiny = sitePool(siteFromText('tiny', 'names: d.test\ndocument_root: /srv\npool: { pm: dynamic }\n', { defaults: { command: ['php-cgi'] }, siteMaxChildren: 1 }, 'tiny.yaml', '/'));
  assert.deepEqual([tiny.maxChildren, tiny.maxSpare], [1, 1]);
  // The key is read from the vhosts section.
  const cfg = configFromObject({ listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', vhosts: true }], vhosts: { dir: 'sites', site_max_children: 8 } }, '/etc/fcgi-pm/fcgi-pm.yaml');
  assert.equal(cfg.vhosts?.siteMaxChildren, 8);
});
