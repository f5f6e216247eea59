"""``cosched experiment list | run | report | ledger | migrate``: every kind of study, one way.

The studies and their kinds are in testbed/experiment/registry.py; every spec declares its
kind in its first line. ``run`` writes ``results.json`` (kind, schema, command, commit,
host) and the report from it; ``report`` writes the report again from a results.json;
``ledger`` writes docs/reproduction.md from the committed results.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from common.errors import UsageError
from testbed.sweep.cli import add_sweep_args, given, options_from, spec_table

from . import command_parser

DESCRIPTION = (
    "Run a study from its spec and write its report (Markdown + PNG) beside its data "
    "(results.json: kind, schema, the command, the commit, the host). `list` shows the "
    "kinds and their specs. Live kinds run on real processes on the local cluster: they "
    "need root, bring the cluster up and tear it down afterwards, also on failure or "
    "Ctrl-C, and run one run at a time. Simulated kinds need no root; their independent "
    "runs go to local worker processes (--workers, default one per core) or a Dask cluster "
    "(--dask), each result kept in OUT/runs.sqlite as it ends, so a killed study resumes "
    "with the runs it lacks (docs/sweeps.md). `report` writes a report again "
    "from its results.json, whatever kind wrote it; `ledger` writes docs/reproduction.md, "
    "every result of the five papers beside ours, from the committed results."
)
EXAMPLES = (
    "  cosched experiment list\n"
    "  sudo cosched experiment run experiments/paired-vs-gang.toml\n"
    "  sudo cosched experiment run experiments/paired-vs-gang.toml --duration 10 --mixes 1\n"
    "  sudo cosched experiment run experiments/fig8-cluster-size.toml --mixes 0,1,2\n"
    "  sudo cosched experiment run experiments/cdc-policies.toml --quick\n"
    "  sudo cosched experiment run experiments/cdc-policies.toml --schemes sb,cc-b --mpls 5\n"
    "  sudo cosched experiment run experiments/sim-vs-live.toml --quick\n"
    "  sudo cosched experiment run experiments/rajaei-live.toml\n"
    "  cosched experiment run experiments/sim-vs-live.toml --resimulate "
    "--out docs/results/sim-vs-live\n"
    "  cosched experiment run experiments/sim-paired-fig10-12.toml --out results/fig10-12\n"
    "  cosched experiment run experiments/rajaei-gang-vs-backfill.toml --quick\n"
    "  cosched experiment run experiments/dhc.toml --quick\n"
    "  cosched experiment run experiments/dhc.toml --dry-run\n"
    "  cosched experiment run experiments/dhc.toml --workers 2 --out docs/results/dhc-full\n"
    "  cosched experiment run experiments/dhc.toml --dask tcp://head:8786\n"
    "  cosched experiment report docs/results/cdc-policies/results.json --out /tmp/cdc\n"
    "  cosched experiment ledger --check"
)

#: command-line overrides of a spec: flag name -> help. Each kind accepts its own
#: (testbed/experiment/*/__init__.py: ``overrides``); any other is one line.
OVERRIDES = {
    "duration": "seconds each mix runs (paired-live)",
    "mixes": "the mixes, e.g. 1 or 0,1,4 (paired-live)",
    "configs": "e.g. gang,paired-fig4,paired-best-fit (paired-live)",
    "schemes": "e.g. sb,cc-b (cdc-live)",
    "loads": "e.g. heavy (cdc-live)",
    "mpls": "e.g. 3,5 (cdc-live)",
    "jobs": "jobs per run (cdc-live)",
}


def add_commands(sub: Any) -> None:
    """Register ``experiment`` (list, run, report, ledger, migrate) on ``sub``."""
    p = command_parser(
        sub, "experiment", "run a study from its spec and write its report", DESCRIPTION, EXAMPLES
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    ls = command_parser(
        verbs, "list", "the kinds of study and their specs",
        "Every kind of study: what it reproduces, live or simulated, its specs in "
        "experiments/ and the overrides it takes.", "  cosched experiment list",
    )  # fmt: skip
    ls.set_defaults(func=cmd_list)

    run = command_parser(verbs, "run", "run a study spec", DESCRIPTION, EXAMPLES)
    run.add_argument("spec", type=Path, help="a study spec, e.g. experiments/paired-vs-gang.toml")
    run.add_argument("--out", type=Path, default=None, help="report folder (default results/NAME)")
    run.add_argument("--quick", action="store_true", help="the spec's [quick] variant")
    run.add_argument(
        "--dry-run", action="store_true", help="read the spec and say what would run; run nothing"
    )
    run.add_argument(
        "--reuse-cluster", action="store_true", help="live kinds: run on a cluster already up"
    )
    run.add_argument(
        "--resimulate",
        action="store_true",
        help="sim-vs-live: simulate OUT/results.json's live runs again (no root)",
    )
    for name, text in OVERRIDES.items():
        run.add_argument("--" + name, default=None, help="override " + text)
    add_sweep_args(run)
    run.set_defaults(func=cmd_run)

    rep = command_parser(
        verbs, "report", "write a study's report again from its results.json",
        "Read a results.json (its kind says which study wrote it) and write report.md and the "
        "PNGs next to it, or in --out: the same code that ends a run, so a committed report "
        "is rebuilt byte for byte.",
        "  cosched experiment report docs/results/cdc-policies/results.json --out /tmp/cdc",
    )  # fmt: skip
    rep.add_argument("results", type=Path, help="a results.json")
    rep.add_argument("--out", type=Path, default=None, help="report folder (default: beside it)")
    rep.set_defaults(func=cmd_report)

    led = command_parser(
        verbs, "ledger", "write docs/reproduction.md from the committed results",
        "Every result of the five papers' evaluations, with our figure, the command and the "
        "results file that hold it and a verdict, from docs/results/*/results.json. --check "
        "exits 1 if the file differs from what the results give.",
        "  cosched experiment ledger\n  cosched experiment ledger --check",
    )  # fmt: skip
    led.add_argument("--out", type=Path, default=None, help="default docs/reproduction.md")
    led.add_argument("--results", type=Path, default=None, help="default docs/results")
    led.add_argument("--check", action="store_true", help="compare instead of writing")
    led.set_defaults(func=cmd_ledger)

    mig = command_parser(
        verbs, "migrate", "convert a results.json written before schema 1",
        "Wrap an older results.json (no kind) in the schema-1 envelope: its kind, given here, "
        "and what made it as far as it is known (the command you give, the commit and host "
        "facts the file recorded). The data are kept as they are.",
        "  cosched experiment migrate old/results.json --kind cdc-live "
        "--command 'cosched experiment run experiments/cdc-policies.toml'",
    )  # fmt: skip
    mig.add_argument("results", type=Path)
    mig.add_argument("--kind", required=True, help="the kind of study that wrote it")
    mig.add_argument("--command", default=None, help="the command that wrote it, if known")
    mig.set_defaults(func=cmd_migrate)


def _command(args: argparse.Namespace) -> str:
    argv = getattr(args, "cli_argv", None)
    return "cosched " + shlex.join(argv) if argv else "cosched experiment run " + str(args.spec)


def cmd_list(args: argparse.Namespace) -> int:
    from testbed.experiment import registry

    for s in registry.studies():
        where = "live (root)" if s.live else "simulated"
        print(f"{s.kind:<12} {where:<12} {s.title}")
        for spec in s.specs:
            print(f"{'':<25} {spec}")
        extra = [*("--" + o for o in s.overrides), *(["--quick"] if s.has_quick else [])]
        if extra:
            print(f"{'':<25} takes {' '.join(extra)}")
    print("\nnot studies: experiments/calibration.toml (cosched calibrate), "
          "experiments/sim-*.toml with [workload] and kth-backfilling.toml "
          "(cosched simulate --workload)")  # fmt: skip
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from testbed.experiment import pipeline

    overrides = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k, None) is not None}
    if args.resimulate:
        overrides["resimulate"] = "yes"
    study, spec = pipeline.prepare(args.spec, quick=args.quick, overrides=overrides)
    out = args.out or pipeline.default_out(study, spec, args.quick)
    if args.dry_run:
        print(f"{args.spec}: kind {study.kind} ({study.title})")
        for line in study.plan(spec):
            print("  " + line)
        print(f"  report in {out}/")
        return 0
    # Simulated runs (a simulated kind's, a live kind's simulated half) go through the sweep
    # executor, their results kept in OUT/runs.sqlite; checked (one line) before anything runs.
    sweep = options_from(
        args, spec_table(args.spec), store=out / "runs.sqlite", desc=f"{study.kind} runs"
    )
    live = study.live and not overrides.get("resimulate")
    if live:
        from testbed.experiment.harness.cluster import require_root, sigterm_as_interrupt

        require_root()  # before anything is said or started: a refusal is one line
        sigterm_as_interrupt()  # SIGTERM tears the cluster down too
        _sequential(given(args))
    _, res, out = pipeline.run(
        args.spec, command=_command(args), out=out, quick=args.quick, overrides=overrides,
        reuse_cluster=args.reuse_cluster, sweep=sweep,
    )  # fmt: skip
    text = study.summary(res.data)
    if text:
        print()
        print(text)
    print(f"\nreport: {out}/report.md (data: {out}/results.json)")
    return 0


def _sequential(flags: list[str]) -> None:
    """Live runs need the host to themselves: say that they run one after another."""
    extra = f" ({', '.join(flags)} apply to its simulated runs only)" if flags else ""
    print(f"live study: its runs go one after another on this host{extra}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from testbed.experiment import pipeline

    study, res, written = pipeline.report(args.results, args.out)
    text = study.summary(res.data)
    if text:
        print(text)
    print(f"\nreport: {written[0] if written else args.results.parent}")
    return 0


def cmd_ledger(args: argparse.Namespace) -> int:
    from testbed.experiment import ledger

    out = args.out or ledger.DEFAULT_OUT
    text = ledger.generate(args.results or ledger.DEFAULT_RESULTS)
    if args.check:
        current = out.read_text() if out.exists() else ""
        if current != text:
            print(f"{out} is stale: run `cosched experiment ledger`")
            return 1
        print(f"{out} is current")
        return 0
    out.write_text(text)
    print(out)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from testbed.experiment import migrate

    if args.kind not in migrate.KNOWN:
        raise UsageError(
            f"--kind {args.kind!r}: not a kind", fix="kinds: " + ", ".join(migrate.KNOWN)
        )
    path = migrate.migrate_file(args.results, args.kind, args.command)
    print(path)
    return 0
