#!/bin/bash
# issue 29: the test command with its tiers one after another (A: scripts/test.sh, main)
# against the root tier with mypy, the fast and the live tiers beside it (B: main's tree
# with 0313277's scripts/test.sh), CI=true as root, one hold of /work/host.lock, order B A.
cd /work/main
renice -n 0 -p $$ >/dev/null
export CI=true
out=/tmp/ab-tiers; mkdir -p $out
run() { # label script
  echo "== $1 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  local t0=$SECONDS
  bash "$2" .venv > $out/$1.log 2>&1
  local rc=$?
  echo "   rc=$rc wall $((SECONDS - t0)) s, ended $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -E "^== (pytest|the |mypy)|passed|failed|error" $out/$1.log | grep -vE "^[0-9.]+s (call|setup|teardown)" | sed 's/^/   /'
  .venv/bin/cosched clean >/dev/null 2>&1
}
date -u
run B1 scripts/test-concurrent.sh
run A1 scripts/test.sh
date -u
