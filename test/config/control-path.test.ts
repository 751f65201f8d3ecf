// The default control socket path, as the daemon and the CLI both derive it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { controlSocketName, controlSocketPath, defaultControlSocket } from '../../src/config/control-path.js';
import { tempDir } from './helpers.js';

test('one name per config file, by its real path; control.sock for runtime_dir and the quick form', (t) => {
  const dir = tempDir(t);
  const a = join(dir, 'site.yaml');
  const b = join(dir, 'other', '..', 'site-b.yml');
  writeFileSync(a, '');
  writeFileSync(join(dir, 'site-b.yml'), '');
  symlinkSync(a, join(dir, 'link.yaml'));
  assert.match(controlSocketName(a), /^site-[0-9a-f]{10}\.sock$/);
  assert.match(controlSocketName(b), /^site-b-[0-9a-f]{10}\.sock$/);
  assert.notEqual(controlSocketName(a), controlSocketName(join(dir, 'site-b.yml')));
  // A symlink to the file is the same config.
  assert.equal(controlSocketName(join(dir, 'link.yaml')), controlSocketName(a));
  assert.equal(controlSocketName('<command line>'), 'control.sock');
  assert.equal(controlSocketName(undefined), 'control.sock');

  assert.equal(defaultControlSocket({ source: a }, {}, 0), join('/run/fcgi-pm', controlSocketName(a)));
  assert.equal(defaultControlSocket({ source: a }, { XDG_RUNTIME_DIR: '/run/user/1000' }, 1000), join('/run/user/1000/fcgi-pm', controlSocketName(a)));
  assert.equal(defaultControlSocket({ source: '<command line>' }, {}, 0), '/run/fcgi-pm/control.sock');
  assert.equal(controlSocketPath({ source: a, runtimeDir: '/run/x' }), '/run/x/control.sock');
  assert.equal(controlSocketPath({ source: a, controlSocket: '/tmp/c.sock' }), '/tmp/c.sock');
  assert.equal(controlSocketPath({ source: a, controlSocket: false }), undefined);
});
