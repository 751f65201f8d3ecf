/**
 * Which files run: PHP code in an uploaded image, a .txt or a .env is never executed by
 * the spawned php-cgi pool, whichever way the request comes (fcgi-pm's HTTP listener,
 * FastCGI, SCGI, nginx's usual `location ~ \.php$` block with and without
 * fastcgi_split_path_info); .php files still run, PATH_INFO included; the HTTP listener
 * serves other files itself without a worker; symlinks and `..` out of the roots are refused.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { FcgiClient, parseCgiOutput, phpParams, requestRecords } from '../helpers/fcgi-client.js';
import { httpRequest, type HttpResponse } from '../helpers/http-client.js';
import { fastcgiParams, startNginx } from '../helpers/nginx.js';
import { freePort } from '../helpers/ports.js';
import { scgiRequest } from '../helpers/scgi-client.js';
import { Cleanup } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';

/** Its source does not contain the word it prints, so a body with the word proves it ran. */
const PAYLOAD = '<?php echo strrev("DETUCEXE"); ?>\n';
const RAN = 'EXECUTED';
const CSS = 'body { color: #333 }\n';
/** Bigger than any socket buffer, so the stream has to wait for the client. */
const BIG = Buffer.alloc(3 * 1024 * 1024, 'fcgi-pm static ');
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');

interface Site {
  root: string;
  outside: string;
}

function makeSite(scope: Cleanup): Site {
  const root = makeTempDir(scope, 'fpm-guard-root-');
  const outside = makeTempDir(scope, 'fpm-guard-out-');
  mkdirSync(join(root, 'uploads'));
  mkdirSync(join(root, 'nodir'));
  mkdirSync(join(root, '.well-known'));
  writeFileSync(join(root, 'index.php'), '<?php echo "index:" . ($_SERVER["PATH_INFO"] ?? "") . "\\n";');
  writeFileSync(join(root, 'uploads', 'image.jpg'), PAYLOAD);
  writeFileSync(join(root, 'secret.txt'), PAYLOAD);
  writeFileSync(join(root, '.env'), PAYLOAD);
  writeFileSync(join(root, 'style.css'), CSS);
  writeFileSync(join(root, 'pixel.png'), PNG);
  writeFileSync(join(root, 'big.bin'), BIG);
  writeFileSync(join(root, '.well-known', 'security.txt'), 'Contact: mailto:a@example.org\n');
  writeFileSync(join(outside, 'evil.php'), PAYLOAD);
  writeFileSync(join(outside, 'secret.css'), 'outside\n');
  symlinkSync(join(outside, 'evil.php'), join(root, 'link.php'));
  symlinkSync(join(outside, 'secret.css'), join(root, 'link.css'));
  return { root, outside };
}

function assertNotRun(r: { status: number; text: string }, what: string, statuses: number[]): void {
  assert.ok(!r.text.includes(RAN), `${what}: the PHP in it ran: ${r.text}`);
  assert.ok(statuses.includes(r.status), `${what}: status ${r.status} (${r.text.trim()}), wanted ${statuses.join('/')}`);
}

async function fcgiGet(port: number, params: Record<string, string>): Promise<{ status: number; text: string }> {
  const c = await FcgiClient.connect({ port });
  try {
    c.send(...requestRecords(1, params, Buffer.alloc(0)));
    const out = parseCgiOutput((await c.response(1)).stdout);
    return { status: out.status, text: out.body.toString('utf8') };
  } finally {
    c.socket.destroy();
  }
}

async function snapshotPool(url: string): Promise<{ accepted: number; processes: { total: number }; spawns?: { count: number } }> {
  const r = await httpRequest(`${url}/fpm-status?snapshot`);
  assert.equal(r.status, 200, r.text);
  return (JSON.parse(r.text) as { pools: Array<{ name: string; accepted: number; processes: { total: number } }> }).pools.find((p) => p.name === 'php')!;
}

