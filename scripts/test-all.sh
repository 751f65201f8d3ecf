#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine with Node 20, then runs them all.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
npm ci --no-audit --no-fund
npm test
