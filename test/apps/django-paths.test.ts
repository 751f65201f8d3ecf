/**
 * The adapter gives Django the path the client asked for, whatever split the front end
 * made: nginx's stock fastcgi_params (SCRIPT_NAME = the whole path, no PATH_INFO) and
 * stock scgi_params (neither) with Django at the root, the example's splits under /app
 * (fastcgi_split_path_info, SCGI captures), and the stock params under /app with the
 * adapter's --script-name. Each path of the table gets what Django's URLconf and
 * reverse() make of it: the page, not the index, for a URL ending in '/'.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { exampleConfig, migrateDjango } from './examples.js';
import { startNginxSite, type FrontEnd } from './servers.js';

interface Front {
  name: string;
  prefix: '' | '/app';
  protocol: 'fastcgi' | 'scgi';
  pool: 'django' | 'django-scgi' | 'django-mounted';
  /** nginx location block(s); PASS is replaced by the listener's address. */
  location: string;
  /** fcgi-pm's listener: a Unix socket (no TCP port to race other tests for while the pools start). */
  sock: string;
  web: FrontEnd | undefined;
}

const FRONTS: Array<Omit<Front, 'sock' | 'web'>> = [
  { name: 'FastCGI, stock fastcgi_params, Django at the root', prefix: '', protocol: 'fastcgi', pool: 'django', location: 'location / { include fastcgi_params; fastcgi_pass PASS; }' },
  { name: 'SCGI, stock scgi_params, Django at the root', prefix: '', protocol: 'scgi', pool: 'django-scgi', location: 'location / { include scgi_params; scgi_pass PASS; }' },
  {
    name: 'FastCGI, fastcgi_split_path_info under /app',
    prefix: '/app',
    protocol: 'fastcgi',
    pool: 'django',
    location: 'location /app/ { fastcgi_split_path_info ^(/app)(/.*)$; include fastcgi_params; fastcgi_param PATH_INFO $fastcgi_path_info; fastcgi_pass PASS; }',
  },
  {
    name: 'SCGI, SCRIPT_NAME and PATH_INFO captured under /app',
    prefix: '/app',
    protocol: 'scgi',
    pool: 'django-scgi',
    location: 'location ~ ^(?<p>/app)(?<rest>/.*)$ { include scgi_params; scgi_param SCRIPT_NAME $p; scgi_param PATH_INFO $rest; scgi_pass PASS; }',
  },
  { name: 'FastCGI, stock fastcgi_params under /app, adapter --script-name /app', prefix: '/app', protocol: 'fastcgi', pool: 'django-mounted', location: 'location /app/ { include fastcgi_params; fastcgi_pass PASS; }' },
];

describe('Django paths through nginx: the page the client asked for, under every split', { timeout: 150_000 }, () => {
  const scope = new Cleanup();
  const fronts: Front[] = [];

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-djp-');
    const db = join(dir, 'db.sqlite3');
    migrateDjango(db);
    for (const [i, f] of FRONTS.entries()) fronts.push({ ...f, sock: join(dir, `front-${i}.sock`), web: undefined });
    const env = { env: { DJANGO_DB_PATH: db }, pm: 'static', max_children: 1 };
    const cfg = exampleConfig('django/fcgi-pm.yaml', {
      listen: { '127.0.0.1:9001': `unix:${fronts[0]!.sock}`, '127.0.0.1:9002': `unix:${fronts[1]!.sock}` },
      pools: { django: env, 'django-scgi': env },
    });
    const command = [...(cfg.pools.django.command as string[])];
    command.splice(command.indexOf('--fastcgi') + 1, 0, '--script-name', '/app');
    cfg.pools['django-mounted'] = { ...cfg.pools.django, command };
    for (const f of fronts.slice(2)) cfg.listen.push({ protocol: f.protocol, address: `unix:${f.sock}`, pool: f.pool });
    await startDaemon(scope, cfg);
    for (const f of fronts) {
      const web = await freePort();
      f.web = await startNginxSite(scope, `server {\n  listen 127.0.0.1:${web};\n  ${f.location.replace('PASS', `unix:${f.sock}`)}\n}\n`, web);
    }
  });
  after(() => scope.run());

  for (const [i, spec] of FRONTS.entries()) {
    describe(spec.name, () => {
      const f = (): Front => fronts[i]!;
      const get = (path: string): ReturnType<typeof httpRequest> => httpRequest(`${f().web!.url}${f().prefix}${path}`);

      it('/page/ is the 8,750-byte page, not the index', async () => {
        const r = await get('/page/');
        assert.equal(r.status, 200, r.text.slice(0, 300));
        assert.equal(r.body.length, 8750);
        assert.match(r.text, /<h1>A page of 8,750 bytes<\/h1>/);
      });

      it('/ is the index, its links under the mount point', async () => {
        const r = await get('/');
        assert.equal(r.status, 200, r.text.slice(0, 300));
        assert.match(r.text, new RegExp(`href="${f().prefix}/page/"`));
        assert.match(r.text, /<h1>fcgi-pm Django example<\/h1>/);
      });

      it('/hello/<name>/: request.path, path_info, SCRIPT_NAME and reverse() as Django expects', async () => {
        const r = await get('/hello/x%20y/?q=1');
        assert.equal(r.status, 200, r.text.slice(0, 300));
        const p = f().prefix;
        assert.deepEqual(JSON.parse(r.text), { name: 'x y', q: '1', path: `${p}/hello/x y/`, path_info: '/hello/x y/', script_name: p, url: `${p}/hello/x%20y/` });
      });

      it('/page without its slash: Django redirects to /page/ (APPEND_SLASH)', async () => {
        const r = await get('/page');
        assert.equal(r.status, 301, r.text.slice(0, 300));
        assert.equal(new URL(String(r.headers.location), f().web!.url).pathname, `${f().prefix}/page/`);
      });

      it('/café/: a %-encoded path', async () => {
        const r = await get('/caf%C3%A9/');
        assert.equal(r.status, 200, r.text.slice(0, 300));
        assert.equal(r.text, 'café ☕\n');
      });
    });
  }
});
