"""The report of the live N + 1 study (kind ``nplus1-live``): per policy the throughput of
the disk- and network-bound jobs, the compute job's against strict and paired gang, the
response times, which rows ran together and how often, each job's measured demand per
device, each device's use over time (device-use.png) and the host's load.

A difference between two policies is taken repeat by repeat (the policies ran
interleaved, so a repeat is one stretch of the host's load); it is beyond the spread when
it has one sign in every repeat and a mean larger than half the range of the per-repeat
values (claims.Difference, the rule of docs/reproduction.md).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.experiment.claims import Difference
from testbed.experiment.nplus1live.study import DEVICES, KINDS, PolicyRun, runs_of

NAMES = {"gang": "strict gang", "paired-gang": "paired gang", "nplus1": "N + 1 gangs (N = 2)"}
UNIT = {"compute": "units/s", "disk": "MB/s", "net": "MB/s"}
SCALE = {"compute": 1.0, "disk": 1e-6, "net": 1e-6}
LOSS_TARGET = 10.0  # per cent: issue 31's bound on the compute jobs' loss


def _by_policy(runs: list[PolicyRun]) -> dict[str, list[PolicyRun]]:
    out: dict[str, list[PolicyRun]] = {}
    for r in runs:
        out.setdefault(r.policy, []).append(r)
    return out


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def throughputs(runs: list[PolicyRun], kind: str) -> list[float]:
    return [tp * SCALE[kind] for r in runs if (tp := r.job(kind).throughput) is not None]


def responses(runs: list[PolicyRun], kind: str | None = None) -> list[float]:
    """Per run: the job's response time, or with no kind the mean over the three."""
    out = []
    for r in runs:
        vals = [j.response_s for j in r.jobs if (kind is None or j.kind == kind)]
        if all(v is not None for v in vals) and vals:
            out.append(statistics.fmean(v for v in vals if v is not None))
    return out


def change(a: list[PolicyRun], b: list[PolicyRun], value: Any) -> Difference | None:
    """Per repeat, ``value`` of a over b's in per cent."""
    pairs = {r.repeat: r for r in b}
    vals = []
    for r in a:
        other = pairs.get(r.repeat)
        if other is None:
            continue
        x, y = value(r), value(other)
        if x is not None and y:
            vals.append((x / y - 1.0) * 100.0)
    return Difference(tuple(vals)) if vals else None


def _tp(kind: str) -> Any:
    return lambda r: r.job(kind).throughput


def _resp(r: PolicyRun) -> float | None:
    vals = [j.response_s for j in r.jobs]
    return None if any(v is None for v in vals) else statistics.fmean(v for v in vals if v)


def all_three(run: PolicyRun) -> list[dict[str, Any]]:
    """The quanta seen while all three jobs were in the system: from the last job's first
    quantum to the first job's last (each job's first and last quantum in the trace)."""
    seen = {k: [i for i, t in enumerate(run.trace) if k in t["ran"]] for k in KINDS}
    if not all(seen.values()):
        return []
    first, last = max(v[0] for v in seen.values()), min(v[-1] for v in seen.values())
    return run.trace[first : last + 1]


def settling(run: PolicyRun) -> tuple[int, int, int] | None:
    """While all three jobs were in: (quanta before the first quantum that ran all three,
    quanta from it on, of those the ones that ran all three); None if none did."""
    window = all_three(run)
    first = next((i for i, t in enumerate(window) if len(t["ran"]) == len(KINDS)), None)
    if first is None:
        return None
    rest = window[first:]
    return first, len(rest), sum(len(t["ran"]) == len(KINDS) for t in rest)


def cpu_by_company(runs: list[PolicyRun]) -> dict[str, float]:
    """The compute job's median CPU share by what ran beside it (its interference)."""
    by: dict[str, list[float]] = {}
    for r in runs:
        for t in r.trace:
            share = t["shares"].get("compute")
            if share is None or "compute" not in t["ran"]:
                continue
            others = "+".join(k for k in t["ran"] if k != "compute") or "alone"
            by.setdefault(others, []).append(float(share.get("cpu", 0.0)))
    return {k: statistics.median(v) for k, v in sorted(by.items())}


