"""``cosched simulate`` and ``cosched policies``: the discrete-event simulator."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from common.errors import CoschedError, UsageError
from controller.policies.base import PolicyError
from controller.policies.registry import REGISTRY, lookup, make_policy, parse_params
from testbed.sweep.cli import add_sweep_args

from . import command_parser

SIMULATE_HELP = """\
Run scheduling policies in the discrete-event simulator and print a summary table.

Workloads:
  lublin            the Lublin-Feitelson (2003) model (batch + interactive types), --jobs, --seed
  lublin1           the same model in its single-type mode
  mix:I             Wiseman & Feitelson 2003 §4.1: I I/O-bound and 4-I compute-bound jobs as wide
  as the machine
  swf:PATH          a Standard Workload Format trace (Parallel Workloads Archive semantics)
  SPEC.toml         a workload spec file (docs/simulator.md)
  WL1 .. WL6        Yu & Byun 2011 Table 3 (NPB class A from recorded traces), for the CDC
                    schemes: WL6:jobs=100,load=heavy | interarrival=S | job_seconds=S | at_once

Several policies (comma-separated) run on exactly the same workload. --loads sweeps the
offered load by scaling interarrival times. Results go to --out as summary.json, one CSV of
per-job metrics per run, and with --plot PNGs (jobs in system; slowdown vs load).

examples:
  cosched simulate --policy easy,conservative --nodes 100 \
      --workload swf:../shared/traces/KTH-SP2-1996-2.1-filtered.swf
  cosched simulate --policy gang,paired-gang --workload lublin --nodes 16 --profile heterogeneous
  cosched simulate --policy paired-gang --param matching=best-fit --workload lublin --mode fluid
  cosched simulate --policy cc-b,sb --mpl 5 --workload WL6:jobs=100,load=heavy --nodes 16 \
      --speeds paper --fluid
