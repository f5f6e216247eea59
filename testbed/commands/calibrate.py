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
    "minutes on a quiet host with the defaults.\n\n"
    "Then the program's costs by gang size (--sizes, default 2,4,8; each size on its own "
    "cluster, a core per node while the host's cores last): the barrier's wall and CPU "
    "time, fitted linear in n - 1, a job's launch and teardown through the controller, "
    "and a fine-grain job's check of the program model "
    "(testbed/experiment/execmodel/programcal.py). "
    "--only sizes measures just these and merges them into the existing file.\n\n"
    "--only resident measures the cost of a resident job: one compute job under strict "
    "gang beside k frozen standby jobs (--resident-ks), its rate against k, blocks in "
    "shuffled order (--repeats blocks; testbed/experiment/execmodel/residentcal.py), and "
    "merges [model] resident_cost (the mean at 1 s quanta, 0 if negative) into the "
    "existing file."
)
EXAMPLES = (
    "  sudo cosched calibrate                       # writes experiments/calibration.toml\n"
    "  sudo cosched calibrate --repeats 5 --duration 8\n"
    "  sudo cosched calibrate --quantum 1.0 --out /tmp/cal-q1.toml   # ParPar's quantum\n"
    "  sudo cosched calibrate --nodes 4 --cpus-per-node 0.5 --cpu-mechanism shared\n"
    "  sudo cosched calibrate --only sizes --link fast-ethernet   # barrier, launch, "
    "teardown at 2, 4, 8\n"
    "  sudo cosched calibrate --only resident --resident-quanta 1,0.1 --resident-record DIR"
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
        "--link",
        default=None,
        help="link profile (default: the spec's); the size measurements time Wiseman & "
        "Feitelson's TCP/IP barrier, so fast-ethernet is the faithful one for them",
    )
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
        "--quiet-timeout",
        type=float,
        default=120.0,
        help="longest wait for a quiet host before a run, s; then it runs anyway and the "
        "host's load is recorded (default %(default)s)",
    )
    p.add_argument(
        "--reuse-cluster", action="store_true", help="run on a cluster that is already up"
    )
    p.add_argument(
        "--sizes",
        default="2,4,8",
        help="gang sizes for the program's costs, comma-separated, or none (default %(default)s)",
    )
    p.add_argument(
        "--only",
        choices=("all", "sizes", "resident"),
        default="all",
        help="sizes: only the program's costs by size; resident: only the cost of a "
        "resident job; either merged into the existing --out file",
    )
    p.add_argument(
        "--resident-ks",
        default="0,1,2,4,8",
        help="--only resident: resident job counts (default %(default)s)",
    )
    p.add_argument(
        "--resident-quanta",
        default="1",
        help="--only resident: quanta, s, comma-separated; the model takes 1 s's "
        "(default %(default)s)",
    )
    p.add_argument(
        "--resident-record",
        type=Path,
        default=None,
        help="--only resident: also write every run to DIR/runs.json",
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
        "quiet_timeout": args.quiet_timeout,
    }
    for flag, key in (
        ("nodes", "nodes"),
        ("cpus_per_node", "cpus_per_node"),
        ("cpu_mechanism", "cpu_mechanism"),
        ("quantum", "quantum"),
        ("link", "link"),
    ):
        value = getattr(args, flag)
        if value is not None:
            changes[key] = value
    if changes.get("quantum", 1.0) < 0.01:
        raise CalibrateUsageError("--quantum must be >= 0.01 s")
    changes["sizes"] = _sizes(args.sizes)
    if args.only == "sizes" and not changes["sizes"]:
        raise CalibrateUsageError("--only sizes needs --sizes")
    cfg = CalibrationConfig.from_spec(spec, **changes)
    out = args.out or DEFAULT_OUT
    sigterm_as_interrupt()
    if args.only == "sizes":
        return _sizes_only(cfg, out)
    if args.only == "resident":
        return _resident_only(args, out)
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


