import { createServer } from 'node:net';

/** Ports this test process already handed out: the kernel may offer a closed one again at once. */
const given = new Set<number>();

/** A loopback TCP port that was free a moment ago (bind port 0, read it, close), never the same twice. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await probePort();
    if (given.has(port)) continue;
    given.add(port);
    return port;
  }
}

function probePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('no port'));
        return;
      }
      srv.close(() => resolve(addr.port));
    });
  });
}
