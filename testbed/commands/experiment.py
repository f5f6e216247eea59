"""``cosched experiment run SPEC.toml``: a live experiment and its report."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from common.errors import CoschedError, UsageError

from . import command_parser

DESCRIPTION = (
    "Run a live experiment on real processes: bring up the local cluster, start the "
    "controller once per configuration and job mix, run the synthetic program, and "
    "write a report (Markdown + PNG) that sets the paper's figures beside ours. "
    "Needs root. The cluster is torn down afterwards, also on failure or Ctrl-C."
)
EXAMPLES = (
    "  sudo cosched experiment run experiments/paired-vs-gang.toml\n"
    "  sudo cosched experiment run experiments/paired-vs-gang.toml --duration 10 --mixes 1\n"
    "  sudo cosched experiment run experiments/paired-vs-gang.toml --configs gang,paired-fig4"
)


def add_commands(sub: Any) -> None:
    """Register ``experiment`` (run) on ``sub``."""
    p = command_parser(
        sub,
        "experiment",
        "run a live experiment (seed 000 §4.1) and write its report",
        DESCRIPTION,
        EXAMPLES,
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    run = command_parser(verbs, "run", "run an experiment spec", DESCRIPTION, EXAMPLES)
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
    run.set_defaults(func=cmd_run)


class ExperimentSpecError(UsageError):
    """The spec file or an override cannot be used (exit status 2)."""


def cmd_run(args: argparse.Namespace) -> int:
    """Run one experiment spec and write its report."""
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
    except OSError as exc:
        raise ExperimentSpecError(
            f"cannot read {args.spec}: {exc.strerror}", fix="give an experiment TOML file"
        ) from None
    except (SpecError, ValueError) as exc:
        raise ExperimentSpecError(
            str(exc), fix="give an experiment TOML, e.g. experiments/paired-vs-gang.toml"
        ) from None
    out = args.out or Path("results") / spec.name
    try:
        result = run_experiment(spec, out, reuse_cluster=args.reuse_cluster)
    except ExperimentError as exc:
        raise CoschedError(str(exc)) from None
    try:
        (out / "report.md").write_text(markdown(result))
        plots(result, out)
    except OSError as exc:
        raise CoschedError(
            f"cannot write the report in {out}: {exc.strerror}", fix="give a writable --out"
        ) from None
    print()
    print(text_summary(result))
    print(f"\nreport: {out}/report.md (plots fig7_top.png, fig7_bottom.png; data results.json)")
    return 0
