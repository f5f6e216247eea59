"""Why the CDC simulator's cost grows faster than the job count (issue 24).

Runs one fixed sample of Yu & Byun's WL6 at the paper's scale (16 nodes, MPL 5,
heavy load, fluid mode, seed 1) at several stream lengths and splits its CPU
seconds into the factors that multiply to it:

    CPU = detail s x running jobs x messages per job-second x events per message
          x CPU per event

* ``detail s`` -- simulated time run event by event (fluid mode jumps over the
  rest); ``changes`` of the running set (a job starts or ends) each force a
  settle and a measure window, ``jumps`` were taken; the detail seconds split by
  what began them: a change's settle and measure windows (``window``), a jump
  taken (``jumped``: the jobs' last stretch until the next change -- the tail
  of ``tail_s`` plus whatever a jump cannot take: the prologue and epilogue of
  every repetition of an NPB program, see testbed/sim/cdc/program.py), a
  measurement after which no jump was taken (``no jump``: a job within
  ``min_jump_s`` of its end, until the next change);
* ``jobs|d`` -- jobs running, averaged over the detail time;
* ``msg/job-s`` -- messages sent per job and detail second (the mix of
  applications: class-A CG sends a message every ~85 us of CPU per rank,
  BT one every ~10 ms);
* ``CG msg %`` -- the share of the messages CG jobs sent;
* ``ev/msg`` -- events popped per message; ``stale %`` -- of those, events that
  found their version moved on and did nothing (re-armed CPU events, ticks
  superseded by an earlier one);
* ``us/ev`` -- CPU microseconds per event (this process's CPU; the counters
  here add a few per cent).

    python benchmarks/cdc_sim_scaling.py --scheme cc-b --jobs 4,8,12,16
    python benchmarks/cdc_sim_scaling.py --programs   # the applications' programs
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.sim.cdc import engine as E
from testbed.sim.cdc.platform import PAPER, parse_platform, parse_speeds
from testbed.sim.cdc.run import build, fluid_of
from testbed.sim.cdc.traces import TABLE3_RANKS, npb_program
from testbed.sim.cdc.workload import PAPER_JOB_SECONDS, WORKLOADS, reps_for

FLUID = {"settle_s": 0.5, "measure_s": 1.0, "tail_s": 1.0, "min_jump_s": 2.0}


class Counted(E.CdcSim):
    """The engine with counters on the side (no change to what it simulates)."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self.msgs: Counter[str] = Counter()
        self.changes = 0
        self.job_s = 0.0  # integral of running jobs over the processes' (detail) clock
        self.last_t = 0.0
        self.running_n = 0
        self.stale = 0
        # the detail time by what began it: a change's settle and measure windows ("window"),
        # a jump that was taken ("jumped": the jobs' last stretch, until the next change), a
        # measurement after which no jump was taken ("no jump": until the next change)
        self.split = {"window": 0.0, "jumped": 0.0, "no jump": 0.0}
        self.mark = (0.0, "window")

    def _marker(self, t: float, label: str) -> None:
        t0, what = self.mark
        self.split[what] += t - t0
        self.mark = (t, label)

    def _changed(self, t: float) -> None:
        self.changes += 1
        self.job_s += (t - self.last_t) * self.running_n
        self.last_t = t
        self.running_n = len(self._running_jobs())
        self._marker(t, "window")
        super()._changed(t)

    def _jump(self, t: float) -> None:
        n = self.jumps
        super()._jump(t)
        if self.fluid_ver * 2 + 1 in [e[5] for e in self.heap if e[3] == E.EV_FLUID]:
            return  # measuring longer: still the window
        self._marker(t, "jumped" if self.jumps > n else "no jump")

    def _send(self, p: Any, dst: int, nbytes: int, t: float) -> None:
        self.msgs[p.job.spec.program.app] += 1
        super()._send(p, dst, nbytes, t)

    def _ev_cpu(self, t: float, nd: Any, ver: int) -> None:
        if ver != nd.ver or nd.running is None:
            self.stale += 1
        super()._ev_cpu(t, nd, ver)

    def _ev_tick(self, t: float, nd: Any, k: int) -> None:
        if k != nd.tick_k or nd.acct_k >= k:
            self.stale += 1
        super()._ev_tick(t, nd, k)

    def _ev_wait(self, t: float, p: Any, ver: int) -> None:
        if ver != p.wait_ver or not p.waiting or p.node.running is not p or p.state != E.SPIN:
            self.stale += 1
        super()._ev_wait(t, p, ver)


