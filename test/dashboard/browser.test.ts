// Dashboard acceptance in real headless Chromium (puppeteer-core, Debian's chromium):
// three daemons with spawned php-cgi pools, the first serving the dashboard with the two
// others as peers (control sockets), one of them stopped. Without the token every page
// and API call gets 401; after the login form the page shows each daemon and pool, a
// load run moves the req/s chart and the busy-worker count, the stopped daemon is down
// with its reason, warnings of the serving daemon and of a peer show in the panel; a max_children edit on two daemons that one of them refuses shows the
// error and writes nothing; a valid one is written (comments kept), reloaded, and is what
// `fcgi-pm status` of both says; a pool's workers are restarted from the page (at once; one by one on every daemon that has the pool), and drained. The screenshot goes to a temp dir (its path is printed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { runBin } from '../cli/helpers.js';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { trackPid, untrackPid, type Scope } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { canConnect, waitFor } from '../helpers/wait.js';

const CHROMIUM = '/usr/bin/chromium';
/** Page-side code runs in the browser; this file is compiled without the DOM library. */
declare const document: { querySelector(s: string): any; querySelectorAll(s: string): any[] & { length: number } };
/** Outside the checkout, kept after the run (overwritten by the next one) for docs/dashboard.png. */
const SHOT = join(tmpdir(), 'fcgi-pm-dashboard.png');
const TOKEN = 'dash-test-token-0123456789abcdef';

interface Node {
  daemon: Daemon;
  control: string;
  port: number;
}

async function startNode(scope: Scope, name: string, pool: string, extra = ''): Promise<Node> {
  const dir = makeTempDir(scope, `fpm-dash-${name}-`);
  const control = join(dir, 'control.sock');
  const port = await freePort();
  const text = `# Daemon ${name} of the dashboard test: these comments must survive an edit.
control_socket: ${control}
listen:
  - { protocol: http, address: "127.0.0.1:${port}", pool: www, document_root: ${JSON.stringify(PHP_FIXTURES)} }  # load arrives here
pools:
  www:
    command: ${JSON.stringify(phpCommand(dir, `dash-${name}`))}
    # Small on purpose.
${pool}
${extra}`;
  const daemon = await startDaemon(scope, text, { dir });
  return { daemon, control, port };
}

