/**
 * How a bench request can fail, as a small fixed set of kinds so reports and --json
 * keep one shape, and the errno → kind mapping.
 */

export const ERROR_KINDS = ['connect', 'reset', 'timeout', 'closed', 'protocol', 'client', 'dropped', 'other'] as const;
export type ErrorKind = (typeof ERROR_KINDS)[number];

/** One line each, for the text report and docs/bench.md. */
export const ERROR_KIND_DOC: Record<ErrorKind, string> = {
  connect: 'connection refused, or no such Unix socket / no permission',
  reset: 'connection reset by the peer (ECONNRESET, EPIPE) during a request',
  timeout: 'no complete reply within --timeout (connect included)',
  closed: 'the peer closed the connection before the reply was complete',
  protocol: 'the reply is not valid FastCGI / CGI / HTTP',
  client: 'the bench itself ran out of something (file descriptors, local ports)',
  dropped: '--rate only: the request was due but all -c connections were busy; not sent',
  other: 'any other socket error',
};

export type ErrorCounts = Record<ErrorKind, number>;

export function emptyErrorCounts(): ErrorCounts {
  return { connect: 0, reset: 0, timeout: 0, closed: 0, protocol: 0, client: 0, dropped: 0, other: 0 };
}

/** The kind for a socket error; `connected` says whether the connection had been made. */
export function classifyErrno(err: NodeJS.ErrnoException, connected: boolean): ErrorKind {
  switch (err.code) {
    case 'ECONNREFUSED':
    case 'ENOENT':
    case 'EACCES':
    case 'EPERM':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ENOTSOCK':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAGAIN':
      return connected ? 'other' : 'connect';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'ECONNABORTED':
      return 'reset';
    case 'ETIMEDOUT':
      return 'timeout';
    case 'EMFILE':
    case 'ENFILE':
    case 'EADDRNOTAVAIL':
    case 'ENOBUFS':
    case 'ENOMEM':
      return 'client';
    default:
      return 'other';
  }
}
