"""``cosched calibrate``: the simulator's execution model measured on the live cluster.

The logic is in :mod:`testbed.experiment.execmodel.calibrate`; this module is the
command line: options, one-line errors, the printed table and the TOML file.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from common.errors import CoschedError, UsageError

from . import command_parser

DESCRIPTION = (
    "Measure on the local cluster what the simulator's execution model assumes "
    "(testbed/sim/execution.py) and write the parameters it reads: the progress "
    "(barriers per second) and CPU share of a compute job, an I/O job and a fine-grain "
    "~45 % CPU job each alone; of two fine-grain jobs and of a compute job with an I/O job "
    "run at once on the same nodes (paired); and of two compute jobs under strict gang at "
    "the quantum. From them: interference = 1 - (paired / alone) x max(1, sum of u) per "
    "pair type (the model uses fine + fine), context_switch = q (1 - k R_gang / R_alone) "
    "for k = 2, and the fine-grain job's utilization.\n\n"
    "The cluster, quantum and compute / I/O jobs come from an experiment spec (default "
    "experiments/paired-vs-gang-2node.toml: 2 nodes with a dedicated core each, as "
    "ParPar's nodes); the flags override them. Every measurement is repeated (--repeats) "
    "and its spread reported; each run waits for a quiet host first. Needs root; brings "
    "the cluster up and tears it down (also on failure, Ctrl-C or SIGTERM). About 4 "
    "minutes on a quiet host with the defaults."
)
EXAMPLES = (
    "  sudo cosched calibrate                       # writes experiments/calibration.toml\n"
    "  sudo cosched calibrate --repeats 5 --duration 8\n"
    "  sudo cosched calibrate --quantum 1.0 --out /tmp/cal-q1.toml   # ParPar's quantum\n"
    "  sudo cosched calibrate --nodes 4 --cpus-per-node 0.5 --cpu-mechanism shared"
)


def add_commands(sub: Any) -> None:
    """Register ``calibrate`` on ``sub``."""
    p = command_parser(
        sub,
        "calibrate",
        "measure the execution model's interference and context switch on the live cluster",
        DESCRIPTION,
        EXAMPLES,
    )
    p.add_argument(
        "--spec",
        type=Path,
        default=None,
        help="experiment spec whose cluster, quantum and jobs to calibrate "
        "(default experiments/paired-vs-gang-2node.toml)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="TOML to write (default experiments/calibration.toml)",
    )
    p.add_argument("--nodes", type=int, default=None, help="cluster nodes (default: the spec's)")
    p.add_argument("--cpus-per-node", type=float, default=None, help="CPU per node")
    p.add_argument(
        "--cpu-mechanism",
        choices=("auto", "cpuset", "shared", "cfs"),
        default=None,
        help="how a node's CPU is limited (docs/cluster.md)",
    )
    p.add_argument("--quantum", type=float, default=None, help="gang quantum, s (spec's)")
    p.add_argument(
        "--duration", type=float, default=8.0, help="seconds per run (default %(default)s)"
    )
    p.add_argument(
        "--repeats", type=int, default=3, help="runs per measurement (default %(default)s, >= 3)"
    )
    p.add_argument(
        "--fine-compute-ms",
        type=float,
        default=2.0,
        help="fine-grain job: compute per barrier, ms (default %(default)s)",
    )
    p.add_argument(
        "--fine-wait-ms",
        type=float,
        default=2.5,
        help="fine-grain job: emulated device wait per barrier, ms (default %(default)s)",
    )
    p.add_argument(
        "--quiet-limit",
        type=float,
        default=0.15,
        help="cores the host may spend outside the cluster before a run starts "
        "(default %(default)s)",
    )
    p.add_argument(
        "--reuse-cluster", action="store_true", help="run on a cluster that is already up"
    )
    p.set_defaults(func=cmd_calibrate)


class CalibrateUsageError(UsageError):
    """A flag or the spec cannot be used (exit status 2)."""


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Run the calibration, print the table, write the TOML file."""
    import os

    from testbed.experiment.execmodel.calibrate import (
        DEFAULT_OUT,
        DEFAULT_SPEC,
        CalibrationConfig,
        run_calibration,
        summary,
        to_toml,
    )
    from testbed.experiment.fields import SpecError
    from testbed.experiment.harness import LiveError
    from testbed.experiment.harness.cluster import host_cores, sigterm_as_interrupt
    from testbed.experiment.paired.spec import read_experiment

    if args.repeats < 3:
        raise CalibrateUsageError(
            f"--repeats {args.repeats}: at least 3, so the spread means something"
        )
    for name in ("duration", "fine_compute_ms", "fine_wait_ms"):
        if not getattr(args, name) > 0:
            raise CalibrateUsageError(f"--{name.replace('_', '-')} must be > 0")
    if args.nodes is not None and args.nodes < 2:
        raise CalibrateUsageError(
            f"--nodes {args.nodes}: at least 2 (the jobs synchronise across nodes)"
        )
    if os.geteuid() != 0:
        raise CoschedError(
            "calibration runs jobs on the local cluster, which needs root",
            fix="run it with sudo",
        )
    spec_path = args.spec or DEFAULT_SPEC
    try:
        spec = read_experiment(spec_path)
    except (SpecError, OSError) as exc:
        raise CalibrateUsageError(str(exc), fix="give a paired-vs-gang spec with --spec") from None
    if spec.sweep is not None:
        raise CalibrateUsageError(
            f"{spec_path} is a sweep; give one configuration, e.g. "
            "experiments/paired-vs-gang-2node.toml"
        )
    spec = spec.with_cores(host_cores())
    changes: dict[str, Any] = {
        "duration": args.duration,
        "repeats": args.repeats,
        "fine_compute_ms": args.fine_compute_ms,
        "fine_wait_ms": args.fine_wait_ms,
        "quiet_limit": args.quiet_limit,
    }
    for flag, key in (
        ("nodes", "nodes"),
        ("cpus_per_node", "cpus_per_node"),
        ("cpu_mechanism", "cpu_mechanism"),
        ("quantum", "quantum"),
    ):
        value = getattr(args, flag)
        if value is not None:
            changes[key] = value
    if changes.get("quantum", 1.0) < 0.01:
        raise CalibrateUsageError("--quantum must be >= 0.01 s")
    cfg = CalibrationConfig.from_spec(spec, **changes)
    out = args.out or DEFAULT_OUT
    sigterm_as_interrupt()
    try:
        cal = run_calibration(cfg, reuse_cluster=args.reuse_cluster)
    except LiveError as exc:
        raise CoschedError(str(exc)) from None
    print()
    print(summary(cal))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(to_toml(cal))
    except OSError as exc:
        raise CoschedError(
            f"cannot write {out}: {exc.strerror}", fix="give a writable --out"
        ) from None
    print(f"\nwritten: {out}")
    return 0