describe('scripts that may run: php-cgi pool with the default limit_extensions', { timeout: 120_000 }, () => {
  const scope = new Cleanup();
  let site: Site;
  let daemon: Daemon;
  let http: string;
  let fcgiPort: number;
  let scgiPort: number;
  before(async () => {
    site = makeSite(scope);
    const dir = makeTempDir(scope);
    const httpPort = await freePort();
    fcgiPort = await freePort();
    scgiPort = await freePort();
    http = `http://127.0.0.1:${httpPort}`;
    daemon = await startDaemon(scope, {
      listen: [
        { protocol: 'http', address: `127.0.0.1:${httpPort}`, pool: 'php', document_root: site.root, status_path: '/fpm-status' },
        { protocol: 'fastcgi', address: `127.0.0.1:${fcgiPort}`, pool: 'php' },
        { protocol: 'scgi', address: `127.0.0.1:${scgiPort}`, pool: 'php' },
      ],
      pools: { php: { command: phpCommand(dir, 'guard-default'), pm: 'ondemand', max_children: 2 } },
      log: { level: 'info', access: false },
    });
  });
  after(() => scope.run());

  it('serves .css and .png itself: type, ETag → 304, HEAD, ranges, and no worker is ever spawned', async () => {
    const css = await httpRequest(`${http}/style.css`);
    assert.equal(css.status, 200);
    assert.equal(css.headers['content-type'], 'text/css; charset=utf-8');
    assert.equal(css.text, CSS);
    const etag = css.headers.etag!;
    assert.match(etag, /^"[0-9a-f]+-[0-9a-f]+"$/);
    assert.ok(css.headers['last-modified']);

    const cached = await httpRequest(`${http}/style.css`, { headers: { 'if-none-match': etag } });
    assert.equal(cached.status, 304);
    assert.equal(cached.body.length, 0);
    const since = await httpRequest(`${http}/style.css`, { headers: { 'if-modified-since': css.headers['last-modified']! } });
    assert.equal(since.status, 304);

    const head = await httpRequest(`${http}/pixel.png`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers['content-type'], 'image/png');
    assert.equal(head.headers['content-length'], String(PNG.length));
    assert.equal(head.body.length, 0);
    const png = await httpRequest(`${http}/pixel.png`);
    assert.deepEqual(png.body, PNG);

    const part = await httpRequest(`${http}/pixel.png`, { headers: { range: 'bytes=1-3' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers['content-range'], `bytes 1-3/${PNG.length}`);
    assert.deepEqual(part.body, PNG.subarray(1, 4));
    const past = await httpRequest(`${http}/pixel.png`, { headers: { range: 'bytes=999-' } });
    assert.equal(past.status, 416);
    assert.equal(past.headers['content-range'], `bytes */${PNG.length}`);

    const big = await httpRequest(`${http}/big.bin`);
    assert.equal(big.headers['content-type'], 'application/octet-stream');
    assert.ok(big.body.equals(BIG), 'a 3 MiB file arrives whole');

    const post = await httpRequest(`${http}/style.css`, { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET, HEAD');
    const known = await httpRequest(`${http}/.well-known/security.txt`);
    assert.equal(known.status, 200);
    assert.equal(known.headers['content-type'], 'text/plain; charset=utf-8');

    // Every answer above was complete before this snapshot: a request given to the pool would be counted.
    const pool = await snapshotPool(http);
    assert.equal(pool.accepted, 0, 'static files never reach the pool');
    assert.equal(pool.processes.total, 0);
    assert.equal(pool.spawns?.count ?? 0, 0);
  });

  it('HTTP listener: PHP in .jpg, .txt, .env never runs; .php does, with PATH_INFO', async () => {
    const image = await httpRequest(`${http}/uploads/image.jpg`);
    assertNotRun(image, '/uploads/image.jpg', [200]);
    assert.equal(image.text, PAYLOAD, 'sent as the file it is');
    assert.equal(image.headers['content-type'], 'image/jpeg');
    assertNotRun(await httpRequest(`${http}/uploads/image.jpg/x.php`), '/uploads/image.jpg/x.php', [403, 404]);
    assertNotRun(await httpRequest(`${http}/uploads/image.jpg/.php`), '/uploads/image.jpg/.php', [403, 404]);
    const secret = await httpRequest(`${http}/secret.txt`);
    assertNotRun(secret, '/secret.txt', [200]);
    assert.equal(secret.text, PAYLOAD);
    assertNotRun(await httpRequest(`${http}/.env`), '/.env', [403]);
    assertNotRun(await httpRequest(`${http}/nodir/`), '/nodir/ (no index)', [403]);
    assertNotRun(await httpRequest(`${http}/missing.php`), '/missing.php', [404]);

    const index = await httpRequest(`${http}/index.php`);
    assert.equal(index.status, 200, index.text);
    assert.equal(index.text, 'index:\n');
    const info = await httpRequest(`${http}/index.php/foo`);
    assert.equal(info.text, 'index:/foo\n');
  });

  it('HTTP listener: symlinks out of document_root are neither run nor served', async () => {
    const link = await httpRequest(`${http}/link.php`);
    assertNotRun(link, '/link.php → outside', [403]);
    assert.match(link.text, /ERR_SCRIPT_FORBIDDEN/);
    const css = await httpRequest(`${http}/link.css`);
    assert.equal(css.status, 403);
    assert.ok(!css.text.includes('outside'), css.text);
  });

  it('FastCGI listener, SCRIPT_FILENAME as nginx sends it: only real .php files run', async () => {
    const p = (script: string): Record<string, string> => phpParams(site.root, script);
    assertNotRun(await fcgiGet(fcgiPort, p('/uploads/image.jpg')), 'fcgi image.jpg (split path info)', [403]);
    // php's fix_pathinfo would run the image: the walk is made here, and the image refused.
    assertNotRun(await fcgiGet(fcgiPort, p('/uploads/image.jpg/x.php')), 'fcgi image.jpg/x.php', [403]);
    assertNotRun(await fcgiGet(fcgiPort, p('/uploads/none/x.php')), 'fcgi missing script', [404]);
    assertNotRun(await fcgiGet(fcgiPort, p('/uploads/image.jpg/.php')), 'fcgi image.jpg/.php', [403, 404]);
    assertNotRun(await fcgiGet(fcgiPort, p('/secret.txt')), 'fcgi secret.txt', [403]);
    assertNotRun(await fcgiGet(fcgiPort, p('/.env')), 'fcgi .env', [403]);
    assertNotRun(await fcgiGet(fcgiPort, { ...p('/nodir'), SCRIPT_FILENAME: join(site.root, 'nodir') }), 'fcgi directory', [403]);
    const noName = p('/index.php');
    delete noName.SCRIPT_FILENAME;
    assertNotRun(await fcgiGet(fcgiPort, { ...noName, PATH_TRANSLATED: join(site.root, 'secret.txt') }), 'fcgi without SCRIPT_FILENAME', [404]);
    const ok = await fcgiGet(fcgiPort, { ...p('/index.php'), PATH_INFO: '/bar' });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.text, 'index:/bar\n');
  });

  it('SCGI listener: the same rules', async () => {
    const p = (script: string): Record<string, string> => phpParams(site.root, script);
    for (const [script, statuses] of [['/uploads/image.jpg', [403]], ['/uploads/image.jpg/x.php', [403]], ['/secret.txt', [403]]] as const) {
      const r = await scgiRequest({ port: scgiPort }, p(script));
      assertNotRun({ status: r.status, text: r.body.toString('utf8') }, `scgi ${script}`, [...statuses]);
    }
    const ok = await scgiRequest({ port: scgiPort }, p('/index.php'));
    assert.equal(ok.body.toString('utf8'), 'index:\n');
  });

  it('logs one warning line with a stable code per refusal, and a flood is rate-limited', async () => {
    const since = daemon.mark();
    const burst = 40;
    const answers = await Promise.all(Array.from({ length: burst }, (_, i) => httpRequest(`${http}/uploads/image.jpg/x${i}.php`)));
    for (const a of answers) assert.equal(a.status, 403);
    const line = await daemon.waitForLog((l) => l.code === 'ERR_SCRIPT_FORBIDDEN', { since });
    // The listener split the URL at the image: that is the script refused, the rest is PATH_INFO.
    assert.match(String(line.script), /\/uploads\/image\.jpg$/);
    assert.match(String(line.uri), /^\/uploads\/image\.jpg\/x\d+\.php$/);
    const lines = daemon.logsSince(since).filter((l) => l.code === 'ERR_SCRIPT_FORBIDDEN');
    assert.ok(lines.length >= 1 && lines.length < burst, `${lines.length} warning lines for ${burst} refusals`);
  });
});

describe('scripts that may run: script_roots and .. escapes', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let site: Site;
  let fcgiPort: number;
  before(async () => {
    site = makeSite(scope);
    const dir = makeTempDir(scope);
    fcgiPort = await freePort();
    await startDaemon(scope, {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${fcgiPort}`, pool: 'php' }],
      pools: { php: { command: phpCommand(dir, 'guard-roots'), max_children: 1, script_roots: [site.root] } },
      log: { level: 'info', access: false },
    });
  });
  after(() => scope.run());

  it('refuses a .php outside the roots, by .. or by symlink; runs one inside', async () => {
    const p = (file: string): Record<string, string> => ({ ...phpParams(site.root, '/x.php'), SCRIPT_FILENAME: file });
    const dotdot = await fcgiGet(fcgiPort, p(`${site.root}/../${site.outside.split('/').pop()}/evil.php`));
    assertNotRun(dotdot, '.. out of script_roots', [403]);
    assert.match(dotdot.text, /ERR_SCRIPT_FORBIDDEN/);
    assertNotRun(await fcgiGet(fcgiPort, p(join(site.root, 'link.php'))), 'symlink out of script_roots', [403]);
    assertNotRun(await fcgiGet(fcgiPort, p(join(site.outside, 'evil.php'))), 'absolute path outside', [403]);
    const ok = await fcgiGet(fcgiPort, p(join(site.root, 'index.php')));
    assert.equal(ok.text, 'index:\n');
  });
});

describe('scripts that may run: nginx location ~ \\.php$ in front', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let plain: string;
  let split: string;
  before(async () => {
    const site = makeSite(scope);
    const dir = makeTempDir(scope);
    const port = await freePort();
    await startDaemon(scope, {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' }],
      pools: { php: { command: phpCommand(dir, 'guard-nginx'), max_children: 2 } },
      log: { level: 'info', access: false },
    });
    const upstream = { httpExtra: `upstream fcgipm { server 127.0.0.1:${port}; keepalive 4; }` };
    // The classic block: /uploads/image.jpg/x.php arrives as SCRIPT_FILENAME=.../image.jpg/x.php.
    plain = (await startNginx(scope, `root ${site.root};
    location ~ \\.php$ {
      fastcgi_pass fcgipm;
      fastcgi_keep_conn on;
      ${fastcgiParams()}
    }`, upstream)).url;
    // A careless split at the first extension: SCRIPT_FILENAME=.../image.jpg, PATH_INFO=/x.php.
    split = (await startNginx(scope, `root ${site.root};
    location ~ \\.php(/|$) {
      fastcgi_split_path_info ^(.+?\\.[a-z]+)(/.*)$;
      fastcgi_pass fcgipm;
      fastcgi_keep_conn on;
      ${fastcgiParams()}
      fastcgi_param PATH_INFO $fastcgi_path_info;
    }`, upstream)).url;
  });
  after(() => scope.run());

  it('without fastcgi_split_path_info', async () => {
    assertNotRun(await httpRequest(`${plain}/uploads/image.jpg/x.php`), 'nginx image.jpg/x.php', [403]);
    assertNotRun(await httpRequest(`${plain}/secret.txt/x.php`), 'nginx secret.txt/x.php', [403]);
    assertNotRun(await httpRequest(`${plain}/missing.php`), 'nginx missing.php', [404]);
    const ok: HttpResponse = await httpRequest(`${plain}/index.php`);
    assert.equal(ok.text, 'index:\n');
  });

  it('with fastcgi_split_path_info', async () => {
    assertNotRun(await httpRequest(`${split}/uploads/image.jpg/x.php`), 'nginx split image.jpg/x.php', [403]);
    assertNotRun(await httpRequest(`${split}/.env/x.php`), 'nginx split .env/x.php', [403]);
    const ok = await httpRequest(`${split}/index.php/foo`);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.text, 'index:/foo\n');
  });
});
