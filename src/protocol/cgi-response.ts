/**
 * CGI response heads (RFC 3875 §6): the part of a backend's output before the blank
 * line. Used to learn the status for logs and to build HTTP responses. Pure.
 * STUB: signatures fixed; the protocol owner fills in bodies.
 */
import type { CgiResponseHead } from './exchange.js';

export const MAX_RESPONSE_HEAD = 64 * 1024;

/**
 * Push parser. push(chunk) returns undefined while the head is incomplete, then
 * { head, rest } where rest is the body bytes that followed the head in that chunk
 * (a view). Accepts \n or \r\n line ends. No Status header → 200, or 302 when a
 * Location header is present. Throws ProtocolError CGI_BAD_RESPONSE_HEAD /
 * CGI_RESPONSE_HEAD_TOO_LARGE.
 */
export declare class CgiResponseHeadParser {
  constructor(maxHeadBytes?: number);
  push(chunk: Buffer): { head: CgiResponseHead; rest: Buffer } | undefined;
}

/** A complete CGI response for an error: Status, Content-Type text/plain, Retry-After when given, short body. */
export declare function renderCgiError(status: number, message: string, retryAfter?: number): Buffer;

/** Standard reason phrase for a status code ("Unknown" when not known). */
export declare function reasonPhrase(status: number): string;
