import { mkdirSync, openSync, readFileSync, unlinkSync, writeSync, closeSync } from 'node:fs';
import { createServer } from 'node:net';

/*
 * Ports come from 10240 up to the kernel's ephemeral range (Linux default 32768..60999,
 * net.ipv4.ip_local_port_range): the kernel never picks them for an outgoing connection or a
 * port-0 bind, so between our probe and the consumer's bind only another process that asks
 * for that exact number can take it. Each test process claims a block of its own with a lock
 * file (the first block whose file is absent or names a process that is gone, starting from
 * one chosen by pid), so parallel test files and other suites on the machine never ask for
 * the same numbers; the probe still skips a port someone else holds.
 */
const FIRST = 10240;
const BLOCK = 128;
const BLOCKS = Math.floor((ephemeralLow() - FIRST) / BLOCK);
const LOCKS = '/tmp/fcgi-pm-test-ports';
let start: number | undefined;
/** Offset of the next candidate from the block's start; never goes back, so no port is handed out twice. */
let next = 0;

/** A loopback TCP port of this process's block that was free a moment ago, never the same twice. */
export async function freePort(): Promise<number> {
  start ??= claimBlock() * BLOCK;
  for (let tries = 0; tries < BLOCKS * BLOCK; tries++) {
    // Taken before the await so concurrent callers get different candidates.
    const port = FIRST + ((start + next++) % (BLOCKS * BLOCK));
    if (await isFree(port)) return port;
  }
  throw new Error('no free test port');
}

/** The first block, from one chosen by pid, whose lock this process could take; released at exit. */
function claimBlock(): number {
  mkdirSync(LOCKS, { recursive: true, mode: 0o1777 });
  for (let i = 0; i < BLOCKS; i++) {
    const block = (process.pid + i) % BLOCKS;
    const file = `${LOCKS}/${block}`;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fd = openSync(file, 'wx');
        writeSync(fd, String(process.pid));
        closeSync(fd);
        process.once('exit', () => {
          try {
            unlinkSync(file);
          } catch {
            // gone already
          }
        });
        return block;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || holderAlive(file)) break;
        try {
          unlinkSync(file); // its process is gone: a stale lock
        } catch {
          // another process took it over first
        }
      }
    }
  }
  return process.pid % BLOCKS;
}

function holderAlive(file: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(file, 'utf8'));
  } catch {
    return false;
  }
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
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
