#!/usr/bin/env bash
# Installs the Debian packages the test suite drives for real, only when missing.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have php-cgi || need+=(php-cgi)
php-cgi -m 2>/dev/null | grep -qi '^pdo_sqlite$' || need+=(php-sqlite3)
have nginx || need+=(nginx)
have lighttpd || need+=(lighttpd)
have spawn-fcgi || need+=(spawn-fcgi)
/usr/bin/python3 -c 'import django' >/dev/null 2>&1 || need+=(python3-django)
# Front ends of examples/frontends/ (the tests run their own instances on loopback).
[ -x /usr/sbin/apache2 ] || need+=(apache2)
[ -x /usr/sbin/haproxy ] || need+=(haproxy)
# vhosts: better-sqlite3 builds from source at npm install (node-gyp: make, g++, python3),
# and so does native/direct-socket.c (cc and the nodejs package's /usr/include/node);
# sqlite3 to look into a sites table by hand; the tests start their own PostgreSQL.
{ have make && have g++ && have python3; } || need+=(build-essential python3)
have sqlite3 || need+=(sqlite3)
# examples/authorizer/token-authorizer.c is built by its test against libfcgi.
[ -e /usr/include/fcgiapp.h ] || need+=(libfcgi-dev)
# bench/budget.ts --short after the tests: wrk loads nginx → fcgi-pm beside nginx → php-fpm.
have wrk || need+=(wrk)
ls /usr/sbin/php-fpm* >/dev/null 2>&1 || need+=(php-fpm)
have promtool || need+=(prometheus)  # `promtool check metrics` on the Prometheus pages
have ss || need+=(iproute2)      # the backlog test reads the listen queue with ss
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# Packages (test/package): scripts/build-deb.sh (dpkg-deb), lintian, the installed units
# checked with systemd-analyze, the man pages found with man -w.
have lintian || need+=(lintian)
# build-deb.sh builds the addons with dpkg-buildflags, strips them and finds their Depends with dpkg-shlibdeps.
{ have dpkg-buildflags && have dpkg-shlibdeps; } || need+=(dpkg-dev)
have strip || need+=(binutils)
have systemd-analyze || need+=(systemd)
have man || need+=(man-db)
# The dashboard's browser test (puppeteer-core drives it; it downloads no browser).
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  # Keep Debian from starting the packaged services (nginx, lighttpd, apache2 and
  # haproxy would take port 80 and more): invoke-rc.d obeys policy-rc.d's "101".
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 755 /usr/sbin/policy-rc.d
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Should a packaged server run anyway (installed earlier, or started at boot), stop it:
# the tests never use the system services.
for pidfile in /run/nginx.pid /run/lighttpd.pid /run/apache2/apache2.pid /run/haproxy.pid; do
  if [ -f "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
done
