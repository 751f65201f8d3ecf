#!/usr/bin/env node
// Writes fcgi-pm.8, a page per command (fcgi-pm-status.8 ...), fcgi-pm.yaml.5 and the
// bash, zsh and fish completions into DIR, from the compiled command line and key tables
// (src/cli/manual.ts). Used by scripts/build-deb.sh.
//   node scripts/gen-manual.mjs DIR [DATE]
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildProgram } from '../dist/src/cli/program.js';
import { commandPageName, renderBashCompletion, renderCommandManPage, renderConfigManPage, renderFishCompletion, renderHelpManPage, renderProgramManPage, renderZshCompletion } from '../dist/src/cli/manual.js';
import { packageVersion } from '../dist/src/version.js';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node scripts/gen-manual.mjs DIR [YYYY-MM-DD]');
  process.exit(2);
}
// A fixed date keeps the package reproducible; default: the day of the build.
const date = process.argv[3] ?? new Date().toISOString().slice(0, 10);
const version = packageVersion();
mkdirSync(dir, { recursive: true });
// Help is laid out for 80 columns whatever terminal runs the build.
process.stdout.columns = 80;
writeFileSync(join(dir, 'fcgi-pm.8'), renderProgramManPage(buildProgram(), version, date));
writeFileSync(join(dir, 'fcgi-pm.yaml.5'), renderConfigManPage(version, date));
for (const c of buildProgram().commands) writeFileSync(join(dir, `${commandPageName(c)}.8`), renderCommandManPage(c, version, date));
writeFileSync(join(dir, 'fcgi-pm.bash-completion'), renderBashCompletion(buildProgram()));
writeFileSync(join(dir, 'fcgi-pm.zsh-completion'), renderZshCompletion(buildProgram()));
writeFileSync(join(dir, 'fcgi-pm.fish-completion'), renderFishCompletion(buildProgram()));
// The WSGI adapter's page is its own --help (argparse), as the daemon's is commander's.
const wsgi = spawnSync('python3', [new URL('../bin/fcgi-pm-wsgi', import.meta.url).pathname, '--help'], { encoding: 'utf8', env: { ...process.env, COLUMNS: '80' } });
if (wsgi.status !== 0) {
  console.error(`fcgi-pm-wsgi --help failed: ${wsgi.stderr}`);
  process.exit(1);
}
writeFileSync(join(dir, 'fcgi-pm-wsgi.1'), renderHelpManPage('fcgi-pm-wsgi', 1, version, date, 'serve a WSGI application over FastCGI or SCGI for fcgi-pm', wsgi.stdout));
