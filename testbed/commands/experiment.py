"""``cosched experiment run SPEC.toml``: a live experiment and its report.

Two kinds of spec (testbed/experiment/spec.py): the paired-vs-gang mixes of
Wiseman & Feitelson 2003 §4.1 (with a ``[sweep]``: Figs. 8 and 9, the mixes once per cluster
size or granularity) and the job streams of Yu & Byun 2011 §5.3/§5.5
(cdc-policies). ``cosched experiment report RESULTS.json`` writes a report
again from its data, whichever kind wrote it.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from common.errors import CoschedError, UsageError

from . import command_parser

DESCRIPTION = (
    "Run a live experiment on real processes: bring up the local cluster, start the "
    "controller once per configuration (and job mix, or load and MPL), run the synthetic "
    "program, and write a report (Markdown + PNG) that sets the paper's figures beside ours. "
    "Needs root. The cluster is torn down afterwards, also on failure or Ctrl-C.\n\n"
    "paired-vs-gang.toml (Wiseman & Feitelson 2003 §4.1, Fig. 7; the 2-node file is the "
    "configuration "
    "faithful to the paper's hardware) and the Fig. 8 / Fig. 9 sweeps take --duration, "
    "--mixes, --configs; "
    "cdc-policies.toml (Yu & Byun 2011 §5.3, §5.5: every communication-driven scheme and BATCH "
    "on one seeded job stream) takes --quick, --schemes, --loads, --mpls, --jobs. "
    "sim-vs-live.toml (Wiseman & Feitelson 2003 §4.2 scaled down: one Lublin stream live under "
    "strict and "
    "paired gang and through the simulator) takes --quick and --reuse-cluster. "
    "A [study] spec such as sim-paired-fig10-12.toml runs in the simulator only (no root; "
    "Wiseman & Feitelson 2003 Figs. 10-12) and takes --quick; so does a [rajaei] spec "
    "(rajaei-gang-vs-backfill.toml: Rajaei et al. 2008 Figs. 5-9, gang vs lookahead backfilling), "
    "and a [dhc] spec (dhc.toml: Feitelson & Rudolph 1996, DHC's design choices and waste)."
)
EXAMPLES = (
    "  sudo cosched experiment run experiments/paired-vs-gang.toml\n"
    "  sudo cosched experiment run experiments/paired-vs-gang.toml --duration 10 --mixes 1\n"
    "  sudo cosched experiment run experiments/paired-vs-gang.toml --configs gang,paired-fig4\n"
    "  sudo cosched experiment run experiments/paired-vs-gang-2node.toml\n"
    "  sudo cosched experiment run experiments/fig8-cluster-size.toml --mixes 0,1,2\n"
    "  sudo cosched experiment run experiments/fig9-granularity.toml --duration 10\n"
    "  sudo cosched experiment run experiments/cdc-policies.toml --quick\n"
    "  sudo cosched experiment run experiments/cdc-policies.toml --schemes sb,cc-b --mpls 5\n"
    "  sudo cosched experiment run experiments/sim-vs-live.toml --quick\n"
    "  cosched experiment run experiments/sim-paired-fig10-12.toml --out results/fig10-12\n"
    "  cosched experiment run experiments/rajaei-gang-vs-backfill.toml --quick\n"
    "  cosched experiment run experiments/dhc.toml --quick\n"
    "  cosched experiment report results/cdc-policies/results.json\n"
    "  cosched experiment report results/paired-vs-gang-2node/results.json"
)
STREAM_ONLY = ("quick", "schemes", "loads", "mpls", "jobs")
PAIRED_ONLY = ("duration", "mixes", "configs")


def add_commands(sub: Any) -> None:
    """Register ``experiment`` (run) on ``sub``."""
    p = command_parser(
        sub,
        "experiment",
        "run a live experiment (Wiseman & Feitelson 2003 §4.1) and write its report",
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
        "--quick", action="store_true", help="job streams: the spec's [quick] run (< 3 min)"
    )
    run.add_argument("--schemes", default=None, help="job streams: override, e.g. sb,cc-b")
    run.add_argument("--loads", default=None, help="job streams: override, e.g. heavy")
    run.add_argument("--mpls", default=None, help="job streams: override, e.g. 3,5")
    run.add_argument("--jobs", type=int, default=None, help="job streams: jobs per run")
    run.add_argument(
        "--reuse-cluster", action="store_true", help="run on a cluster that is already up"
    )
    run.set_defaults(func=cmd_run)
    rep = command_parser(
        verbs,
        "report",
        "write an experiment's report again from its results.json",
        "Read the results.json an experiment wrote (paired-vs-gang, a Fig. 8 / Fig. 9 "
        "sweep, or a job stream) and write report.md and the PNGs next to it (or in --out) "
        "again, e.g. after changing the report code.",
        "  cosched experiment report results/cdc-policies/results.json\n"
        "  cosched experiment report results/paired-vs-gang-2node/results.json",
    )
    rep.add_argument("results", type=Path, help="results.json of an experiment")
    rep.add_argument("--out", type=Path, default=None, help="report folder (default: beside it)")
    rep.set_defaults(func=cmd_report)


class ExperimentSpecError(UsageError):
    """The spec file or an override cannot be used (exit status 2)."""


def _given(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    return [f"--{n}" for n in names if getattr(args, n, None) not in (None, False)]


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _kind(path: Path) -> str | None:
    """``"study"`` (simulated Figs. 10-12), ``"rajaei"`` (Rajaei et al. 2008 in the simulator),
    ``"validate"`` (simulator vs live) or None."""
    import tomllib

    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return None  # load_any below says what is wrong
    if isinstance(doc.get("study"), dict):
        return "study"
    if isinstance(doc.get("rajaei"), dict):
        return "rajaei"
    if isinstance(doc.get("dhc"), dict):
        return "dhc"
    exp = doc.get("experiment")
    if isinstance(exp, dict) and "mean_runtime" in exp:
        return "validate"
    return None


def _run_delegated(args: argparse.Namespace, kind: str) -> int:
    """Simulated studies and the validation run their own entry points (same flags)."""
    wrong = [f for f in _given(args, PAIRED_ONLY + STREAM_ONLY) if f != "--quick"]
    if wrong:
        raise ExperimentSpecError(
            f"{', '.join(wrong)}: not for a {kind} spec ({args.spec})",
            fix="give only --out, --quick" + (", --reuse-cluster" if kind == "validate" else ""),
        )
    argv = [str(args.spec)]
    if args.out is not None:
        argv += ["--out", str(args.out)]
    if args.quick:
        argv.append("--quick")
    if kind == "study":
        from testbed.experiment.pairedsim import study as simstudy

        return simstudy.main(argv)
    if kind == "rajaei":
        from testbed.experiment.rajaei import study as rajaei

        return rajaei.main(argv)
    if kind == "dhc":
        from testbed.experiment.dhc import study as dhcstudy

        return dhcstudy.main(argv)
    from testbed.experiment.simvslive import study as validate

    if args.reuse_cluster:
        argv.append("--reuse-cluster")
    return validate.main(argv)


def cmd_run(args: argparse.Namespace) -> int:
    """Run one experiment spec and write its report."""
    from testbed.experiment.cdc.stream import StreamSpec
    from testbed.experiment.paired.spec import SpecError, load_any

    kind = _kind(args.spec)
    if kind is not None:
        return _run_delegated(args, kind)

    try:
        spec = load_any(args.spec)
    except OSError as exc:
        raise ExperimentSpecError(
            f"cannot read {args.spec}: {exc.strerror}", fix="give an experiment TOML file"
        ) from None
    except (SpecError, ValueError) as exc:
        raise ExperimentSpecError(
            str(exc), fix="give an experiment TOML, e.g. experiments/paired-vs-gang.toml"
        ) from None
    if isinstance(spec, StreamSpec):
        return _run_streams(args, spec)
    wrong = _given(args, STREAM_ONLY)
    if wrong:
        raise ExperimentSpecError(
            f"{', '.join(wrong)}: only for job-stream specs; {args.spec} is a paired spec",
            fix="use --duration, --mixes or --configs",
        )
    return _run_paired(args)


def _run_streams(args: argparse.Namespace, spec: Any) -> int:
    from testbed.experiment.cdc.report import markdown, plots, text_summary
    from testbed.experiment.cdc.run import run_streams
    from testbed.experiment.cdc.stream import SCHEMES
    from testbed.experiment.paired.run import ExperimentError

    wrong = _given(args, PAIRED_ONLY)
    if wrong:
        raise ExperimentSpecError(
            f"{', '.join(wrong)}: only for paired specs; {args.spec} is a job-stream spec",
            fix="use --quick, --schemes, --loads, --mpls or --jobs",
        )
    if args.quick:
        spec = spec.quick_version()
    changes: dict[str, Any] = {}
    if args.schemes:
        changes["schemes"] = _csv(args.schemes)
        for s in changes["schemes"]:
            if s not in SCHEMES:
                raise ExperimentSpecError(f"--schemes: unknown {s!r}; valid: {', '.join(SCHEMES)}")
    if args.loads:
        changes["loads"] = _csv(args.loads)
        for ld in changes["loads"]:
            if ld not in spec.load_means:
                raise ExperimentSpecError(
                    f"--loads: unknown {ld!r}; the spec defines {', '.join(spec.load_means)}"
                )
    if args.mpls:
        try:
            changes["mpls"] = tuple(int(m) for m in _csv(args.mpls))
        except ValueError:
            raise ExperimentSpecError(
                f"--mpls: whole numbers, e.g. 3,5; got {args.mpls!r}"
            ) from None
        if not changes["mpls"] or any(not 1 <= m <= 64 for m in changes["mpls"]):
            raise ExperimentSpecError(f"--mpls: MPLs in 1..64, e.g. 3,5; got {args.mpls!r}")
    if args.jobs is not None:
        if args.jobs < 1:
            raise ExperimentSpecError(f"--jobs must be >= 1, got {args.jobs}")
        changes["jobs"] = args.jobs
    spec = dataclasses.replace(spec, **changes)
    out = args.out or Path("results") / (spec.name + ("-quick" if args.quick else ""))
    try:
        result = run_streams(spec, out, reuse_cluster=args.reuse_cluster)
    except ExperimentError as exc:
        raise CoschedError(str(exc)) from None
    written = _write_stream_report(result, out, markdown, plots)
    print()
    print(text_summary(result))
    print(f"\nreport: {out}/report.md (plots {', '.join(written)}; data results.json)")
    return 0


def _write_stream_report(result: Any, out: Path, markdown: Any, plots: Any) -> list[str]:
    """report.md and the PNGs; returns the PNGs' names."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(markdown(result))
        written: list[str] = plots(result, out)
    except OSError as exc:
        raise CoschedError(
            f"cannot write the report in {out}: {exc.strerror}", fix="give a writable --out"
        ) from None
    return written


