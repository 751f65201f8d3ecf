// A reload commits while a request's script check waits for the disk: the request must
// reach the pool now in service, not the replaced one (which is stopping and answers 503).
// The pools are stand-ins that record what they get; the script check is the real gate on a
// real file, its first look-up asynchronous.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FrontendEnv } from '../../src/frontend/env.js';
import { routeExchange } from '../../src/frontend/dispatch.js';
import { ScriptGate } from '../../src/frontend/script-gate.js';
import type { Exchange } from '../../src/protocol/exchange.js';
import type { Pool } from '../../src/pool/types.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

it('a pool replaced while the script check awaited I/O: the request goes to its successor', async () => {
  const scope = new Cleanup();
  try {
    const dir = makeTempDir(scope);
    const script = join(dir, 'pid.php');
    writeFileSync(script, '<?php echo getmypid();');
    const got: string[] = [];
    const pool = (gen: string): Pool => ({ name: 'a', scriptRules: { extensions: ['.php'], roots: [] }, dispatch: () => got.push(gen) }) as unknown as Pool;
    const old = pool('old');
    const fresh = pool('new');
    let live = old;
    const env = {
      cfg: { protocol: 'fastcgi', pool: 'a' },
      ctx: { getPool: (name: string) => (name === 'a' ? live : undefined) },
      scripts: new ScriptGate(undefined),
    } as unknown as FrontendEnv;
    const ex = { finished: false, params: new Map([['SCRIPT_FILENAME', script]]) } as unknown as Exchange;
    routeExchange(env, ex);
    assert.deepEqual(got, [], 'the first look-up of the script is asynchronous');
    live = fresh; // the reload's commit, synchronous, while the stat is pending
    await waitFor(() => got.length > 0, { timeout: 5000, what: 'the request dispatched' });
    assert.deepEqual(got, ['new']);
  } finally {
    await scope.run();
  }
});
