#!/usr/bin/env bash
# Side-by-side benchmark: nginx → fcgi-pm → php-cgi against the floor (nginx → a minimal
# relay with kept-alive php-cgi, bench/relay-floor.ts), nginx → php-fpm (static),
# nginx → spawn-fcgi php-cgi and fcgi-pm's own HTTP listener; then idle connections,
# overload at twice capacity, and cold start. See bench/compare.ts for what runs.
#
#   bench/compare.sh --quick                 # a short run (a few minutes)
#   bench/compare.sh --out /tmp/run.md       # the full run, markdown table also to a file
#   bench/compare.sh --floor                 # fcgi-pm, floor, php-fpm; 100 B and 8,750 B pages,
#                                            # 2 workers, c=10, 3 rounds of 5 s (about 2 minutes)
#   options: --rounds N --seconds S --workers 2,4 --concurrency 10,50 --json FILE
#            --pages p100,p8750,sleep50 --stacks fcgipm,floor,fpm,spawn,http,fcgipm-nk --only throughput,cold
#
# Installs php-fpm, spawn-fcgi, wrk, nginx, php-cgi from Debian when missing (they are
# only ever run with their own configs in a temp dir; the system services stay off).
set -euo pipefail
cd "$(dirname "$0")/.."

have() { command -v "$1" >/dev/null 2>&1; }
need=()
have php-cgi || need+=(php-cgi)
have nginx || [ -x /usr/sbin/nginx ] || need+=(nginx)
have spawn-fcgi || need+=(spawn-fcgi)
have wrk || need+=(wrk)
ls /usr/sbin/php-fpm* >/dev/null 2>&1 || need+=(php-fpm)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Debian may start the packaged services; this benchmark runs its own instances.
  for f in /run/php/php*-fpm.pid /run/nginx.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
fi

[ -d node_modules ] || npm install --no-audit --no-fund >/dev/null
npx tsc -p . >/dev/null || true   # emits even when someone else's file has a type error
[ -f dist/bench/compare.js ] || { echo "build failed: dist/bench/compare.js missing" >&2; exit 1; }

# --floor's settings go last: compare.js takes the first of a repeated option, so
# "--floor --rounds 5" runs 5 rounds.
args=()
floor=()
for a in "$@"; do
  if [ "$a" = "--floor" ]; then
    floor=(--quick --rounds 3 --seconds 5 --workers 2 --concurrency 10 --pages p100,p8750 --stacks fcgipm,floor,fpm --only throughput)
  else
    args+=("$a")
  fi
done
args+=("${floor[@]}")
node dist/bench/compare.js "${args[@]}" &
pid=$!
# compare.js stops everything it started, by pid, when it ends or gets SIGTERM/SIGINT;
# on Ctrl-C or kill we pass the signal on and wait for that cleanup.
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
set +e
wait "$pid"; status=$?
if [ "$status" -gt 128 ] && kill -0 "$pid" 2>/dev/null; then wait "$pid"; status=$?; fi
exit "$status"