/** `clients` loops of GET /sleep.php until stopped. */
function load(port: number, clients: number): { stop(): Promise<void>; ok(): number } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
  let running = true;
  let ok = 0;
  const loop = async (): Promise<void> => {
    while (running) {
      const r = await httpRequest(`http://127.0.0.1:${port}/sleep.php?ms=150`, { agent }).catch(() => undefined);
      if (r?.status === 200) ok++;
    }
  };
  const loops = Array.from({ length: clients }, loop);
  return {
    ok: () => ok,
    stop: async () => {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

async function launch(scope: Scope): Promise<Browser> {
  const profile = makeTempDir(scope, 'fpm-dash-chrome-');
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`],
  });
  const pid = browser.process()?.pid;
  if (pid !== undefined) trackPid(pid);
  scope.after(async () => {
    await browser.close().catch(() => undefined);
    if (pid !== undefined) untrackPid(pid);
  });
  return browser;
}

/** [id, up, reason] of every daemon on the page. */
function daemonsOnPage(page: Page): Promise<Array<[string, string, string]>> {
  return page.$$eval('[data-daemon]', (els) => els.map((e) => [e.getAttribute('data-daemon') ?? '', e.getAttribute('data-up') ?? '', e.querySelector('.reason')?.textContent ?? ''] as [string, string, string]));
}

async function editOnPage(page: Page, value: string): Promise<void> {
  await page.$eval('#edit-result', (e) => (e.innerHTML = ''));
  const input = await page.waitForSelector('#edit-fields input[data-key="max_children"]');
  await input!.click({ clickCount: 3 });
  await input!.press('Backspace');
  await input!.type(value);
  await page.click('#edit-apply');
  await page.waitForFunction(() => document.querySelector('#edit-result [data-result]') !== null, { timeout: 60_000 });
}

async function statusMaxChildren(control: string): Promise<number | undefined> {
  const r = await runBin(['status', '--json', '--control', control]);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { pools: Array<{ name: string; maxChildren?: number }> }).pools.find((p) => p.name === 'www')?.maxChildren;
}

test('dashboard over three daemons in headless Chromium', { timeout: 170_000 }, async (t) => {
  const b = await startNode(t, 'b', '    pm: dynamic\n    max_children: 3\n    min_spare: 1\n    max_spare: 3');
  const c = await startNode(t, 'c', '    pm: ondemand\n    max_children: 2');
  await c.daemon.stop();
  const dport = await freePort();
  const dash = `dashboard:\n  address: "127.0.0.1:${dport}"\n  token: ${TOKEN}\n  sample_interval: 400ms\n  peers: [${b.control}, ${c.control}]  # the stopped one stays listed\n`;
  const a = await startNode(t, 'a', '    pm: ondemand\n    max_children: 3\n    idle_timeout: 30s', dash);
  await waitFor(() => canConnect({ port: dport, host: '127.0.0.1' }), { what: 'the dashboard port' });
  const base = `http://127.0.0.1:${dport}`;

  // Without the token (or with a wrong one), every page and API call is refused.
  for (const path of ['/', '/app.js', '/app.css', '/api/cluster', '/api/snapshot', '/api/events']) {
    assert.equal((await httpRequest(base + path)).status, 401, `GET ${path}`);
    assert.equal((await httpRequest(base + path, { headers: { authorization: 'Bearer wrong-token-wrong-token' } })).status, 401, `GET ${path} with a wrong token`);
  }
  for (const path of ['/api/edit', '/api/reload']) {
    const r = await httpRequest(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ targets: ['self'], pool: 'www', settings: { max_children: 9 } }) });
    assert.equal(r.status, 401, `POST ${path}`);
  }
  assert.equal((await httpRequest(base + '/api/cluster', { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200, 'the token opens the API');
  const aBefore = readFileSync(a.daemon.configPath, 'utf8');
  assert.match(aBefore, /max_children: 3/, 'nothing was changed by the refused calls');

  const browser = await launch(t);
  const page = await browser.newPage();
  await page.setViewport({ width: 1360, height: 1000 });
  const first = await page.goto(base + '/');
  assert.equal(first?.status(), 401, 'the page itself needs the login');
  await page.type('input[name=token]', TOKEN);
  const [after] = await Promise.all([page.waitForNavigation(), page.click('button')]);
  assert.equal(after?.status(), 200);

  // Each daemon and pool; the stopped one down with a reason.
  await page.waitForFunction((n) => document.querySelectorAll('[data-daemon]').length === n && document.querySelectorAll('[data-pool]').length === 2, { timeout: 20_000 }, 3);
  const shown = await daemonsOnPage(page);
  assert.deepEqual(shown.map(([id, up]) => [id, up]), [['self', 'true'], [b.control, 'true'], [c.control, 'false']]);
  assert.match(shown[2]![2], /no such socket|connection refused/);

  // Warnings of daemon a and of peer b (a script that does not exist) reach the panel.
  for (const n of [a, b]) assert.equal((await httpRequest(`http://127.0.0.1:${n.port}/missing.php`)).status, 404);
  await page.waitForFunction(
    (ids) => ids.every((id: string) => Array.from(document.querySelectorAll('#warnings li'), (li: { getAttribute(n: string): string; textContent: string }) => li.getAttribute('data-warning-daemon') === id && /ERR_SCRIPT_NOT_FOUND/.test(li.textContent)).includes(true)),
    { timeout: 20_000 },
    ['self', b.control],
  );

  // A load run on daemon a moves its req/s chart and busy-worker count.
  const poolSel = '[data-daemon="self"] [data-pool="www"]';
  const rpsBefore = await page.$eval(`${poolSel} svg.chart-rps`, (e) => Number(e.getAttribute('data-max')));
  assert.equal(rpsBefore, 0, 'no traffic yet');
  const run = load(a.port, 3);
  try {
    // The busy count is read where it was seen: the next update may already show 0 again.
    const seen = await page.waitForFunction(
      (sel) => {
        const busy = Number(document.querySelector(`${sel} .busy`)?.textContent);
        return Number(document.querySelector(`${sel} svg.chart-rps`)?.getAttribute('data-max')) > 0 && busy > 0 ? busy : false;
      },
      { timeout: 30_000, polling: 100 },
      poolSel,
    );
    const busy = (await seen.jsonValue()) as number;
    assert.ok(busy >= 1 && busy <= 3, `busy workers within max_children: ${busy}`);
    // A few points of load on the chart for the screenshot.
    await page.waitForFunction((sel) => Number(document.querySelector(`${sel} svg.chart-rps`)?.getAttribute('data-nonzero')) >= 5 && document.querySelectorAll(`${sel} table.workers tbody tr`).length > 0, { timeout: 20_000, polling: 100 }, poolSel);
    await page.screenshot({ path: SHOT, fullPage: true });
    t.diagnostic(`screenshot: ${SHOT}`);
  } finally {
    await run.stop();
  }
  assert.ok(run.ok() > 0);

  // max_children 2: fine for a (ondemand), refused for b (max_spare 3): nothing is written anywhere.
  const bBefore = readFileSync(b.daemon.configPath, 'utf8');
  await page.select('#edit-pool', 'www');
  const targets = await page.$$eval('#edit-targets input', (els) => els.map((e) => [(e as unknown as { value: string }).value, (e as unknown as { checked: boolean }).checked]));
  assert.deepEqual(targets, [['self', true], [b.control, true]]);
  await editOnPage(page, '2');
  const refused = await page.$eval('#edit-result', (e) => e.textContent ?? '');
  assert.match(refused, /Nothing was changed on any daemon/);
  assert.match(refused, new RegExp(`${b.daemon.configPath.replace(/[.]/g, '\\.')}:\\d+: pools\\.www\\.max_spare: must be ≤ max_children \\(2\\), got 3`));
  assert.equal(readFileSync(a.daemon.configPath, 'utf8'), aBefore, 'a unchanged');
  assert.equal(readFileSync(b.daemon.configPath, 'utf8'), bBefore, 'b unchanged');
  assert.equal(await statusMaxChildren(a.control), 3);

  // max_children 5 on both: written with comments kept, reloaded, visible in fcgi-pm status.
  await editOnPage(page, '5');
  const results = await page.$$eval('#edit-result [data-result]', (els) => els.map((e) => [e.getAttribute('data-result'), e.getAttribute('data-ok'), e.querySelector('.status')?.textContent]));
  assert.deepEqual(results, [['self', 'true', 'written and reloaded'], [b.control, 'true', 'written and reloaded']]);
  const diffs = await page.$$eval('#edit-result pre.diff', (els) => els.map((e) => e.textContent ?? ''));
  assert.equal(diffs.length, 2);
  for (const d of diffs) {
    assert.match(d, /^-\s+max_children: 3$/m, 'the diff shows the old line');
    assert.match(d, /^\+\s+max_children: 5$/m, 'and the new one');
  }
  for (const n of [a, b]) {
    const text = readFileSync(n.daemon.configPath, 'utf8');
    assert.match(text, /^# Daemon . of the dashboard test: these comments must survive an edit\.$/m);
    assert.match(text, /# load arrives here/);
    assert.match(text, /# Small on purpose\./);
    assert.match(text, /^    max_children: 5$/m);
    assert.equal(await statusMaxChildren(n.control), 5);
  }
  assert.match(readFileSync(a.daemon.configPath, 'utf8'), /# the stopped one stays listed/);
  await page.waitForFunction(() => Array.from(document.querySelectorAll('.max-children'), (e: { textContent: string }) => e.textContent).join() === '5,5', { timeout: 10_000 });

  // Restart b's workers from the page: fresh pids, the old worker gone, no reload of the file.
  const before = await workerPids(b.control);
  assert.ok(before.length >= 1, 'dynamic pool b keeps a spare worker');
  await page.$eval('#edit-result', (e) => (e.innerHTML = ''));
  await page.click(`[data-daemon="${b.control}"] button.restart[data-restart-pool="www"]`);
  await page.waitForFunction(() => document.querySelector('#edit-result [data-result]') !== null, { timeout: 60_000 });
  assert.equal(await page.$eval('#edit-result [data-result] .status', (e) => e.textContent), 'workers replaced');
  await waitFor(async () => {
    const now = await workerPids(b.control);
    return now.length >= 1 && now.every((p) => !before.includes(p));
  }, { timeout: 20_000, what: "b's workers replaced" });
  assert.equal(await statusMaxChildren(b.control), 5);

  // A rolling restart on every daemon that has the pool (self and b; c is down), each daemon's result shown.
  const beforeRolling = await workerPids(b.control);
  await page.$eval('#edit-result', (e) => (e.innerHTML = ''));
  await page.click(`[data-daemon="${b.control}"] .actions-all button[data-verb="rolling"]`);
  await page.waitForFunction(() => document.querySelectorAll('#edit-result [data-result]').length === 2, { timeout: 60_000 });
  const rolled = await page.$$eval('#edit-result [data-result]', (els) => els.map((e) => [e.getAttribute('data-result'), e.getAttribute('data-ok'), e.querySelector('.status')?.textContent]));
  assert.deepEqual(rolled.map((r) => [r[0], r[1]]), [['self', 'true'], [b.control, 'true']]);
  assert.match(String(rolled[1]![2]), /^\d+ worker\(s\) replaced one by one$/);
  assert.deepEqual((await workerPids(b.control)).filter((p) => beforeRolling.includes(p)), [], "b's workers replaced one by one");

  // Drain b alone: its workers are retired, the page says how many.
  await page.$eval('#edit-result', (e) => (e.innerHTML = ''));
  await page.click(`[data-daemon="${b.control}"] .pool-head > .actions > button[data-verb="drain"]`);
  await page.waitForFunction(() => document.querySelector('#edit-result [data-result]') !== null, { timeout: 60_000 });
  assert.match(await page.$eval('#edit-result [data-result] .status', (e) => e.textContent), /^[1-9]\d* worker\(s\) retired$/);
});

async function workerPids(control: string): Promise<number[]> {
  const r = await runBin(['status', '--json', '--control', control]);
  return (JSON.parse(r.stdout) as { pools: Array<{ workers: Array<{ pid: number }> }> }).pools[0]!.workers.map((w) => w.pid);
}
