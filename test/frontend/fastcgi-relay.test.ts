/**
 * FastCGI in, FastCGI out, against a real php-cgi: a listener whose pool runs each
 * exchange on a real upstream endpoint. Checks what the relay promises beyond the
 * response itself: a bodyless request reaches the backend in one write, the client's
 * bytes go through, and a listener's params win over every copy the client sent.
 */
import assert from 'node:assert/strict';
import { connect, Socket } from 'node:net';
import { test, type TestContext } from 'node:test';
import { silentLogger } from '../../src/log/log.js';
import { parseAddress, type SocketAddress } from '../../src/protocol/address.js';
import { FcgiDecoder, RecordType, type FcgiRecord } from '../../src/protocol/fastcgi.js';
import { CgiParams } from '../../src/protocol/params.js';
import { UpstreamEndpoint } from '../../src/upstream/endpoint.js';
import { FakePool } from '../helpers/fake-pool.js';
import { requestRecords } from '../helpers/fcgi-client.js';
import { makeTempDir } from '../helpers/tmp.js';
import { withTimeout } from '../helpers/wait.js';
import { startPhpCgi, writeScripts } from '../fixtures/upstream/php.js';
import { phpParams } from '../fixtures/upstream/sink.js';
import { addressFor, startRig } from './support.js';

const SCRIPTS = {
  'hello.php': `<?php echo 'hello';`,
  'forced.php': `<?php echo $_SERVER['X_FORCED'] ?? '(unset)', ' ', $_SERVER['X_TWICE'] ?? '(unset)';`,
};

/** Counts stream-level writes (each one write or writev system call) per socket while installed. */
function countWrites(t: TestContext): Map<Socket, Buffer[]> {
  const seen = new Map<Socket, Buffer[]>();
  const proto = Socket.prototype as unknown as { _writeGeneric: (this: Socket, writev: boolean, data: unknown, enc: string, cb: () => void) => void };
  const orig = proto._writeGeneric;
  proto._writeGeneric = function (this: Socket, writev, data, enc, cb) {
    const bufs = writev ? (data as Array<{ chunk: Buffer }>).map((c) => c.chunk) : [data as Buffer];
    let list = seen.get(this);
    if (list === undefined) seen.set(this, (list = []));
    list.push(Buffer.concat(bufs));
    return orig.call(this, writev, data, enc, cb);
  };
  t.after(() => {
    proto._writeGeneric = orig;
  });
  return seen;
}

async function setup(t: TestContext, cfgParams: Record<string, string> = {}): Promise<{ dir: string; client: Socket; ask(params: Record<string, string> | CgiParams): Promise<string> }> {
  const dir = makeTempDir(t, 'fpm-relay-');
  writeScripts(dir, SCRIPTS);
  let endpoint: UpstreamEndpoint | undefined;
  t.after(() => endpoint?.destroy());
  const php = await startPhpCgi(t, dir);
  endpoint = new UpstreamEndpoint(parseAddress(`unix:${php.socketPath}`) as SocketAddress, { protocol: 'fastcgi', connectTimeout: 2000, readTimeout: 10_000, keepAlive: true, maxIdle: 4 }, silentLogger());
  const ep = endpoint;
  const pool = new FakePool((ex) => ep.run(ex, (o) => {
    if (o.kind === 'failed') ex.respondError(o.error);
  }));
  const rig = await startRig(t, 'fastcgi', addressFor(t, 'unix'), { pool, cfg: { params: cfgParams } });
  const client = connect(rig.target as { path: string });
  t.after(() => client.destroy());
  await new Promise<void>((res) => client.once('connect', () => res()));
  // One reader for the connection: STDOUT of request 1 until its END_REQUEST.
  let out: Buffer[] = [];
  let ended: (() => void) | undefined;
  const dec = new FcgiDecoder((r: FcgiRecord) => {
    if (r.type === RecordType.Stdout) out.push(Buffer.from(r.content));
    if (r.type === RecordType.EndRequest) ended?.();
  });
  client.on('data', (c: Buffer) => dec.push(c));
  const ask = (params: Record<string, string> | CgiParams): Promise<string> =>
    withTimeout(
      new Promise<string>((resolve) => {
        out = [];
        ended = () => resolve(Buffer.concat(out).toString('latin1'));
        // The whole request in one write, as nginx sends a GET.
        client.write(Buffer.concat(requestRecords(1, params)));
      }),
      10_000,
      'a reply from php-cgi',
    );
  return { dir, client, ask };
}

function bodyOf(cgi: string): string {
  return cgi.slice(cgi.indexOf('\r\n\r\n') + 4);
}

test('a bodyless request goes to a kept-alive backend in one write, bytes as the client sent them', async (t) => {
  const s = await setup(t);
  assert.equal(bodyOf(await s.ask(phpParams(s.dir, 'hello.php'))), 'hello'); // opens the backend connection
  const writes = countWrites(t);
  const params = phpParams(s.dir, 'hello.php', { HTTP_X_ODD: 'caf\xe9 \x01' });
  assert.equal(bodyOf(await s.ask(params)), 'hello');
  const upstream = [...writes].filter(([sock, bufs]) => sock !== s.client && bufs[0]![1] === RecordType.BeginRequest);
  assert.equal(upstream.length, 1, 'one upstream socket wrote a request');
  const [, bufs] = upstream[0]!;
  assert.equal(bufs.length, 1, `writes to the backend for one GET: ${bufs.length}`);
  // BEGIN_REQUEST, PARAMS, empty PARAMS, empty STDIN: the client's PARAMS content unchanged.
  const types: number[] = [];
  let paramsBody = Buffer.alloc(0);
  new FcgiDecoder((r: FcgiRecord) => {
    types.push(r.type);
    if (r.type === RecordType.Params) paramsBody = Buffer.concat([paramsBody, r.content]);
  }).push(bufs[0]!);
  assert.deepEqual(types, [RecordType.BeginRequest, RecordType.Params, RecordType.Params, RecordType.Stdin]);
  const sent = Buffer.concat(requestRecords(1, params));
  assert.ok(sent.includes(paramsBody), 'PARAMS bytes forwarded as received');
});

test('php-cgi sees the listener params, not a second copy the client sent', async (t) => {
  const s = await setup(t, { X_FORCED: 'listener' });
  const base = phpParams(s.dir, 'forced.php');
  const flat: string[] = [];
  for (const [k, v] of Object.entries(base)) flat.push(k, v);
  // A name twice: php-cgi keeps the last copy it reads.
  flat.push('X_FORCED', 'client-1', 'X_TWICE', 'first', 'X_FORCED', 'client-2', 'X_TWICE', 'second');
  assert.equal(bodyOf(await s.ask(new CgiParams(flat))), 'listener second');
});
