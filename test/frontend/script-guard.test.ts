// The pure decisions behind "which files run" (script-guard.ts) and the HTTP listener's
// static files (http-static.ts), as tables; the gate's cache on a real temp dir.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { contentTypeOf, entityTag, hasDotSegment, isNotModified, parseRange } from '../../src/frontend/http-static.js';
import { ScriptGate } from '../../src/frontend/script-gate.js';
import { hasAllowedExtension, isInside, judgeFile, judgeName, runTarget } from '../../src/frontend/script-guard.js';
import type { ResolvedPath } from '../../src/frontend/script-path.js';
import type { ScriptRules } from '../../src/pool/types.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';

const PHP: ScriptRules = { extensions: ['.php', '.phar'], roots: [] };
const FORBIDDEN = ErrorCodes.SCRIPT_FORBIDDEN;
const NOT_FOUND = ErrorCodes.SCRIPT_NOT_FOUND;

describe('judgeName: what the name alone decides', () => {
  const cases: Array<[string | undefined, ScriptRules, string | undefined]> = [
    ['/srv/www/index.php', PHP, undefined],
    ['/srv/www/app.phar', PHP, undefined],
    ['/srv/www/uploads/image.jpg', PHP, FORBIDDEN],
    ['/srv/www/uploads/image.jpg/x.php', PHP, undefined], // passes the name; the file php would run is judged later
    ['/srv/www/page.php/', PHP, undefined], // lighttpd's broken-scriptfilename
    ['/srv/www/uploads/image.jpg/.php', PHP, FORBIDDEN], // no segment php could run is a script
    ['/srv/www/secret.txt', PHP, FORBIDDEN],
    ['/srv/www/.env', PHP, FORBIDDEN],
    ['/srv/www/.php', PHP, FORBIDDEN], // a dotfile, not a script
    ['/srv/www/x.php.jpg', PHP, FORBIDDEN],
    ['/srv/www/X.PHP', PHP, FORBIDDEN], // case-sensitive, as PHP-FPM
    ['/srv/www/php', PHP, FORBIDDEN],
    ['index.php', PHP, FORBIDDEN], // relative: php-cgi would resolve it against its cwd
    ['', PHP, NOT_FOUND],
    [undefined, PHP, NOT_FOUND],
    ['/srv/www/image.jpg', { extensions: [], roots: ['/srv/www'] }, undefined], // roots only: any name
  ];
  for (const [name, rules, code] of cases) {
    it(`${JSON.stringify(name)} with [${rules.extensions.join(' ')}] → ${code ?? 'allowed'}`, () => {
      assert.equal(judgeName(name, rules)?.code, code);
    });
  }
  it('refusals by name are 403, a missing name 404', () => {
    assert.equal(judgeName('/a/b.txt', PHP)?.status, 403);
    assert.equal(judgeName(undefined, PHP)?.status, 404);
  });
});

describe('runTarget: the file php-cgi would run (cgi.fix_pathinfo walk)', () => {
  const disk: Record<string, ResolvedPath> = {
    '/srv': { kind: 'dir', real: '/srv' },
    '/srv/www': { kind: 'dir', real: '/srv/www' },
    '/srv/www/index.php': { kind: 'file', real: '/srv/www/index.php' },
    '/srv/www/uploads': { kind: 'dir', real: '/srv/www/uploads' },
    '/srv/www/uploads/image.jpg': { kind: 'file', real: '/srv/www/uploads/image.jpg' },
    '/srv/www/dir.php': { kind: 'dir', real: '/srv/www/dir.php' },
  };
  const lookup = (p: string): ResolvedPath => disk[p] ?? { kind: 'none', real: undefined };
  const cases: Array<[string, string | undefined]> = [
    ['/srv/www/index.php', '/srv/www/index.php'],
    ['/srv/www/index.php/foo/bar', '/srv/www/index.php'], // nginx without fastcgi_split_path_info
    ['/srv/www/index.php/', '/srv/www/index.php'], // lighttpd broken-scriptfilename
    ['/srv/www/uploads/image.jpg/x.php', '/srv/www/uploads/image.jpg'], // then refused by extension
    ['/srv/www/dir.php', '/srv/www/dir.php'], // itself, a directory: refused as not a file
    ['/srv/www/missing.php', undefined],
    ['/srv/www/uploads/none/x.php', undefined], // an existing directory ends the walk
    ['/nowhere/x.php', undefined],
  ];
  for (const [name, want] of cases) {
    it(`${name} → ${want ?? 'nothing'}`, () => {
      const t = runTarget(name, lookup);
      assert.ok(!('missing' in t));
      assert.equal(t.file.kind === 'none' ? undefined : t.name, want);
    });
  }
  it('asks for one path at a time, longest first, and stops at what is not cached', () => {
    const asked: string[] = [];
    const t = runTarget('/srv/www/index.php/a/b', (p) => {
      asked.push(p);
      return p === '/srv/www/index.php/a/b' ? { kind: 'none', real: undefined } : undefined;
    });
    assert.deepEqual(t, { missing: '/srv/www/index.php/a' });
    assert.deepEqual(asked, ['/srv/www/index.php/a/b', '/srv/www/index.php/a']);
  });
});

