/**
 * What a browser does that the plain HTTP helper does not: keep cookies, read a CSRF
 * token from a form, and send multipart/form-data with a file.
 */
import { createHash } from 'node:crypto';
import { httpRequest, httpUpload, type HttpResponse } from '../helpers/http-client.js';

export class CookieJar {
  readonly cookies = new Map<string, string>();

  take(r: HttpResponse): void {
    for (const c of r.headers['set-cookie'] ?? []) {
      const [pair] = c.split(';');
      const i = pair!.indexOf('=');
      if (i > 0) this.cookies.set(pair!.slice(0, i).trim(), pair!.slice(i + 1).trim());
    }
  }

  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/** The value of the hidden csrfmiddlewaretoken input in a Django form page. */
export function csrfToken(html: string): string {
  const m = /name="csrfmiddlewaretoken" value="([^"]+)"/.exec(html);
  if (!m) throw new Error(`no CSRF token in the page: ${html.slice(0, 300)}`);
  return m[1]!;
}

export function formBody(fields: Record<string, string>): string {
  return new URLSearchParams(fields).toString();
}

/**
 * Streams a multipart/form-data body: `fields`, then one file part whose content is
 * `block` repeated up to `fileBytes`. Resolves with the response and the file's sha256.
 */
export async function multipartUpload(
  url: string,
  fields: Record<string, string>,
  file: { field: string; name: string; block: Buffer; bytes: number },
  headers: Record<string, string> = {},
  timeout = 60_000,
): Promise<{ res: HttpResponse; sha256: string }> {
  const boundary = `----fcgipm${Date.now().toString(16)}`;
  let head = '';
  for (const [k, v] of Object.entries(fields)) head += `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="${file.field}"; filename="${file.name}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  const hash = createHash('sha256');
  const res = await httpUpload(url, file.block, file.bytes, {
    headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}` },
    timeout,
    prefix: Buffer.from(head),
    suffix: Buffer.from(tail),
    onChunk: (chunk) => hash.update(chunk),
  });
  return { res, sha256: hash.digest('hex') };
}

/** GET with the jar's cookies; the jar takes the cookies set by the response. */
export async function getWithCookies(url: string, jar: CookieJar): Promise<HttpResponse> {
  const r = await httpRequest(url, { headers: jar.cookies.size ? { cookie: jar.header() } : {} });
  jar.take(r);
  return r;
}
