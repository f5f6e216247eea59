#!/usr/bin/env bash
# The default experiment. Until the live paired-vs-gang experiment lands, a simulated
# comparison of strict gang, paired gang and EASY backfilling on a Lublin workload
# (seed 000 §4.2.1: 16 nodes, times divided by 40, fine-grain jobs), swept over load.
set -euo pipefail
venv=${1:-.venv}
exec "$venv/bin/cosched" simulate --policy gang,paired-gang,easy --nodes 16 \
  --workload experiments/sim-paired-vs-gang.toml --loads 0.5,0.7,0.9 \
  --out results/default --plot
