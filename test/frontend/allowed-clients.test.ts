/**
 * allowed_clients on TCP listeners of every protocol: a client outside the list is
 * closed before anything is read (no response, no exchange), counted, and logged once
 * per address however often it retries; a client inside it is served. IPv4, IPv6, CIDR
 * blocks and IPv4 clients of an IPv6 socket (::ffff:a.b.c.d). Client addresses are
 * chosen with the socket's localAddress (all of 127.0.0.0/8 is loopback on Linux).
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FrontProtocol } from '../../src/config/types.js';
import { ErrorCodes } from '../../src/errors.js';
import { ClientGate, MAX_TRACKED, REFUSAL_LOG_INTERVAL_MS } from '../../src/frontend/client-gate.js';
import { FcgiClient, parseCgiOutput, requestRecords } from '../helpers/fcgi-client.js';
import { RawConn } from '../helpers/raw-socket.js';
import { encodeScgiRequest, scgiRequest } from '../helpers/scgi-client.js';
import { Cleanup } from '../helpers/scope.js';
import type { ConnectTarget } from '../helpers/wait.js';
import { captureLogger, listenerConfig, startRig, type Rig } from './support.js';

const PARAMS = { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x', REQUEST_URI: '/x' };

/** One request in the listener's protocol; resolves with the response status. */
const REQUEST: Record<FrontProtocol, (t: ConnectTarget) => Promise<number>> = {
  fastcgi: async (t) => {
    const c = await FcgiClient.connect(t);
    try {
      c.request(1, PARAMS);
      return parseCgiOutput((await c.response(1)).stdout).status;
    } finally {
      c.close();
    }
  },
  scgi: async (t) => (await scgiRequest(t, PARAMS)).status,
  http: async (t) => {
    const c = new RawConn(t);
    await c.connected;
    c.write('GET /x HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n');
    const res = await c.waitClose();
    return Number(/^HTTP\/1\.1 (\d{3})/.exec(res.received.toString('latin1'))?.[1] ?? 0);
  },
};

/** A whole request in each protocol: a listener that read it would answer it. */
const WHOLE_REQUEST: Record<FrontProtocol, Buffer> = {
  fastcgi: Buffer.concat(requestRecords(1, PARAMS)),
  scgi: encodeScgiRequest(PARAMS),
  http: Buffer.from('GET /x HTTP/1.1\r\nHost: test\r\n\r\n'),
};

interface Case {
  name: string;
  address: string;
  allowed: string[];
  /** Client addresses (localAddress) and whether each is served; `host` is where to connect. */
  host: string;
  served: string[];
  refused: string[];
}

const CASES: Case[] = [
  { name: 'IPv4 address', address: '127.0.0.1:0', allowed: ['127.0.0.2'], host: '127.0.0.1', served: ['127.0.0.2'], refused: ['127.0.0.1'] },
  { name: 'IPv4 CIDR block', address: '127.0.0.1:0', allowed: ['127.0.0.8/29'], host: '127.0.0.1', served: ['127.0.0.9', '127.0.0.15'], refused: ['127.0.0.1', '127.0.0.16'] },
  { name: 'IPv6 ::1', address: '[::1]:0', allowed: ['::1'], host: '::1', served: ['::1'], refused: [] },
  { name: 'IPv6 CIDR without ::1', address: '[::1]:0', allowed: ['fd00::/8'], host: '::1', served: [], refused: ['::1'] },
  // The client shows up as ::ffff:127.0.0.2; both rule spellings match it.
  { name: 'IPv4 client of an IPv6 socket', address: '[::ffff:127.0.0.1]:0', allowed: ['127.0.0.2', '::ffff:127.0.0.3'], host: '127.0.0.1', served: ['127.0.0.2', '127.0.0.3'], refused: ['127.0.0.1'] },
];

const ATTEMPTS = 12;

async function refusedOnce(rig: Rig, protocol: FrontProtocol, target: ConnectTarget): Promise<void> {
  const before = rig.listener.refused;
  const c = new RawConn(target);
  await c.connected;
  c.write(WHOLE_REQUEST[protocol]);
  const res = await c.waitClose(10_000);
  assert.notEqual(res.ended, 'timeout', 'a refused connection is closed by the listener');
  assert.equal(res.received.length, 0, `no response bytes, got ${JSON.stringify(res.received.toString('latin1'))}`);
  assert.equal(rig.listener.refused, before + 1, 'counted as refused');
}

