/**
 * Socket addresses as operators write them: "127.0.0.1:9000", "[::1]:9000",
 * "localhost:9000", ":9000" (all interfaces), "unix:/run/app.sock" or "/run/app.sock".
 */
export type SocketAddress =
  | { kind: 'tcp'; host: string; port: number; text: string }
  | { kind: 'unix'; path: string; text: string };

/** Returns the address or a message saying what is wrong with it. */
export function parseAddress(input: string): SocketAddress | string {
  const s = input.trim();
  if (s.startsWith('unix:')) {
    const path = s.slice(5);
    if (!path.startsWith('/')) return `unix socket path must be absolute: "${input}"`;
    return { kind: 'unix', path, text: `unix:${path}` };
  }
  if (s.startsWith('/')) return { kind: 'unix', path: s, text: `unix:${s}` };
  let host: string;
  let portText: string;
  const v6 = /^\[([0-9a-fA-F:.]+)\]:(\d+)$/.exec(s);
  if (v6) {
    host = v6[1]!;
    portText = v6[2]!;
  } else {
    const i = s.lastIndexOf(':');
    if (i < 0) return `address needs a port or "unix:" prefix: "${input}"`;
    host = s.slice(0, i);
    portText = s.slice(i + 1);
    if (host.includes(':')) return `IPv6 addresses need brackets, e.g. "[::1]:9000": "${input}"`;
    // Catches "[]:80", "a b:80", "x/y:80" here rather than as a confusing DNS error later.
    if (host !== '' && host !== '*' && !/^[A-Za-z0-9._-]+$/.test(host)) return `bad host name in "${input}"`;
  }
  if (!/^\d+$/.test(portText)) return `bad port in "${input}"`;
  const port = Number(portText);
  if (port > 65535) return `port out of range in "${input}"`;
  if (host === '' || host === '*') host = '0.0.0.0';
  const text = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return { kind: 'tcp', host, port, text };
}
