/**
 * The FastCGI authorizer role (FastCGI specification 1.0, section 6.3): what an
 * authorizer's answer means. Status 200 grants access, and each `Variable-NAME: value`
 * header becomes variable NAME of the request that follows (the body of a 200 is
 * ignored); any other status is the response the client gets, as the authorizer wrote it.
 *
 * Pure: the upstream judges an authorizer's head here, and so does whoever acts on
 * the answer (a front end relaying it, a pool's `authorizer`).
 */
import type { CgiResponseHead } from './exchange.js';
import { parseCgiHead } from './cgi-response.js';

export type AuthorizerAnswer =
  /** 200: access granted; the variables to add to the request, names without the prefix. */
  | { kind: 'allow'; variables: Array<[string, string]> }
  /** Any other status: the authorizer's response goes to the client. */
  | { kind: 'deny' }
  /** A 200 fcgi-pm will not act on: denied, and the reason logged. */
  | { kind: 'bad'; reason: string };

const PREFIX = 'variable-';
/** More than this many variables is not an answer we act on. */
export const MAX_AUTHORIZER_VARIABLES = 64;
const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/**
 * Variables that say which request this is or which file runs: an authorizer grants or
 * refuses a request, it does not get to change it (a SCRIPT_FILENAME of its choosing would
 * run another file; HTTP_* would pose as the client's headers; PHP_VALUE sets php.ini).
 * REMOTE_USER and AUTH_TYPE are what authorizers usually set, and are allowed.
 */
const STEERING: ReadonlySet<string> = new Set([
  'SCRIPT_FILENAME', 'SCRIPT_NAME', 'PATH_INFO', 'PATH_TRANSLATED', 'DOCUMENT_ROOT',
  'DOCUMENT_URI', 'REQUEST_URI', 'REQUEST_METHOD', 'QUERY_STRING', 'CONTENT_LENGTH',
  'CONTENT_TYPE', 'SERVER_NAME', 'SERVER_ADDR', 'SERVER_PORT', 'SERVER_PROTOCOL',
  'SERVER_SOFTWARE', 'GATEWAY_INTERFACE', 'REMOTE_ADDR', 'REMOTE_PORT', 'REMOTE_HOST',
  'HTTPS', 'REDIRECT_STATUS', 'FCGI_ROLE', 'PHP_VALUE', 'PHP_ADMIN_VALUE',
]);

/** Why a `Variable-` name is refused, or undefined when it may be set. */
export function variableNameProblem(name: string): string | undefined {
  if (!NAME.test(name)) return `Variable-${name.slice(0, 80)}: a variable name is letters, digits and _ (not first a digit), at most 128`;
  const upper = name.toUpperCase();
  if (upper.startsWith('HTTP_') || STEERING.has(upper)) return `Variable-${name}: an authorizer may not set ${upper}`;
  return undefined;
}

export function judgeAuthorizerAnswer(head: CgiResponseHead): AuthorizerAnswer {
  if (head.status !== 200) return { kind: 'deny' };
  const variables: Array<[string, string]> = [];
  for (const [name, value] of head.headers) {
    if (name.length <= PREFIX.length || name.slice(0, PREFIX.length).toLowerCase() !== PREFIX) continue;
    const variable = name.slice(PREFIX.length);
    const problem = variableNameProblem(variable);
    if (problem !== undefined) return { kind: 'bad', reason: problem };
    variables.push([variable, value]);
  }
  if (variables.length > MAX_AUTHORIZER_VARIABLES) return { kind: 'bad', reason: `${variables.length} Variable- headers, more than ${MAX_AUTHORIZER_VARIABLES}` };
  return { kind: 'allow', variables };
}

/**
 * The head of a granting answer as it is passed on: the body is dropped, so the headers
 * that describe one go too.
 */
export function grantedHead(head: CgiResponseHead): CgiResponseHead {
  let text = `Status: 200 ${head.reason}\r\n`;
  for (const [name, value] of head.headers) {
    const lower = name.toLowerCase();
    if (lower === 'content-length' || lower === 'transfer-encoding') continue;
    text += `${name}: ${value}\r\n`;
  }
  return parseCgiHead(Buffer.from(`${text}\r\n`, 'latin1'));
}
