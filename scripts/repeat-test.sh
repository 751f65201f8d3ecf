#!/bin/sh
# Runs one compiled test file N times in a row and stops at the first failure:
# a loop for hunting flaky tests on a loaded machine, not part of CI.
#   scripts/repeat-test.sh dist/test/integration/backend-errors.test.js 50 [name pattern]
set -u
file=$1
runs=${2:-50}
pattern=${3:-}
i=0
while [ "$i" -lt "$runs" ]; do
  i=$((i + 1))
  if [ -n "$pattern" ]; then
    out=$(node --test --test-timeout=180000 --test-name-pattern="$pattern" "$file" 2>&1)
  else
    out=$(node --test --test-timeout=180000 "$file" 2>&1)
  fi
  if [ $? -ne 0 ]; then
    echo "$out" | grep -E -A80 '^not ok' | head -120
    echo "run $i of $runs FAILED ($(cat /proc/loadavg | cut -d' ' -f1-3) load)"
    exit 1
  fi
  echo "run $i of $runs passed (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
echo "$runs of $runs passed"
