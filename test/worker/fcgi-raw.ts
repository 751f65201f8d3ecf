/**
 * A raw FastCGI client for worker tests, independent of src/protocol (which another
 * engineer is writing): one request on a fresh connection, the whole response collected.
 */
import net from 'node:net';
import type { SocketAddress } from '../../src/protocol/address.js';

function record(type: number, id: number, content: Buffer = Buffer.alloc(0)): Buffer {
  const pad = (8 - (content.length % 8)) % 8;
  const h = Buffer.alloc(8);
  h[0] = 1;
  h[1] = type;
  h.writeUInt16BE(id, 2);
  h.writeUInt16BE(content.length, 4);
  h[6] = pad;
  return Buffer.concat([h, content, Buffer.alloc(pad)]);
}

function nameValues(params: Record<string, string>): Buffer {
  const parts: Buffer[] = [];
  const len = (n: number): Buffer => {
    if (n < 128) return Buffer.from([n]);
    const b = Buffer.alloc(4);
    b.writeUInt32BE((n | 0x80000000) >>> 0);
    return b;
  };
  for (const [k, v] of Object.entries(params)) {
    const kb = Buffer.from(k, 'latin1');
    const vb = Buffer.from(v, 'latin1');
    parts.push(len(kb.length), len(vb.length), kb, vb);
  }
  return Buffer.concat(parts);
}

/** BEGIN_REQUEST (responder, no keep-conn) + PARAMS + empty PARAMS + STDIN + empty STDIN. */
export function requestBytes(params: Record<string, string>, body: Buffer = Buffer.alloc(0), id = 1): Buffer {
  const begin = Buffer.from([0, 1, 0, 0, 0, 0, 0, 0]);
  const out = [record(1, id, begin), record(4, id, nameValues(params)), record(4, id)];
  if (body.length > 0) out.push(record(5, id, body));
  out.push(record(5, id));
  return Buffer.concat(out);
}

export interface RawResponse {
  stdout: Buffer;
  stderr: Buffer;
  appStatus: number | undefined;
  protocolStatus: number | undefined;
}

export function fcgiRequest(addr: SocketAddress, params: Record<string, string>, body?: Buffer, timeoutMs = 5000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const sock = addr.kind === 'unix' ? net.connect(addr.path) : net.connect(addr.port, addr.host);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('FastCGI request timed out'));
    }, timeoutMs);
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.on('close', () => {
      clearTimeout(timer);
      const buf = Buffer.concat(chunks);
      const res: RawResponse = { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), appStatus: undefined, protocolStatus: undefined };
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let i = 0;
      while (i + 8 <= buf.length) {
        const type = buf[i + 1]!;
        const len = buf.readUInt16BE(i + 4);
        const content = buf.subarray(i + 8, i + 8 + len);
        if (type === 6) out.push(content);
        else if (type === 7) err.push(content);
        else if (type === 3) {
          res.appStatus = content.readUInt32BE(0);
          res.protocolStatus = content[4];
        }
        i += 8 + len + buf[i + 6]!;
      }
      res.stdout = Buffer.concat(out);
      res.stderr = Buffer.concat(err);
      resolve(res);
    });
    sock.write(requestBytes(params, body));
  });
}
