#!/bin/sh
# Builds fcgi-pm_VERSION_ARCH.deb with dpkg-deb from the npm package (so the .deb holds
# exactly what `npm pack` ships, with its bundled production node_modules: no compiler,
# no network at install), and the native addons (native/*.c: accept: direct's shared
# socket, the upgrade's exec in place) built here with dpkg-buildflags, so dpkg owns
# them and the package is for this machine's architecture. Works from a fresh clone: it
# says which Debian packages are missing (node 20 and npm, a C compiler, Node's headers,
# dpkg-dev, binutils; --install-deps installs them with apt-get), and runs `npm ci` when
# the checkout has no node_modules yet (TypeScript builds dist/ for the tarball).
#
#   scripts/build-deb.sh [--tarball fcgi-pm-VERSION.tgz] [--out DIR] [--install-deps]
#
# Without --tarball, `npm pack` makes one (its prepack does a clean build). The .deb goes
# to DIR, by default the checkout's parent directory (as dpkg-buildpackage does), never
# into the checkout. Prints the path of the .deb. Layout:
#   /usr/lib/fcgi-pm/                 the npm package (bin/, dist/, node_modules/, docs/, examples/)
#                                     and native/build/*.node, the addons built for it
#   /usr/bin/fcgi-pm, fcgi-pm-wsgi    symlinks into it
#   /etc/fcgi-pm/fcgi-pm.yaml         conffile: examples/systemd/fcgi-pm.yaml (passes `fcgi-pm check`)
#   /lib/systemd/system/              fcgi-pm.service, fcgi-pm.socket (examples/systemd/)
#   /etc/logrotate.d/fcgi-pm          conffile: examples/systemd/logrotate (runs reopen-logs)
#   /etc/init.d/fcgi-pm               conffile: the LSB init script, where systemd does not run
#   /etc/sv/fcgi-pm/                  conffiles: a runit service (run, log/run), not enabled
#   /usr/share/man/man8/fcgi-pm.8.gz, fcgi-pm-COMMAND.8.gz (one per command),
#   man5/fcgi-pm.yaml.5.gz, bash, zsh and fish completion:
#                                     generated from the command line and the key table
#                                     (scripts/gen-manual.mjs)
#   /usr/share/doc/fcgi-pm/           copyright, changelog
# lintian: run `lintian fcgi-pm_*.deb`; packaging/debian/lintian-overrides says why each
# remaining tag is expected.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tarball=
out=$(dirname "$root")
install_deps=
while [ $# -gt 0 ]; do
    case $1 in
        --tarball) tarball=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --install-deps) install_deps=1; shift ;;
        *) echo "usage: $0 [--tarball FILE] [--out DIR] [--install-deps]" >&2; exit 2 ;;
    esac
done

# What the build runs, by the Debian package that has it.
missing=
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
need node nodejs
need npm npm
need cc gcc
need dpkg-deb dpkg
need dpkg-buildflags dpkg-dev
need dpkg-shlibdeps dpkg-dev
need strip binutils
headers=
for d in "$(dirname "$(command -v node 2>/dev/null || echo /usr/bin/node)")/../include/node" /usr/include/node /usr/local/include/node; do
    [ -f "$d/node_api.h" ] && headers=$d && break
done
[ -n "$headers" ] || missing="$missing nodejs"
if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
    echo "build-deb: node $(node --version) is too old: fcgi-pm needs Node.js 20 or later (Debian 12 ships 18: use NodeSource's nodejs 20, see README.md \"Install\")" >&2
    exit 1
fi
missing=$(printf '%s\n' $missing | sort -u | tr '\n' ' ' | sed 's/ *$//')
if [ -n "$missing" ]; then
    if [ -n "$install_deps" ]; then
        echo "build-deb: installing $missing" >&2
        apt-get install -y --no-install-recommends $missing >&2
    else
        echo "build-deb: missing Debian packages: $missing" >&2
        echo "  install them with: apt-get install --no-install-recommends $missing   (or run $0 --install-deps)" >&2
        [ -z "$headers" ] && echo "  (Node's headers, include/node/node_api.h, come with the nodejs package; NodeSource's has them too)" >&2
        exit 1
    fi
