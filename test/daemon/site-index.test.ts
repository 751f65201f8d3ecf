// The host index: exact names, wildcards by longest suffix, hosts as clients send them,
// names two sites claim.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hostName, SiteIndex } from '../../src/daemon/vhosts/site-index.js';
import type { SiteConfig } from '../../src/config/types.js';
import { loadOptional } from '../../src/daemon/vhosts/optional-module.js';

const site = (id: string, ...names: string[]): SiteConfig => ({ id, names, documentRoot: `/srv/${id}`, settings: {}, baseDir: '/', rewrite: [], origin: `${id}.yaml` });

test('exact names first, then the longest wildcard suffix; not the bare domain of a wildcard', () => {
  const { index, problems } = SiteIndex.build([site('a', 'example.org', '*.example.org'), site('b', '*.shop.example.org'), site('c', 'www.shop.example.org')]);
  assert.deepEqual(problems, []);
  const id = (h: string) => index.lookup(h)?.id;
  assert.equal(id('example.org'), 'a');
  assert.equal(id('blog.example.org'), 'a');
  assert.equal(id('x.y.example.org'), 'a');
  assert.equal(id('eu.shop.example.org'), 'b');
  assert.equal(id('www.shop.example.org'), 'c');
  assert.equal(id('shop.example.org'), 'a');
  assert.equal(id('example.net'), undefined);
  assert.equal(id('WWW.Shop.Example.ORG:8443'), 'c');
  assert.equal(id('example.org.'), 'a');
});

test('a name two sites claim stays with the id that sorts first; the other is reported and left out', () => {
  const { index, problems } = SiteIndex.build([site('zeta', 'z.test', 'shared.test'), site('alpha', 'shared.test', 'a.test')]);
  assert.equal(index.lookup('shared.test')?.id, 'alpha');
  assert.equal(index.lookup('z.test'), undefined);
  assert.deepEqual(problems.map((p) => [p.site.id, p.message]), [['zeta', 'zeta.yaml: names: "shared.test" is already a name of site alpha; this site is left out']]);
});

test('hostName strips the port and trailing dot, keeps IPv6 brackets, lowercases', () => {
  assert.equal(hostName('Example.org:80'), 'example.org');
  assert.equal(hostName('[::1]:8080'), '[::1]');
  assert.equal(hostName('a.test.'), 'a.test');
});

test('a database driver that is not installed: the error names what needs it and how to get it', () => {
  assert.throws(() => loadOptional('fcgi-pm-no-such-driver', 'vhosts.sqlite'), /^Error: vhosts\.sqlite needs the npm package fcgi-pm-no-such-driver, which is not installed or not built \(Cannot find module/);
});
