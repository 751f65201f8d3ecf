/**
 * A stop without a successor (SIGTERM, SIGQUIT, fcgi-pm stop) under load: closing a
 * listener resets the connections still waiting in its accept queue, which nginx answers
 * 502. The stop first removes the Unix socket file (a new connection fails to connect,
 * and nginx tries its next server), then takes what waits in the queue, then closes.
 * Sixty-four clients opening a connection per request keep the queue full at the moment
 * of the stop; before this, several of their connections were reset after connecting.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { join } from 'node:path';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

test('a stop under load resets no connection that reached the accept queue: each is served, later ones never connect', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-stopq-');
  const sock = join(dir, 'front.sock');
  const d = await opsDaemon(t, {
    shutdown_timeout: '10s',
    listen: [{ protocol: 'http', address: `unix:${sock}`, pool: 'app', document_root: PHP_FIXTURES, mode: '0666' }],
    pools: { app: { command: phpCommand(dir, 'stopq'), pm: 'static', max_children: 2, queue_timeout: '20s' } },
  }, { dir });
  const outcomes = new Map<string, number>();
  const count = (k: string): void => void outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
  let stopping = false;
  let done = false;
  const once = (): Promise<void> =>
    new Promise((resolve) => {
      let connected = false;
      const req = http.request({ socketPath: sock, path: '/hello.php', agent: false, headers: { connection: 'close' } }, (res) => {
        res.resume();
        res.on('end', () => resolve(count(`status ${res.statusCode}`)));
        res.on('error', (e: NodeJS.ErrnoException) => resolve(count(`reset after connecting (${e.code})`)));
      });
      req.on('socket', (s) => s.once('connect', () => (connected = true)));
      req.on('error', (e: NodeJS.ErrnoException) => {
        if (connected) count(`reset after connecting (${e.code})`);
        else {
          count('never connected');
          if (stopping) done = true;
        }
        resolve();
      });
      req.end();
    });
  const client = async (): Promise<void> => {
    while (!done) await once();
  };
  const clients = Array.from({ length: 64 }, client);
  await waitFor(() => (outcomes.get('status 200') ?? 0) >= 300, { timeout: 20_000, what: '300 requests served before the stop' });
  stopping = true;
  const exit = await d.daemon.stop();
  done = true;
  await Promise.all(clients);
  const summary = JSON.stringify(Object.fromEntries(outcomes));
  assert.equal(exit.code, 0, summary);
  assert.deepEqual([...outcomes.keys()].filter((k) => k.startsWith('reset')), [], `connections reset by the stop: ${summary}`);
  assert.ok((outcomes.get('never connected') ?? 0) > 0, `the clients went on until the socket was gone: ${summary}`);
});
