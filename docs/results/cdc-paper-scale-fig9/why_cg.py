"""Why CC-B slows CG: each application's processes under SB, HYBRID and CC-B, measured.

The engine's per-process records (testbed/sim/cdc/engine.py ``ProcRecord``; a run's
``records`` with ``record = true``, testbed/sim/cdc/run.py) summed per application:

* WL5 at once (50 CG jobs): from this study's run files (runs/, made with the records;
  one made before them, CC-B's seed 1, is made again with them by ``--run-wl5`` and
  checked and kept as the WL6 runs are);
* WL6 heavy, 100 jobs: the committed runs of docs/results/cdc-paper-scale-heavy100 made
  again with the very parameters their files hold plus the records (``--run``); each
  must give the committed file's per-job starts and ends exactly (the records change
  nothing), and is kept in ``why_cg.json``.

Printed per workload, scheme and application, over the seeds present, summed over the
processes (a process's life is its job's execution):

* ``exec s``: mean job execution; ``cpu %``: CPU received ÷ life; ``held %``: CPU
  received while its node's boost holder ÷ life; ``wait %``: time in message waits
  (start of a wait to its end) ÷ life; ``pend %``: time with a message arrived and
  unread ÷ life;
* at the evaluated decisions where two or more of a node's processes were pending
  (CC's repeats of a provably unchanged outcome are not evaluated, so these count
  distinct conflicts; fluid jumps add none): ``cont/s``, such decisions per second of
  life, ``won %``, how many made this process the holder; for CC-B the mean unclamped
  W_r (eq. 4: the lowest over its pending messages of ERL_max − ERL', in units of
  ERL_max/100), the mean number of pending messages it carried, and ``top %``, how
  many of those contests found its W_r at eq. (4)'s top (100: every correspondent
  already rescheduled), where CC's weights tie and the earliest arrival wins;
* ``cpu % fast`` / ``slow``: the CPU share on the speed-1 nodes and on the slow ones.

    python docs/results/cdc-paper-scale-fig9/why_cg.py --run --seeds 1   # WL6 (minutes)
    cd docs/results/cdc-paper-scale-fig9 && python why_cg.py > why_cg.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
HEAVY = HERE.parent / "cdc-paper-scale-heavy100" / "runs"
KEEP = HERE / "why_cg.json"
WL6 = "WL6 heavy, 100 jobs"
WL5 = "WL5 at once, 50 jobs"
SCHEMES = ("sb", "hybrid", "cc-b")


def simulate(path: Path) -> dict[str, Any]:
    """The run of ``path`` again with the records on: its ``records``."""
    from testbed.sim.cdc.run import run_cdc

    doc = json.loads(path.read_text())
    got = run_cdc({**doc["params"], "record": True}, int(doc["cell"]["seed"]))
    if got["per_job"] != doc["per_job"]:
        raise SystemExit(f"{path.name}: the records changed the run (per_job differs)")
    return {"file": str(path.relative_to(HERE.parent)), "records": got["records"]}


def run(seeds: list[int], schemes: list[str], wl5: bool) -> None:
    kept: dict[str, Any] = json.loads(KEEP.read_text()) if KEEP.exists() else {}
    for k in seeds:
        for s in schemes:
            if wl5:
                f = HERE / "runs" / f"WL5-at_once-j50-{s}-mpl5-s{k}.json"
                key = f"{WL5}|{s}|{k}"
                if key in kept or not f.exists() or "records" in json.loads(f.read_text()):
                    continue
            else:
                f = HEAVY / f"WL6-heavy-j100-{s}-mpl5-s{k}.json"
                key = f"{WL6}|{s}|{k}"
                if key in kept or not f.exists():
                    continue
            print(f"simulating {f.name} with the records ...", file=sys.stderr, flush=True)
            kept[key] = simulate(f)
            KEEP.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")


def collect() -> dict[str, dict[str, Any]]:
    """``label|scheme|seed`` -> {"records", "exec": {app: mean execution s}}."""
    out: dict[str, dict[str, Any]] = {}
    kept: dict[str, Any] = json.loads(KEEP.read_text()) if KEEP.exists() else {}
    for key, v in kept.items():
        doc = json.loads((HERE.parent / v["file"]).read_text())
        out[key] = {"records": v["records"], "by_app": doc["by_app"]}
    for f in sorted((HERE / "runs").glob("WL5-at_once-j50-*.json")):
        doc = json.loads(f.read_text())
        c = doc["cell"]
        key = f"{WL5}|{c['scheme']}|{c['seed']}"
        if "records" in doc:
            out[key] = {"records": doc["records"], "by_app": doc["by_app"]}
    return out


def _sum(rs: list[dict[str, float]], k: str) -> float:
    return sum(r.get(k, 0.0) for r in rs)


def table(data: dict[str, dict[str, Any]]) -> None:
    for label in (WL6, WL5):
        keys = [k for k in data if k.startswith(label + "|")]
        if not keys:
            continue
        seeds = sorted({int(k.split("|")[2]) for k in keys})
        print(f"{label}, MPL 5, 16 paper nodes; seeds {', '.join(map(str, seeds))}, summed")
        print(f"{'scheme':7} {'app':4} {'procs':>5} {'exec s':>7} {'cpu %':>6} {'held %':>6} "
              f"{'wait %':>6} {'pend %':>6} {'cont/s':>7} {'won %':>6} {'W_r':>6} "
              f"{'msgs':>5} {'top %':>5} {'cpu% fast':>9} {'cpu% slow':>9}")  # fmt: skip
        for s in SCHEMES:
            runs = [data[f"{label}|{s}|{k}"] for k in seeds if f"{label}|{s}|{k}" in data]
            if len(runs) != len(seeds):
                continue  # only schemes with every seed: the same streams side by side
            for a in sorted({a for r in runs for a in r["records"]}):
                fast = [r["records"][a]["fast"] for r in runs if "fast" in r["records"][a]]
                slow = [r["records"][a]["slow"] for r in runs if "slow" in r["records"][a]]
                both = fast + slow
                life = _sum(both, "life_s")

                def pct(k: str, rs: list[dict[str, float]] = both) -> float:
                    lf = _sum(rs, "life_s")
                    return 100 * _sum(rs, k) / lf if lf else float("nan")

                cont, won = _sum(both, "contested"), _sum(both, "won")
                cc = cont and s.startswith("cc")
                wr = f"{_sum(both, 'w_r_sum') / cont:6.1f}" if cc else "     –"
                ms = f"{_sum(both, 'msgs_sum') / cont:5.2f}" if cc else "    –"
                top = f"{100 * _sum(both, 'w_r_top') / cont:5.1f}" if cc else "    –"
                won_pct = f"{100 * won / cont:6.1f}" if cont else "     –"
                ex = sum(r["by_app"][a]["execution_s"] for r in runs) / len(runs)
                print(f"{s:7} {a:4} {int(_sum(both, 'procs')):5d} {ex:7.1f} {pct('cpu_s'):6.1f} "
                      f"{pct('held_s'):6.1f} {pct('msg_wait_s'):6.1f} {pct('pending_s'):6.1f} "
                      f"{cont / life:7.2f} {won_pct} {wr} {ms} {top} "
                      f"{pct('cpu_s', fast):9.1f} {pct('cpu_s', slow):9.1f}")  # fmt: skip
        print()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--run", action="store_true", help="simulate the WL6 cells missing, keep")
    ap.add_argument("--seeds", default="1", help="comma-separated seeds to simulate (--run)")
    ap.add_argument("--schemes", default="hybrid,cc-b", help="schemes to simulate (--run)")
    ap.add_argument("--run-wl5", action="store_true", help="WL5 runs made without records")
    a = ap.parse_args()
    if a.run or a.run_wl5:
        run([int(x) for x in a.seeds.split(",")], a.schemes.split(","), a.run_wl5)
        return
    print("# $ python why_cg.py   (in docs/results/cdc-paper-scale-fig9; WL6 from why_cg.json)")
    table(collect())


if __name__ == "__main__":
    main()
