/**
 * `fcgi-pm dashboard`: the web dashboard (src/dashboard/) over daemons given on the
 * command line, without editing any config and without a daemon of its own; it runs
 * until interrupted. `--hash-password` prints a users: entry for a dashboard section.
 */
import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import { parseAddress } from '../protocol/address.js';
import { parseDuration } from '../config/units.js';
import type { DashboardConfig } from '../config/types.js';
import { createLogger } from '../log/log.js';
import { recentWarnings } from '../log/warning-ring.js';
import { EXIT_USAGE } from './report.js';

interface DashboardCliOptions {
  peers: string[];
  address: string;
  token?: string;
  peerToken?: string;
  history: string;
  interval: string;
  hashPassword?: boolean;
}

const collect = (v: string, prev: string[]): string[] => [...prev, ...v.split(',').map((s) => s.trim()).filter((s) => s !== '')];

function usage(msg: string): never {
  process.stderr.write(`fcgi-pm dashboard: ${msg}\n`);
  process.exit(EXIT_USAGE);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

export function dashboardCommand(): Command {
  return new Command('dashboard')
    .description('serve the web dashboard over the given daemons (control sockets or other dashboards), without a config file')
    .option('--peers <list>', 'control socket paths or http:// dashboards, comma-separated (repeatable)', collect, [])
    .option('--address <host:port>', 'where to listen', '127.0.0.1:9910')
    .option('--token <secret>', 'the login token (default: FCGI_PM_DASHBOARD_TOKEN, else a random one, printed)')
    .option('--peer-token <secret>', 'token for http:// peers')
    .option('--history <duration>', 'how far back the charts go', '15m')
    .option('--interval <duration>', 'sample interval while a page is open', '2s')
    .option('--hash-password', 'read a password on stdin, print its scrypt hash for dashboard.users, and exit')
    .action(async (o: DashboardCliOptions) => {
      if (o.hashPassword) {
        const pw = await readStdin();
        if (pw === '') usage('--hash-password: no password on stdin');
        const { hashPassword } = await import('../dashboard/auth.js');
        process.stdout.write(hashPassword(pw) + '\n');
        return;
      }
      if (o.peers.length === 0) usage('--peers: name at least one daemon (a control socket path or an http:// dashboard)');
      const address = parseAddress(o.address);
      if (typeof address === 'string' || address.kind === 'unix') usage(`--address: ${typeof address === 'string' ? address : 'must be host:port'}`);
      const history = parseDuration(o.history);
      const interval = parseDuration(o.interval);
      if (typeof history === 'string') usage(`--history: ${history}`);
      if (typeof interval === 'string' || interval < 250) usage(`--interval: ${typeof interval === 'string' ? interval : 'at least 250ms'}`);
      const given = o.token ?? process.env.FCGI_PM_DASHBOARD_TOKEN;
      if (given !== undefined && given.length < 16) usage('--token: at least 16 characters');
      const token = given ?? randomBytes(16).toString('hex');
      const peers = o.peers.map((p) => (p.startsWith('unix:') ? p.slice(5) : p));
      const cfg: DashboardConfig = { address, token, peers, peerToken: o.peerToken, history, sampleInterval: interval, idleSampleInterval: 10_000 };
      const logger = createLogger({ level: 'info' });
      // Loaded here, not with the command line: `fcgi-pm run` never needs the dashboard's modules.
      const { DashboardServer } = await import('../dashboard/server.js');
      const server = new DashboardServer({ config: () => cfg, logger, warnings: recentWarnings });
      const at = await server.listen();
      if (given === undefined) process.stderr.write(`fcgi-pm dashboard: log in at http://${at}/ with the token ${token}\n`);
      await new Promise<void>((resolve) => {
        for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve());
      });
      await server.close();
    });
}
