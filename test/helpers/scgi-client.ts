/**
 * A raw SCGI client for tests, written independently of the project's codec: one
 * request per connection, the whole response read until the server closes.
 */
import { parseCgiOutput, type CgiOutput } from './fcgi-client.js';
import { RawConn } from './raw-socket.js';
import type { ConnectTarget } from './wait.js';

/** Netstring header with CONTENT_LENGTH first, as the SCGI spec requires. */
export function encodeScgiRequest(params: Record<string, string>, body: Buffer = Buffer.alloc(0)): Buffer {
  const pairs: string[] = ['CONTENT_LENGTH', String(body.length), 'SCGI', '1'];
  for (const [k, v] of Object.entries(params)) if (k !== 'CONTENT_LENGTH' && k !== 'SCGI') pairs.push(k, v);
  const head = Buffer.from(pairs.map((p) => p + '\0').join(''), 'latin1');
  return Buffer.concat([Buffer.from(`${head.length}:`), head, Buffer.from(','), body]);
}

export async function scgiRequest(
  target: ConnectTarget,
  params: Record<string, string>,
  body?: Buffer,
  waitMs = 10_000,
): Promise<CgiOutput & { raw: Buffer }> {
  const c = new RawConn(target);
  await c.connected;
  c.write(encodeScgiRequest(params, body));
  const res = await c.waitClose(waitMs);
  if (res.ended === 'timeout') throw new Error(`SCGI response not closed within ${waitMs} ms; got ${res.received.length} bytes`);
  return { ...parseCgiOutput(res.received), raw: res.received };
}
