/**
 * FastCGI in, FastCGI out: php-cgi's STDOUT records reach the FastCGI client byte for
 * byte, only the request id rewritten. A recording relay between the endpoint and the
 * real php-cgi keeps what php-cgi sent on each connection; the raw client in front
 * multiplexes two request ids on one connection and reads a large response slowly.
 */
import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { silentLogger } from '../../src/log/log.js';
import { parseAddress, type SocketAddress } from '../../src/protocol/address.js';
import type { Exchange } from '../../src/protocol/exchange.js';
import { RecordType } from '../../src/protocol/fastcgi.js';
import { UpstreamEndpoint } from '../../src/upstream/endpoint.js';
import { FakePool } from '../helpers/fake-pool.js';
import { requestRecords } from '../helpers/fcgi-client.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { startPhpCgi, writeScripts } from '../fixtures/upstream/php.js';
import { phpParams } from '../fixtures/upstream/sink.js';
import { addressFor, startRig } from './support.js';

// Well past what the kernel's socket buffers hold (about 200 KB each way on a Unix socket), so the client's pause is felt.
const BIG = 1024 * 1024;
const SCRIPTS = {
  'alpha.php': `<?php header('X-Which: alpha'); usleep(50000); echo str_repeat('a', 20000);`,
  'beta.php': `<?php http_response_code(404); usleep(50000); echo str_repeat('b', 300);`,
  'big.php': `<?php for ($i = 0; $i < ${BIG / 1024}; $i++) echo str_repeat(chr(65 + $i % 26), 1024);`,
};

/** Whole records (header, content, padding) of a FastCGI byte stream. */
function splitRecords(stream: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let pos = 0;
  while (pos + 8 <= stream.length) {
    const len = 8 + stream.readUInt16BE(pos + 4) + stream[pos + 6]!;
    out.push(stream.subarray(pos, pos + len));
    pos += len;
  }
  assert.equal(pos, stream.length, 'the stream ends on a record boundary');
  return out;
}

const isStdout = (rec: Buffer, id?: number): boolean =>
  rec[1] === RecordType.Stdout && rec.readUInt16BE(4) > 0 && (id === undefined || rec.readUInt16BE(2) === id);

/** The non-empty STDOUT records of `stream` with their request id set to `id`, as one buffer. */
function stdoutAs(stream: Buffer, id: number): Buffer {
  return Buffer.concat(splitRecords(stream).filter((r) => isStdout(r)).map((r) => {
    const c = Buffer.from(r);
    c.writeUInt16BE(id, 2);
    return c;
  }));
}

interface Rig {
  dir: string;
  client: Socket;
  /** Everything the client received. */
  received(): Buffer;
  /** Bytes php-cgi sent, one entry per backend connection. */
  fromPhp: Buffer[][];
  /** What each respondRecords() call answered (false: the client side was full). */
  recordAnswers: boolean[];
}

async function setup(t: TestContext): Promise<Rig> {
  const dir = makeTempDir(t, 'fpm-pass-');
  writeScripts(dir, SCRIPTS);
  const php = await startPhpCgi(t, dir, { children: 2 }); // two requests at once
  // The recording relay: daemon → relay → php-cgi; php-cgi's bytes are kept per connection.
  const fromPhp: Buffer[][] = [];
  const relayPath = join(dir, 'relay.sock');
  const relay: Server = createServer((down) => {
    const got: Buffer[] = [];
    fromPhp.push(got);
    const up = connect(php.socketPath);
    down.pipe(up);
    up.on('data', (c: Buffer) => got.push(c));
    up.pipe(down);
    up.on('error', () => down.destroy());
    down.on('error', () => up.destroy());
  });
  await new Promise<void>((res) => relay.listen(relayPath, res));
  t.after(() => relay.close());
  const endpoint = new UpstreamEndpoint(parseAddress(`unix:${relayPath}`) as SocketAddress, { protocol: 'fastcgi', connectTimeout: 2000, readTimeout: 10_000, keepAlive: true, maxIdle: 4 }, silentLogger());
  t.after(() => endpoint.destroy());
  const recordAnswers: boolean[] = [];
  const pool = new FakePool((ex: Exchange) => {
    const orig = ex.respondRecords.bind(ex);
    ex.respondRecords = (raw, n) => {
      const ok = orig(raw, n);
      recordAnswers.push(ok);
      return ok;
    };
    endpoint.run(ex, (o) => {
      if (o.kind === 'failed') ex.respondError(o.error);
    });
  });
  const rig = await startRig(t, 'fastcgi', addressFor(t, 'unix'), { pool });
  const client = connect(rig.target as { path: string });
  t.after(() => client.destroy());
  await new Promise<void>((res) => client.once('connect', () => res()));
  const got: Buffer[] = [];
  client.on('data', (c: Buffer) => got.push(c));
  return { dir, client, received: () => Buffer.concat(got), fromPhp, recordAnswers };
}