describe('judgeFile: what the file system said about the file that would run', () => {
  const file = (real: string): ResolvedPath => ({ kind: 'file', real });
  const cases: Array<[string, ResolvedPath, string[][], string | undefined, number | undefined]> = [
    ['a file, no roots', file('/srv/www/index.php'), [], undefined, undefined],
    ['a walked-back image', file('/srv/www/uploads/image.jpg'), [], FORBIDDEN, 403],
    ['nothing there (ENOENT, or ENOTDIR for image.jpg/x.php)', { kind: 'none', real: undefined }, [], NOT_FOUND, 404],
    ['a directory', { kind: 'dir', real: '/srv/www/dir.php' }, [], FORBIDDEN, 403],
    ['a fifo or device', { kind: 'other', real: '/srv/www/pipe.php' }, [], FORBIDDEN, 403],
    ['inside the root', file('/srv/www/a/b.php'), [['/srv/www']], undefined, undefined],
    ['inside one of two roots', file('/opt/app/b.php'), [['/srv/www', '/opt/app']], undefined, undefined],
    ['outside (.. or symlink resolved)', file('/tmp/evil.php'), [['/srv/www']], FORBIDDEN, 403],
    ['a sibling sharing the prefix', file('/srv/www-old/a.php'), [['/srv/www']], FORBIDDEN, 403],
    ['in script_roots but not in document_root', file('/opt/app/b.php'), [['/opt/app'], ['/srv/www']], FORBIDDEN, 403],
    ['a root that does not exist contains nothing', file('/srv/www/a.php'), [[]], FORBIDDEN, 403],
    ['root "/"', file('/x.php'), [['/']], undefined, undefined],
  ];
  for (const [what, f, sets, code, status] of cases) {
    it(what, () => {
      const r = judgeFile(f.real ?? '/srv/www/x.php', f, PHP, sets);
      assert.equal(r?.code, code);
      assert.equal(r?.status, status);
    });
  }
});

describe('extension and root helpers', () => {
  it('hasAllowedExtension looks at the last segment only', () => {
    assert.equal(hasAllowedExtension('/a.php/b.jpg', ['.php']), false);
    assert.equal(hasAllowedExtension('/a.jpg/b.php', ['.php']), true);
    assert.equal(hasAllowedExtension('/a/.php', ['.php']), false);
    assert.equal(hasAllowedExtension('/a/x.phtml', ['.php', '.phtml']), true);
  });
  it('isInside needs a path below the root, not the root itself', () => {
    assert.equal(isInside('/srv/www', ['/srv/www']), false);
    assert.equal(isInside('/srv/www/', ['/srv/www']), false);
    assert.equal(isInside('/srv/www/x', ['/srv/www/']), true);
  });
});

describe('HTTP listener: dotfiles', () => {
  const cases: Array<[string, boolean]> = [
    ['/.env', true],
    ['/.git/config', true],
    ['/a/.htpasswd', true],
    ['/uploads/image.jpg/.php', true],
    ['/.well-known/acme-challenge/abc', false],
    ['/.well-known/.hidden', true],
    ['/a/.well-known/x', true],
    ['/index.php', false],
    ['/a.b/c.d', false],
  ];
  for (const [path, refused] of cases) it(`${path} → ${refused ? 'refused' : 'served'}`, () => assert.equal(hasDotSegment(path), refused));
});

