/**
 * The end-to-end checks every web path must pass (nginx FastCGI, nginx SCGI, fcgi-pm's
 * own HTTP listener): registered as one describe() block around a shared setup.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { Daemon } from './daemon.js';
import { LogLevel } from './daemon.js';
import { httpRequest, httpUpload } from './http-client.js';
import { bigBlock, bigSha256, seededBytes, sha256 } from './payload.js';
import { RawConn } from './raw-socket.js';
import { Cleanup, type Scope } from './scope.js';

export interface WebTarget {
  /** "http://127.0.0.1:PORT", where /hello.php etc. are served. */
  url: string;
  daemon: Daemon;
}

const MB = 1048576;

export function webSuite(name: string, setup: (scope: Scope) => Promise<WebTarget>): void {
  describe(name, { timeout: 60_000 }, () => {
    const scope = new Cleanup();
    let target: WebTarget;
    before(async () => {
      target = await setup(scope);
    });
    after(() => scope.run());

    it('GET returns the page', async () => {
      const r = await httpRequest(`${target.url}/hello.php`);
      assert.equal(r.status, 200);
      assert.equal(r.text, 'Hello from PHP\n');
      assert.match(String(r.headers['content-type']), /^text\/plain/);
    });

    it('HEAD returns headers and no body; the kept-alive connection stays in sync', async () => {
      // Raw bytes: node's client drops a connection after a HEAD response with no length,
      // and it would hide stray body bytes. Those would show up ahead of the GET's status line.
      const u = new URL(target.url);
      const c = new RawConn({ host: u.hostname, port: Number(u.port) });
      await c.connected;
      c.write(`HEAD /hello.php HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`);
      const head = await c.waitData((b) => b.includes('\r\n\r\n'), 10_000);
      assert.match(head.toString('latin1'), /^HTTP\/1\.1 200 /);
      c.write(`GET /hello.php HTTP/1.1\r\nHost: ${u.host}\r\nConnection: close\r\n\r\n`);
      const all = (await c.waitClose(10_000)).received.toString('latin1');
      const second = all.slice(all.indexOf('\r\n\r\n') + 4);
      assert.match(second, /^HTTP\/1\.1 200 /, `bytes between the HEAD response and the next one: ${JSON.stringify(second.slice(0, 80))}`);
      assert.match(second, /Hello from PHP\n(\r\n0\r\n\r\n)?$/);
    });

    it('POST of a 10 MB body reaches PHP intact (sha256 computed by PHP)', async () => {
      const block = seededBytes(MB, 7);
      const r = await httpUpload(`${target.url}/upload-hash.php`, block, 10 * MB);
      assert.equal(r.status, 200, r.text.slice(0, 300));
      const expected = sha256(Buffer.concat(Array.from({ length: 10 }, () => block)));
      assert.deepEqual(JSON.parse(r.text), { sha256: expected, bytes: 10 * MB });
    });

    it('small form POST: method, content type and body reach PHP', async () => {
      const body = 'a=1&b=two+words';
      const r = await httpRequest(`${target.url}/echo.php?q=1`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      assert.equal(r.status, 200);
      const j = JSON.parse(r.text);
      assert.equal(j.method, 'POST');
      assert.equal(j.cgi.CONTENT_TYPE, 'application/x-www-form-urlencoded');
      assert.equal(j.cgi.CONTENT_LENGTH, String(body.length));
      assert.equal(j.body_sha256, sha256(body));
    });

    it('a 10 MB response arrives intact (sha256)', async () => {
      const r = await httpRequest(`${target.url}/big.php?mb=10`);
      assert.equal(r.status, 200);
      assert.equal(r.body.length, 10 * MB);
      assert.equal(sha256(r.body), bigSha256(10));
      assert.equal(bigBlock().length, 65536);
    });

    it('redirect: 302 with the Location PHP set', async () => {
      const r = await httpRequest(`${target.url}/redirect.php?to=/elsewhere%3Fx%3D1`);
      assert.equal(r.status, 302);
      assert.equal(r.headers.location, '/elsewhere?x=1');
    });

    for (const code of [404, 418, 500, 201]) {
      it(`status ${code} set by PHP reaches the client`, async () => {
        const r = await httpRequest(`${target.url}/status.php?code=${code}`);
        assert.equal(r.status, code);
        assert.equal(r.text, `status ${code}\n`);
      });
    }

    it('writes an access log line with the status', async () => {
      await target.daemon.waitForLog((l) => l.status === 418 && JSON.stringify(l).includes('status.php?code=418'), {
        timeout: 3000,
        what: 'access line for /status.php?code=418',
      });
    });

    it('query string passes unchanged', async () => {
      const qs = 'a=1&b=x%20y&c=&d=%C3%A9&e[]=1&e[]=2';
      const r = await httpRequest(`${target.url}/echo.php?${qs}`);
      assert.equal(r.status, 200);
      const j = JSON.parse(r.text);
      assert.equal(j.method, 'GET');
      assert.equal(j.query, qs);
      assert.deepEqual(j.get, { a: '1', b: 'x y', c: '', d: 'é', e: ['1', '2'] });
    });

    it('cookies reach PHP, and Set-Cookie headers reach the client', async () => {
      const r = await httpRequest(`${target.url}/echo.php`, { headers: { cookie: 'sid=abc123; theme=dark' } });
      assert.deepEqual(JSON.parse(r.text).cookies, { sid: 'abc123', theme: 'dark' });
      const s = await httpRequest(`${target.url}/setcookie.php`);
      assert.equal(s.status, 200);
      const set = s.headers['set-cookie'] ?? [];
      assert.equal(set.length, 2, JSON.stringify(set));
      assert.match(set[0]!, /^alpha=one; path=\//);
      assert.match(set[1]!, /^beta=two%20words; path=\/; HttpOnly/);
    });

    it('request headers reach PHP as HTTP_* variables', async () => {
      const r = await httpRequest(`${target.url}/echo.php`, { headers: { 'x-custom-thing': 'v1', 'accept-language': 'fr' } });
      const j = JSON.parse(r.text);
      assert.equal(j.headers.HTTP_X_CUSTOM_THING, 'v1');
      assert.equal(j.headers.HTTP_ACCEPT_LANGUAGE, 'fr');
    });

    it('200 concurrent requests are all answered correctly', async () => {
      const many = new http.Agent({ keepAlive: true, maxSockets: 200 });
      try {
        const results = await Promise.all(
          Array.from({ length: 200 }, (_, i) => httpRequest(`${target.url}/echo.php?i=${i}`, { agent: many, timeout: 45_000 })),
        );
        const bad = results.map((r, i) => [i, r] as const).filter(([i, r]) => r.status !== 200 || JSON.parse(r.text).get.i !== String(i));
        assert.equal(bad.length, 0, `wrong answers: ${bad.slice(0, 5).map(([i, r]) => `${i}: ${r.status} ${r.text.slice(0, 100)}`).join('; ')}`);
      } finally {
        many.destroy();
      }
    });

    it('logged no errors during normal traffic', () => {
      const errors = target.daemon.logs.filter((l) => typeof l.level === 'number' && l.level >= LogLevel.error);
      assert.equal(errors.length, 0, JSON.stringify(errors.slice(0, 5)));
    });

    it('stops on SIGTERM with exit code 0', async () => {
      const exit = await target.daemon.stop();
      assert.deepEqual(exit, { code: 0, signal: null }, target.daemon.dump());
    });
  });
}
