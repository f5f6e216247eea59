#!/usr/bin/env bash
# The default experiment: Wiseman & Feitelson 2003 §4.1 on real processes. Brings up a 4-node local
# cluster, runs the five job mixes under strict gang and paired gang (Fig. 4 to the
# letter, as its prose reads, best fit), prints the Fig. 7 comparison, writes results/paired-vs-gang/
# (Markdown report + PNG plots) and tears the cluster down.
# Without root (no namespaces or cgroups) it says so and runs the simulated
# comparison instead (strict vs paired gang vs EASY on a Lublin workload).
set -euo pipefail
venv=${1:-.venv}
if [ "$(id -u)" = 0 ]; then
  exec "$venv/bin/cosched" experiment run experiments/paired-vs-gang.toml
fi
echo "not root: the live experiment needs network namespaces and cgroups (run: sudo make run)." >&2
echo "running the simulated comparison instead." >&2
exec "$venv/bin/cosched" simulate --policy gang,paired-gang,easy --nodes 16 \
  --workload experiments/sim-paired-vs-gang.toml --loads 0.5,0.7,0.9 \
  --out results/sim-paired-vs-gang --plot
