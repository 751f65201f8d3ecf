#!/usr/bin/env node
// prepack: a clean build of dist/ so the tarball holds no compiled file whose source is gone.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';

const root = new URL('..', import.meta.url);
rmSync(new URL('dist/', root), { recursive: true, force: true });
execFileSync(process.execPath, [new URL('node_modules/typescript/bin/tsc', root).pathname, '-p', '.'], { cwd: root, stdio: 'inherit' });
