import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/*
 * Ports come from 10240 up to the kernel's ephemeral range (Linux default 32768..60999,
 * net.ipv4.ip_local_port_range): the kernel never picks them for an outgoing connection or a
 * port-0 bind, so between our probe and the consumer's bind only another process that asks
 * for that exact number can take it. Each test process walks its own block, chosen by pid, so
 * parallel test files (and other suites on the machine) ask for different numbers; the probe
 * still skips a port someone holds, and a process that exhausts its block goes on into the next.
 */
const FIRST = 10240;
const BLOCK = 128;
const BLOCKS = Math.floor((ephemeralLow() - FIRST) / BLOCK);
const start = (process.pid % BLOCKS) * BLOCK;
/** Offset of the next candidate from FIRST; never goes back, so no port is handed out twice. */
let next = 0;

/** A loopback TCP port of this process's block that was free a moment ago, never the same twice. */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < BLOCKS * BLOCK; tries++) {
    // Taken before the await so concurrent callers get different candidates.
    const port = FIRST + ((start + next++) % (BLOCKS * BLOCK));
    if (await isFree(port)) return port;
  }
  throw new Error('no free test port');
}

/** Low end of the kernel's ephemeral range; our ports stay below it. */
function ephemeralLow(): number {
  let low = 32768;
  try {
    low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || low;
  } catch {
    // not Linux: keep the default
  }
  if (low - FIRST < 16 * BLOCK) throw new Error(`ip_local_port_range starts at ${low}: too low for test ports from ${FIRST}`);
  return low;
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE' || err.code === 'EACCES') resolve(false);
      else reject(err);
    });
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}