def cmd_report(args: argparse.Namespace) -> int:
    """Write an experiment's report from its results.json."""
    import json

    try:
        data = json.loads(args.results.read_text())
    except OSError as exc:
        raise ExperimentSpecError(
            f"cannot read {args.results}: {exc.strerror}", fix="give a results.json"
        ) from None
    except ValueError as exc:
        raise ExperimentSpecError(
            f"{args.results} is not JSON ({exc})", fix="give the results.json a run wrote"
        ) from None
    out = args.out or args.results.parent
    if isinstance(data, dict) and "waste" in (data.get("meta") or {}):
        return _report_dhc(
            data, out
        )  # Feitelson & Rudolph's study (testbed/experiment/dhcstudy.py)
    if isinstance(data, dict) and "points" in data:
        return _report_sweep(args.results, data, out)
    if isinstance(data, dict) and any("mix" in r for r in data.get("runs") or []):
        return _report_paired(args.results, data, out)
    return _report_stream(args.results, data, out)


def _report_dhc(data: dict[str, Any], out: Path) -> int:
    from testbed.experiment.dhc import report as dhcreport

    points, meta = list(data["points"]), dict(data["meta"])
    for p in dhcreport.write_report(points, meta, out):
        print(p)
    for ok, line in dhcreport.findings(points, meta):
        print(("reproduced: " if ok else "differs:    ") + line)
    return 0