describe('HTTP listener: static file answers', () => {
  it('Content-Type by extension, case-insensitive, octet-stream when unknown', () => {
    assert.equal(contentTypeOf('/s/style.CSS'), 'text/css; charset=utf-8');
    assert.equal(contentTypeOf('/i/a.png'), 'image/png');
    assert.equal(contentTypeOf('/i/a.jpeg'), 'image/jpeg');
    assert.equal(contentTypeOf('/a/README'), 'application/octet-stream');
    assert.equal(contentTypeOf('/a.d/noext'), 'application/octet-stream');
    assert.equal(contentTypeOf('/a/.bashrc'), 'application/octet-stream');
  });

  const st = { mtimeMs: 1_700_000_000_500, size: 1234 };
  const etag = entityTag(st);
  const lastModified = new Date(1_700_000_000_000).toUTCString();
  it('ETag from mtime seconds and size', () => assert.equal(etag, `"${(1_700_000_000).toString(16)}-4d2"`));
  const conditional: Array<[string, string | undefined, string | undefined, boolean]> = [
    ['matching ETag', etag, undefined, true],
    ['weak form of it', `W/${etag}`, undefined, true],
    ['in a list', `"x", ${etag}`, undefined, true],
    ['*', '*', undefined, true],
    ['other ETag (wins over a matching date)', '"other"', lastModified, false],
    ['same Last-Modified', undefined, lastModified, true],
    ['later date', undefined, new Date(1_800_000_000_000).toUTCString(), true],
    ['earlier date', undefined, new Date(1_600_000_000_000).toUTCString(), false],
    ['bad date', undefined, 'yesterday', false],
    ['no validators', undefined, undefined, false],
  ];
  for (const [what, inm, ims, expected] of conditional) {
    it(`304 when ${what}: ${expected}`, () => assert.equal(isNotModified(inm, ims, etag, st.mtimeMs), expected));
  }

  const ranges: Array<[string | undefined, ReturnType<typeof parseRange>]> = [
    ['bytes=0-9', { start: 0, end: 9 }],
    ['bytes=10-', { start: 10, end: 99 }],
    ['bytes=-10', { start: 90, end: 99 }],
    ['bytes=-500', { start: 0, end: 99 }],
    ['bytes=50-5000', { start: 50, end: 99 }],
    ['bytes=100-', 'unsatisfiable'],
    ['bytes=-0', 'unsatisfiable'],
    ['bytes=9-3', undefined],
    ['bytes=0-1,5-6', undefined], // several ranges: the whole file
    ['items=0-1', undefined],
    ['bytes=-', undefined],
    [undefined, undefined],
  ];
  for (const [header, expected] of ranges) {
    it(`Range ${header} of 100 bytes → ${JSON.stringify(expected)}`, () => assert.deepEqual(parseRange(header, 100), expected));
  }
});

describe('ScriptGate on a real directory', () => {
  const scope = new Cleanup();
  after(() => scope.run());
  const root = makeTempDir(scope, 'fpm-gate-');
  const out = makeTempDir(scope, 'fpm-gate-out-');
  mkdirSync(join(root, 'sub'));
  writeFileSync(join(root, 'sub', 'a.php'), '');
  writeFileSync(join(out, 'b.php'), '');
  symlinkSync(join(out, 'b.php'), join(root, 'b.php'));
  const rules = { extensions: ['.php'], roots: [root] };

  it('asks the disk once, then answers from the cache synchronously', async () => {
    const gate = new ScriptGate(undefined);
    const first = gate.check(join(root, 'sub', 'a.php'), rules);
    assert.ok(first instanceof Promise);
    assert.equal(await first, undefined);
    assert.equal(gate.check(join(root, 'sub', 'a.php'), rules), undefined, 'cached: no promise');
  });

  it('refuses .. and symlinks out of script_roots, and out of document_root', async () => {
    const gate = new ScriptGate(undefined);
    assert.equal((await gate.check(`${root}/../${out.split('/').pop()}/b.php`, rules))?.code, FORBIDDEN);
    assert.equal((await gate.check(join(root, 'b.php'), rules))?.code, FORBIDDEN);
    assert.equal(await gate.check(join(root, 'sub', 'a.php', 'x.php'), rules), undefined, 'a.php runs with PATH_INFO /x.php');
    assert.equal((await gate.check(join(root, 'sub', 'none.php', 'x.php'), rules))?.code, NOT_FOUND);
    const http = new ScriptGate(join(root, 'sub'));
    const noRoots: ScriptRules = { extensions: ['.php'], roots: [] };
    assert.equal(await http.check(join(root, 'sub', 'a.php'), noRoots), undefined);
    assert.equal((await http.check(join(out, 'b.php'), noRoots))?.code, FORBIDDEN);
  });
});
