#!/bin/bash
# testtime: A (main at a5603be, /work/wt-testtime-base) vs B (branch testtime), interleaved
# A B A B, each under this one hold of /work/host.lock (run: flock /work/host.lock bash THIS).
A=/work/wt-testtime-base
B=/work/wt-testtime
export CI=true
out=/tmp/tt-measure
mkdir -p $out
run() { # label dir args...
  local label=$1 dir=$2; shift 2
  cd $dir
  .venv/bin/cosched clean >/dev/null 2>&1
  echo "== $label $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)"
  local t0=$(date +%s.%N)
  .venv/bin/pytest -q -p no:cacheprovider --durations=0 --durations-min=0.5 "$@" > $out/$label.log 2>&1
  local rc=$?
  local t1=$(date +%s.%N)
  echo "   rc=$rc wall $(echo "$t1 - $t0" | bc) s; $(tail -1 $out/$label.log)"
}
date -u
for r in 1 2; do
  run calibrate-A$r $A tests/integration/test_calibrate_live.py
  run calibrate-B$r $B tests/integration/test_calibrate_live.py
done
for r in 1 2; do
  run rajaei-A$r $A "tests/integration/test_studies_live.py::test_rajaei_live_quick_variant"
  run rajaei-B$r $B "tests/integration/test_studies_live.py::test_rajaei_live_quick_variant"
done
for r in 1 2; do
  run dask-A$r $A tests/integration/test_sweep_dask.py
  run dask-B$r $B -n 2 tests/live/testbed/sweep/test_daskpool.py
done
for r in 1 2; do
  run deployssh-A$r $A tests/integration/test_deploy_ssh.py
  run deployssh-B$r $B tests/integration/test_deploy_ssh.py
done
cd $B; .venv/bin/cosched clean
date -u
