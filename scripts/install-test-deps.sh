#!/usr/bin/env bash
# Installs the Debian packages the test suite drives for real, only when missing.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have php-cgi || need+=(php-cgi)
php -m 2>/dev/null | grep -qi '^pdo_sqlite$' || need+=(php-sqlite3)
have nginx || need+=(nginx)
have lighttpd || need+=(lighttpd)
have spawn-fcgi || need+=(spawn-fcgi)
/usr/bin/python3 -c 'import django' >/dev/null 2>&1 || need+=(python3-django)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian starts the packaged servers on install; the tests run their own on loopback.
for svc in nginx lighttpd; do
  if [ -f "/run/$svc.pid" ]; then kill "$(cat "/run/$svc.pid")" 2>/dev/null || true; fi
done