"""


def add_commands(sub: Any) -> None:
    """Register ``simulate`` and ``policies`` on ``sub``."""
    p = sub.add_parser(
        "simulate",
        help="run policies in the discrete-event simulator",
        description=SIMULATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--policy",
        required=True,
        help="policy name, or several separated by commas (see `cosched policies`)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a policy parameter, repeatable (applies to every listed policy that has it)",
    )
    p.add_argument("--workload", default="lublin", help="lublin | swf:PATH | SPEC.toml")
    p.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="machine size (default: 128, or the trace's MaxProcs)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="lublin: jobs to generate (default 1000); swf: keep the first N (default all)",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed of the workload (default 1)")
    p.add_argument(
        "--load", type=float, default=None, help="scale interarrival times to this offered load"
    )
    p.add_argument("--loads", default=None, help="comma-separated loads to sweep, e.g. 0.5,0.7,0.9")
    p.add_argument(
        "--profile",
        default=None,
        choices=["compute", "homogeneous", "heterogeneous", "qcrd", "devices"],
        help="CPU/I-O profile given to every job (default: as the workload says; compute-bound; "
        "devices: compute-, disk- and network-bound jobs, docs/nplus1.md)",
    )
    p.add_argument(
        "--mode",
        default=None,
        choices=["exact", "fluid"],
        help="gang execution model (default exact; fluid for > 20,000 jobs)",
    )
    p.add_argument(
        "--quantum", type=float, default=1.0, help="quantum length in seconds (default 1)"
    )
    p.add_argument(
        "--context-switch",
        type=float,
        default=None,
        help="context-switch cost in seconds (default: from the calibration)",
    )
    p.add_argument(
        "--interference",
        type=float,
        default=None,
        help="speed lost while sharing a node, 0..1 (default: from the calibration)",
    )
    p.add_argument(
        "--calibration",
        default=None,
        metavar="PATH|none",
        help="the execution model measured live by `cosched calibrate` (default: the "
        "committed experiments/calibration.toml; none: built-in 0.05 interference, 0 s switch)",
    )
    p.add_argument(
        "--skip-bad-lines", action="store_true", help="skip malformed SWF lines (they are counted)"
    )
    p.add_argument(
        "--out", type=Path, default=Path("results/sim"), help="output folder (default results/sim)"
    )
    p.add_argument("--plot", action="store_true", help="write PNG plots")
    cdc = p.add_argument_group("communication-driven schemes (Yu & Byun 2011; docs/simulator.md)")
    cdc.add_argument(
        "--mpl", type=int, default=None, help="jobs per node at most (default 5; BATCH is 1)"
    )
    cdc.add_argument(
        "--speeds",
        default="paper",
        help="per-node speeds: paper (7 at 1, the rest at 1.8/2.8), 1,1,0.64,... or groups "
        "7x1,9x0.643 (default paper)",
    )
    cdc.add_argument(
        "--platform",
        default="paper",
        help="paper or testbed, with overrides: paper:decision_ms=2,latency_us=20 "
        "(default paper: 13 us, 2 Gb/s, HZ=1000, 41 ms slices)",
    )
    cdc.add_argument(
        "--fluid",
        action="store_true",
        help="fluid mode: detail after each change of the running set, then jump (faster)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_sweep_args(p, store=False)
    p.set_defaults(func=cmd_simulate)

    q = command_parser(
        sub,
        "policies",
        "list the scheduling policies and their parameters",
        "List every policy the simulator and controller know: name, family (batch or "
        "gang), what it does, and each parameter with its default, type and choices. "
        "Give parameters with --param KEY=VALUE to `cosched simulate` or "
        "`cosched controller start`.",
        "  cosched policies\n"
        "  cosched simulate --policy paired-gang --param matching=best-fit --workload lublin",
    )
    q.set_defaults(func=cmd_policies)


class SimulateError(UsageError):
    """A policy, parameter, workload or setting the simulator cannot use (exit status 2)."""


def cmd_policies(args: argparse.Namespace) -> int:
    for entry in REGISTRY.values():
        print(f"{entry.name}  [{entry.family}]  {entry.summary}")
        for p in entry.params:
            choice = f" (one of: {', '.join(p.choices)})" if p.choices else ""
            print(f"    {p.name}={p.default!s:<10} {p.kind.__name__:<5} {p.help}{choice}")
    return 0


def _parse_kv(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SimulateError(
                f"--param {item!r}: expected KEY=VALUE", fix="e.g. --param max_slots=4"
            )
        out[key.strip()] = value.strip()
    return out


def _default_nodes(workload: str) -> int:
    """The trace's MaxProcs for an SWF workload (read from its header only), else 128."""
    path: str | None = None
    if workload.startswith("swf:"):
        path = workload[4:]
    elif workload.endswith(".toml"):
        from testbed.sim.workloads.spec import WorkloadError, load_workload_spec

        try:
            spec = load_workload_spec(workload)
        except (WorkloadError, OSError):
            return 128  # resolve_workload reports the problem with the spec
        if spec.source == "swf" and spec.path is not None:
            path = str(spec.path)
    if path is not None:
        from testbed.sim.workloads.swf import SwfHeader

        try:
            with open(path) as fh:
                comments = []
                for line in fh:
                    if not line.lstrip().startswith(";"):
                        break
                    comments.append(line)
        except OSError:
            return 128  # the workload loader reports the missing file
        size = SwfHeader.from_comments(comments).machine_size
        if size:
            return size
    return 128


