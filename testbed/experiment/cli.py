"""``cosched experiment run SPEC.toml``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HELP = """\
Run a live experiment on real processes: bring up the local cluster, start the
controller once per configuration and job mix, run the synthetic program, and
write a report (Markdown + PNG) that sets the paper's figures beside ours.
Needs root. The cluster is torn down afterwards, also on failure or Ctrl-C.

example:
  sudo cosched experiment run experiments/paired-vs-gang.toml
  sudo cosched experiment run experiments/paired-vs-gang.toml --duration 10 --mixes 1
"""


def add_experiment_commands(sub: Any) -> None:
    p = sub.add_parser(
        "experiment",
        help="run a live experiment (seed 000 §4.1) and write its report",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    run = verbs.add_parser(
        "run",
        help="run an experiment spec",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "spec", type=Path, help="experiment TOML, e.g. experiments/paired-vs-gang.toml"
    )
    run.add_argument("--out", type=Path, default=None, help="report folder (default results/NAME)")
    run.add_argument("--duration", type=float, default=None, help="override seconds per mix")
    run.add_argument("--mixes", default=None, help="override the mixes, e.g. 1 or 0,1,4")
    run.add_argument(
        "--configs", default=None, help="override, e.g. gang,paired-fig4,paired-best-fit"
    )
    run.add_argument(
        "--reuse-cluster", action="store_true", help="run on a cluster that is already up"
    )
    run.set_defaults(func=run_experiment_cmd)


def run_experiment_cmd(args: argparse.Namespace) -> int:
    import dataclasses

    from testbed.experiment.report import markdown, plots, text_summary
    from testbed.experiment.runner import ExperimentError, run_experiment
    from testbed.experiment.spec import CONFIGS, SpecError, load_experiment

    try:
        spec = load_experiment(args.spec)
        if args.duration is not None:
            if args.duration <= 0:
                raise SpecError("--duration must be > 0 seconds")
            spec = dataclasses.replace(spec, duration=args.duration)
        if args.mixes:
            mixes = tuple(int(m) for m in args.mixes.split(","))
            if any(not 0 <= m <= 4 for m in mixes):
                raise SpecError("--mixes: I/O job counts in 0..4, e.g. 0,1,4")
            spec = dataclasses.replace(spec, mixes=mixes)
        if args.configs:
            configs = tuple(c.strip() for c in args.configs.split(","))
            for c in configs:
                if c not in CONFIGS:
                    raise SpecError(f"--configs: unknown {c!r}; valid: {', '.join(CONFIGS)}")
            spec = dataclasses.replace(spec, configs=configs)
    except (SpecError, ValueError) as exc:
        print(f"cosched experiment: {exc}", file=sys.stderr)
        return 2
    out = args.out or Path("results") / spec.name
    try:
        result = run_experiment(spec, out, reuse_cluster=args.reuse_cluster)
    except ExperimentError as exc:
        print(f"cosched experiment: {exc}", file=sys.stderr)
        return 1
    (out / "report.md").write_text(markdown(result))
    plots(result, out)
    print()
    print(text_summary(result))
    print(f"\nreport: {out}/report.md (plots fig7_top.png, fig7_bottom.png; data results.json)")
    return 0