fi
version=$(node -p "require('$root/package.json').version")
# npm pack builds dist/ with TypeScript (prepack) and bundles the runtime dependencies
# from node_modules: a fresh clone needs them first. No optional parts (better-sqlite3,
# pg: built from source, and the package does not carry them) and no install scripts.
if [ -z "$tarball" ] && [ ! -x "$root/node_modules/typescript/bin/tsc" ]; then
    echo "build-deb: $root/node_modules is missing: npm ci (once)" >&2
    (cd "$root" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund >&2)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$tarball" ]; then
    (cd "$root" && npm pack --silent --pack-destination "$work" >/dev/null)
    tarball=$work/fcgi-pm-$version.tgz
fi
stage=$work/stage
lib=$stage/usr/lib/fcgi-pm
deb=$root/packaging/debian
mkdir -p "$lib" "$stage/usr/bin" "$stage/DEBIAN" "$stage/etc/fcgi-pm" "$stage/etc/logrotate.d" \
    "$stage/lib/systemd/system" "$stage/usr/share/man/man8" "$stage/usr/share/man/man5" \
    "$stage/usr/share/bash-completion/completions" "$stage/usr/share/doc/fcgi-pm" \
    "$stage/usr/share/lintian/overrides" "$stage/var/log/fcgi-pm"
tar -xzf "$tarball" -C "$lib" --strip-components=1 --no-same-owner
ln -s ../lib/fcgi-pm/bin/fcgi-pm "$stage/usr/bin/fcgi-pm"
ln -s ../lib/fcgi-pm/bin/fcgi-pm-wsgi "$stage/usr/bin/fcgi-pm-wsgi"
# Only what runs: the bundled modules' own tests and benchmarks go, their licenses stay.
find "$lib/node_modules" -depth -type d \( -name test -o -name tests -o -name benchmarks -o -name '.?*' \) -exec rm -rf {} +
find "$lib/node_modules" \( -name '.*' -o -name '*.html' -o -name '*.ts' \) -type f -delete
find "$lib" -name '*.map' -delete
# The addons, built where they are loaded from; a direct pool without them runs in fallback.
CPPFLAGS=$(dpkg-buildflags --get CPPFLAGS) CFLAGS=$(dpkg-buildflags --get CFLAGS) LDFLAGS=$(dpkg-buildflags --get LDFLAGS) \
    node "$lib/scripts/build-native.mjs" >&2
if [ ! -f "$lib/native/build/direct-socket.node" ]; then
    echo "build-deb: native/direct-socket.c did not build: a C compiler and Node's headers (/usr/include/node) are needed" >&2
    exit 1
