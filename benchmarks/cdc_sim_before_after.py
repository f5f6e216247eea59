"""The CDC simulator before and after a change, on the same run, as a ratio (ABAB).

Exports the engine as it was at ``--before`` (a commit; default the last one before
the hot-path rewrite) into a temporary tree, then runs one fixed sample of Yu &
Byun's WL6 at the paper's scale (16 nodes, MPL 5, heavy load, fluid mode) in a
fresh process per round, alternating before and after (ABAB), and prints each
round's CPU seconds (the child's user + system time: the host is shared), the
ratio of the medians, and whether every simulated figure of the two agreed
(only events, evaluated decisions and wall time may differ; every job's start,
end and CPU, and the raw ERL and MD sums, compared to the last bit).

    python benchmarks/cdc_sim_before_after.py --schemes cc-b,sb --jobs 6 --rounds 2

``--after-fluid whole_reps=true`` runs the working tree with fluid fields of its
own (a model option the old engine lacks): the figures then differ by design,
and the line gives the after run's mean response, BCR and MD against the
before run's instead of the identity check.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cdc_agent_cost import extract  # the old engine's tree, from git archive

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "81b6150"  # the golden figures' commit: the engine before the hot-path rewrite
CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from testbed.sim.cdc.run import build, summarize
p = {"scheme": sys.argv[2], "mpl": 5, "workload": "WL6:jobs=%s,load=heavy" % sys.argv[3],
     "nodes": 16, "speeds": "paper", "platform": "paper",
     "fluid": {"settle_s": 0.5, "measure_s": 1.0, "tail_s": 1.0, "min_jump_s": 2.0,
               **json.loads(sys.argv[5])}}
sim, jobs = build(p, int(sys.argv[4]))
res = sim.run(jobs)
out = summarize(res)
for k in ("events", "evaluated", "wall_s"):
    out.pop(k, None)
# every job's times to the last bit, and the ERL statistics' raw sums
out["exact"] = [[j.job_id, j.start.hex(), j.end.hex(), j.cpu_s.hex()] for j in res.jobs]
out["erl_raw"] = [res.erl_sum_us.hex(), res.erl_count, res.md_sum_s.hex()]
print(json.dumps(out))
"""


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one(
    tree: Path, scheme: str, jobs: int, seed: int, fluid: dict[str, object] | None = None
) -> tuple[float, str]:
    c0 = child_cpu()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(tree),
            scheme,
            str(jobs),
            str(seed),
            json.dumps(fluid or {}),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    ).stdout
    return child_cpu() - c0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default=BEFORE, help=f"commit of the old engine (default {BEFORE})")
    ap.add_argument("--schemes", default="cc-b,sb")
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="ABAB rounds (default 2)")
    ap.add_argument(
        "--after-fluid",
        default="",
        help="fluid fields for the working tree only, KEY=JSON,... (e.g. whole_reps=true)",
    )
    args = ap.parse_args()
    extra: dict[str, object] = {}
    for item in filter(None, (x.strip() for x in args.after_fluid.split(","))):
        k, _, v = item.partition("=")
        extra[k.strip()] = json.loads(v)
    with tempfile.TemporaryDirectory(prefix="cdc-before-") as tmp:
        old = extract(args.before, Path(tmp))
        print(
            f"WL6 heavy, {args.jobs} jobs, 16 paper nodes, MPL 5, fluid, seed {args.seed}; "
            f"before = {args.before}, after = the working tree"
            f"{' with fluid ' + json.dumps(extra) if extra else ''}; CPU s per run, "
            f"ABAB x{args.rounds}"
        )
        for s in [x.strip() for x in args.schemes.split(",") if x.strip()]:
            cpu: dict[str, list[float]] = {"before": [], "after": []}
            outs: dict[str, set[str]] = {"before": set(), "after": set()}
            for _ in range(args.rounds):
                for label, tree in (("before", old), ("after", ROOT)):
                    c, o = one(tree, s, args.jobs, args.seed, extra if label == "after" else None)
                    cpu[label].append(c)
                    outs[label].add(o)
            b, a = statistics.median(cpu["before"]), statistics.median(cpu["after"])
            same = outs["before"] == outs["after"] and len(outs["after"]) == 1
            head = (
                f"{s:<7} before {' '.join(f'{x:.2f}' for x in cpu['before'])}  "
                f"after {' '.join(f'{x:.2f}' for x in cpu['after'])}  speed-up {b / a:.2f}x"
            )
            if extra:
                fb, fa = (json.loads(sorted(outs[k])[0]) for k in ("before", "after"))
                rel = 100 * (fa["response_s"] / fb["response_s"] - 1)
                print(
                    f"{head}  after vs before: response {fa['response_s']:.1f} s vs "
                    f"{fb['response_s']:.1f} s ({rel:+.1f} %), "
                    f"BCR {fa['bcr']:.4f} vs {fb['bcr']:.4f}, MD {fa['md_s'] * 1e3:.2f} vs "
                    f"{fb['md_s'] * 1e3:.2f} ms"
                )
                continue
            print(f"{head}  figures identical: {'yes' if same else 'NO'}")
            if not same:
                print(json.dumps({k: sorted(v)[:1] for k, v in outs.items()})[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