def _report_stream(path: Path, data: Any, out: Path) -> int:
    from testbed.experiment.cdc.report import markdown, plots, text_summary
    from testbed.experiment.cdc.run import StreamResult

    try:
        result = StreamResult.from_dict(data)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise ExperimentSpecError(
            f"{path} is not an experiment's results.json ({exc})",
            fix="give the results.json a run wrote",
        ) from None
    _write_stream_report(result, out, markdown, plots)
    print(text_summary(result))
    print(f"\nreport: {out}/report.md")
    return 0


def _report_paired(path: Path, data: Any, out: Path) -> int:
    from testbed.experiment.paired.report import text_summary
    from testbed.experiment.paired.run import ExperimentResult

    try:
        result = ExperimentResult.from_dict(data)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise ExperimentSpecError(
            f"{path} is not a paired-vs-gang results.json ({exc})",
            fix="give the results.json a run wrote",
        ) from None
    _write_paired_report(result, out)
    print(text_summary(result))
    print(f"\nreport: {out}/report.md")
    return 0


def _report_sweep(path: Path, data: Any, out: Path) -> int:
    from testbed.experiment.paired.report import sweep_text
    from testbed.experiment.paired.run import SweepResult

    try:
        sweep = SweepResult.from_dict(data)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise ExperimentSpecError(
            f"{path} is not a sweep's results.json ({exc})",
            fix="give the results.json a run wrote",
        ) from None
    _write_sweep_report(sweep, out)
    print(sweep_text(sweep))
    print(f"\nreport: {out}/report.md")
    return 0


