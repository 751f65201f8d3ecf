/**
 * Where the control socket lives when the config does not say: the daemon binds there
 * and `fcgi-pm status|reload|stop|workers` look there, so both must derive it the same
 * way (this function). In order:
 *   1. control_socket as configured ("off" disables it);
 *   2. <runtime_dir>/control.sock when runtime_dir is set;
 *   3. /run/fcgi-pm/control.sock when running as root (systemd's RuntimeDirectory=fcgi-pm);
 *   4. $XDG_RUNTIME_DIR/fcgi-pm/control.sock for other users with a runtime dir;
 *   5. <os tmpdir>/fcgi-pm-<uid>/control.sock.
 */
import * as os from 'node:os';
import * as nodePath from 'node:path';

export const CONTROL_SOCKET_NAME = 'control.sock';

export interface ControlSocketSetting {
  /** As configured: a path, false for "off", undefined for the default. */
  controlSocket?: string | false | undefined;
  runtimeDir?: string | undefined;
}

export function defaultControlSocket(runtimeDir: string | undefined, env: NodeJS.ProcessEnv = process.env, uid = process.getuid?.() ?? -1): string {
  if (runtimeDir !== undefined) return nodePath.join(runtimeDir, CONTROL_SOCKET_NAME);
  if (uid === 0) return nodePath.join('/run/fcgi-pm', CONTROL_SOCKET_NAME);
  const xdg = env['XDG_RUNTIME_DIR'];
  if (xdg !== undefined && xdg.startsWith('/')) return nodePath.join(xdg, 'fcgi-pm', CONTROL_SOCKET_NAME);
  return nodePath.join(os.tmpdir(), `fcgi-pm-${uid}`, CONTROL_SOCKET_NAME);
}

/** The path to bind / connect to, or undefined when the control socket is off. */
export function controlSocketPath(cfg: ControlSocketSetting): string | undefined {
  if (cfg.controlSocket === false) return undefined;
  return cfg.controlSocket ?? defaultControlSocket(cfg.runtimeDir);
}

/** True when the path is the derived default rather than configured. */
export function isDefaultControlSocket(cfg: ControlSocketSetting): boolean {
  return cfg.controlSocket === undefined;
}
