/**
 * The daemon's control socket (fcgi-pm status, reload, restart, drain, stop, workers):
 * bound once at start after checking that no other daemon answers there, closed at the
 * end of a stop, and moved when a reload changes its path or mode.
 */
import type { Server } from 'node:net';
import { mkdirSync, statSync } from 'node:fs';
import * as nodePath from 'node:path';
import { controlSocketPath, isDefaultControlSocket } from '../config/control-path.js';
import type { Config } from '../config/types.js';
import { whoAnswers } from '../control/client.js';
import { ControlServer, type BoundControl, type ControlHandlers } from '../control/server.js';
import { ErrorCodes } from '../errors.js';
import { ListenError, releaseUnixPath } from '../frontend/listen.js';
import type { Logger } from '../log/log.js';
import type { Sockets } from './sockets.js';

/** Another daemon answers on this one's control socket. */
export class AlreadyRunningError extends Error {
  readonly code = ErrorCodes.ALREADY_RUNNING;
  constructor(message: string) {
    super(message);
    this.name = 'AlreadyRunningError';
  }
}

export class ControlEndpoint {
  private readonly logger: Logger;
  private control: ControlServer | undefined;
  private handlers: ControlHandlers | undefined;
  /** The bound path (status shows it), undefined while none is. */
  path: string | undefined;

  private readonly sockets: Sockets;

  constructor(logger: Logger, sockets: Sockets) {
    this.logger = logger;
    this.sockets = sockets;
  }

  /**
   * Binds the control socket. A daemon that answers there already (the same config
   * started twice, or two configs told to share a path) stops this start with
   * ERR_ALREADY_RUNNING, except in the quick form, which then runs without a control
   * socket (a warning): its default is one shared name. Other failures to bind throw for
   * a configured path and warn for a derived one.
   */
  async open(cfg: Config, handlers: ControlHandlers): Promise<void> {
    this.handlers = handlers;
    const path = controlSocketPath(cfg);
    if (path === undefined) return;
    const quickDefault = isDefaultControlSocket(cfg) && !nodePath.isAbsolute(cfg.source);
    // Handed on by the daemon we replace (upgrade in place): it answers there until it leaves.
    const other = this.sockets.has(`unix:${path}`) ? undefined : await whoAnswers(path);
    if (other !== undefined && !quickDefault) {
      const who = `pid ${other.pid ?? '?'}, config ${other.config ?? '?'}`;
      throw new AlreadyRunningError(`another fcgi-pm (${who}) answers on the control socket ${path}; not starting a second daemon for ${cfg.source}`);
    }
    try {
      const dir = nodePath.dirname(path);
      const isDefault = isDefaultControlSocket(cfg);
      // The derived default for a non-root user may sit in a shared tmpdir: private, and
      // ours, or not used at all. /run/fcgi-pm and runtime_dir may hold listener sockets: 0755.
      const privateDir = isDefault && cfg.runtimeDir === undefined && !dir.startsWith('/run/');
      mkdirSync(dir, { recursive: true, mode: privateDir ? 0o700 : 0o755 });
      const st = statSync(dir);
      const uid = process.getuid?.() ?? 0;
      if (isDefault && st.uid !== uid && st.uid !== 0) throw new Error(`${dir} belongs to uid ${st.uid}, not to us`);
      const identity = { pid: process.pid, config: cfg.source };
      this.control = await ControlServer.start(path, cfg.controlSocketMode ?? 0o600, handlers, this.logger.child({ component: 'control' }), (server, p, mode) => bindControl(this.sockets, server, p, mode), identity);
      this.path = path;
      this.logger.info({ kind: 'control', path }, `control socket ${path} (fcgi-pm status, reload, stop, workers)`);
    } catch (err) {
      // A derived path that cannot be bound (a foreign directory) is not worth refusing to serve over.
      if (!isDefaultControlSocket(cfg)) {
        throw new ListenError(`control_socket ${path}: ${(err as Error).message.replace(/^unix:\S+: /, '')}; is another fcgi-pm running with this config? ("fcgi-pm status -c FILE" tells)`);
      }
      const hint = quickDefault ? 'run it from a config file, or set control_socket, to give it its own' : 'set control_socket to give this daemon its own';
      this.logger.warn({ code: ErrorCodes.CONTROL_SOCKET, kind: 'control', path, err: (err as Error).message }, `no control socket: ${(err as Error).message}; ${hint}`);
    }
  }

  /** The socket went to a new daemon: stop answering, leave its path to the new one. */
  handOver(): void {
    const c = this.control;
    this.control = undefined;
    // A reply under way on ours still goes out.
    if (c !== undefined) void c.close(false);
  }

  async close(): Promise<void> {
    const c = this.control;
    this.control = undefined;
    if (c !== undefined) await c.close();
  }

  /** After a reload: a new path or mode moves the socket. */
  follow(cur: Config, next: Config): void {
    const oldPath = controlSocketPath(cur);
    const newPath = controlSocketPath(next);
    if (oldPath === newPath && cur.controlSocketMode === next.controlSocketMode) return;
    const old = this.control;
    this.control = undefined;
    this.path = undefined;
    // The reply to this reload still goes out on the old connection; new ones use the new path.
    void (async () => {
      if (old !== undefined) await old.close(false);
      if (this.handlers !== undefined) await this.open(next, this.handlers).catch((err: unknown) => this.logger.error({ code: ErrorCodes.CONTROL_SOCKET, err }, 'control socket could not be opened'));
    })();
  }
}

async function bindControl(sockets: Sockets, server: Server, path: string, mode: number): Promise<BoundControl> {
  await sockets.listen(server, { kind: 'unix', path, text: `unix:${path}` }, { mode });
  return { release: () => releaseUnixPath(server) };
}