def _resident_only(args: argparse.Namespace, out: Path) -> int:
    """``--only resident``: measure the cost of a resident job, merge it into ``out``."""
    import json
    import os
    from dataclasses import asdict

    from testbed.experiment.execmodel.residentcal import (
        ResidentConfig,
        lines,
        measure,
        merge_resident,
        summarise,
    )
    from testbed.experiment.harness import LiveError, hostload

    try:
        ks = tuple(sorted({int(x) for x in args.resident_ks.split(",") if x.strip()}))
        quanta = tuple(float(x) for x in args.resident_quanta.split(",") if x.strip())
    except ValueError:
        raise CalibrateUsageError(
            "--resident-ks and --resident-quanta: comma-separated numbers, e.g. 0,1,2,4,8 and 1"
        ) from None
    if len(ks) < 2 or ks[0] < 0:
        raise CalibrateUsageError(f"--resident-ks {args.resident_ks}: two or more counts >= 0")
    if 1.0 not in quanta or any(q < 0.01 for q in quanta):
        raise CalibrateUsageError(
            f"--resident-quanta {args.resident_quanta}: include 1 (the model's) and no "
            "quantum below 0.01 s"
        )
    existing = _merged_into(out, "resident")
    cfg = ResidentConfig(
        link=args.link or "gige", quanta=quanta, ks=ks, blocks=args.repeats,
        duration=args.duration,
    )  # fmt: skip
    try:
        runs = measure(cfg, Path(f"/tmp/cosched-calibrate-{os.getpid()}"), print)
    except LiveError as exc:
        raise CoschedError(str(exc)) from None
    summary = summarise(runs)
    host = hostload.host_record()
    print()
    print("\n".join(lines(summary)))
    try:
        out.write_text(merge_resident(existing, summary, runs, host))
        if args.resident_record is not None:
            args.resident_record.mkdir(parents=True, exist_ok=True)
            doc = {"config": asdict(cfg), "host": host, "runs": runs, "summary": summary}
            (args.resident_record / "runs.json").write_text(json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        raise CoschedError(
            f"cannot write {out}: {exc.strerror}", fix="give a writable --out"
        ) from None
    print(f"\nwritten: {out}")
    return 0


def _sizes(text: str) -> tuple[int, ...]:
    if text.strip().lower() == "none":
        return ()
    try:
        sizes = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise CalibrateUsageError(
            f"--sizes {text!r}: whole node counts, e.g. 2,4,8, or none"
        ) from None
    if any(n < 2 for n in sizes):
        raise CalibrateUsageError(f"--sizes {text!r}: each size at least 2 (a barrier needs two)")
    return sizes


def _sizes_only(cfg: Any, out: Path) -> int:
    """``--only sizes``: measure the program's costs, merge them into ``out``."""
    import os
    import time

    from testbed.experiment.execmodel.calibrate import measure_program_sizes, merge_sizes
    from testbed.experiment.execmodel.programcal import summary_lines
    from testbed.experiment.harness import LiveError, hostload

    existing = _merged_into(out, "sizes")
    work = Path(f"/tmp/cosched-calibrate-{os.getpid()}")
    try:
        sizes = measure_program_sizes(cfg, work, print)
    except LiveError as exc:
        raise CoschedError(str(exc)) from None
    rec = hostload.host_record()
    host = {
        k: rec[k] for k in ("date", "kernel", "cores", "cosched_commit", "working_tree_modified")
    }
    host["sizes"] = list(cfg.sizes)
    host["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print()
    print("\n".join(summary_lines(sizes)))
    try:
        out.write_text(merge_sizes(existing, sizes, host))
    except OSError as exc:
        raise CoschedError(
            f"cannot write {out}: {exc.strerror}", fix="give a writable --out"
        ) from None
    print(f"\nwritten: {out}")
    return 0


def _merged_into(out: Path, only: str) -> str:
    """The calibration file an ``--only`` run merges its figures into."""
    try:
        return out.read_text()
    except OSError as exc:
        raise CoschedError(
            f"--only {only} merges into {out}, which cannot be read: {exc.strerror}",
            fix="run the whole calibration first, or give --out",
        ) from None
