"""The scheduler: requests, the class rules, and one quantum at a time.

It ties the parts together: the job table (controller/jobtable.py), the policy
and the family that drives it (controller/families/), the quantum round
(controller/quantum.py), telemetry (controller/telemetry.py), what ranks are
told at launch (controller/launchenv.py) and reconciliation with the agents
(controller/reconcile.py). The class rules (controller/classes.py) are applied
around the policy. Driven by an injected clock and agent pool, so unit tests
run it with fakes; docs/controller.md says how a quantum runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from agent.client import AgentError
from agent.jobsecret import new_instance
from controller import classes
from controller.families import Core, Family, make_family
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
from controller.jobtable import JobTable
from controller.launchenv import rank_env
from controller.nodes import NodeInfo, Pool
from controller.operator import OperatorConfig
from controller.policies.base import JobRequest, QuantumPlan
from controller.policies.registry import Policy, lookup, make_policy
from controller.quantum import QuantumRound
from controller.reconcile import Reconciler
from controller.telemetry import Telemetry

log = logging.getLogger("controller.quantum")  # the scheduler's parts log as one


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
        node_index = {n.name: i for i, n in enumerate(self.nodes)}
        self.cfg = config or OperatorConfig()
        if self.cfg.max_slots is None and "max_slots" in self.params:
            ms = self.params["max_slots"]
            self.cfg.max_slots = ms if isinstance(ms, int) else None
        self.wall = wall
        self.mono = mono
        self.job_env = dict(job_env or {})  # added to every rank's environment (net_env)
        self.table = JobTable()
        self.round = QuantumRound(
            pool,
            self.nodes,
            self.table,
            mono,
            device_bps=lambda: {"disk": self.cfg.disk_bps, "net": self.cfg.net_bps},
            measure=self._measure,
        )
        self.telemetry = Telemetry()
        self.rejoins = Reconciler(pool, self.nodes, self.table, self._rank_ended, self.on_event)
        self.pool.on_connect = self._agent_connected
        self.policy: Policy = self._new_policy()
        self.core = Core(
            nodes=self.nodes,
            node_index=node_index,
            table=self.table,
            agents=pool,
            mono=mono,
            launch=self.launch,
            end=self.end,
            submit=self.policy_submit,
            max_slots=lambda: self.cfg.max_slots,
        )
        self.fam: Family = make_family(self.core, self.policy)
        self.last_plan: QuantumPlan | None = None
        self.last_utilization: dict[int, float] = {}
        self.last_devices: dict[int, dict[str, float]] = {}  # the same, per device
        self.ack_all_devices = False  # --ack-devices all: agents read every device (_measure)
        # the plan whose quantum last_utilization measured (the acks of a round carry
        # the CPU used since the previous one: the quantum before last_plan's)
        self.measured_plan: QuantumPlan | None = None
        self._last_tick: float | None = None

    # ---- construction --------------------------------------------------------
    @property
    def family(self) -> str:
        return self.entry.family

    def _measure(self) -> list[str] | None:
        """The I/O devices whose bytes the agents read for the acks: those the policy
        uses (GangPolicy.io_devices; none for a policy without them), or None, every
        device, under ``--ack-devices all``."""
        if self.ack_all_devices:
            return None
        wanted = getattr(self.policy, "io_devices", None)
        return list(wanted()) if callable(wanted) else []

    def _new_policy(self) -> Policy:
        params = dict(self.params)
        if "max_slots" in {p.name for p in self.entry.params}:
            params["max_slots"] = self.cfg.max_slots
        return make_policy(self.policy_name, len(self.nodes), params)

    def _agent_connected(self, node: str, hello: Mapping[str, Any]) -> None:
        self.rejoins.connected(node)  # reconciled at the next quantum
        self.fam.agent_connected(node, hello)

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
            mine = sum(1 for j in self.table.jobs.values() if j.user == user and not j.ended)
            if mine >= self.cfg.user_limit:
                raise SpecError(
                    f"user {user!r} already has {mine} unfinished job(s), the limit is"
                    f" {self.cfg.user_limit}; wait for one to end or ask the operator"
                )
        job = self.table.add(spec, user, self.wall())
        log.info(
            "job %d submitted by %s%s: %s",
            job.job_id,
            user,
            f" to run as {spec.run_as}" if spec.run_as not in (None, user) else "",
            " ".join(spec.argv),
        )
        self._hand_over()
        return job.job_id

    def kill(self, job_id: object, user: str, operator: bool) -> str:
        job = self.table.get(job_id)
        if not operator and job.user != user:
            raise RequestError(f"job {job.job_id} belongs to {job.user!r}, not {user!r}")
        if job.ended:
            return job.state
        self._kill_ranks(job)
        self.end(job, KILLED, f"killed by {user}")
        return job.state

    def set_class(self, job_id: object, new_class: object, user: str, operator: bool) -> str:
        job = self.table.get(job_id)
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
        self.table.in_policy.add(job.job_id)

    def _hand_over(self) -> None:
        t = self.table
        self.fam.withdraw_outranked()
        while t.held:
            order = classes.hold_order(t.jobs[j] for j in t.held)
            head = order[0]
            others = sum(1 for j in order if j.job_class != STANDBY)
            waiting = self.fam.waiting_for_classes(head)
            if not classes.may_hand_over(head, waiting, others):
                break
            t.held.remove(head.job_id)
            self.policy_submit(head)
        self.fam.after_hand_over()

    # ---- launch / end ------------------------------------------------------------
    def launch(self, job: Job, nodes: list[str], *, start_frozen: bool) -> None:
        job.start(self.wall(), nodes)
        peers = [self.nodes[self.core.node_index[n]].data_ip for n in nodes]
        instance = new_instance()  # one per launch: the agents key the job's secret with it
        for rank, node in enumerate(nodes):
            env = rank_env(job, rank, node, peers, self.job_env, instance)
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
        if self.table.drop(job.job_id):
            self.policy.finish(job.job_id, self.mono())
        self.fam.ended(job.job_id)
        self.round.forget(job.job_id)
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
        job = self.table.jobs.get(jid)
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
        self.rejoins.rejoined()
        self._class_rules(now)
        self._hand_over()
        planned = self.fam.plan(now)
        self.telemetry.planned(planned.policy_plan)
        report = self.round.run(planned.runnable, planned.weights, at)
        self.last_utilization = report.utilization
        self.last_devices = report.devices
        if report.devices:
            # a policy that reads only the CPU gets it from here (GangPolicy.observe_devices)
            self.fam.observe_devices(report.devices)
        self.telemetry.switched(report.switches, timed=at is not None)
        self.measured_plan = self.last_plan
        self.last_plan = planned.policy_plan
        for ev in self.pool.events():
            self.on_event(ev)
        if self.telemetry.counters.quanta % 50 == 0:
            self.table.prune_ended(self.wall())

    def _class_rules(self, now: float) -> None:
        dt = 0.0 if self._last_tick is None else max(0.0, now - self._last_tick)
        self._last_tick = now
        for job in self.table.jobs.values():
            if job.job_class == INTERACTIVE and job.active:
                job.interactive_run_s += dt
                if classes.should_demote(job, self.cfg.interactive_limit):
                    job.job_class = PRODUCTION
                    log.info(
                        "job %d demoted to production after %.1fs interactive",
                        job.job_id,
                        job.interactive_run_s,
                    )

    # ---- views -------------------------------------------------------------------
    def queue_length(self) -> int:
        return len(self.table.held) + self.policy.queue_length

    def matrix_view(self) -> dict[str, Any]:
        jobs = self.table.jobs
        slots = self.fam.rows()
        plan = self.last_plan
        shown = {j for row_ in slots for j in row_ if j is not None}
        shown.update(self.table.held)
        shown.update(self.table.in_policy)
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
                    "user": jobs[j].user,
                    "class": jobs[j].job_class,
                    "size": jobs[j].spec.size,
                    "state": jobs[j].state,
                }
                for j in sorted(shown)
                if j in jobs
            },
        }

    # ---- checkpoint / restore (controller/checkpoint.py has the file format) ------------
    def to_payload(self) -> dict[str, Any]:
        in_policy = self.table.in_policy
        history = {str(j): list(h) for j, h in self.fam.snapshot().items() if j in in_policy}
        jobs = self.table.to_payload()
        return {
            "policy": self.policy_name,
            "params": self.params,
            "nodes": [n.name for n in self.nodes],
            "config": self.cfg.to_dict(),
            "next_id": jobs["next_id"],
            "archived_counts": jobs["archived_counts"],
            "q": self.round.q,
            "saved_at": self.wall(),
            "jobs": jobs["jobs"],
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
        # The file's checksum held, so a payload of the wrong shape was written by hand or
        # by another version: refused in one line (the daemon has not started yet).
        try:
            self.cfg = OperatorConfig.from_dict(dict(payload.get("config") or {}))
            self.policy = self._new_policy()
            self.table.load(payload)
            self.round.q = int(payload.get("q", 0))
            self.fam = make_family(self.core, self.policy, self.fam.schemes)
            order = sorted(self.table.jobs.values(), key=lambda j: (j.submit_time, j.job_id))
            # Started jobs first, where their processes run.
            self.fam.readopt([j for j in order if j.active])
            history = payload.get("predictor_history") or {}
            self.fam.restore({int(k): tuple(float(u) for u in v) for k, v in history.items()})
        except RequestError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            raise RequestError(f"checkpoint payload malformed: {type(e).__name__}: {e}") from None
        self.table.held = [j.job_id for j in order if j.state == QUEUED]
        self._hand_over()

    def reconcile(self) -> dict[str, Any]:
        """After a restore: ask every agent what happened to our jobs meanwhile
        (controller/reconcile.py)."""
        return self.rejoins.restored()
