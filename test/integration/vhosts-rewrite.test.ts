// Rewrite rules with the real daemon and php-cgi: a front-controller app served through
// the HTTP listener and through nginx (FastCGI), a regex rule with captures, and a rule
// that would make php run a .jpg, which limit_extensions still refuses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { startNginxForSites } from '../helpers/nginx.js';
import { PHP_FLAGS } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';

const SHOW = `<?php
header('Content-Type: application/json');
echo json_encode(['file' => basename(__FILE__), 'script' => $_SERVER['SCRIPT_NAME'], 'info' => $_SERVER['PATH_INFO'] ?? '',
  'query' => $_SERVER['QUERY_STRING'], 'uri' => $_SERVER['REQUEST_URI'], 'get' => $_GET]);
`;

test('rewrite: front controller and regex rules through the HTTP listener and nginx; limit_extensions still applies', { timeout: 90_000 }, async (t) => {
  const base = makeTempDir(t, 'fpm-rw-');
  const root = join(base, 'app');
  mkdirSync(root);
  writeFileSync(join(root, 'index.php'), SHOW);
  writeFileSync(join(root, 'post.php'), SHOW);
  writeFileSync(join(root, 'style.css'), 'body{}');
  writeFileSync(join(root, 'photo.jpg'), 'JPEG');
  const sites = join(base, 'sites');
  mkdirSync(sites);
  writeFileSync(
    join(sites, 'app.yaml'),
    stringifyYaml({
      names: ['app.test'],
      document_root: root,
      rewrite: [{ match: '^/post/(\\d+)$', to: '/post.php?id=$1' }, { match: '^/pic/(\\w+)$', to: '/$1.jpg' }, { front_controller: '/index.php' }],
    }),
  );
  const [fcgi, http, plain] = [await freePort(), await freePort(), await freePort()];
  await startDaemon(t, {
    control_socket: 'off',
    listen: [
      { protocol: 'fastcgi', address: `127.0.0.1:${fcgi}`, vhosts: true },
      { protocol: 'http', address: `127.0.0.1:${http}`, vhosts: true },
      // Rules on a listener of its own, without vhosts.
      { protocol: 'http', address: `127.0.0.1:${plain}`, pool: 'plain', document_root: root, rewrite: [{ front_controller: '/index.php' }] },
    ],
    pools: { plain: { command: ['php-cgi', ...PHP_FLAGS], max_children: 1 } },
    vhosts: { dir: sites, defaults: { command: ['php-cgi', ...PHP_FLAGS], max_children: 1 } },
    log: { level: 'info', access: false },
  });
  const ngx = await startNginxForSites(t, fcgi);
  const ask = async (url: string, host = 'app.test') => {
    const r = await httpRequest(url, { headers: { host }, timeout: 20_000 });
    return { status: r.status, text: r.text, json: r.status === 200 && r.text.startsWith('{') ? (JSON.parse(r.text) as Record<string, unknown>) : undefined };
  };

  for (const front of [`http://127.0.0.1:${http}`, ngx.url]) {
    // Front controller: a path naming no file runs /index.php, path and query kept.
    const fc = await ask(`${front}/blog/2024/hello?x=1`);
    assert.equal(fc.status, 200, `${front}: ${fc.text}`);
    assert.deepEqual([fc.json!.file, fc.json!.script, fc.json!.info, fc.json!.query, fc.json!.uri], ['index.php', '/index.php', '/blog/2024/hello', 'x=1', '/blog/2024/hello?x=1'], front);
    // A regex rule with a capture; the rule's query comes first, the request's follows.
    const post = await ask(`${front}/post/42?y=2`);
    assert.equal(post.status, 200, `${front}: ${post.text}`);
    assert.deepEqual([post.json!.file, post.json!.script, post.json!.query, post.json!.get], ['post.php', '/post.php', 'id=42&y=2', { id: '42', y: '2' }], front);
    // An existing file is not rewritten.
    assert.equal((await ask(`${front}/index.php`)).json!.info, '', front);
  }
  // The HTTP listener serves an existing static file as it is, and what a rule maps to a .jpg as a file.
  assert.equal((await ask(`http://127.0.0.1:${http}/style.css`)).text, 'body{}');
  assert.equal((await ask(`http://127.0.0.1:${http}/pic/photo`)).text, 'JPEG');
  // Through FastCGI the rule would make php run photo.jpg: limit_extensions refuses it.
  const jpg = await ask(`${ngx.url}/pic/photo`);
  assert.equal(jpg.status, 403, jpg.text);
  // A listener's own rules.
  const own = await ask(`http://127.0.0.1:${plain}/any/where`, 'localhost');
  assert.deepEqual([own.status, own.json?.script, own.json?.info], [200, '/index.php', '/any/where']);
});
