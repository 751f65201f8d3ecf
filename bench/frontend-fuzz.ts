/**
 * The front-end fuzz run at benchmark size: a real daemon on loopback (FastCGI, SCGI
 * and HTTP listeners, short client deadlines) in front of the trivial backend, and
 * 10^5 bent requests per front end by default. Fails (exit 1) on the first input with
 * more than one response, a probe that is not served, or a dead daemon; prints counts.
 *
 *   npx tsc -p . && node dist/bench/frontend-fuzz.js [inputs-per-protocol] [max-seconds-per-protocol] [seed]
 */
import { startTrivialBackend } from './trivial-backend.js';
import { startDaemon } from '../test/helpers/daemon.js';
import { fuzzFrontend, type FuzzProtocol } from '../test/helpers/frontend-fuzz.js';
import { freePort } from '../test/helpers/ports.js';
import { Cleanup } from '../test/helpers/scope.js';

const inputs = Number(process.argv[2] ?? 100_000);
const maxSeconds = Number(process.argv[3] ?? 300);
const seed = Number(process.argv[4] ?? Date.now() % 100_000);
const OK_BODY = 'x'.repeat(7);
const PROTOCOLS: readonly FuzzProtocol[] = ['fastcgi', 'scgi', 'http'];

async function main(): Promise<number> {
  const scope = new Cleanup();
  try {
    const backend = await startTrivialBackend({ protocol: 'fastcgi', address: '127.0.0.1:0', size: OK_BODY.length });
    scope.after(() => backend.close());
    const ports = new Map<FuzzProtocol, number>();
    for (const p of PROTOCOLS) ports.set(p, await freePort());
    const short = { idle_timeout: '300ms', header_timeout: '300ms', body_timeout: '300ms', max_conns: 4096 };
    const daemon = await startDaemon(scope, {
      listen: PROTOCOLS.map((p) => ({ protocol: p, address: `127.0.0.1:${ports.get(p)}`, pool: 'b', ...short })),
      pools: { b: { backends: [backend.address], max_conns_per_backend: 64 } },
      log: { level: 'error' },
    });
    console.log(`seed ${seed}, ${inputs} inputs per front end, at most ${maxSeconds} s each`);
    for (const protocol of PROTOCOLS) {
      const t0 = Date.now();
      const counts = await fuzzFrontend({ protocol, port: ports.get(protocol)!, okBody: OK_BODY }, { inputs, seed, maxMs: maxSeconds * 1000, batch: 1000, concurrency: 128 }, () => daemon.running);
      const s = (Date.now() - t0) / 1000;
      console.log(`${protocol.padEnd(8)} ${counts.inputs} inputs in ${s.toFixed(1)} s: ${counts.answered} answered, ${counts.closed} closed without an answer, ${counts.open} left open, ${counts.probes} probes served`);
    }
    const errors = daemon.warningsSince(0).filter((l) => (l.level ?? 0) >= 50);
    console.log(`daemon error lines: ${errors.length}`);
    return errors.length === 0 ? 0 : 1;
  } catch (err) {
    console.error(String((err as Error).message ?? err));
    return 1;
  } finally {
    await scope.run();
  }
}

process.exitCode = await main();