def paper_params(scheme: str, jobs: int, fluid: dict[str, Any] | None) -> dict[str, Any]:
    """A WL6-heavy stream of ``jobs`` on the paper's 16 nodes at MPL 5 (run.build's
    parameters; ``fluid`` None: exact)."""
    return {
        "scheme": scheme,
        "mpl": 5,
        "workload": f"WL6:jobs={jobs},load=heavy",
        "nodes": 16,
        "speeds": "paper",
        "platform": "paper",
        "fluid": fluid,
    }


def one(
    scheme: str, jobs: int, seed: int, whole_reps: bool = False, past_queued: bool = False
) -> str:
    params = paper_params(
        scheme, jobs, {**FLUID, "whole_reps": whole_reps, "past_queued": past_queued}
    )
    _plain, specs = build(params, seed)  # the stream (and the engine it would run)
    sim = Counted(
        scheme, 5, parse_speeds("paper", 16), parse_platform("paper"), seed=seed,
        fluid=fluid_of(params["fluid"]),
    )  # fmt: skip
    c0 = time.process_time()
    res = sim.run(specs)
    cpu = time.process_time() - c0
    sim.stale += sim.stale_cpu  # the engine's loop drops most stale CPU events itself
    detail = res.makespan - sim.jumped_s
    msgs = sum(sim.msgs.values())
    job_s = sim.job_s + (sim.now - sim.last_t) * sim.running_n
    sim._marker(sim.now, "window")
    sp = sim.split
    return (
        f"{jobs:>5}{cpu:>8.1f}{res.makespan:>7.0f}{detail:>9.1f}{sim.changes:>8}{sim.jumps:>6}"
        f"{sp['window']:>8.1f}{sp['jumped']:>8.1f}{sp['no jump']:>8.1f}"
        f"{job_s / detail:>8.2f}{msgs:>10}{msgs / job_s:>11.0f}{100 * sim.msgs['cg'] / msgs:>9.0f}"
        f"{res.events:>10}{res.events / msgs:>8.2f}{100 * sim.stale / res.events:>8.0f}"
        f"{cpu / res.events * 1e6:>7.2f}{cpu / jobs:>10.2f}"
    )


def programs() -> None:
    """Each WL6 application's job as the stream runs it (rank 0): repetitions, CPU per
    repetition, what of it lies outside the body iterations (a body-only jump cannot take
    it), messages per CPU-second."""
    sp = tuple(parse_speeds("paper", 16))
    print(
        f"{'app':<5}{'ranks':>6}{'reps':>6}{'CPU s/rep':>11}{'not body s':>12}{'not body %':>12}"
        f"{'msg/CPU-s':>11}"
    )
    for app in WORKLOADS["WL6"]:
        reps = reps_for(app, sp, PAPER, PAPER_JOB_SECONDS)
        for n in TABLE3_RANKS[app]:
            r = npb_program(app, n).ranks[0]
            cpu = r.cpu_s()
            rest = sum(
                sum(x[0] for x in st) * k
                for (st, k), b in zip(r.segments, r.body, strict=True)
                if not b
            )
            print(
                f"{app:<5}{n:>6}{reps:>6}{cpu:>11.3f}{rest:>12.3f}{100 * rest / cpu:>12.1f}"
                f"{r.messages() / cpu:>11.0f}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scheme", default="cc-b")
    ap.add_argument("--jobs", default="4,8,12,16", help="stream lengths (default 4,8,12,16)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--whole-reps", action="store_true", help="fluid jumps take whole repetitions too"
    )
    ap.add_argument(
        "--past-queued",
        action="store_true",
        help="fluid jumps reach past arrivals that start no job",
    )
    ap.add_argument("--programs", action="store_true", help="print the applications' programs")
    args = ap.parse_args()
    if args.programs:
        programs()
        return 0
    sizes = [int(x) for x in args.jobs.split(",") if x.strip()]
    print(
        f"WL6 heavy, 16 paper nodes, MPL 5, fluid (settle 0.5 s, measure 1 s, tail 1 s), "
        f"{args.scheme}, seed {args.seed}{', whole_reps' if args.whole_reps else ''}"
        f"{', past_queued' if args.past_queued else ''}"
    )
    print(
        f"{'jobs':>5}{'CPU s':>8}{'sim s':>7}{'detail s':>9}{'changes':>8}{'jumps':>6}"
        f"{'window':>8}{'jumped':>8}{'no jump':>8}"
        f"{'jobs|d':>8}{'messages':>10}{'msg/job-s':>11}{'CG msg %':>9}{'events':>10}"
        f"{'ev/msg':>8}{'stale %':>8}{'us/ev':>7}{'CPU s/job':>10}"
    )
    for n in sizes:
        print(one(args.scheme, n, args.seed, args.whole_reps, args.past_queued), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
