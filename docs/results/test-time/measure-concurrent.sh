#!/bin/bash
# testtime2: the whole test command, A (main at 8af941d, /work/wt-testtime2-base: the tiers
# one after another) against B (branch testtime2: the root tier with the fast and then the
# live tier beside it), CI=true as root, each `bash scripts/test.sh .venv` (what `make test`
# runs) under this one hold of /work/host.lock (run: flock /work/host.lock bash THIS).
# Order B A B A, each started only if it can end before CUTOFF (the lock is shared and
# the session has a deadline): two B runs come first when there is no time for an A
# between them. The issue-24 background study is paused while it runs.
A=/work/wt-testtime2-base
B=/work/wt-testtime2
CUTOFF=$(date -u -d "${CUTOFF:-today 18:38}" +%s)
export CI=true
out=/tmp/tt2-measure
mkdir -p $out
trap '/work/cdc-pause.sh cont; cd $B && .venv/bin/cosched clean >/dev/null 2>&1; date -u +"lock released %T"' EXIT
/work/cdc-pause.sh stop
need() { [ $(( $(date +%s) + $1 )) -le "$CUTOFF" ]; }  # seconds
run() { # label dir
  local label=$1 dir=$2
  cd $dir
  echo "== $label $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  local t0=$SECONDS
  bash scripts/test.sh .venv > $out/$label.log 2>&1
  local rc=$?
  echo "   rc=$rc wall $((SECONDS - t0)) s, ended $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -E "^== (pytest|the |mypy)|passed|failed|error" $out/$label.log | grep -vE "^[0-9.]+s (call|setup|teardown)" | sed 's/^/   /'
}
date -u
if need $((13*60)); then run B1 $B; fi
if need $((16*60 + 13*60)); then run A1 $A; fi
if need $((13*60)); then run B2 $B; fi
if need $((16*60)); then run A2 $A; fi
date -u
