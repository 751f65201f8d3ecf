/**
 * The `dashboard:` section: a web page watching this daemon and its peers (src/dashboard/).
 * Present = on; the daemon serves it on `address` itself.
 */
import type { KeySpec } from './key-spec.js';

export const DASHBOARD_KEYS: readonly KeySpec[] = [
  { key: 'address', field: 'address', type: { kind: 'address' }, default: '127.0.0.1:9910', doc: 'Where the dashboard answers HTTP (TCP; loopback by default: put nginx in front for TLS).' },
  { key: 'allowed_clients', field: 'allowedClients', type: { kind: 'client-list' }, defaultText: '(any client)', doc: 'Client addresses and CIDR blocks that may connect to the dashboard, as for listeners.' },
  { key: 'token', field: 'token', type: { kind: 'string' }, doc: 'Secret for the dashboard (at least 16 characters): "Authorization: Bearer TOKEN", or typed once into the login form (a cookie). Needs token or users.' },
  { key: 'users', field: 'users', type: { kind: 'string-map' }, doc: 'Basic-auth users: name → scrypt hash from "fcgi-pm dashboard --hash-password" (scrypt$N$r$p$salt$hash).' },
  { key: 'peers', field: 'peers', type: { kind: 'string-list' }, default: [], defaultText: '[]', doc: 'Other daemons shown on the page: control sockets on this host ("/run/fcgi-pm/x.sock") or dashboards ("http://10.0.0.2:9910", read with peer_token).' },
  { key: 'peer_token', field: 'peerToken', type: { kind: 'string' }, doc: 'Token sent to peers given as http:// dashboards.' },
  { key: 'history', field: 'history', type: { kind: 'duration', min: 10_000 }, default: '15m', doc: 'How far back the charts go: the in-memory ring keeps history / sample_interval samples.' },
  { key: 'sample_interval', field: 'sampleInterval', type: { kind: 'duration', min: 250 }, default: '2s', doc: 'How often snapshots are taken and pushed while a page is open.' },
  { key: 'idle_sample_interval', field: 'idleSampleInterval', type: { kind: 'duration', min: 0 }, default: '10s', doc: 'How often snapshots are taken while no page is open, so a page opened later has history (the ring then spans longer: history / sample_interval samples); 0s: only while a page is open.' },
];

/** A users: entry: scrypt$N$r$p$salt$hash, salt and hash in base64 (src/dashboard/auth.ts makes them). */
export const PASSWORD_HASH = /^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/;
