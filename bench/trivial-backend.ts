/**
 * A trivial FastCGI / SCGI / HTTP responder with known behaviour, written for speed
 * (pre-encoded replies, record headers walked in place), so that it is not what limits
 * a measurement of the load generator or of the daemon's own cost.
 *
 *   node dist/bench/trivial-backend.js --fastcgi 127.0.0.1:9100 [--size 100] [--mix] [--delay MS]
 *   node dist/bench/trivial-backend.js --http 127.0.0.1:8100 --scgi unix:/tmp/t.sock
 *   command: [node, dist/bench/trivial-backend.js, --fastcgi, fd0]   (as a spawned fcgi-pm worker)
 *
 * --mix: the n-th request the process answers (counted over all connections) gets 503
 * when n % 10 == 0, else 404 when n % 4 == 0, else 200. Tests use it via
 * startTrivialBackend(); the counters are readable there.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { unlinkSync } from 'node:fs';

export type TrivialProtocol = 'fastcgi' | 'scgi' | 'http';

export interface TrivialOptions {
  protocol: TrivialProtocol;
  /** "127.0.0.1:0" (any free port), "host:port", "unix:/path", or "fd0" (the listening socket inherited as fd 0, as fcgi-pm hands it to a spawned worker). */
  address: string;
  /** Reply body bytes (default 100). */
  size?: number;
  /** The 404/503 status mix described above. */
  mix?: boolean;
  /** Answer each request after this many ms (default 0: at once). */
  delayMs?: number;
}

export interface TrivialBackend {
  /** "127.0.0.1:PORT" or "unix:/path" as bound. */
  address: string;
  port: number;
  /** Requests answered, by status. */
  readonly counts: Map<number, number>;
  /** Requests received (answered or not yet). */
  readonly received: () => number;
  /** Connections accepted. */
  readonly connections: () => number;
  close(): Promise<void>;
}

export function statusForRequest(n: number, mix: boolean): number {
  if (!mix) return 200;
  if (n % 10 === 0) return 503;
  if (n % 4 === 0) return 404;
  return 200;
}

const REASONS: Record<number, string> = { 200: 'OK', 404: 'Not Found', 503: 'Service Unavailable' };

function cgiReply(status: number, size: number): Buffer {
  const head = `Status: ${status} ${REASONS[status]}\r\nContent-Type: text/plain\r\nContent-Length: ${size}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), Buffer.alloc(size, 'x')]);
}

function httpReply(status: number, size: number, close: boolean): Buffer {
  const head = `HTTP/1.1 ${status} ${REASONS[status]}\r\nContent-Type: text/plain\r\nContent-Length: ${size}\r\n${close ? 'Connection: close\r\n' : ''}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), Buffer.alloc(size, 'x')]);
}

function fcgiRecord(type: number, id: number, content: Buffer): Buffer {
  const out: Buffer[] = [];
  for (let off = 0; off < content.length || out.length === 0; off += 65535) {
    const part = content.subarray(off, off + 65535);
    const pad = -part.length & 7;
    const h = Buffer.alloc(8);
    h[0] = 1;
    h[1] = type;
    h.writeUInt16BE(id, 2);
    h.writeUInt16BE(part.length, 4);
    h[6] = pad;
    out.push(h, part, Buffer.alloc(pad));
    if (content.length === 0) break;
  }
  return Buffer.concat(out);
}

/** STDOUT with the whole reply, empty STDOUT, END_REQUEST: one write. */
function fcgiReply(id: number, status: number, size: number): Buffer {
  return Buffer.concat([fcgiRecord(6, id, cgiReply(status, size)), fcgiRecord(6, id, Buffer.alloc(0)), fcgiRecord(3, id, Buffer.alloc(8))]);
}

class Replies {
  private readonly cache = new Map<string, Buffer>();
  constructor(private readonly size: number) {}
  fcgi(id: number, status: number): Buffer {
    const k = `f${id}:${status}`;
    let b = this.cache.get(k);
    if (b === undefined) this.cache.set(k, (b = fcgiReply(id, status, this.size)));
    return b;
  }
  cgi(status: number): Buffer {
    const k = `c${status}`;
    let b = this.cache.get(k);
    if (b === undefined) this.cache.set(k, (b = cgiReply(status, this.size)));
    return b;
  }
  http(status: number, close: boolean): Buffer {
    const k = `h${status}:${close}`;
    let b = this.cache.get(k);
    if (b === undefined) this.cache.set(k, (b = httpReply(status, this.size, close)));
    return b;
  }
}

