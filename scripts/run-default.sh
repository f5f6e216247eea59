#!/usr/bin/env bash
# The default experiment. Until the live paired-vs-gang experiment lands, a simulated
# comparison of strict gang, paired gang and EASY backfilling on a Lublin workload
# (16 nodes, heterogeneous CPU/I-O profiles as in seed 000 §4.2.2), swept over load.
set -euo pipefail
venv=${1:-.venv}
exec "$venv/bin/cosched" simulate --policy gang,paired-gang,easy --workload lublin \
  --nodes 16 --jobs 1000 --seed 1 --profile heterogeneous --loads 0.5,0.7,0.9 \
  --out results/default --plot
