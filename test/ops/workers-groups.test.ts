// `fcgi-pm workers` for a php-cgi group (group_size 4): the parent's line with its seats,
// then each child with its pid (the daemon's grandchildren in /proc) and memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort } from '../helpers/ports.js';
import { PHP_FIXTURES, PHP_FLAGS } from '../helpers/paths.js';
import { listProcesses } from '../helpers/proc.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

test('workers lists a group\'s children: pid, state, memory', { timeout: 60_000 }, async (t) => {
  const port = await freePort();
  const d = await opsDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES }],
    pools: { php: { command: ['php-cgi', ...PHP_FLAGS, '-d', 'error_log=/dev/null/workers-groups-marker'], pm: 'static', max_children: 4, group_size: 4 } },
  });
  // The parent and its 4 children, from /proc.
  let parent = 0;
  let kids: number[] = [];
  await waitFor(() => {
    const [p] = d.daemon.descendants('workers-groups-marker').filter((pid) => listProcesses().find((x) => x.pid === pid)?.ppid === d.daemon.pid);
    if (p === undefined) return false;
    kids = listProcesses().filter((x) => x.ppid === p && x.state !== 'Z').map((x) => x.pid).sort((a, b) => a - b);
    parent = p;
    return kids.length === 4;
  }, { timeout: 15_000, what: 'a php-cgi parent with 4 children' });
  // Status measures the children on its memory sampling; wait until it lists all four.
  await waitFor(async () => {
    const j = JSON.parse((await d.ctl(['workers', '--json'])).stdout) as Array<{ children?: Array<{ pid: number }> }>;
    return j[0]?.children?.length === 4;
  }, { timeout: 15_000, what: 'the status snapshot to know the 4 children' });

  const r = await d.ctl(['workers']);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  const parentLine = lines.find((l) => l.split(/\s+/)[1] === String(parent));
  assert.ok(parentLine, r.stdout);
  assert.match(parentLine!, /\bidle 0\/4\b/, 'the group\'s seats on its line');
  for (const kid of kids) {
    const line = lines.find((l) => l.includes(`└ ${kid} `));
    assert.ok(line, `child ${kid} listed:\n${r.stdout}`);
    assert.match(line!, new RegExp(`child of ${parent}\\s+-\\s+\\d+(\\.\\d+)?[KMG]iB`), `child ${kid}: state and memory:\n${r.stdout}`);
  }
});