def cmd_simulate(args: argparse.Namespace) -> int:
    from testbed.sim.engine import simulate
    from testbed.sim.metrics import job_table, summarize, write_csv, write_json
    from testbed.sim.report import plot_jobs_in_system, plot_slowdown_vs_load, table
    from testbed.sim.results import SimConfig
    from testbed.sim.workloads.spec import WorkloadError, resolve_workload

    try:
        policies = [name.strip() for name in args.policy.split(",") if name.strip()]
        raw = _parse_kv(args.param)
        entries = [lookup(name) for name in policies]
        if any(e.family == "cdc" for e in entries):
            if not all(e.family == "cdc" for e in entries):
                raise PolicyError(
                    "the communication-driven schemes run in their own simulator: list only "
                    "batch, local, dcs, pb, ib, sb, hybrid, cc-s, cc-b in one --policy"
                )
            return _simulate_cdc(args, [e.name for e in entries], raw)
        for key in raw:
            if not any(key in {p.name for p in e.params} for e in entries):
                parse_params(entries[0], {key: raw[key]})  # raises with the valid list
        typed = {
            e.name: parse_params(
                e, {k: v for k, v in raw.items() if k in {p.name for p in e.params}}
            )
            for e in entries
        }
        loads = [float(x) for x in args.loads.split(",")] if args.loads else [args.load]
    except (PolicyError, ValueError) as exc:
        # policies are pure and know nothing of CoschedError: wrap here
        raise SimulateError(str(exc), fix="see `cosched policies`") from None
    nodes = args.nodes if args.nodes is not None else _default_nodes(args.workload)
    if nodes < 1:
        raise SimulateError(f"--nodes must be >= 1, got {nodes}")
    workloads = []
    try:
        for load in loads:
            jobs, info = resolve_workload(
                args.workload,
                nodes=nodes,
                seed=args.seed,
                jobs=args.jobs,
                load=load,
                profile=args.profile,
                skip_bad_lines=args.skip_bad_lines or None,
            )
            workloads.append((load, jobs, info))
    except (WorkloadError, OSError) as exc:
        what = str(exc)  # a WorkloadError names the workload itself
        if isinstance(exc, OSError):
            where = str(exc.filename or "")
            why = exc.strerror or str(exc)
            why = why if where in args.workload else f"{where}: {why}"
            what = f"--workload {args.workload}: {why}"
        raise SimulateError(
            what,
            fix="give lublin, mix:I, swf:PATH or SPEC.toml (see `cosched simulate --help`)",
        ) from None
    info = workloads[0][2]
    if info.skipped_lines:
        print(f"skipped {info.skipped_lines} malformed lines of {args.workload}", file=sys.stderr)
    mode = args.mode or ("fluid" if info.n_jobs > 20000 else "exact")
    gang = any(e.family == "gang" for e in entries)
    model = _execution_model(args) if gang else None
    try:
        config = SimConfig(
            nodes=nodes,
            quantum=args.quantum,
            context_switch=model[0] if model else 0.0,
            interference=model[1] if model else 0.05,
            mode=mode,
            # N + 1 gangs need each job's disk and network demand: the three-device
            # model, for every policy of the run so that they are compared on one model
            network=any(e.name == "nplus1" for e in entries) or args.profile == "devices",
        )
    except ValueError as exc:
        raise SimulateError(str(exc)) from None
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CoschedError(
            f"cannot create --out {args.out}: {exc.strerror}", fix="give a writable --out"
        ) from None
    for e in entries:
        try:  # a value the constructor refuses (e.g. band=-1): one line before any run
            make_policy(e.name, nodes, typed[e.name])
        except PolicyError as exc:
            raise SimulateError(str(exc), fix="see `cosched policies`") from None
    pairs = [(load, jobs, info, e) for load, jobs, info in workloads for e in entries]
    if len(pairs) > 1 or args.dask:  # one run goes to the cluster too if asked
        ran = _run_sweep(args, pairs, nodes, typed, config)
    else:
        load, jobs, info, entry = pairs[0]
        policy = make_policy(entry.name, nodes, typed[entry.name])
        res = _run_one(simulate, jobs, policy, config, quiet=args.quiet, label=entry.name)
        rows = job_table(res)
        summary = summarize(res, rows)
        summary.load = info.offered_load
        write_csv(args.out / f"jobs-{_tag(entry.name, load)}.csv", rows)
        write_json(args.out / f"summary-{_tag(entry.name, load)}.json", summary, res)
        ran = [(summary, res.rejected, res)]
    summaries = [r[0] for r in ran]
    where = f"; gang execution model {mode}" if gang else ""
    print(f"workload: {workloads[0][2].description}; nodes {nodes}{where}")
    if model:
        print(model[2])
    print(table(summaries))
    for s, rejected, _ in ran:
        for job_id, why in rejected[:5]:
            print(f"rejected job {job_id} ({s.policy}): {why}")
        if len(rejected) > 5:
            print(f"... and {len(rejected) - 5} more rejected ({s.policy})")
    if args.plot:
        plot_jobs_in_system(args.out / "jobs_in_system.png", [r[2] for r in ran[-len(entries) :]])
        if len(loads) > 1:
            plot_slowdown_vs_load(args.out / "slowdown_vs_load.png", summaries)
    print(f"results in {args.out}/")
    return 0