fi
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$lib"/native/build/*.node
arch=$(dpkg --print-architecture)
# What the addons link against (libc), as dpkg-shlibdeps finds it from the files themselves.
mkdir -p "$work/shlibs/debian"
printf 'Source: fcgi-pm\n\nPackage: fcgi-pm\nArchitecture: any\n' >"$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$lib"/native/build/*.node | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "build-deb: dpkg-shlibdeps found no dependency for the addons" >&2; exit 1; }
cp "$root/examples/systemd/fcgi-pm.yaml" "$stage/etc/fcgi-pm/fcgi-pm.yaml"
cp "$root/examples/systemd/logrotate" "$stage/etc/logrotate.d/fcgi-pm"
cp "$root/examples/systemd/fcgi-pm.service" "$root/examples/systemd/fcgi-pm.socket" "$stage/lib/systemd/system/"
# Without systemd: the LSB init script, and a runit service to link into /etc/service.
mkdir -p "$stage/etc/init.d" "$stage/etc/sv/fcgi-pm/log"
cp "$deb/init.d" "$stage/etc/init.d/fcgi-pm"
cp "$root/examples/runit/run" "$stage/etc/sv/fcgi-pm/run"
cp "$root/examples/runit/log/run" "$stage/etc/sv/fcgi-pm/log/run"
node "$lib/scripts/gen-manual.mjs" "$work/man" "$(date -u -r "$root/package.json" +%Y-%m-%d)"
for page in "$work"/man/*.8; do gzip -9n -c "$page" >"$stage/usr/share/man/man8/$(basename "$page").gz"; done
gzip -9n -c "$work/man/fcgi-pm.yaml.5" >"$stage/usr/share/man/man5/fcgi-pm.yaml.5.gz"
mkdir -p "$stage/usr/share/man/man1"
gzip -9n -c "$work/man/fcgi-pm-wsgi.1" >"$stage/usr/share/man/man1/fcgi-pm-wsgi.1.gz"
cp "$work/man/fcgi-pm.bash-completion" "$stage/usr/share/bash-completion/completions/fcgi-pm"
mkdir -p "$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d"
cp "$work/man/fcgi-pm.zsh-completion" "$stage/usr/share/zsh/vendor-completions/_fcgi-pm"
cp "$work/man/fcgi-pm.fish-completion" "$stage/usr/share/fish/vendor_completions.d/fcgi-pm.fish"
cp "$deb/copyright" "$stage/usr/share/doc/fcgi-pm/copyright"
gzip -9n -c "$root/CHANGELOG.md" >"$stage/usr/share/doc/fcgi-pm/changelog.gz"
printf 'fcgi-pm (%s) unstable; urgency=medium\n\n  * Built from the fcgi-pm repository (scripts/build-deb.sh).\n\n -- fcgi-pm authors <fcgi-pm@users.noreply.github.com>  %s\n' \
    "$version" "$(date -u -R -r "$root/package.json")" | gzip -9n >"$stage/usr/share/doc/fcgi-pm/changelog.Debian.gz"
cp "$deb/lintian-overrides" "$stage/usr/share/lintian/overrides/fcgi-pm"
for s in postinst prerm; do cp "$deb/$s" "$stage/DEBIAN/$s"; done
# The packaged config's opcache cache dir, as the daemon derives it (src/config/opcache-path.ts).
cache=$(cd "$lib" && node --input-type=module -e "import { opcacheRoot } from './dist/src/config/opcache-path.js'; process.stdout.write(String(opcacheRoot({ source: '/etc/fcgi-pm/fcgi-pm.yaml' }, 0)))")
case $cache in /var/cache/fcgi-pm/?*) ;; *) echo "unexpected opcache dir: $cache" >&2; exit 1 ;; esac
sed "s#@CACHE_DIR@#$cache#g" "$deb/postrm" >"$stage/DEBIAN/postrm"
printf '%s\n' /etc/fcgi-pm/fcgi-pm.yaml /etc/logrotate.d/fcgi-pm /etc/init.d/fcgi-pm /etc/sv/fcgi-pm/run /etc/sv/fcgi-pm/log/run >"$stage/DEBIAN/conffiles"
# Modes as Debian wants them: directories and scripts (#!) 0755, everything else 0644.
find "$stage" -type d -exec chmod 0755 {} +
find "$stage" -type f -exec chmod 0644 {} +
find "$lib" -path "$lib/examples" -prune -o -type f -exec sh -c 'for f; do [ "$(head -c 2 "$f")" = "#!" ] && chmod 0755 "$f"; done; true' sh {} +
chmod 0755 "$lib/bin/fcgi-pm" "$lib/bin/fcgi-pm-wsgi" "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm" \
    "$stage/etc/init.d/fcgi-pm" "$stage/etc/sv/fcgi-pm/run" "$stage/etc/sv/fcgi-pm/log/run"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@SIZE@/$size/" -e "s/@ARCH@/$arch/" -e "s/@SHLIBS@/$shlibs/" "$deb/control.in" >"$stage/DEBIAN/control"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums)
mkdir -p "$out"
file=$out/fcgi-pm_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$file" >/dev/null
echo "$file"