/** True once the client has END_REQUEST for every id in `ids`. */
function ended(stream: Buffer, ids: number[]): boolean {
  if (stream.length < 8) return false;
  let pos = 0;
  const seen = new Set<number>();
  while (pos + 8 <= stream.length) {
    const len = 8 + stream.readUInt16BE(pos + 4) + stream[pos + 6]!;
    if (pos + len > stream.length) break;
    if (stream[pos + 1] === RecordType.EndRequest) seen.add(stream.readUInt16BE(pos + 2));
    pos += len;
  }
  return ids.every((id) => seen.has(id));
}

test('two multiplexed requests: each gets its backend STDOUT records unchanged but for the id', async (t) => {
  const rig = await setup(t);
  // Both requests in one write, ids nginx would not use, so both are rewritten.
  rig.client.write(Buffer.concat([...requestRecords(3, phpParams(rig.dir, 'alpha.php')), ...requestRecords(7, phpParams(rig.dir, 'beta.php'))]));
  await waitFor(() => ended(rig.received(), [3, 7]), { what: 'both END_REQUESTs' });
  const records = splitRecords(rig.received());
  assert.equal(rig.fromPhp.length, 2, 'the two requests ran on two backend connections at once');
  const backends = rig.fromPhp.map((chunks) => Buffer.concat(chunks));
  for (const [id, marker] of [[3, 'X-Which: alpha'], [7, 'Status: 404']] as const) {
    const mine = Buffer.concat(records.filter((r) => isStdout(r, id)));
    const backend = backends.find((b) => b.includes(marker));
    assert.ok(backend !== undefined, `a backend connection answered ${marker}`);
    assert.ok(mine.length > (id === 3 ? 20000 : 300), `request ${id} got its body`);
    assert.ok(mine.equals(stdoutAs(backend, id)), `request ${id}: STDOUT records as php-cgi sent them, id ${id}`);
    // Then php-cgi's own closing records for this id, as it sent them: its END_REQUEST,
    // after an empty STDOUT only if it sent one (php-cgi does not, nor does php-fpm).
    const tail = records.filter((r) => r.readUInt16BE(2) === id && !isStdout(r)).map((r) => r[1]);
    const phpTail = splitRecords(backend).filter((r) => !isStdout(r)).map((r) => r[1]);
    assert.equal(phpTail.at(-1), RecordType.EndRequest);
    assert.deepEqual(tail, phpTail);
  }
});

test('a 1 MiB response read slowly: back-pressure holds, the records arrive unchanged', async (t) => {
  const rig = await setup(t);
  rig.client.pause(); // the slow reader: nothing is read until the daemon was told to wait
  rig.client.write(Buffer.concat(requestRecords(2, phpParams(rig.dir, 'big.php'))));
  await waitFor(() => rig.recordAnswers.includes(false), { what: 'the front socket to refuse more' });
  rig.client.resume();
  await waitFor(() => ended(rig.received(), [2]), { what: 'END_REQUEST' });
  const mine = Buffer.concat(splitRecords(rig.received()).filter((r) => isStdout(r, 2)));
  assert.equal(rig.fromPhp.length, 1);
  assert.ok(mine.equals(stdoutAs(Buffer.concat(rig.fromPhp[0]!), 2)), 'STDOUT records as php-cgi sent them');
  assert.ok(mine.length > BIG, `the whole response came: ${mine.length} bytes of records`);
});
