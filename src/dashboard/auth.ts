/**
 * Who may use the dashboard: the token (an "Authorization: Bearer" header, or typed into
 * the login form once), or users with scrypt-hashed passwords (Basic auth, or the form).
 * A form login gets a random session cookie (HttpOnly, SameSite=Strict), kept in memory
 * and bounded; every comparison of a secret is timing-safe. scrypt runs off the event
 * loop (the daemon keeps proxying meanwhile), and a Basic header that passed is
 * remembered for a while, so a page's calls do not each cost a hash.
 */
import { createHash, randomBytes, scrypt, scryptSync, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { DashboardConfig } from '../config/types.js';

export const COOKIE = 'fcgipm_dash';
const MAX_SESSIONS = 1000;
export const SESSION_MS = 12 * 3600_000;
const SCRYPT = { N: 16384, r: 8, p: 1 };

export function hashPassword(password: string, salt = randomBytes(16)): string {
  const key = scryptSync(password, salt, 32, SCRYPT);
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [tag, n, r, p, salt, hash] = stored.split('$');
  if (tag !== 'scrypt' || salt === undefined || hash === undefined) return Promise.resolve(false);
  const want = Buffer.from(hash, 'base64');
  const N = Number(n);
  return new Promise((resolve) => {
    scrypt(password, Buffer.from(salt, 'base64'), want.length, { N, r: Number(r), p: Number(p), maxmem: 256 * N * Number(r) }, (err, got) => {
      resolve(err === null && got.length === want.length && timingSafeEqual(got, want));
    });
  });
}

/** Equal-length digests, so neither the content nor the length leaks through timing. */
function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

/** How long a Basic header that passed is taken without hashing again. */
const BASIC_CACHE_MS = 5 * 60_000;

export class DashboardAuth {
  private readonly sessions = new Map<string, number>();
  /** sha256 of a Basic header that passed → until when; users' settings may change on reload, hence short. */
  private readonly basicOk = new Map<string, number>();

  constructor(
    private readonly cfg: () => Pick<DashboardConfig, 'token' | 'users'>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether the request carries a valid token, Basic credentials or session cookie. */
  async allowed(req: IncomingMessage): Promise<boolean> {
    const h = req.headers.authorization ?? '';
    const token = this.cfg().token;
    if (h.startsWith('Bearer ')) return token !== undefined && sameSecret(h.slice(7).trim(), token);
    if (h.startsWith('Basic ')) return this.basic(h);
    const sid = cookieOf(req, COOKIE);
    if (sid === undefined) return false;
    const until = this.sessions.get(sid);
    if (until === undefined) return false;
    if (until < this.now()) {
      this.sessions.delete(sid);
      return false;
    }
    return true;
  }

  private async basic(h: string): Promise<boolean> {
    const key = createHash('sha256').update(h).digest('base64');
    const until = this.basicOk.get(key);
    if (until !== undefined && until > this.now()) return true;
    const text = Buffer.from(h.slice(6), 'base64').toString('utf8');
    const i = text.indexOf(':');
    if (i <= 0 || !(await this.userOk(text.slice(0, i), text.slice(i + 1)))) return false;
    this.basicOk.set(key, this.now() + BASIC_CACHE_MS);
    if (this.basicOk.size > MAX_SESSIONS) this.basicOk.delete(this.basicOk.keys().next().value as string);
    return true;
  }

  /** Whether the form's token or user/password is right; if so, a new session id. */
  async login(fields: URLSearchParams): Promise<string | undefined> {
    const token = this.cfg().token;
    const t = fields.get('token');
    const u = fields.get('user');
    const ok = t !== null && t !== '' ? token !== undefined && sameSecret(t, token) : u !== null && (await this.userOk(u, fields.get('password') ?? ''));
    if (!ok) return undefined;
    const sid = randomBytes(24).toString('base64url');
    this.sessions.set(sid, this.now() + SESSION_MS);
    if (this.sessions.size > MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value as string);
    return sid;
  }

  /** Basic auth realm when users are configured (browsers then ask), else none. */
  challenge(): string | undefined {
    return this.cfg().users !== undefined ? 'Basic realm="fcgi-pm dashboard", charset="UTF-8"' : undefined;
  }

  private async userOk(user: string, password: string): Promise<boolean> {
    const stored = this.cfg().users?.[user];
    // An unknown user costs the same scrypt as a known one.
    return (await verifyPassword(password, stored ?? dummyHash())) && stored !== undefined;
  }
}

let dummy: string | undefined;
const dummyHash = (): string => (dummy ??= hashPassword('not a password', Buffer.alloc(16)));