describe('allowed_clients', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());

  for (const protocol of ['fastcgi', 'scgi', 'http'] as const) {
    for (const c of CASES) {
      it(`${protocol}: ${c.name}`, async () => {
        const rig = await startRig(scope, protocol, c.address, { cfg: { allowedClients: c.allowed } });
        const port = (rig.target as { port: number }).port;
        for (const local of c.served) assert.equal(await REQUEST[protocol]({ host: c.host, port, localAddress: local }), 200, `${local} is served`);
        for (const local of c.refused) {
          for (let i = 0; i < ATTEMPTS; i++) await refusedOnce(rig, protocol, { host: c.host, port, localAddress: local });
        }
        assert.equal(rig.pool.dispatched.length, c.served.length, 'refused connections never reach the pool');
        assert.equal(rig.listener.refused, c.refused.length * ATTEMPTS);
        const lines = rig.lines.filter((l) => l.code === ErrorCodes.CLIENT_NOT_ALLOWED);
        // One line per refused address, whatever the number of attempts.
        assert.deepEqual(lines.map((l) => String(l.remote).replace(/^::ffff:/, '')).sort(), [...c.refused].sort(), JSON.stringify(lines));
      });
    }
  }

  it('a changed allow list applies to the next connection (what a reload does)', async () => {
    const rig = await startRig(scope, 'fastcgi', '127.0.0.1:0', { cfg: { allowedClients: ['127.0.0.2'] } });
    const port = (rig.target as { port: number }).port;
    await refusedOnce(rig, 'fastcgi', { port, localAddress: '127.0.0.1' });
    rig.listener.config.allowedClients = ['127.0.0.1'];
    assert.equal(await REQUEST.fastcgi({ port, localAddress: '127.0.0.1' }), 200);
    await refusedOnce(rig, 'fastcgi', { port, localAddress: '127.0.0.2' });
    rig.listener.config.allowedClients = undefined;
    assert.equal(await REQUEST.fastcgi({ port, localAddress: '127.0.0.2' }), 200);
  });
});

describe('ClientGate log state', () => {
  const fakeSocket = (remoteAddress: string) => ({ remoteAddress, destroy: () => {} }) as never;

  it('logs an address again after a minute, with the count it left out', () => {
    const { logger, lines } = captureLogger();
    let now = 1_000_000;
    const gate = new ClientGate(listenerConfig('fastcgi', '127.0.0.1:0', { allowedClients: ['10.0.0.0/8'] }), () => logger, () => now);
    for (let i = 0; i < 5; i++) assert.equal(gate.admit(fakeSocket('192.0.2.1')), false);
    assert.equal(gate.admit(fakeSocket('10.1.2.3')), true);
    assert.equal(lines.length, 1);
    now += REFUSAL_LOG_INTERVAL_MS - 1;
    gate.admit(fakeSocket('192.0.2.1'));
    assert.equal(lines.length, 1);
    now += 1;
    gate.admit(fakeSocket('192.0.2.1'));
    assert.equal(lines.length, 2);
    assert.equal(lines[1]!.suppressed, 5);
    assert.equal(gate.refused, 7);
  });

  it('a scan from many addresses keeps at most MAX_TRACKED entries and still logs once a minute for the rest', () => {
    const { logger, lines } = captureLogger();
    let now = 0;
    const gate = new ClientGate(listenerConfig('fastcgi', '127.0.0.1:0', { allowedClients: ['10.0.0.1'] }), () => logger, () => now);
    const scan = (): void => {
      for (let i = 0; i < MAX_TRACKED * 3; i++) gate.admit(fakeSocket(`2001:db8::${i.toString(16)}`));
    };
    scan();
    const seen = (gate as unknown as { seen: Map<string, unknown> }).seen;
    assert.equal(seen.size, MAX_TRACKED + 1);
    assert.equal(lines.length, MAX_TRACKED + 1, 'one line per tracked address and one for the others');
    assert.equal(lines.at(-1)!.remote, 'other addresses');
    now += REFUSAL_LOG_INTERVAL_MS;
    scan();
    assert.ok(seen.size <= MAX_TRACKED + 1, `log state stays bounded: ${seen.size}`);
  });
});
