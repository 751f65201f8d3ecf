// docs/vhosts.md's catch-all nginx server block in front of a FastCGI vhosts listener:
// "/" and a directory URL run the site's index (as the HTTP listener does) instead of
// 403 "extension not in limit_extensions"; a static file gets a refusal naming the real
// reason; proxy_pass to an HTTP vhosts listener serves the static files too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { startNginx, startNginxForSites } from '../helpers/nginx.js';
import { PHP_FLAGS } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';

test('vhosts behind nginx: "/" and directory URLs run the index; static files over HTTP proxy_pass', { timeout: 90_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-vhi-');
  chmodSync(dir, 0o755);
  const root = join(dir, 'www');
  mkdirSync(join(root, 'blog'), { recursive: true, mode: 0o755 });
  writeFileSync(join(root, 'index.php'), '<?php echo "home ", $_SERVER["SCRIPT_NAME"];', { mode: 0o644 });
  writeFileSync(join(root, 'blog', 'index.php'), '<?php echo "blog ", $_SERVER["SCRIPT_NAME"];', { mode: 0o644 });
  writeFileSync(join(root, 'style.css'), 'body { color: red }\n', { mode: 0o644 });
  const sites = join(dir, 'sites');
  mkdirSync(sites);
  writeFileSync(join(sites, 'app.yaml'), `names: [app.test]\ndocument_root: ${root}\n`);
  const [fcgi, http] = [await freePort(), await freePort()];
  const d = await startDaemon(t, {
    control_socket: 'off',
    listen: [
      { protocol: 'fastcgi', address: `127.0.0.1:${fcgi}`, vhosts: true },
      { protocol: 'http', address: `127.0.0.1:${http}`, vhosts: true },
    ],
    vhosts: { dir: sites, defaults: { command: ['php-cgi', ...PHP_FLAGS], max_children: 1 } },
    log: { level: 'info', access: true },
  });
  const host = { host: 'app.test' };

  // FastCGI: docs/vhosts.md's catch-all block.
  const ngx = await startNginxForSites(t, fcgi);
  const home = await httpRequest(`${ngx.url}/`, { headers: host });
  assert.deepEqual([home.status, home.text], [200, 'home /index.php']);
  const blog = await httpRequest(`${ngx.url}/blog/`, { headers: host });
  assert.deepEqual([blog.status, blog.text], [200, 'blog /blog/index.php']);
  const css = await httpRequest(`${ngx.url}/style.css`, { headers: host });
  assert.equal(css.status, 403);
  const refusal = await d.waitForLog((l) => l.code === 'ERR_SCRIPT_FORBIDDEN' && String(l.script).endsWith('/style.css'), { timeout: 5000, what: 'the refusal of style.css' });
  assert.match(String(refusal.msg), /static file or a directory is for the web server/);

  // HTTP: nginx proxies everything to the HTTP vhosts listener, which serves static files itself.
  const proxy = await startNginx(t, `location / { proxy_pass http://127.0.0.1:${http}; proxy_set_header Host $host; }`);
  const page = await httpRequest(`${proxy.url}/`, { headers: host });
  assert.deepEqual([page.status, page.text], [200, 'home /index.php']);
  const sheet = await httpRequest(`${proxy.url}/style.css`, { headers: host });
  assert.deepEqual([sheet.status, sheet.text], [200, 'body { color: red }\n']);
});