def _tag(policy: str, load: float | None) -> str:
    return policy if load is None else f"{policy}-load{load:g}"


def _absolute(workload: str) -> str:
    """The workload argument with its file made absolute (a worker may run elsewhere)."""
    if workload.startswith("swf:"):
        return "swf:" + str(Path(workload[4:]).resolve())
    if workload.endswith(".toml"):
        return str(Path(workload).resolve())
    return workload


def _run_sweep(
    args: argparse.Namespace, pairs: list[Any], nodes: int, typed: dict[str, Any], config: Any
) -> list[tuple[Any, list[tuple[int, str]], Any]]:
    """Several (load, policy) runs through the sweep executor; writes each run's files."""
    from dataclasses import asdict

    from testbed.sim.metrics import RunSummary
    from testbed.sim.report import JobsSeries
    from testbed.sim.sweeprun import run_policy
    from testbed.sweep import RunSpec, run_sweep
    from testbed.sweep.cli import options_from

    specs = []
    for load, _, _, entry in pairs:
        workload = {
            "arg": _absolute(args.workload),
            "jobs": args.jobs,
            "load": load,
            "profile": args.profile,
            "skip_bad_lines": args.skip_bad_lines or None,
        }
        params = {
            "workload": workload,
            "nodes": nodes,
            "policy": entry.name,
            "policy_params": typed[entry.name],
            "config": asdict(config),
        }
        specs.append(RunSpec("simulate", params, args.seed, run_policy))
    done = run_sweep(specs, options_from(args, None, desc="simulate runs"))
    ran = []
    for (load, _, _, entry), r in zip(pairs, done.results, strict=True):
        if r is None:
            continue
        doc = dict(r["summary"])
        doc["slot_matched_fraction"] = {int(k): v for k, v in doc["slot_matched_fraction"].items()}
        summary = RunSummary(**doc)
        tag = _tag(entry.name, load)
        (args.out / f"jobs-{tag}.csv").write_text(r["csv"], newline="")
        (args.out / f"summary-{tag}.json").write_text(r["json"])
        rejected = [(int(j), str(why)) for j, why in r["rejected"]]
        ran.append((summary, rejected, JobsSeries(entry.name, r["series"][0], r["series"][1])))
    done.check()
    return ran


def _execution_model(args: argparse.Namespace) -> tuple[float, float, str]:
    """(context switch, interference, a line saying where they came from).

    Only gang policies use the execution model, so only they read the
    calibration file; flags given on the command line win over it.
    """
    from testbed.sim.calibration import resolve_calibration

    cal = resolve_calibration(args.calibration)
    cs = cal.context_switch if args.context_switch is None else args.context_switch
    interference = cal.interference if args.interference is None else args.interference
    line = cal.describe()
    if args.context_switch is not None or args.interference is not None:
        line = (
            f"execution model: interference {interference:.3f}, context switch "
            f"{cs * 1000:.1f} ms (flags over {cal.source})"
        )
    return cs, interference, line


def _run_one(simulate: Any, jobs: Any, policy: Any, config: Any, *, quiet: bool, label: str) -> Any:
    """Run with a progress bar that appears only if the run takes over a second."""
    if quiet or not sys.stderr.isatty():  # no bar in CI logs and pipes
        return simulate(jobs, policy, config)
    bar = _LateBar(len(jobs), label)
    try:
        return simulate(jobs, policy, config, progress=bar)
    finally:
        bar.close()


