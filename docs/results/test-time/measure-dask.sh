#!/bin/bash
# testtime: the Dask sweep tests, A (main, tests/integration/test_sweep_dask.py) vs B (branch
# testtime, tests/live/testbed/sweep/test_daskpool.py, Dask's connect timeout 5 s in the
# worker-death test), each whole module on one worker, A B A B ...
# No kernel state (local processes only).
A=/work/wt-testtime-base
B=/work/wt-testtime
out=/tmp/tt-daskmod
mkdir -p $out
run() {
  local label=$1 dir=$2; shift 2
  cd $dir
  echo "== $label $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)"
  .venv/bin/pytest -q -p no:cacheprovider --durations=0 --durations-min=0 "$@" > $out/$label.log 2>&1
  echo "   rc=$? $(grep -E "^[0-9.]+s call.*worker_dies" $out/$label.log | head -1); $(tail -1 $out/$label.log)"
}
date -u
for r in 1 2 3 4 5 6; do
  run dask-A$r $A tests/integration/test_sweep_dask.py
  run dask-B$r $B tests/live/testbed/sweep/test_daskpool.py
done
date -u