def _write_paired_report(result: Any, out: Path) -> None:
    from testbed.experiment.paired.report import markdown, plots

    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(markdown(result))
        plots(result, out)
    except OSError as exc:
        raise CoschedError(
            f"cannot write the report in {out}: {exc.strerror}", fix="give a writable --out"
        ) from None


def _write_sweep_report(sweep: Any, out: Path) -> str:
    from testbed.experiment.paired.report import sweep_markdown, sweep_plots

    for p in sweep.points:
        _write_paired_report(p.result, out / p.label)
    try:
        (out / "report.md").write_text(sweep_markdown(sweep))
        name: str = sweep_plots(sweep, out)
    except OSError as exc:
        raise CoschedError(
            f"cannot write the report in {out}: {exc.strerror}", fix="give a writable --out"
        ) from None
    return name


def _run_paired(args: argparse.Namespace) -> int:
    from testbed.experiment.paired.report import sweep_text, text_summary
    from testbed.experiment.paired.run import ExperimentError, run_experiment, run_sweep
    from testbed.experiment.paired.spec import CONFIGS, SpecError, load_experiment

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
    from testbed.commands.calibrate import _terminate_as_interrupt

    _terminate_as_interrupt()  # SIGTERM tears the cluster down too
    try:
        if spec.sweep is not None:
            sweep = run_sweep(spec, out, reuse_cluster=args.reuse_cluster)
        else:
            result = run_experiment(spec, out, reuse_cluster=args.reuse_cluster)
    except ExperimentError as exc:
        raise CoschedError(str(exc)) from None
    print()
    if spec.sweep is not None:
        name = _write_sweep_report(sweep, out)
        print(sweep_text(sweep))
        print(
            f"\nreport: {out}/report.md (plot {name}; each point in its folder; data results.json)"
        )
        return 0
    _write_paired_report(result, out)
    print(text_summary(result))
    print(f"\nreport: {out}/report.md (plots fig7_top.png, fig7_bottom.png; data results.json)")
    return 0