export async function startTrivialBackend(o: TrivialOptions): Promise<TrivialBackend> {
  const size = o.size ?? 100;
  const mix = o.mix === true;
  const delay = o.delayMs ?? 0;
  const replies = new Replies(size);
  const counts = new Map<number, number>();
  let received = 0;
  let connections = 0;
  const sockets = new Set<Socket>();

  const nextStatus = (): number => statusForRequest(++received, mix);
  const answer = (sock: Socket, status: number, bytes: Buffer, end: boolean): void => {
    const send = (): void => {
      counts.set(status, (counts.get(status) ?? 0) + 1);
      if (sock.destroyed) return;
      if (end) sock.end(bytes);
      else sock.write(bytes);
    };
    if (delay > 0) setTimeout(send, delay);
    else send();
  };

  const onFcgi = (sock: Socket): void => {
    let pending: Buffer | undefined;
    let keepConn = false;
    sock.on('data', (chunk: Buffer) => {
      let b = pending === undefined ? chunk : Buffer.concat([pending, chunk]);
      pending = undefined;
      let p = 0;
      while (b.length - p >= 8) {
        const type = b[p + 1]!;
        const clen = (b[p + 4]! << 8) | b[p + 5]!;
        const total = 8 + clen + b[p + 6]!;
        if (b.length - p < total) break;
        if (type === 1) keepConn = (b[p + 8 + 2]! & 1) === 1;
        else if (type === 5 && clen === 0) {
          const id = (b[p + 2]! << 8) | b[p + 3]!;
          const status = nextStatus();
          answer(sock, status, replies.fcgi(id, status), !keepConn);
        }
        p += total;
      }
      if (p < b.length) pending = Buffer.from(b.subarray(p));
    });
  };

  const onHttp = (sock: Socket): void => {
    let pending = '';
    let bodyLeft = 0;
    sock.setEncoding('latin1');
    sock.on('data', (s: string) => {
      let text = pending + s;
      pending = '';
      for (;;) {
        if (bodyLeft > 0) {
          const n = Math.min(bodyLeft, text.length);
          bodyLeft -= n;
          text = text.slice(n);
          if (bodyLeft > 0) return;
        }
        const end = text.indexOf('\r\n\r\n');
        if (end < 0) {
          pending = text;
          return;
        }
        const head = text.slice(0, end);
        text = text.slice(end + 4);
        const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        bodyLeft = cl ? Number(cl[1]) : 0;
        const close = /\r\nconnection:\s*close/i.test(head) || head.includes(' HTTP/1.0');
        const status = nextStatus();
        answer(sock, status, replies.http(status, close), close);
        if (close) return;
      }
    });
  };

  const onScgi = (sock: Socket): void => {
    let buf: Buffer = Buffer.alloc(0);
    let answered = false;
    sock.on('data', (chunk: Buffer) => {
      if (answered) return;
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      const colon = buf.indexOf(58);
      if (colon < 0) return;
      const hlen = Number(buf.toString('latin1', 0, colon));
      const headEnd = colon + 1 + hlen + 1;
      if (buf.length < headEnd) return;
      const header = buf.toString('latin1', colon + 1, colon + 1 + hlen).split('\0');
      const clen = Number(header[1] ?? 0);
      if (buf.length < headEnd + clen) return;
      answered = true;
      const status = nextStatus();
      answer(sock, status, replies.cgi(status), true);
    });
  };

  const handler = o.protocol === 'fastcgi' ? onFcgi : o.protocol === 'http' ? onHttp : onScgi;
  const server: Server = createServer({ noDelay: true }, (sock) => {
    connections++;
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => {});
    handler(sock);
  });

  let address: string;
  let port = 0;
  if (o.address === 'fd0') {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ fd: 0 }, resolve);
    });
    address = 'fd0';
  } else if (o.address.startsWith('unix:')) {
    const path = o.address.slice(5);
    try {
      unlinkSync(path);
    } catch {
      // not there
    }
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ path, backlog: 4096 }, resolve);
    });
    address = o.address;
  } else {
    const i = o.address.lastIndexOf(':');
    const host = o.address.slice(0, i) || '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port: Number(o.address.slice(i + 1)), backlog: 4096 }, resolve);
    });
    const a = server.address();
    port = a !== null && typeof a === 'object' ? a.port : 0;
    address = `${host}:${port}`;
  }
  return {
    address,
    port,
    counts,
    received: () => received,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const common = { size: Number(arg('--size') ?? 100), mix: process.argv.includes('--mix'), delayMs: Number(arg('--delay') ?? 0) };
  const started: string[] = [];
  for (const protocol of ['fastcgi', 'scgi', 'http'] as const) {
    const a = arg(`--${protocol}`);
    if (a === undefined) continue;
    const b = await startTrivialBackend({ protocol, address: a, ...common });
    started.push(`${protocol}://${b.address}`);
  }
  if (started.length === 0) {
    process.stderr.write('usage: trivial-backend --fastcgi ADDR | --scgi ADDR | --http ADDR [--size N] [--mix] [--delay MS]   (ADDR: host:port, unix:/path or fd0)\n');
    process.exit(2);
  }
  if (!started.some((u) => u.endsWith('fd0'))) process.stdout.write(`listening ${started.join(' ')}\n`);
  process.on('SIGTERM', () => process.exit(0));
  process.on('SIGINT', () => process.exit(0));
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) void main();