def groups(runs: list[PolicyRun], *, full: bool = False) -> tuple[Counter[str], int]:
    """How often each set of kinds ran together, over the quanta in which any job ran
    (``full``: only while all three were in the system)."""
    c: Counter[str] = Counter(
        "+".join(t["ran"]) or "none"
        for r in runs
        for t in (all_three(r) if full else r.trace)
        if t["ran"] or full
    )
    return c, sum(c.values())


def demand(runs: list[PolicyRun], kind: str) -> dict[str, float]:
    """The median share of each device the agents measured for ``kind`` over its quanta."""
    rows = [t["shares"][kind] for r in runs for t in r.trace if kind in t["shares"]]
    if not rows:
        return {}
    return {d: statistics.median(float(s.get(d, 0.0)) for s in rows) for d in DEVICES}


def device_series(run: PolicyRun) -> list[tuple[float, dict[str, float]]]:
    """Per quantum seen: each device's use, the shares of the jobs that ran summed."""
    out = []
    for t in run.trace:
        use = {d: sum(float(s.get(d, 0.0)) for s in t["shares"].values()) for d in DEVICES}
        out.append((float(t["t"]), use))
    return out


def device_means(runs: list[PolicyRun]) -> dict[str, float]:
    """Each device's mean use over the quanta from the first to the last a job ran."""
    vals: dict[str, list[float]] = {d: [] for d in DEVICES}
    for r in runs:
        busy = [i for i, t in enumerate(r.trace) if t["ran"]]
        if not busy:
            continue
        for _t, use in device_series(r)[busy[0] : busy[-1] + 1]:
            for d in DEVICES:
                vals[d].append(use[d])
    return {d: statistics.fmean(v) for d, v in vals.items() if v}


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _spread(xs: list[float], fmt: str = "{:.2f}") -> str:
    if not xs:
        return "-"
    per = ", ".join(fmt.format(x) for x in xs)
    return f"{fmt.format(statistics.fmean(xs))} ({per})" if len(xs) > 1 else fmt.format(xs[0])


def _diff(d: Difference | None) -> str:
    if d is None:
        return "-"
    tag = "beyond the spread" if d.beyond_spread() else "within the spread"
    if d.spread is None:
        tag = "one repeat: no spread"
    return f"{d.text().replace('seed', 'repeat')}: {tag}"


def verdicts(data: Mapping[str, Any]) -> dict[str, Difference | None]:
    by = _by_policy(runs_of(data))
    n1, pg, g = by.get("nplus1", []), by.get("paired-gang", []), by.get("gang", [])
    return {
        f"{k} {what} vs {base}": change(n1, ref, fn)
        for base, ref in (("gang", g), ("paired-gang", pg))
        for k, what, fn in (
            ("disk", "throughput", _tp("disk")),
            ("net", "throughput", _tp("net")),
            ("compute", "throughput", _tp("compute")),
            ("all", "mean response", _resp),
        )
    }


