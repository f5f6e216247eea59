"""The scheduler core: job table, policy, and one quantum at a time.

Gang modes (strict gang, gang-greedy, gang-backfill, paired gang; Wiseman & Feitelson 2003 §2,
Rajaei et al. 2008 §3.2): every quantum the policy's :class:`QuantumPlan` becomes one
``{job_id: weight}`` command per node, sent to all agents before any ack is
awaited (Wiseman & Feitelson 2003 §3.1, Fig. 5). The acks carry each job's CPU time since the
previous ack, from which the utilization of the jobs that ran in the previous
quantum is fed back with ``policy.observe`` (Wiseman & Feitelson 2003 §3.2, "the master daemon
collects the data from all the nodes and calculates the average CPU
utilization for the job").

Batch modes (fcfs, easy, conservative, lookahead; Rajaei et al. 2008 §3.1): the policy
says which jobs start; they are launched thawed and run to completion. A
quantum command listing every running job is still sent each period: it is
the heartbeat and it brings back CPU time, so accounting is the same.

What differs between the two is in controller/families/ (one module per
family); this core never asks which kind of policy it holds.

Utilization normalisation: the utilization of job *j* in a quantum is

    sum over its ranks of cpu_ns / sum over its nodes of (elapsed_ns x capacity)

where elapsed is the time between the node's two consecutive applies and
capacity the node's CPU allowance (1 for a dedicated core, 0.5 for a node
capped at half a CPU). A compute-bound job thus reads ~1.0 however the node is
capped, as eq. (1) of Wiseman & Feitelson 2003 expects.

Skew: agents on one host share CLOCK_MONOTONIC, so the spread of the acks'
``applied_monotonic_ns`` (each node's switch complete: freezes and thaws
confirmed) over the nodes of one quantum is the cross-node command skew (on
real nodes it mixes clocks; it is reported all the same). The thaw skew is the
spread of the acks' ``thawed_realtime_ns``, the CLOCK_REALTIME instant each
agent finished its thaw writes: the moment the incoming gang starts there.

Time-triggered switches (docs/cluster.md): the daemon calls :meth:`Scheduler.tick`
``lead`` ahead of the quantum boundary with ``at`` = the boundary on
CLOCK_REALTIME; every agent thaws the incoming jobs at that instant, then
freezes the outgoing ones and acks. The acks report the lateness of each thaw
against ``at``, whether the plan arrived after its instant (late), and the
freeze confirmation time. CPU accounting is unchanged: each ack still carries
the CPU time since the node's previous apply.

CDC modes (batch, local, dcs, pb, ib, sb, hybrid, cc-s, cc-b; Yu & Byun 2011):
space sharing up to an MPL; the agents are told the scheme with the
``local_policy`` request (at start and on every reconnect) and own the job
weights; the quantum command is the heartbeat and the CPU-time collector.

Every rank is told where its peers are (``COSCHED_PEERS``) and, when the
cluster emulates delay, jitter or loss in user space, the link's figures
(``COSCHED_NET_*``, docs/cdc.md); see :func:`net_env`.

The class rules (controller/classes.py) are applied around the policy.
Everything here is driven by an injected clock and agent pool, so unit tests
run it with fakes.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.client import AgentError
from controller import classes
from controller.archive import JobArchive
from controller.families import Family, make_family
from controller.jobs import (
    BENCHMARK,
    DONE,
    FAILED,
    INTERACTIVE,
    KILLED,
    PRODUCTION,
    QUEUED,
    STANDBY,
    Job,
    RequestError,
    SpecError,
    parse_spec,
)
from controller.nodes import NodeInfo, Pool, QuantumResult
from controller.operator import OperatorConfig
from controller.policies.base import JobRequest, LocalScheme, QuantumPlan
from controller.policies.registry import Policy, lookup, make_policy
from controller.window import Window

log = logging.getLogger("controller.quantum")

PORT_BASE = 20000
PORT_SPAN = 12000  # 20000..31999: below Linux's ephemeral range (32768-), see job_port
SKEW_WINDOW = 10000
WARN_EVERY_S = 30.0  # a node that keeps failing is reported this often, with a count


def job_port(job_id: int) -> int:
    """Rank 0's barrier port: unique among the 12,000 most recent jobs.

    Kept below the kernel's ephemeral range so that no outgoing connection on
    the node can already hold a rank's listening port.
    """
    return PORT_BASE + job_id % PORT_SPAN


def net_env(state: Mapping[str, Any]) -> dict[str, str]:
    """``COSCHED_NET_*`` for every rank, from the cluster state (testbed/cluster/state.py).

    Only where the link's delay is emulated in user space (no netem: the
    message library adds it) and the link profile has delay, jitter or loss;
    empty otherwise (netem does it in the kernel, or there is nothing to add).
    """
    if state.get("delay_mechanism") != "userspace":
        return {}
    prof = state.get("profile") or {}
    delay = float(prof.get("delay_us") or 0.0)
    jitter = float(prof.get("jitter_us") or 0.0)
    loss = float(prof.get("loss_pct") or 0.0)
    if not (delay > 0 or jitter > 0 or loss > 0):
        return {}
    return {
        "COSCHED_NET_DELAY_US": f"{delay:g}",
        "COSCHED_NET_JITTER_US": f"{jitter:g}",
        "COSCHED_NET_LOSS_PCT": f"{loss:g}",
        "COSCHED_NET_RATE_BPS": str(int(prof.get("rate_bps") or 0)),
    }


def job_utilization(
    cpu_ns: Mapping[str, Mapping[int, int]],
    elapsed_ns: Mapping[str, int],
    capacity: Mapping[str, float],
    placement: Mapping[int, list[str]],
) -> dict[int, float]:
    """Utilization per job (module docstring): CPU used / CPU the nodes offered.

    ``cpu_ns[node][job]`` is the job's CPU time on the node in the quantum,
    ``elapsed_ns[node]`` the quantum's length there. Jobs with a node lacking
    data are left out rather than under-reported.
    """
    out: dict[int, float] = {}
    for job, nodes in placement.items():
        used = 0
        offered = 0.0
        ok = bool(nodes)
        for n in nodes:
            if n not in elapsed_ns or job not in cpu_ns.get(n, {}) or elapsed_ns[n] <= 0:
                ok = False
                break
            used += cpu_ns[n][job]
            offered += elapsed_ns[n] * capacity.get(n, 1.0)
        if ok and offered > 0:
            out[job] = min(1.0, max(0.0, used / offered))
    return out


def command_skew_s(applied_ns: Mapping[str, int]) -> float | None:
    """Spread of the apply instants of one quantum over the nodes (None if < 2)."""
    if len(applied_ns) < 2:
        return None
    return (max(applied_ns.values()) - min(applied_ns.values())) / 1e9


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


@dataclass
class Counters:
    quanta: int = 0
    paired_quanta: int = 0
    planned_quanta: int = 0
    failed_commands: int = 0
    utilization: float = 0.0  # cluster CPU utilization in the last quantum (0..1)
    timed_quanta: int = 0  # quanta sent time-triggered (with an instant)
    late_plans: int = 0  # node plans whose instant had passed when the agent got them
    missed_boundaries: int = 0  # quantum boundaries skipped because the round ran past them


class Scheduler:
    """Jobs, policy, classes and the per-quantum round; no sockets of its own."""

    def __init__(
        self,
        policy_name: str,
        params: Mapping[str, object],
        pool: Pool,
        *,
        config: OperatorConfig | None = None,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
        job_env: Mapping[str, str] | None = None,
    ) -> None:
        self.policy_name = policy_name
        self.params = dict(params)
        self.entry = lookup(policy_name)
        self.pool = pool
        self.nodes: list[NodeInfo] = list(pool.nodes)
        self.node_index = {n.name: i for i, n in enumerate(self.nodes)}
        self.capacity = {n.name: n.capacity for n in self.nodes}
        self.cfg = config or OperatorConfig()
        if self.cfg.max_slots is None and "max_slots" in self.params:
            ms = self.params["max_slots"]
            self.cfg.max_slots = ms if isinstance(ms, int) else None
        self.wall = wall
        self.mono = mono
        self.job_env = dict(job_env or {})  # added to every rank's environment (net_env)
        # The agents' local scheme (docs/cdc.md), kept across a restore's new family.
        self.local_state: dict[str, str] = {}  # node -> scheme it runs, or why not
        self.local_sent: dict[str, dict[str, Any]] = {}  # node -> last request it accepted
        self.local_refused: dict[str, object] = {}  # node -> the refusing agent's pid
        self._local_warned: set[str] = set()
        self._ever_connected: set[str] = set()
        self._rejoined: set[str] = set()
        self.rejoins: deque[dict[str, Any]] = deque(maxlen=16)  # the last reconcile_node reports
        self.pool.on_connect = self._agent_connected
        self.policy: Policy = self._new_policy()
        self.fam: Family = make_family(self, self.policy)
        self.jobs: dict[int, Job] = {}
        # Ended jobs beyond the keep_ended most recent go to the archive (controller/
        # archive.py) and leave memory; without an archive every job is kept.
        self.archive: JobArchive | None = None
        self.keep_ended = 200
        self.archived_counts: Counter[tuple[str, str]] = Counter()
        self.next_id = 1
        self.held: list[int] = []  # jobs not yet handed to the policy
        self.in_policy: set[int] = set()
        self.q = 0
        self.last_plan: QuantumPlan | None = None
        self._prev_runnable: dict[int, list[str]] = {}  # job -> nodes, previous quantum
        self._prev_applied: dict[str, int] = {}
        self._failing: dict[str, tuple[int, float, str]] = {}  # node -> count, last log, error
        self._last_tick: float | None = None
        # Fixed windows (controller/window.py): memory does not grow as they fill.
        self.skews = Window(SKEW_WINDOW)
        # Drained by the metrics exporter at each scrape; bounded, so a controller
        # nobody scrapes (or one without --metrics) keeps only the last window.
        self.new_skews: deque[float] = deque(maxlen=SKEW_WINDOW)
        self.thaw_skews = Window(SKEW_WINDOW)
        self.new_thaw_skews: deque[float] = deque(maxlen=SKEW_WINDOW)
        self.lateness = Window(SKEW_WINDOW)  # per node and quantum
        self.freeze_confirms = Window(SKEW_WINDOW)
        self.new_late = 0  # drained by the metrics exporter
        self.slot_runs: Counter[int] = Counter()
        self.counters = Counters()
        self.last_utilization: dict[int, float] = {}

    # ---- construction --------------------------------------------------------
    @property
    def family(self) -> str:
        return self.entry.family

    def _new_policy(self) -> Policy:
        params = dict(self.params)
        if "max_slots" in {p.name for p in self.entry.params}:
            params["max_slots"] = self.cfg.max_slots
        return make_policy(self.policy_name, len(self.nodes), params)

    # ---- the agents' local scheme (docs/cdc.md) ---------------------------------------
    def _agent_connected(self, node: str, hello: Mapping[str, Any]) -> None:
        if node in self._ever_connected:
            self._rejoined.add(node)  # reconciled at the next quantum (reconcile_node)
        self._ever_connected.add(node)
        self.fam.agent_connected(node, hello)

    def reconcile_node(self, node: str) -> dict[str, Any]:
        """A node whose agent we reach again (after a partition or an agent restart):
        ask it what became of our ranks there. An exit sent on the connection that
        broke is lost to us, so the agent's job list decides; ranks it reports ended
        (or no longer knows) are recorded, running ones are switched by the next plan.
        """
        report: dict[str, Any] = {"node": node, "ended": [], "running": []}
        st = self.pool.status(node)
        if st is None:
            self._rejoined.add(node)  # try again next quantum
            return report
        known = {str(j.get("job_id")): j for j in st.get("jobs", [])}
        for job in list(self.jobs.values()):
            if not job.active or not any(r.node == node and not r.ended for r in job.ranks):
                continue
            info = known.get(str(job.job_id))
            if info is None:
                self._rank_ended(job, node, None)
            elif info.get("state") == "ended":
                code = info.get("exit_code")
                self._rank_ended(job, node, code if isinstance(code, int) else None, info)
            (report["ended"] if job.ended else report["running"]).append(job.job_id)
        log.info("%s rejoined; reconciled: %s", node, report)
        self.rejoins.append(report)
        return report

    def local_policy_request(
        self, node: str, scheme: LocalScheme | str, mpl: int = 1
    ) -> dict[str, Any]:
        """The ``local_policy`` request for ``node``: scheme, MPL, settings, every peer."""
        sch = scheme if isinstance(scheme, LocalScheme) else LocalScheme(scheme)
        return {
            "node": node,
            "scheme": sch.name,
            "mpl": mpl,
            "tick_ms": sch.tick_ms,
            "spin_us": sch.spin_us,
            "boost": sch.boost,
            "peers": {n.name: {"ctl": n.address[0], "data": n.data_ip} for n in self.nodes},
        }

    def tell_agent(self, node: str, data: dict[str, Any], hello: Mapping[str, Any]) -> None:
        """Send ``data`` as the node's local_policy; a refusal is logged once per node.

        An agent that refused is not asked again until it is another process
        (its hello's pid differs): an agent too old for the request closes the
        connection on it, and asking again would only repeat that.
        """
        pid = hello.get("pid")
        if node in self.local_refused and self.local_refused[node] == pid and pid is not None:
            return
        try:
            self.pool.local_policy(node, data)
        except (AgentError, ConnectionError, OSError) as e:
            why = e.reason if isinstance(e, AgentError) else (str(e) or type(e).__name__)
            self.local_state[node] = f"refused: {why}"
            self.local_sent.pop(node, None)
            if isinstance(e, AgentError):
                self.local_refused[node] = pid
            if node not in self._local_warned:
                self._local_warned.add(node)
                log.warning(
                    "agent %s did not take local scheme %s (%s): it keeps its own scheduling,"
                    " so jobs there see LOCAL behaviour",
                    node,
                    data.get("scheme"),
                    why,
                )
            return
        self.local_refused.pop(node, None)
        self.local_sent[node] = data
        self.local_state[node] = str(data.get("scheme"))
        log.info("agent %s runs local scheme %s", node, data.get("scheme"))

    def apply_config(self) -> None:
        """Push operator settings that live inside the policy (max_slots)."""
        # Only new rows are affected: existing rows are never torn down.
        self.fam.set_max_slots(self.cfg.max_slots)

    # ---- requests ------------------------------------------------------------
    def submit(self, raw: object, user: str, operator: bool = False) -> int:
        """Queue a job of ``user``. Its ranks run as ``user``; an operator may name
        another user (``run_as``, root included): the only way to a root job for
        anyone but root itself (docs/security.md)."""
        spec = parse_spec(raw, len(self.nodes))
        if spec.run_as not in (None, user) and not operator:
            raise SpecError(
                f"spec.run_as: only operators may run a job as another user ({user!r} is "
                f"not one); drop run_as to run it as {user!r}"
            )
        if self.cfg.user_limit is not None:
            mine = sum(1 for j in self.jobs.values() if j.user == user and not j.ended)
            if mine >= self.cfg.user_limit:
                raise SpecError(
                    f"user {user!r} already has {mine} unfinished job(s), the limit is"
                    f" {self.cfg.user_limit}; wait for one to end or ask the operator"
                )
        job = Job(
            job_id=self.next_id,
            spec=spec,
            user=user,
            submit_time=self.wall(),
            job_class=spec.job_class,
        )
        self.next_id += 1
        self.jobs[job.job_id] = job
        self.held.append(job.job_id)
        log.info(
            "job %d submitted by %s%s: %s",
            job.job_id,
            user,
            f" to run as {spec.run_as}" if spec.run_as not in (None, user) else "",
            " ".join(spec.argv),
        )
        self._hand_over()
        return job.job_id

    def get(self, job_id: object) -> Job:
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            raise RequestError(f"job_id: want an int, got {job_id!r}")
        job = self.jobs.get(job_id)
        if job is None:
            raise RequestError(f"no job {job_id}; see the 'jobs' request for valid ids")
        return job

    def kill(self, job_id: object, user: str, operator: bool) -> str:
        job = self.get(job_id)
        if not operator and job.user != user:
            raise RequestError(f"job {job.job_id} belongs to {job.user!r}, not {user!r}")
        if job.ended:
            return job.state
        self._kill_ranks(job)
        self.end(job, KILLED, f"killed by {user}")
        return job.state

    def set_class(self, job_id: object, new_class: object, user: str, operator: bool) -> str:
        job = self.get(job_id)
        if not operator and job.user != user:
            raise RequestError(f"job {job.job_id} belongs to {job.user!r}, not {user!r}")
        if new_class not in classes.RANK:
            raise RequestError(
                f"class: unknown class {new_class!r}; valid: {', '.join(classes.RANK)}"
            )
        assert isinstance(new_class, str)
        if job.ended:
            raise RequestError(f"job {job.job_id} has ended ({job.state})")
        if new_class == INTERACTIVE and job.job_class != INTERACTIVE:
            job.promotions += 1
            job.interactive_run_s = 0.0  # a fresh allowance (Gorda & Brooks 1991, gangster)
        job.job_class = new_class
        log.info("job %d class -> %s (by %s)", job.job_id, new_class, user)
        self._hand_over()
        return job.job_class

    # ---- hand-over to the policy (classes rule 1) ------------------------------
    def _request(self, job: Job) -> JobRequest:
        return JobRequest(
            job_id=job.job_id,
            size=job.spec.size,
            estimate=job.spec.estimate,
            submit_time=self.mono(),
            exclusive=job.spec.exclusive or job.job_class == BENCHMARK,
            user=job.user,
        )

    def policy_submit(self, job: Job) -> None:
        self.policy.submit(self._request(job), self.mono())
        self.in_policy.add(job.job_id)

    def _hand_over(self) -> None:
        self.fam.withdraw_outranked()
        while self.held:
            order = classes.hold_order(self.jobs[j] for j in self.held)
            head = order[0]
            others = sum(1 for j in order if j.job_class != STANDBY)
            waiting = self.fam.waiting_for_classes(head)
            if not classes.may_hand_over(head, waiting, others):
                break
            self.held.remove(head.job_id)
            self.policy_submit(head)
        self.fam.after_hand_over()

    # ---- launch / end ------------------------------------------------------------
    def launch(self, job: Job, nodes: list[str], *, start_frozen: bool) -> None:
        job.start(self.wall(), nodes)
        peers = [self.nodes[self.node_index[n]].data_ip for n in nodes]
        for rank, node in enumerate(nodes):
            env = dict(job.spec.env)
            env.update(self.job_env)
            env.update(
                COSCHED_JOB=str(job.job_id),
                COSCHED_RANK=str(rank),
                COSCHED_SIZE=str(job.spec.size),
                COSCHED_PEERS=",".join(peers),
                COSCHED_RANK0_ADDR=peers[0],
                COSCHED_PORT=str(job_port(job.job_id)),
                COSCHED_NODE=node,
            )
            try:
                reply = self.pool.launch(
                    node,
                    str(job.job_id),
                    list(job.spec.argv),
                    rank=rank,
                    size=job.spec.size,
                    env=env,
                    start_frozen=start_frozen,
                    cwd=job.spec.cwd,
                    user=job.run_user,  # the submitter, or run_as (agent/runas.py)
                )
            except (AgentError, ConnectionError, OSError) as e:
                log.error("job %d: launch of rank %d on %s failed: %s", job.job_id, rank, node, e)
                job.ranks[rank].ended = True
                self._kill_ranks(job)
                self.end(job, FAILED, f"rank {rank} could not start on {node}: {e}")
                return
            r = job.ranks[rank]
            pids = reply.get("pids", {})
            r.pid = pids.get(str(rank))
            run_dir = reply.get("run_dir")
            if run_dir:
                r.stdout = f"{run_dir}/rank-{rank}.out"
                r.stderr = f"{run_dir}/rank-{rank}.err"
        if not start_frozen:
            job.set_runnable(True)
        log.info("job %d launched on %s", job.job_id, ",".join(nodes))

    def _kill_ranks(self, job: Job) -> None:
        for r in job.ranks:
            if r.ended:
                continue
            try:
                self.pool.kill(r.node, str(job.job_id))
            except (AgentError, ConnectionError, OSError) as e:
                log.warning("job %d: kill on %s: %s", job.job_id, r.node, e)

    def end(self, job: Job, state: str, reason: str, exit_code: int | None = None) -> None:
        if job.ended:
            return
        job.end(state, self.wall(), reason, exit_code)
        if job.job_id in self.held:
            self.held.remove(job.job_id)
        if job.job_id in self.in_policy:
            self.in_policy.discard(job.job_id)
            self.policy.finish(job.job_id, self.mono())
        self.fam.ended(job.job_id)
        self._prev_runnable.pop(job.job_id, None)
        log.info("job %d %s: %s", job.job_id, state, reason)
        self._hand_over()

    def on_event(self, ev: Mapping[str, Any]) -> None:
        """An agent's job_event: a rank exited (or vanished)."""
        if ev.get("event") != "exit":
            return
        try:
            jid = int(str(ev.get("job_id")))
        except ValueError:
            return
        job = self.jobs.get(jid)
        node = ev.get("node")
        if job is None or not isinstance(node, str):
            log.warning("event for unknown job %s on %s", ev.get("job_id"), node)
            return
        code = ev.get("exit_code")
        self._rank_ended(job, node, code if isinstance(code, int) else None, ev)

    def _rank_ended(
        self, job: Job, node: str, code: int | None, ev: Mapping[str, Any] | None = None
    ) -> None:
        for rank, r in enumerate(job.ranks):
            if r.node != node or r.ended:
                continue
            r.ended = True
            if ev is not None:
                codes = ev.get("exit_codes") or {}
                c = codes.get(str(rank), code) if isinstance(codes, dict) else code
                r.exit_code = c if isinstance(c, int) else code
            else:
                r.exit_code = code
            if job.ended:
                continue
            if r.exit_code not in (0, None):
                self._kill_ranks(job)
                self.end(
                    job,
                    FAILED,
                    f"rank {rank} on {node} exited with {r.exit_code}",
                    r.exit_code,
                )
        if not job.ended and job.ranks and all(r.ended for r in job.ranks):
            if all(r.exit_code == 0 for r in job.ranks):
                self.end(job, DONE, "all ranks exited 0", 0)
            else:
                # Only an agent restart loses exit codes (reattached, not its child).
                self.end(job, DONE, "ranks ended; exit status unknown (agent restarted)")

    # ---- the quantum -----------------------------------------------------------------
    def tick(self, at: float | None = None) -> None:
        """One quantum: events, class rules, the plan, the command round, feedback.

        ``at``: the CLOCK_REALTIME instant the agents apply the plan at
        (time-triggered); None applies it on arrival.
        """
        now = self.mono()
        for ev in self.pool.events():
            self.on_event(ev)
        rejoined, self._rejoined = sorted(self._rejoined), set()
        for node in rejoined:
            self.reconcile_node(node)
        self._class_rules(now)
        self._hand_over()
        planned = self.fam.plan(now)
        runnable, weights, plan = planned.runnable, planned.weights, planned.policy_plan
        commands: dict[str, dict[str, int]] = {n.name: {} for n in self.nodes}
        for jid, nodes in runnable.items():
            for n in nodes:
                commands[n][str(jid)] = weights.get(jid, 100)
        self.q += 1
        results = self.pool.quantum(self.q, commands, at)
        if at is not None:
            self.counters.timed_quanta += 1
        self._account(results)
        for job in self.jobs.values():
            job.set_runnable(job.job_id in runnable)
        self._prev_runnable = runnable
        self.last_plan = plan
        self.counters.quanta += 1
        for ev in self.pool.events():
            self.on_event(ev)
        if self.counters.quanta % 50 == 0:
            self.prune_ended()

    def _class_rules(self, now: float) -> None:
        dt = 0.0 if self._last_tick is None else max(0.0, now - self._last_tick)
        self._last_tick = now
        for job in self.jobs.values():
            if job.job_class == INTERACTIVE and job.active:
                job.interactive_run_s += dt
                if classes.should_demote(job, self.cfg.interactive_limit):
                    job.job_class = PRODUCTION
                    log.info(
                        "job %d demoted to production after %.1fs interactive",
                        job.job_id,
                        job.interactive_run_s,
                    )

    def _account(self, results: Mapping[str, QuantumResult]) -> None:
        """CPU time per job, utilization feedback, skew, cluster utilization."""
        cpu: dict[str, dict[int, int]] = {}
        elapsed: dict[str, int] = {}
        applied: dict[str, int] = {}
        thawed: dict[str, int] = {}
        for node, res in results.items():
            if res.ack is None:
                self.counters.failed_commands += 1
                self._warn_failed(node, str(res.error))
                continue
            if node in self._failing:
                n, _, _ = self._failing.pop(node)
                log.info("quantum %d: %s answers again after %d failed quanta", self.q, node, n)
            ack = res.ack
            per: dict[int, int] = {}
            for k, v in (ack.get("cpu_ns") or {}).items():
                try:
                    per[int(k)] = int(v)
                except (TypeError, ValueError):
                    continue
            cpu[node] = per
            for jid, ns in per.items():
                job = self.jobs.get(jid)
                if job is not None:
                    job.cpu_ns += ns
            if ack.get("errors"):
                log.warning("quantum %d on %s: %s", self.q, node, ack["errors"])
            self._switch_figures(node, ack, thawed)
            t = ack.get("applied_monotonic_ns")
            if isinstance(t, int):
                applied[node] = t
                prev = self._prev_applied.get(node)
                if prev is not None:
                    elapsed[node] = t - prev
        capacity = self.capacity
        util = job_utilization(cpu, elapsed, capacity, self._prev_runnable)
        self.last_utilization = util
        if util:
            self.fam.observe(util)
        skew = command_skew_s(applied)
        if skew is not None:
            self.skews.append(skew)
            self.new_skews.append(skew)
        thaw_skew = command_skew_s(thawed)
        if thaw_skew is not None:
            self.thaw_skews.append(thaw_skew)
            self.new_thaw_skews.append(thaw_skew)
        total_cpu = sum(sum(per.values()) for per in cpu.values())
        offered = sum(elapsed[n] * capacity.get(n, 1.0) for n in elapsed)
        if offered > 0:
            self.counters.utilization = min(1.0, total_cpu / offered)
        self._prev_applied.update(applied)
        for node in results:
            if node not in applied:
                self._prev_applied.pop(node, None)

    def unreachable_nodes(self) -> list[str]:
        """Nodes whose agent is not connected or failed its last quantum command."""
        down = {n for n, ok in self.pool.connected().items() if not ok}
        return sorted(down | set(self._failing))

    def _warn_failed(self, node: str, error: str) -> None:
        """Log a node's failed command once, then once per WARN_EVERY_S with a count.

        A controller whose agents are gone logged every node every quantum (816 lines in
        80 s at 0.1 s quanta, issue 13); ``failed_commands`` still counts every one.
        """
        now = self.mono()
        n, last, last_error = self._failing.get(node, (0, -math.inf, ""))
        n += 1
        if error != last_error or now - last >= WARN_EVERY_S:
            more = (
                f" ({n} failed quanta so far; next report in {WARN_EVERY_S:g} s)" if n > 1 else ""
            )
            log.warning("quantum %d on %s: %s%s", self.q, node, error, more)
            last, last_error = now, error
        self._failing[node] = (n, last, last_error)

    def _switch_figures(self, node: str, ack: Mapping[str, Any], thawed: dict[str, int]) -> None:
        """The thaw instant, lateness, late flag and freeze confirmation of one ack."""
        t = ack.get("thawed_realtime_ns")
        if isinstance(t, int):
            thawed[node] = t
        fc = ack.get("freeze_confirm_s")
        if isinstance(fc, int | float):
            self.freeze_confirms.append(float(fc))
        if ack.get("mode") != "time-triggered":
            return
        lat = ack.get("lateness_s")
        if isinstance(lat, int | float):
            self.lateness.append(float(lat))
        if ack.get("late"):
            self.counters.late_plans += 1
            self.new_late += 1
            log.info(
                "quantum %d: the plan reached %s after its instant (applied late)", self.q, node
            )

    # ---- views -------------------------------------------------------------------
    def queue_length(self) -> int:
        return len(self.held) + self.policy.queue_length

    def matching_success_ratio(self) -> float:
        c = self.counters
        return c.paired_quanta / c.planned_quanta if c.planned_quanta else 0.0

    def slot_matched_ratio(self) -> dict[int, float]:
        """Fraction of quanta in which each row was used as the partner (Wiseman & Feitelson 2003
        Fig. 7
        bottom: "fraction of quanta in which jobs occupying different slots in the matrix
        were used for matching")."""
        total = self.counters.planned_quanta
        return {s: n / total for s, n in sorted(self.slot_runs.items())} if total else {}

    def skew_percentiles(self) -> dict[str, float | None]:
        v = list(self.skews)
        return {"p50": percentile(v, 50), "p99": percentile(v, 99), "max": max(v, default=None)}

    def switch_percentiles(self) -> dict[str, float | None]:
        """Thaw skew, lateness against the instant and freeze confirmation, p50/p99 (s)."""
        out: dict[str, float | None] = {}
        for name, window in (
            ("thaw_skew", self.thaw_skews),
            ("lateness", self.lateness),
            ("freeze_confirm", self.freeze_confirms),
        ):
            v = list(window)
            out[f"{name}_p50_s"] = percentile(v, 50)
            out[f"{name}_p99_s"] = percentile(v, 99)
        return out

    def matrix_view(self) -> dict[str, Any]:
        slots = self.fam.rows()
        plan = self.last_plan
        shown = {j for row_ in slots for j in row_ if j is not None}
        shown.update(self.held)
        shown.update(self.in_policy)
        extra = self.fam.describe()
        tree_view = getattr(self.policy, "tree_view", None)  # DHC: its controllers and front
        return {
            **({"tree": tree_view()} if callable(tree_view) else {}),
            "policy": self.policy_name,
            **{k: extra[k] for k in ("mpl", "scheme") if k in extra},
            "quantum": self.cfg.quantum,
            "nodes": [n.name for n in self.nodes],
            "slots": slots,
            "running": {
                "slot": plan.slot if plan else None,
                "partner": plan.partner if plan else None,
                "alternates": sorted(plan.alternates) if plan else [],
            },
            "jobs": {
                str(j): {
                    "user": self.jobs[j].user,
                    "class": self.jobs[j].job_class,
                    "size": self.jobs[j].spec.size,
                    "state": self.jobs[j].state,
                }
                for j in sorted(shown)
                if j in self.jobs
            },
        }

    def job_counts(self) -> dict[tuple[str, str], int]:
        """Jobs by (state, class), the archived ones included (the exporter's gauge)."""
        c: Counter[tuple[str, str]] = Counter(self.archived_counts)
        for j in self.jobs.values():
            c[(j.state, j.job_class)] += 1
        return dict(c)

    def prune_ended(self) -> int:
        """Move the oldest ended jobs beyond ``keep_ended`` to the archive; returns how
        many. A job still referenced (held, in the policy) is never moved."""
        if self.archive is None:
            return 0
        ended = [j for j in self.jobs.values() if j.ended and j.job_id not in self.in_policy]
        extra = len(ended) - self.keep_ended
        if extra <= 0:
            return 0
        ended.sort(key=lambda j: (j.end_time or 0.0, j.job_id))
        old = ended[:extra]
        now = self.wall()
        try:
            self.archive.append(j.record(now, with_ranks=True) for j in old)
        except OSError as e:  # keep them in memory; try again later
            log.warning("cannot archive %d ended job(s) to %s: %s", extra, self.archive.path, e)
            return 0
        for j in old:
            self.archived_counts[(j.state, j.job_class)] += 1
            del self.jobs[j.job_id]
        return extra

    def records(self, now: float, show_all: bool) -> list[dict[str, Any]]:
        """The ``jobs`` request: unfinished jobs, or with ``show_all`` every job, the
        archived ones included."""
        out = [j.record(now) for _, j in sorted(self.jobs.items()) if show_all or not j.ended]
        if show_all and self.archive is not None:
            drop = ("ranks", "argv")
            old = {
                r["job_id"]: {k: v for k, v in r.items() if k not in drop}
                for r in self.archive.records()
                if r.get("job_id") not in self.jobs
            }
            out = sorted([*old.values(), *out], key=lambda r: int(r["job_id"]))
        return out

    def record(self, job_id: object, now: float) -> dict[str, Any]:
        """The ``job`` request: one job with its ranks, from memory or the archive."""
        if isinstance(job_id, int) and job_id not in self.jobs and self.archive is not None:
            rec = self.archive.find(job_id)
            if rec is not None:
                return rec
        return self.get(job_id).record(now, with_ranks=True)

    # ---- checkpoint / restore (controller/checkpoint.py has the file format) ------------
    def to_payload(self) -> dict[str, Any]:
        history = {str(j): list(h) for j, h in self.fam.snapshot().items() if j in self.in_policy}
        return {
            "policy": self.policy_name,
            "params": self.params,
            "nodes": [n.name for n in self.nodes],
            "config": self.cfg.to_dict(),
            "next_id": self.next_id,
            "archived_counts": [[st, cls, n] for (st, cls), n in self.archived_counts.items()],
            "q": self.q,
            "saved_at": self.wall(),
            "jobs": [self.jobs[j].to_dict() for j in sorted(self.jobs)],
            "predictor_history": history,
        }

    def restore(self, payload: Mapping[str, Any]) -> None:
        """Rebuild from a checkpoint payload (strategy: controller/checkpoint.py)."""
        if payload.get("policy") != self.policy_name:
            raise RequestError(
                f"checkpoint is for policy {payload.get('policy')!r}, not {self.policy_name!r};"
                f" start with --policy {payload.get('policy')}"
            )
        names = [n.name for n in self.nodes]
        if payload.get("nodes") != names:
            raise RequestError(
                f"checkpoint nodes {payload.get('nodes')} differ from this cluster's {names}"
            )
        self.cfg = OperatorConfig.from_dict(dict(payload.get("config") or {}))
        self.policy = self._new_policy()
        self.jobs = {}
        for d in payload.get("jobs", []):
            job = Job.from_dict(d)
            self.jobs[job.job_id] = job
        self.next_id = max([int(payload.get("next_id", 1)), *[j + 1 for j in self.jobs]])
        self.archived_counts = Counter(
            {(str(st), str(cls)): int(n) for st, cls, n in payload.get("archived_counts", [])}
        )
        self.q = int(payload.get("q", 0))
        self.fam = make_family(self, self.policy)
        self.held, self.in_policy = [], set()
        order = sorted(self.jobs.values(), key=lambda j: (j.submit_time, j.job_id))
        # Started jobs first, where their processes run.
        self.fam.readopt([j for j in order if j.active])
        history = payload.get("predictor_history") or {}
        self.fam.restore({int(k): tuple(float(u) for u in v) for k, v in history.items()})
        self.held = [j.job_id for j in order if j.state == QUEUED]
        self._hand_over()

    def reconcile(self) -> dict[str, Any]:
        """After a restore: ask every agent what happened to our jobs meanwhile.

        Gorda & Brooks 1991 §3.1: "internal consistency-checking corrects any inconsistent
        data (such as a job which has exited in the interim)". Ended ranks are
        recorded with the agents' exit codes; live ones are re-adopted (the next
        quantum freezes them per the matrix again); jobs an agent no longer
        knows are recorded as ended with the reason.
        """
        report: dict[str, Any] = {"adopted": [], "ended": [], "orphans": [], "unreachable": []}
        # Only jobs started before the restart: events handled below may launch
        # new ones, which the status snapshot cannot know about yet.
        restored = sorted(j for j, job in self.jobs.items() if job.active)
        known: dict[str, dict[str, dict[str, Any]]] = {}
        for n in self.nodes:
            st = self.pool.status(n.name)
            if st is None:
                report["unreachable"].append(n.name)
                continue
            known[n.name] = {str(j.get("job_id")): j for j in st.get("jobs", [])}
        for ev in self.pool.events():
            self.on_event(ev)
        for job in (self.jobs[j] for j in restored):
            for r in job.ranks:
                if r.ended or r.node not in known:
                    continue
                info = known[r.node].get(str(job.job_id))
                if info is None:
                    self._rank_ended(job, r.node, None)
                elif info.get("state") == "ended":
                    code = info.get("exit_code")
                    self._rank_ended(job, r.node, code if isinstance(code, int) else None, info)
            if job.ended:
                report["ended"].append(job.job_id)
            else:
                report["adopted"].append(job.job_id)
        ours = {str(j) for j, job in self.jobs.items() if job.active or j in restored}
        for node, jobs in known.items():
            for jid, info in jobs.items():
                if info.get("state") != "ended" and jid not in ours:
                    report["orphans"].append(f"{node}:{jid}")
        if report["orphans"]:
            log.warning("agents run jobs this controller does not know: %s", report["orphans"])
        log.info("reconcile: %s", report)
        return report
