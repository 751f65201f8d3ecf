/**
 * The bridge of an upgrade by exec: while the process executes the new code and the new
 * code starts (Node's start and loading the program: a few hundred ms, during which no
 * listener of this pid accepts), a helper process serves the listeners. It is the new
 * code itself, started as an upgrade's new daemon is (upgrade.ts startSuccessor: the
 * listening sockets inherited, readiness told on a pipe), with a config derived from the
 * real one: each spawned pool whose workers can be handed on becomes an external pool
 * whose backends are those workers' sockets (one connection each, not kept, so the old
 * code, the bridge and the new code can all reach them), the other spawned pools start
 * workers only on demand, and there is no control socket, pid file or dashboard. Its
 * start is the new code's check (cli/run.ts: the host checks on the config as it is,
 * before it becomes the bridge's; a failure is told on the readiness pipe); a bridge that
 * cannot start fails the upgrade, and nothing changed. Once the bridge serves, the old code stops accepting,
 * finishes its requests, hands its workers on and execs; the new code, once it serves,
 * stops the bridge (SIGTERM: it finishes what it runs) and reaps it. The bridge dies with
 * the process (setpriv --pdeathsig), whatever happens to it.
 */
import type { Config } from '../config/types.js';
import { parseAddress } from '../protocol/address.js';
import { defaultDeathGuard } from '../worker/death-guard.js';
import { ownCommandLine, startSuccessor, UPGRADE_READY_MS, type HandedSocket, type Successor } from './upgrade.js';

/** Tells the new code it runs as a bridge: JSON { pool: [worker socket address, ...] }. */
export const BRIDGE_ENV = 'FCGI_PM_UPGRADE_BRIDGE';

/** Why this config's upgrade runs without a bridge, or undefined when it can have one. */
export function bridgeBlocker(cfg: Config): string | undefined {
  if (defaultDeathGuard().mode !== 'setpriv') return 'no setpriv to tie the bridge to the daemon';
  if (cfg.vhosts !== undefined) return 'vhosts';
  // An accept: direct pool's socket is the pool's, not a listener's: the bridge would bind it again.
  for (const p of cfg.pools.values()) if (p.accept === 'direct') return `pool ${p.name} is accept: direct`;
  return undefined;
}

/** Starts the bridge on the listeners' sockets; resolves once it serves (rejects like startSuccessor). */
export function startBridge(sockets: readonly HandedSocket[], workers: ReadonlyMap<string, string[]>): Promise<Successor> {
  const argv = ownCommandLine();
  const w = defaultDeathGuard().wrap(argv[0]!, argv.slice(1));
  // Its start (the new code's check) takes what serving leaves; it serves at the normal weight.
  return startSuccessor(
    sockets,
    new Map(),
    [w.file, ...w.args],
    UPGRADE_READY_MS,
    {
      [BRIDGE_ENV]: JSON.stringify(Object.fromEntries(workers)),
      // Not systemd's main process, ever.
      NOTIFY_SOCKET: undefined,
    },
    true,
  );
}

/** In the new code started as a bridge: the config it serves with; undefined when not a bridge. Clears the variable. */
export function bridgeConfig(cfg: Config, env: NodeJS.ProcessEnv = process.env): Config | undefined {
  const v = env[BRIDGE_ENV];
  delete env[BRIDGE_ENV];
  if (v === undefined) return undefined;
  let workers: Record<string, unknown> = {};
  try {
    workers = JSON.parse(v) as Record<string, unknown>;
  } catch {
    // no workers: every pool starts its own on demand
  }
  for (const [name, p] of cfg.pools) {
    if (p.command === undefined) continue;
    const list = Array.isArray(workers[name]) ? (workers[name] as unknown[]).filter((a): a is string => typeof a === 'string') : [];
    const backends = list.map((a) => parseAddress(a)).filter((a) => typeof a !== 'string');
    if (backends.length > 0) cfg.pools.set(name, { ...p, command: undefined, backends, maxConnsPerBackend: 1, keepAlive: false });
    else cfg.pools.set(name, { ...p, pm: 'ondemand', residentParent: false });
  }
  cfg.controlSocket = false;
  cfg.pidFile = false;
  cfg.dashboard = undefined;
  cfg.shutdownDelay = 0;
  // Its own start and stop say nothing the daemon's lines do not: warnings and errors only.
  cfg.log.level = 'warn';
  return cfg;
}

/** SIGTERM to the bridge: it stops accepting, finishes what it runs and exits. */
export function stopBridge(pid: number): void {
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    // gone
  }
}