def markdown(data: Mapping[str, Any]) -> str:
    spec, cal = data["spec"], data.get("calibration") or {}
    runs = runs_of(data)
    by = _by_policy(runs)
    policies = [p for p in spec["policies"] if p in by]
    reps = max((r.repeat for r in runs), default=0)
    lines = [
        f"# {spec['name']}: N + 1 gangs against strict and paired gang, live",
        "",
        "Wiseman & Feitelson 2003 §5 (issue 31 item 1). One compute-, one disk- and one "
        f"network-bound job (apps/devicejob.py), each {spec['nodes']} wide, on "
        f"{spec['nodes']} nodes with {spec['cpus_per_node']:g} CPU each "
        f"({spec['cpu_mechanism']}), link {spec['link']}, quantum {spec['quantum']} s; "
        f"{reps} repeat(s), the policies interleaved in each "
        f"({', '.join(spec['policies'])}). testbed/experiment/nplus1live/study.py says what "
        "is measured and how; docs/nplus1.md the choices.",
        "",
        "## Calibration (each job alone, before the runs)",
        "",
    ]
    bps = cal.get("bps") or {}
    if bps:
        own_d, own_n = cal.get("disk_own_bps_per_node"), cal.get("net_own_bps_per_node")
        lines += [
            f"* `disk_bps` = **{bps['disk'] / 1e6:.1f} MB/s** per node: the disk job without "
            f"pauses ({spec['jobs']['disk']['block'] >> 20} MiB O_DIRECT writes, one rank a "
            "node, both nodes on the host's one disk) read a median "
            f"{cal['disk_unpaused']['median_shares']['disk']:.4f} of the disk at "
            f"{cal['probe_bps']['disk'] / 1e9:g} GB/s over "
            f"{cal['disk_unpaused']['quanta']} quanta (its own count: "
            f"{_f(own_d and own_d / 1e6, '{:.1f}')} MB/s per node). The controller's "
            f"default, {cal['default_bps']['disk'] / 1e6:.0f} MB/s, would read every quantum "
            "of it as 1.000.",
            f"* `net_bps` = **{bps['net'] / 1e6:.2f} MB/s** per node: the network job without "
            f"pauses ({spec['jobs']['net']['block'] >> 10} KiB each way a round trip) read "
            f"{cal['net_unpaused']['median_shares']['net']:.4f} of the network at "
            f"{cal['probe_bps']['net'] / 1e9:g} GB/s (its own count, rank 0's bytes sent and "
            f"received: {_f(own_n and own_n / 1e6)} MB/s).",
            "",
            "Each kind alone with its pauses (the agents' median share of each device; "
            "its work in the runs is its rate alone times "
            f"{spec['solo_seconds']:g} s):",
            "",
            "| kind | duty asked | cpu | disk | net | units/s alone | units per job |",
            "|---|---|---|---|---|---|---|",
        ]
        for k in KINDS:
            a = cal["alone"][k]
            m = a["median_shares"]
            lines.append(
                f"| {k} | {spec['jobs'][k]['duty']:g} | {m['cpu']:.3f} | {m['disk']:.3f} | "
                f"{m['net']:.3f} | {a['units_per_s']:.1f} | {cal['units'][k]} |"
            )
        lines.append("")
    lines += [
        "## Per policy",
        "",
        "Throughput while the job ran (disk: bytes over both ranks; network: rank 0's bytes "
        "sent and received; compute: work units), each job's response time (end - submit), "
        "the mean over the repeats with each repeat's figure in brackets.",
        "",
        "| policy | disk MB/s | net MB/s | compute units/s | response disk s | "
        "response net s | response compute s | mean response s | makespan s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in policies:
        rs = by[p]
        mk = [max(v for j in r.jobs if (v := j.response_s) is not None) for r in rs]
        lines.append(
            f"| {NAMES[p]} | {_spread(throughputs(rs, 'disk'), '{:.0f}')} | "
            f"{_spread(throughputs(rs, 'net'))} | {_spread(throughputs(rs, 'compute'), '{:.1f}')}"
            f" | {_spread(responses(rs, 'disk'))} | {_spread(responses(rs, 'net'))} | "
            f"{_spread(responses(rs, 'compute'))} | {_spread(responses(rs))} | "
            f"{_spread(mk)} |"
        )
    diffs = verdicts(data)
    lines += [
        "",
        "## N + 1 gangs against the others",
        "",
        "In per cent of the other policy's figure, repeat by repeat.",
        "",
        "| figure | against strict gang | against paired gang |",
        "|---|---|---|",
    ]
    for k, what in (("disk", "throughput"), ("net", "throughput"), ("compute", "throughput"),
                    ("all", "mean response")):  # fmt: skip
        label = "mean response time" if k == "all" else f"{k} job's {what}"
        lines.append(
            f"| {label} | {_diff(diffs[f'{k} {what} vs gang'])} | "
            f"{_diff(diffs[f'{k} {what} vs paired-gang'])} |"
        )
    lines += ["", *target_lines(diffs), "", "## Why: what ran together, and each job's demand", ""]
    lines += [
        "Share of the quanta in which any job ran (the controller's status, every quantum "
        "seen) by the set of jobs that ran:",
        "",
        "| policy | quanta | groups | quanta with all three in the system | groups then |",
        "|---|---|---|---|---|",
    ]
    for p in policies:
        cells = []
        for full in (False, True):
            c, n = groups(by[p], full=full)
            text = ", ".join(f"{g} {k / n:.1%}" for g, k in c.most_common()) if n else "-"
            cells += [str(n), text]
        lines.append(f"| {NAMES[p]} | {' | '.join(cells)} |")
    lines += [
        "",
        "Each job's measured share of each device (the agents' figure the policy is fed; "
        "median over the quanta it ran):",
        "",
        "| policy | compute (cpu, disk, net) | disk (cpu, disk, net) | net (cpu, disk, net) |",
        "|---|---|---|---|",
    ]
    for p in policies:
        cells = []
        for k in KINDS:
            m = demand(by[p], k)
            cells.append(", ".join(f"{m[d]:.3f}" for d in DEVICES) if m else "-")
        lines.append(f"| {NAMES[p]} | {' | '.join(cells)} |")
    n1 = by.get("nplus1", [])
    settled = [x for r in n1 if (x := settling(r)) is not None]
    if settled:
        lines += [
            "",
            "N + 1 gangs, while all three jobs were in, per repeat: quanta before the first "
            "that ran all three (each job's first quantum is its start-up: a new job runs "
            "alone, and its next measurement, the first of its steady work, differs from "
            "the start-up's by more than 0.2 and makes it run alone again), then quanta that "
            "ran all three of those from the first on: "
            + "; ".join(f"{a} before, {c} of {b}" for a, b, c in settled)
            + ". The rows' predicted vectors the matching read are in results.json (trace, "
            "`predicted`).",
        ]
    lines += [
        "",
        "The compute job's median CPU share by what ran beside it (what sharing the node "
        "costs it; the rest of the core went to the host's other load):",
        "",
        "| policy | by company |",
        "|---|---|",
    ]
    for p in policies:
        comp = cpu_by_company(by[p])
        lines.append(f"| {NAMES[p]} | " + ", ".join(f"{k} {v:.3f}" for k, v in comp.items()) + " |")
    lines += [
        "",
        "Sharp changes (§4.2.3, per device for N + 1 gangs, the CPU only for paired gang): "
        "a job's measurement differing from its previous one by more than 0.2 makes it run "
        "alone the next quantum it runs. Measurements seen / of them sharp changes:",
        "",
        "| policy | compute | disk | net |",
        "|---|---|---|---|",
    ]
    for p in policies:
        devs = DEVICES if p == "nplus1" else ("cpu",)
        counts = [sharp_changes(by[p], k, devs) for k in KINDS]
        lines.append(f"| {NAMES[p]} | " + " | ".join(f"{n} / {f}" for n, f in counts) + " |")
    lines += [
        "",
        "Each device's mean use (the shares of the jobs that ran summed per quantum, from "
        "the first quantum a job ran to the last; `device-use.png` plots them over time, "
        "repeat 1):",
        "",
        "| policy | cpu | disk | net |",
        "|---|---|---|---|",
    ]
    for p in policies:
        m = device_means(by[p])
        lines.append(
            f"| {NAMES[p]} | " + " | ".join(_f(m.get(d), "{:.3f}") for d in DEVICES) + " |"
        )
    lines += [
        "",
        "## The host",
        "",
        "| run | policy | load average (1, 5, 15 min) before | cores busy outside the "
        "experiment | quanta | wall s |",
        "|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, 1):
        la = ", ".join(f"{x:.2f}" for x in r.loadavg) or "-"
        lines.append(
            f"| {i} | {NAMES[r.policy]} | {la} | {_f(r.other_cores)} | {r.quanta} | "
            f"{r.wall_s:.1f} |"
        )
    lines.append("")
    return "\n".join(lines)


def _yes(b: bool) -> str:
    return "yes" if b else "no"


def sharp_changes(runs: list[PolicyRun], kind: str, devices: tuple[str, ...]) -> tuple[int, int]:
    """(measurements, of them a change of more than 0.2 on one of ``devices`` from the job's
    previous one): §4.2.3's rule then predicts 1.0 and the job runs alone a quantum
    (controller/policies/predictor.py; paired gang reads the CPU only, N + 1 every device).
    From the quanta the trace saw: a quantum it missed merges two measurements."""
    n = flagged = 0
    for r in runs:
        prev: dict[str, float] | None = None
        for t in r.trace:
            cur = t["shares"].get(kind)
            if cur is None:
                continue
            n += 1
            if prev is not None and any(
                abs(float(cur.get(d, 0.0)) - float(prev.get(d, 0.0))) > 0.2 + 1e-9 for d in devices
            ):
                flagged += 1
            prev = cur
    return n, flagged


def target_lines(v: Mapping[str, Difference | None]) -> list[str]:
    """Issue 31's target: N + 1 against paired gang, I/O jobs' throughput and the compute
    job's loss (at most 10 %); the loss against strict gang beside it."""
    out = ["**Target** (issue 31: against paired gang, the disk- and network-bound jobs' "
           f"throughput, the compute jobs' loss at most {LOSS_TARGET:g} %):"]  # fmt: skip
    for base in ("paired-gang", "gang"):
        d, n, c = (v[f"{k} throughput vs {base}"] for k in ("disk", "net", "compute"))
        if d is None or n is None or c is None:
            continue
        worst = min(c.values)
        met = "met" if -worst <= LOSS_TARGET else "not met"
        out.append(
            f"* against {NAMES[base]}: disk {d.mean:+.1f} %, network {n.mean:+.1f} %, "
            f"compute {c.mean:+.1f} % (worst repeat {worst:+.1f} %: the bound of a "
            f"{LOSS_TARGET:g} % loss {met}); I/O beyond the spread: disk "
            f"{_yes(d.beyond_spread())}, network {_yes(n.beyond_spread())}."
        )
    return out


def plots(data: Mapping[str, Any], out: Path) -> list[Path]:
    from testbed.experiment.plots import pyplot, save

    by = _by_policy(runs_of(data))
    policies = [p for p in data["spec"]["policies"] if p in by]
    if not policies:
        return []
    plt = pyplot()
    fig, axes = plt.subplots(len(policies), 1, figsize=(8, 2.3 * len(policies)), sharex=True)
    axes = [axes] if len(policies) == 1 else list(axes)
    for ax, p in zip(axes, policies, strict=True):
        series = device_series(by[p][0])
        for d, style in zip(DEVICES, ("-", "--", ":"), strict=True):
            ax.step([t for t, _ in series], [u[d] for _, u in series], style, where="post",
                    label=d)  # fmt: skip
        ax.set_ylabel("use")
        ax.set_ylim(0, 2.0)
        ax.set_title(f"{NAMES[p]} (repeat 1)", fontsize=9)
        ax.legend(loc="upper right", fontsize=7)
    axes[-1].set_xlabel("seconds since the jobs were submitted")
    fig.suptitle("each device's use per quantum (shares of the jobs that ran, summed)")
    return [save(fig, out / "device-use.png")]


def summary(data: Mapping[str, Any]) -> str:
    by = _by_policy(runs_of(data))
    lines = []
    for p in [p for p in data["spec"]["policies"] if p in by]:
        rs = by[p]
        c, n = groups(rs, full=True)
        top = ", ".join(f"{g} {k / n:.0%}" for g, k in c.most_common(3)) if n else "-"
        lines.append(
            f"{NAMES[p]}: disk {_f(_mean(throughputs(rs, 'disk')), '{:.0f}')} MB/s, net "
            f"{_f(_mean(throughputs(rs, 'net')))} MB/s, compute "
            f"{_f(_mean(throughputs(rs, 'compute')), '{:.1f}')} units/s, mean response "
            f"{_f(_mean(responses(rs)))} s; with all three in: {top}"
        )
    return "\n".join([*lines, *target_lines(verdicts(data))])
