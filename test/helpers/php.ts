/**
 * An external php-cgi FastCGI backend started by the test: `php-cgi -b SOCKET`, one
 * process (PHP_FCGI_CHILDREN=0), no request limit unless asked, stopped by pid.
 */
import { ManagedChild } from './child.js';
import { PHP_CGI, PHP_FIXTURES, PHP_FLAGS } from './paths.js';
import type { Scope } from './scope.js';
import { isListening, targetOf, WaitAborted, waitFor } from './wait.js';

export interface PhpCgi {
  pid: number;
  /** As given: "/dir/php.sock" or "127.0.0.1:PORT". */
  address: string;
  child: ManagedChild;
  stop(): Promise<void>;
}

export async function startPhpCgi(
  scope: Scope,
  address: string,
  opts: { env?: Record<string, string>; flags?: string[] } = {},
): Promise<PhpCgi> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    PHP_FCGI_CHILDREN: '0',
    // php-cgi exits after this many requests; 0 = never (tests pass a number to test that).
    PHP_FCGI_MAX_REQUESTS: '0',
    ...opts.env,
  };
  const child = new ManagedChild('php-cgi', PHP_CGI, ['-b', address, ...PHP_FLAGS, ...(opts.flags ?? [])], {
    env,
    cwd: PHP_FIXTURES,
  });
  const stop = async (): Promise<void> => {
    await child.stop(3000);
  };
  scope.after(stop);
  await waitFor(
    async () => {
      if (!child.running) throw new WaitAborted(`php-cgi exited ${JSON.stringify(child.exit)}: ${child.stderr}`);
      return isListening(targetOf(address));
    },
    { timeout: 10_000, what: `php-cgi on ${address}` },
  );
  return { pid: child.pid, address, child, stop };
}