class _LateBar:
    """A tqdm bar created after the first second of a run, with what ended so far.

    tqdm costs a twentieth of a second to import, a tenth of the whole KTH
    command (issue 11); most runs end before a bar would show, so it is
    imported only when one is due.
    """

    def __init__(self, total: int, label: str) -> None:
        self.due = time.monotonic() + 1.0
        self.total = total
        self.label = label
        self.done = 0
        self.bar: Any = None

    def __call__(self, ended: int) -> None:
        if self.bar is not None:
            self.bar.update(ended)
            return
        self.done += ended
        if time.monotonic() >= self.due:
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.total, initial=self.done, desc=self.label, unit="job", leave=False
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _simulate_cdc(args: argparse.Namespace, schemes: list[str], raw: dict[str, str]) -> int:
    """The CDC schemes on Yu & Byun's workloads (testbed/sim/cdc/, docs/simulator.md)."""
    import json

    from testbed.sim.cdc.platform import PlatformError, parse_platform, parse_speeds
    from testbed.sim.cdc.run import run_cdc
    from testbed.sim.cdc.workload import WorkloadError, parse_workload
    from testbed.sweep import RunSpec, run_sweep
    from testbed.sweep.cli import options_from

    mpl = args.mpl if args.mpl is not None else int(raw.pop("mpl", 5))
    if mpl < 1:
        raise SimulateError(f"--mpl {mpl}: the multiprogramming level must be >= 1 (1..64)")
    if mpl > 64:
        raise SimulateError(f"--mpl {mpl}: at most 64 (what the agents accept)")
    unknown = sorted(set(raw) - {"mpl"})
    if unknown:
        raise SimulateError(
            f"--param {unknown[0]}: the simulated schemes take --mpl, --speeds and --platform "
            "(e.g. --platform paper:spin_us=150)"
        )
    nodes = args.nodes if args.nodes is not None else 16
    if nodes < 1:
        raise SimulateError(f"--nodes must be >= 1, got {nodes}")
    try:
        platform = parse_platform(args.platform)
        parse_speeds(args.speeds, nodes)
        wl = parse_workload(args.workload)
    except (PlatformError, WorkloadError) as exc:
        raise SimulateError(str(exc)) from None
    fluid = {"settle_s": 0.5, "measure_s": 1.0, "tail_s": 1.0, "min_jump_s": 2.0}
    specs = [
        RunSpec(
            "simulate-cdc",
            {
                "scheme": name,
                "mpl": 1 if name == "batch" else mpl,
                "workload": args.workload,
                "nodes": nodes,
                "speeds": args.speeds,
                "platform": args.platform,
                "fluid": fluid if args.fluid else None,
            },
            args.seed,
            run_cdc,
        )
        for name in schemes
    ]
    out = run_sweep(specs, options_from(args, None, desc="cdc runs"))
    for failure in out.failed:
        raise SimulateError(f"{failure.spec.params['scheme']}: {failure.error}")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CoschedError(
            f"cannot create --out {args.out}: {exc.strerror}", fix="give a writable --out"
        ) from None
    print(
        f"workload: {wl.describe()}; nodes {nodes} (speeds {args.speeds}); platform "
        f"{platform.name} (decisions every {platform.decision_ms:g} ms); "
        f"{'fluid' if args.fluid else 'exact'}"
    )
    print(
        f"{'scheme':<8}{'MPL':>4}{'jobs':>6}{'response s':>12}{'wait s':>10}{'exec s':>10}"
        f"{'wait %':>8}{'BCR':>8}{'MD ms':>9}{'decisions':>12}{'sim s':>8}"
    )

    def f(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for spec, res in zip(specs, out.results, strict=True):
        assert res is not None
        name = str(spec.params["scheme"])
        ws = res["wait_share"]
        md = res["md_s"]
        print(
            f"{name:<8}{res['mpl']:>4}{res['done']:>6}{f(res['response_s'], '.2f'):>12}"
            f"{f(res['wait_s'], '.2f'):>10}{f(res['execution_s'], '.2f'):>10}"
            f"{f(None if ws is None else 100 * ws, '.1f'):>8}{f(res['bcr'], '.3f'):>8}"
            f"{f(None if md is None else md * 1e3, '.3f'):>9}{res['decisions']:>12}"
            f"{res['wall_s']:>8.1f}"
        )
        (args.out / f"summary-{name}.json").write_text(
            json.dumps({"params": dict(spec.params), "seed": spec.seed, **res}, indent=1) + "\n"
        )
        rows = ["job_id,app,size,submit,start,end,wait,response"]
        for jid, app, size, sub, start, end in res["per_job"]:
            rows.append(f"{jid},{app},{size},{sub},{start},{end},{start - sub:.6f},{end - sub:.6f}")
        (args.out / f"jobs-{name}.csv").write_text("\n".join(rows) + "\n")
    print(f"results in {args.out}/")
    return 0
