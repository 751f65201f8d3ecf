/**
 * A bounded load: `clients` loops, each sending one request after another on its own
 * kept-alive connection, until `seconds` have passed; every answer is checked.
 */
import http from 'node:http';
import { httpRequest, type HttpResponse } from '../helpers/http-client.js';

export interface SoakResult {
  requests: number;
  errors: string[];
  /** Requests per URL (when several are given). */
  perUrl: Record<string, number>;
}

/**
 * `urls[i % urls.length]` is client i's URL. `check` returns a reason when an answer is
 * wrong. Each request is bounded by `requestTimeout`; the whole run ends after `seconds`
 * plus the last requests' completion.
 */
export async function soak(
  urls: string[],
  clients: number,
  seconds: number,
  check: (r: HttpResponse) => string | undefined,
  requestTimeout = 30_000,
): Promise<SoakResult> {
  const end = Date.now() + seconds * 1000;
  const result: SoakResult = { requests: 0, errors: [], perUrl: {} };
  const loop = async (i: number): Promise<void> => {
    const url = urls[i % urls.length]!;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      while (Date.now() < end) {
        result.requests++;
        result.perUrl[url] = (result.perUrl[url] ?? 0) + 1;
        try {
          const r = await httpRequest(url, { agent, timeout: requestTimeout });
          const why = check(r);
          if (why) result.errors.push(`client ${i}: ${why}`);
        } catch (err) {
          result.errors.push(`client ${i}: ${(err as Error).message}`);
        }
      }
    } finally {
      agent.destroy();
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, i) => loop(i)));
  return result;
}
