"""The node agent: a single-threaded selectors loop enforcing quantum commands.

One thread does everything latency-sensitive (socket I/O, freeze/thaw, reaping)
so a quantum command is applied as soon as its frame is read, with no thread
hand-off; it runs at SCHED_FIFO when permitted. The only other thread is the
Prometheus HTTP server, which reads a snapshot taken under ``self.lock``.

This module is the job state machine (launch, quantum apply, reap, fail-safe,
reattach, snapshot) and the loop; the sockets and frames are agent/server.py,
what each request does is agent/api.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from agent import wire
from agent.api import AgentAPI, Refused
from agent.failsafe import FailSafe, Transition
from agent.iodevice import ENV as IODEV_ENV
from agent.iodevice import SOCKET_NAME as IODEV_SOCKET
from agent.iodevice import IoDevice
from agent.jobs import Job, JobError, check_job_id, job_cgroup, kill_job, spawn_rank
from agent.jobsecret import instance_of, rank_env
from agent.local import LocalHost, LocalScheduler
from agent.metrics import AgentMetrics, Snapshot
from agent.netuse import NetMeter
from agent.nicguard import mesh_of
from agent.plan import Offer, Plan, PlanSlot, TooFar, wait_until
from agent.realtime import FIFO, NONE, choose_wakeup
from agent.runas import RunAsError, ensure_root, job_env, output_dir, resolve
from agent.server import AgentConn, AgentServer
from common.cgroups import (
    DEFAULT_WEIGHT,
    CgroupError,
    FreezeError,
    base_join,
    open_cgroups,
    prepare_base,
)
from common.cgroups import Cgroups as CgroupDriver
from common.cgroups.driver import PreparedThaw
from common.errors import UsageError

log = logging.getLogger("agent")

KEEP_ENDED = 256  # ended jobs an agent remembers at most
KEEP_ENDED_S = 600.0  # and for how long

# Exits of our own children wake the loop via SIGCHLD (see run()); this
# interval only bounds how late a reattached job's end (not our child, no
# SIGCHLD) or a missed signal is noticed. Fewer wakeups = less agent CPU.
REAP_INTERVAL = 0.5
# The agent's own leaf below its node group: cgroup v2 enables controllers
# (cpu.weight for the jobs) only in groups that hold no process themselves.
AGENT_LEAF = "agent"


_WAKEUP = object()  # selector tag of the signal wake-up pipe

# Wake-ups (agent/realtime.py) under which a time-triggered switch writes its thaws
# before its freezes: nothing preempts a SCHED_FIFO agent between the two writes. A
# fair agent, even with a short slice, can be preempted there once its slice is used;
# it asks for the freezes first (apply_at, docs/cluster.md "The order of the writes").
THAW_FIRST = frozenset({FIFO})

# The I/O devices an ack can carry bytes for (controller/acks.py DEVICE_ACK_KEYS: "disk"
# -> io_bytes, "net" -> net_bytes). A quantum names those its controller's policy reads
# (``measure``); one that names none, from an older controller, gets them all.
DEVICES = frozenset({"disk", "net"})


class Stop(BaseException):
    """Raised from the SIGTERM handler to leave the loop through ``finally``."""


@dataclass
class AgentConfig:
    node: str
    listen: tuple[str, int]
    key: bytes
    cgroup_parent: str  # "" = cosched/<node> below the layout's base
    run_dir: Path
    metrics: tuple[str, int] | None = None
    failsafe_timeout: float = 2.0
    backend: str | None = None  # None/"auto" = detect
    cgroup_root: str | None = None
    fifo_priority: int = 10  # 0 = stay SCHED_OTHER
    # If SCHED_FIFO is refused (agent/realtime.py, docs/cluster.md): SCHED_OTHER with this
    # slice (0 = not tried: measured no better than plain), else the agent's own leaf at
    # this cpu weight against the jobs' (0 = not tried)
    slice_us: int = 0
    leaf_weight: int = 10000
    freeze_timeout: float = 1.0
    tt_wait: str = (
        "sleep"  # last stretch before a plan's instant: "sleep" or "spin" (agent/plan.py)
    )
    switch: str = "freezer"  # "freezer" or "signals" (SIGSTOP/SIGCONT, agent/signals.py)
    io_device: bool = True  # the node's shared I/O device (agent/iodevice.py)
    net_meter: bool = True  # report each job's TCP bytes (agent/netuse.py)
    decision_interval_ms: float = 10.0  # a local scheme's tick unless the controller sets one


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        driver: CgroupDriver | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sel: selectors.BaseSelector | None = None,
    ) -> None:
        """``sel``: a selector shared with other agents of one process (agent/emulated.py)."""
        self.cfg = config
        self.wall = wall  # CLOCK_REALTIME: the clock plans' instants are on
        explicit = bool(config.cgroup_parent.strip("/"))
        self.driver = driver or open_cgroups(
            config.backend or "auto",
            root=config.cgroup_root,
            # An explicit parent (the cluster gives one) needs no base lookup.
            base="" if explicit else None,
            freeze_timeout=config.freeze_timeout,
        )
        if config.switch == "signals":
            from agent.signals import SignalSwitch

            self.driver = cast(CgroupDriver, SignalSwitch(self.driver))
        elif config.switch != "freezer":
            raise ValueError(f"switch must be 'freezer' or 'signals', got {config.switch!r}")
        self.parent = (
            config.cgroup_parent.strip("/")
            if explicit
            else base_join(self.driver.layout.base, "cosched", config.node)
        )
        self.jobs: dict[str, Job] = {}
        self.failsafe = FailSafe(config.failsafe_timeout, clock)
        # A plan must take effect before the fail-safe would give up on the controller.
        self.plans = PlanSlot(max_ahead=config.failsafe_timeout)
        self.lock = threading.Lock()
        self.metrics = AgentMetrics(self.snapshot)
        self.sel = sel or selectors.DefaultSelector()
        self.last_q: int | None = None
        self._next_reap = 0.0
        self._pending_remove: dict[str, float] = {}  # cgroup -> give-up time
        self._stopping = False
        self.local = LocalScheduler(
            LocalHost(
                node=config.node,
                key=config.key,
                listen_ip=config.listen[0],
                run_dir=lambda: self.cfg.run_dir,  # settled by start()
                jobs=self.jobs,
                loop=self.sel,
                cgroups=self.driver,
                default_tick_ms=config.decision_interval_ms,
            )
        )
        self.api = AgentAPI(self)
        self.server = AgentServer(self.sel, config.key, config.node, self.api.dispatch, self._heard)
        self.iodev: IoDevice | None = None
        # why the jobs' block I/O bytes cannot be read here (None: they are, issue 31)
        self.io_unavailable: str | None = "not set up yet"
        self.netmeter: NetMeter | None = NetMeter() if config.net_meter else None
        self._measured = DEVICES  # the devices the previous ack read (their bases are current)
        # how the loop is woken promptly (agent/realtime.py), set by start(); with
        # SCHED_FIFO a time-triggered switch writes its thaws first (apply_at)
        self.wakeup = NONE

    # ---- lifecycle --------------------------------------------------------
    def start(self) -> None:
        try:
            self.cfg.run_dir = ensure_root(self.cfg.run_dir)  # refuses a plantable directory
        except (RunAsError, OSError) as e:
            raise UsageError(
                f"--run-dir {self.cfg.run_dir}: {e}", fix="give a root-owned directory"
            ) from None
        prepare_base(self.driver)  # a delegated unit's processes go to a leaf
        self.driver.ensure_parent(self.parent, ())
        if os.getpid() in self.driver.pids(self.parent):
            self.driver.enter_leaf(self.parent, AGENT_LEAF, os.getpid())
        self.driver.ensure_parent(self.parent)
        self.io_unavailable = self.driver.io_accounting(self.parent)
        if self.io_unavailable:
            log.info("jobs' disk use not reported: %s", self.io_unavailable)
        try:
            self.driver.pin_freezer(self.parent)
        except (CgroupError, OSError) as e:
            log.warning("cannot pin the freezer on (%s): switches cost a little more", e)
        self._reattach()
        self.server.listen(self.cfg.listen)
        if self.cfg.io_device:
            # before going realtime: the device's threads stay SCHED_OTHER
            self.iodev = IoDevice(self.cfg.run_dir / IODEV_SOCKET)
            self.iodev.open()
        if self.cfg.metrics is not None:
            self.metrics.serve(*self.cfg.metrics)
        caps = self.driver.capabilities
        log.info(
            "agent %s listening on %s:%d, cgroup backend %s, parent %s, weights %s",
            self.cfg.node,
            *self.cfg.listen,
            self.driver.name,
            self.parent,
            "enforced" if caps.weights_enforced else "recorded only (no cpu.weight here)",
        )
        # After the metrics thread exists, so it stays SCHED_OTHER.
        self._go_realtime()

    def _go_realtime(self) -> None:
        self.wakeup = choose_wakeup(
            self.cfg.fifo_priority,
            self.cfg.slice_us,
            "thaws may complete late under load, and a time-triggered switch writes its"
            " freezes before its thaws",
            leaf_weight=self._weigh_own_leaf if self.cfg.leaf_weight > 0 else None,
        )

    def _weigh_own_leaf(self) -> None:
        """The agent's leaf (``<parent>/agent``) at ``leaf_weight``; OSError if not had.

        Only where the agent runs in that leaf, as ``cluster up`` and :meth:`start`
        place it; a leaf elsewhere (a systemd unit's supervisor) is left alone.
        """
        leaf = base_join(self.parent, AGENT_LEAF)
        if not self.driver.capabilities.weights_enforced:
            raise OSError("no cpu weights on this host")
        if os.getpid() not in self.driver.pids(leaf):
            raise OSError(f"the agent is not in its leaf {leaf}")
        try:
            self.driver.set_weight(leaf, self.cfg.leaf_weight)
        except (CgroupError, ValueError) as e:
            raise OSError(f"{leaf}: {e}") from None

    @property
    def realtime(self) -> bool:
        """SCHED_FIFO granted: orders a time-triggered switch (apply_at)."""
        return self.wakeup == FIFO

    def run(self) -> None:
        """start + loop + shutdown, with SIGCHLD waking the loop (main thread only)."""
        self.start()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old_fd = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        old_handler = signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        self.sel.register(wake_r, selectors.EVENT_READ, _WAKEUP)
        try:
            self.loop()
        finally:
            signal.signal(signal.SIGCHLD, old_handler)
            signal.set_wakeup_fd(old_fd)
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(wake_r)
            os.close(wake_r)
            os.close(wake_w)
            self.shutdown()

    def stop(self) -> None:
        self._stopping = True

    def loop(self) -> None:
        while not self._stopping:
            self.step(
                min(
                    self.failsafe.time_left(),
                    REAP_INTERVAL,
                    self.local.timeout(),
                    self.plans.wake_in(self.wall()),
                )
            )

    def step(self, timeout: float) -> None:
        ready = self.sel.select(max(0.0, timeout))
        # A due plan goes before the frames that arrived with the wake-up: its
        # instant cannot wait for them.
        self._fire_due_plan()
        for key, mask in ready:
            if self.server.owns(key.data):
                self.server.ready(key.data, mask)
            elif self.local.owns(key.data):
                self.local.ready(key.data)
            elif key.data is _WAKEUP:
                with contextlib.suppress(BlockingIOError):
                    while os.read(key.fd, 512):
                        pass
                self._next_reap = 0.0  # a child exited (or another signal): reap now
        self.local.poll()
        self.server.sweep()  # handshake and idle deadlines (common/guard.py)
        if self.failsafe.poll() is Transition.ACTIVATE:
            self._activate_failsafe()
        self._fire_due_plan()  # the frames just handled may have brought one already due
        now = time.monotonic()
        if now >= self._next_reap:
            self._next_reap = now + REAP_INTERVAL
            self.reap()

    def shutdown(self) -> None:
        """Never leave a job frozen behind: thaw everything, default weights."""
        self.local.close()
        self._drop_plan("the agent is exiting")
        self._release_all("agent exiting")
        with contextlib.suppress(CgroupError, OSError):
            self.driver.unpin_freezer(self.parent)
        if self.iodev is not None:
            self.iodev.close()
            self.iodev = None
        self.server.close()
        self.metrics.shutdown()
        log.info("agent %s stopped", self.cfg.node)

    def _release_all(self, why: str) -> int:
        live = [j for j in self.jobs.values() if not j.ended]
        for job in live:
            try:
                self.driver.set_weight(job.cgroup, DEFAULT_WEIGHT)
                job.weight = DEFAULT_WEIGHT
            except (CgroupError, OSError) as e:
                log.error("%s: cannot reset weight of job %s: %s", why, job.job_id, e)
        frozen = [j for j in live if j.frozen]
        for job in frozen:
            try:
                self.driver.thaw(job.cgroup)
                job.frozen = False
            except (CgroupError, OSError) as e:
                log.error("%s: cannot thaw job %s: %s", why, job.job_id, e)
        return len(frozen)

    def _activate_failsafe(self) -> None:
        # A pending plan would freeze jobs again after the release below.
        self._drop_plan("fail-safe: the controller went silent")
        n = self._release_all("fail-safe")
        self.metrics.failsafe_activations.inc()
        log.warning(
            "FAIL-SAFE: no controller frame for %.2fs (> %.2fs): thawed %d job(s), default"
            " weights, local scheduling until the controller returns",
            self.failsafe.age(),
            self.failsafe.timeout,
            n,
        )

    # ---- reattach / reap ---------------------------------------------------
    def _reattach(self) -> None:
        for name in self.driver.children(self.parent):
            if not name.startswith("job-"):
                continue
            jid = name[4:]
            try:
                check_job_id(jid)
            except JobError:
                continue
            cg = job_cgroup(self.parent, jid)
            job = Job(jid, cg, reattached=True)
            try:
                pids = self.driver.pids(cg)
                job.frozen = not self.driver.is_thawed(cg)
                job.weight = self.driver.get_weight(cg)
                job.usage_base_ns = self.driver.cpu_usage_ns(cg)
                job.io_base = self._io_now(cg)
            except (CgroupError, OSError) as e:
                log.warning("reattach: cannot read %s: %s", cg, e)
                pids = []
            job.pids = dict(enumerate(pids))
            self.jobs[jid] = job
            if pids:
                log.info("reattached job %s (%d processes, frozen=%s)", jid, len(pids), job.frozen)
            else:
                self._end(job, None, "processes gone while the agent was down")

    def reap(self) -> None:
        for job in list(self.jobs.values()):
            if job.ended:
                continue
            if job.reattached:
                try:
                    alive = bool(self.driver.pids(job.cgroup))
                except (CgroupError, OSError):
                    alive = False
                if not alive:
                    self._end(job, None, "processes gone (reattached job: exit code unknown)")
                continue
            for rank, proc in job.ranks.items():
                if rank not in job.exit_codes and proc is not None:
                    rc = proc.poll()
                    if rc is not None:
                        job.exit_codes[rank] = rc
            if len(job.exit_codes) == len(job.ranks):
                codes = list(job.exit_codes.values())
                code = next((c for c in codes if c != 0), 0)
                self._end(job, code, "exited")
        now = time.monotonic()
        for cg, give_up in list(self._pending_remove.items()):
            try:
                self.driver.remove(cg)
                del self._pending_remove[cg]
            except (CgroupError, OSError) as e:
                if now > give_up:
                    log.error("giving up removing %s: %s", cg, e)
                    del self._pending_remove[cg]

    def _end(self, job: Job, code: int | None, reason: str) -> None:
        try:
            job.final_usage_ns = self.driver.cpu_usage_ns(job.cgroup)
        except (CgroupError, OSError):
            job.final_usage_ns = None
        job.final_io = self._io_now(job.cgroup)
        try:
            if self.driver.pids(job.cgroup):
                self.driver.kill_all(job.cgroup)  # stragglers the ranks left behind
        except (CgroupError, OSError):
            pass
        with self.lock:
            job.ended = True
            job.exit_code = code
            job.end_reason = reason
            job.ended_at = time.monotonic()
            self._prune_ended()
        try:
            self.driver.remove(job.cgroup)
        except (CgroupError, OSError):
            self._pending_remove[job.cgroup] = time.monotonic() + 10.0
        log.info("job %s ended: exit code %s (%s)", job.job_id, code, reason)
        self._emit(
            {
                "node": self.cfg.node,
                "job_id": job.job_id,
                "event": "exit",
                "exit_code": code,
                "exit_codes": {str(r): c for r, c in job.exit_codes.items()},
                "reason": reason,
            }
        )

    def _prune_ended(self) -> None:
        """Forget ended jobs past KEEP_ENDED_S, and all but the last KEEP_ENDED (issue 13:
        the table grew by every job ever run). Kept that long so a restarted controller can
        still read how a job ended (its reconcile); called with the lock held."""
        ended = sorted((j.ended_at, jid) for jid, j in self.jobs.items() if j.ended)
        cutoff = time.monotonic() - KEEP_ENDED_S
        drop = len(ended) - KEEP_ENDED
        for i, (at, jid) in enumerate(ended):
            if i < drop or at < cutoff:
                del self.jobs[jid]

    def _emit(self, event: dict[str, Any]) -> None:
        self.server.send_event(event)  # or kept for the next controller session

    def _heard(self, conn: AgentConn) -> None:
        if self.failsafe.heard() is Transition.RESUME:
            log.warning("controller is back (%s): leaving fail-safe, obeying again", conn.peer)

    @property
    def listener(self) -> socket.socket | None:
        return self.server.listener

    # ---- what the request handlers read (agent/api.py ``Node``) -------------------
    @property
    def node(self) -> str:
        return self.cfg.node

    @property
    def backend(self) -> str:
        return self.driver.name

    @property
    def weights_enforced(self) -> bool:
        return self.driver.capabilities.weights_enforced

    @property
    def tt_wait(self) -> str:
        return self.cfg.tt_wait

    def kill(self, job: Job) -> None:
        """The kill request: the job's processes go; its end is reported as an exit."""
        kill_job(self.driver, job)
        job.frozen = False
        log.info("killed job %s", job.job_id)
        self.reap()

    # ---- launching -----------------------------------------------------------
    def launch(
        self,
        jid: str,
        d: dict[str, Any],
        ranks: list[int],
        env_extra: dict[str, str],
        weight: int,
        frozen: bool,
    ) -> dict[str, Any]:
        """Make the job's group and start its ranks inside it (request already checked).

        Raises :class:`Refused` when it cannot; returns what the reply reports.
        """
        cg = job_cgroup(self.parent, jid)
        if self.driver.exists(cg):
            raise Refused("job_exists", f"cgroup {cg} still exists")
        # Least privilege (agent/runas.py): the submitter's user, a clean environment,
        # output in a directory no one else can plant links in.
        instance = instance_of(env_extra)  # names a fresh output dir; keys the job's secret
        try:
            user = resolve(d.get("user"))
            out_dir = output_dir(self.cfg.run_dir, jid, instance)
        except (RunAsError, OSError) as e:
            raise Refused("launch_failed", f"launch of {jid}: {e}") from None
        base_env, dropped = job_env(user, env_extra)
        if dropped:
            log.warning("job %s: dropped %s from its environment", jid, ", ".join(dropped))
        base_env.update(self.local.job_env())
        base_env.update(
            COSCHED_JOB_ID=jid,
            COSCHED_NODE=self.cfg.node,
            COSCHED_NRANKS=str(d.get("size", len(ranks))),
        )
        base_env.update(rank_env(self.cfg.key, jid, instance))  # agent/jobsecret.py
        if self.iodev is not None:
            base_env[IODEV_ENV] = str(self.iodev.path)
        job = Job(jid, cg, weight=weight, frozen=frozen, run_dir=out_dir, user=user.name)
        job.peers, job.port = mesh_of(env_extra)  # what NIC registrations are checked against
        with contextlib.suppress(ValueError):
            # The library holds messages this long (userspace delay): the NIC view waits as long.
            job.net_delay_s = float(env_extra.get("COSCHED_NET_DELAY_US", "0")) / 1e6
        try:
            self.driver.create(cg)
            self.driver.set_weight(cg, weight)
            if frozen:
                self.driver.freeze(cg)  # an empty group freezes at once; ranks join frozen
            for rank in ranks:
                env = dict(base_env, COSCHED_RANK=str(rank))
                proc = spawn_rank(
                    self.driver, cg, d["argv"], env, out_dir, rank, d.get("cwd"), user
                )
                job.ranks[rank] = proc
                job.pids[rank] = proc.pid
        except (OSError, CgroupError, JobError, ValueError) as e:
            with contextlib.suppress(CgroupError, OSError):
                self.driver.kill_all(cg)
            for started in job.ranks.values():
                if started is not None:
                    with contextlib.suppress(Exception):
                        started.wait(timeout=5)
            with contextlib.suppress(CgroupError, OSError):
                self.driver.remove(cg)
            raise Refused("launch_failed", f"launch of {jid} failed: {e}") from None
        with self.lock:
            self.jobs[jid] = job
        log.info(
            "launched job %s as %s ranks %s pids %s frozen=%s",
            jid,
            user.name,
            ranks,
            list(job.pids.values()),
            frozen,
        )
        return {
            "job_id": jid,
            "pids": {str(r): p for r, p in job.pids.items()},
            "cgroup": cg,
            "frozen": frozen,
            "run_dir": str(out_dir),
        }

    # ---- enforcement -------------------------------------------------------
    def apply_now(
        self, q: int, runnable: dict[str, int], measure: frozenset[str] | None = None
    ) -> dict[str, Any]:
        """A quantum without an instant: it replaces a pending plan; applied, then acked."""
        self.replace_pending(q)
        ack = self.apply(runnable, measure)
        self.last_q = q
        ack.update(q=q, node=self.cfg.node)
        return ack

    def apply(
        self, runnable: dict[str, int], measure: frozenset[str] | None = None
    ) -> dict[str, Any]:
        """Immediate mode: freeze the others, set weights, thaw the runnable.

        Freezing first means the outgoing and incoming gangs never overlap on
        this node; the price is that the thaw, the instant the gang needs
        together on every node, comes after this node's freeze confirmation and
        whenever the command happened to arrive (see :meth:`apply_at`).
        """
        t0 = time.perf_counter()
        drv = self.driver
        live, to_freeze, to_thaw = self._split(runnable)
        errors: dict[str, str] = {}
        freeze_lat = self._freeze(to_freeze, errors)
        t1 = time.perf_counter()
        freeze_s = t1 - t0
        steps = {"freeze_write": drv.last_write_s, "freeze_confirm": drv.last_confirm_s}
        self._set_weights(live, runnable, errors)
        t2 = time.perf_counter()
        thaw_lat = self._thaw(to_thaw, errors)
        thawed_ns = time.time_ns()
        t3 = time.perf_counter()
        ack = self._finish(live, freeze_lat, thaw_lat, errors, t0, measure)
        # where a switch's time goes, per step (benchmarks/switch_steps.py, docs/cluster.md)
        steps.update(weights=t2 - t1, thaw_write=drv.last_write_s,
                     thaw_confirm=drv.last_confirm_s, account=time.perf_counter() - t3)  # fmt: skip
        if not to_freeze:
            steps["freeze_write"] = steps["freeze_confirm"] = 0.0
        if not to_thaw:
            steps["thaw_write"] = steps["thaw_confirm"] = 0.0
        ack.update(mode="immediate", thawed_realtime_ns=thawed_ns, freeze_confirm_s=freeze_s,
                   steps_s=steps)  # fmt: skip
        return ack

    def apply_at(self, plan: Plan) -> dict[str, Any]:
        """Time-triggered mode: thaw the incoming jobs at ``plan.at``, then freeze the others.

        Before the instant (the loop wakes ``EARLY_S`` ahead) the incoming
        jobs, still frozen, get their weights, so nothing but the thaw writes
        lies on the path from the instant to the gang running. After the thaw
        the outgoing jobs are frozen and confirmed; until then both may run on
        this node, for ``freeze_confirm_s`` (docs/cluster.md says why we accept
        that). That holds only for an agent at SCHED_FIFO, which nothing
        preempts between the two writes. Without it (cgroup2 on a kernel with
        RT group scheduling refuses SCHED_FIFO outside the root group) the
        thawed job preempted the agent and both ran for milliseconds (measured,
        docs/cluster.md), so there the freezes are written first, the thaws
        right after, then both are confirmed. The ack is sent after the
        confirmation, with the same CPU-time accounting as :meth:`apply`, so the
        controller's utilization feedback is unchanged.
        """
        prepared_ns = time.time_ns()
        live, to_freeze, to_thaw = self._split(plan.runnable)
        errors: dict[str, str] = {}
        self._set_weights(to_thaw, plan.runnable, errors)
        thaw = self._prepare_thaw(to_thaw)
        try:
            if not plan.late:
                wait_until(plan.at, self.cfg.tt_wait)
            woke_ns = time.time_ns()
            t0 = time.perf_counter()
            thaw_lat: dict[str, float] = {}
            thawed: list[tuple[int, float]] = []

            def write_thaws() -> None:
                if thawed:
                    return
                if thaw is not None:
                    thaw.write()
                else:
                    thaw_lat.update(self._thaw(to_thaw, errors))
                thawed.append((time.time_ns(), time.perf_counter()))

            if self.wakeup in THAW_FIRST:
                write_thaws()
                # One host, fewer cores than agents: the other agents woken for this
                # instant on this core (same FIFO priority) thaw before we go on.
                # Alone on a node, this returns at once.
                os.sched_yield()
                freeze_lat = self._freeze(to_freeze, errors)
            else:
                # freezes requested, thaws written, then the freezes confirmed; a thaw
                # that raises is raised after the confirmation, not taken for the freeze's
                raised: list[BaseException] = []

                def hook() -> None:
                    try:
                        write_thaws()
                    except BaseException as e:  # re-raised below
                        raised.append(e)

                freeze_lat = self._freeze(to_freeze, errors, between=hook)
                if raised:
                    raise raised[0]
                write_thaws()  # no-op unless the freeze failed before its hook ran
            thawed_ns, t_thawed = thawed[0]
            freeze_s = time.perf_counter() - t_thawed
            if thaw is not None:
                thaw_lat = self._confirm_thaw(thaw, to_thaw, errors)
        finally:
            if thaw is not None:
                thaw.close()
        moved = {j.job_id for j in to_thaw} | {j.job_id for j in to_freeze}
        stay = [j for j in live if j.job_id not in moved]
        self._set_weights(stay, plan.runnable, errors)
        ack = self._finish(live, freeze_lat, thaw_lat, errors, t0, plan.measure)
        lateness = thawed_ns / 1e9 - plan.at
        self.metrics.tt_lateness.observe(max(0.0, lateness))
        ack.update(
            mode="time-triggered",
            at=plan.at,
            late=plan.late,
            thawed_realtime_ns=thawed_ns,
            lateness_s=lateness,
            # Where the lateness comes from: the loop's wake-up before the
            # instant (negative: early, as it should be), the end of the final
            # wait after it, and the thaw writes from there.
            received_s=plan.received_wall - plan.at,
            prepared_s=prepared_ns / 1e9 - plan.at,
            woke_s=woke_ns / 1e9 - plan.at,
            thaw_writes_s=(thawed_ns - woke_ns) / 1e9,
            freeze_confirm_s=freeze_s,
            wait=self.cfg.tt_wait,
            received_monotonic_ns=plan.received_monotonic_ns,
        )
        return ack

    def _prepare_thaw(self, jobs: list[Job]) -> PreparedThaw | None:
        """Open the thaw requests before the instant; None: thaw the slow way then."""
        if not jobs:
            return None
        try:
            return self.driver.prepare_thaw([j.cgroup for j in jobs])
        except (CgroupError, OSError) as e:
            log.warning("cannot prepare the thaw of %s (%s): thawing on the slow path",
                        [j.job_id for j in jobs], e)  # fmt: skip
            return None

    def _confirm_thaw(
        self, thaw: PreparedThaw, jobs: list[Job], errors: dict[str, str]
    ) -> dict[str, float]:
        lat: dict[str, float] = {}
        try:
            lat = thaw.confirm()
        except (CgroupError, OSError) as e:
            for j in jobs:
                errors[j.job_id] = f"thaw failed: {e}"
        for j in jobs:
            if j.cgroup in thaw.failed:
                errors[j.job_id] = f"thaw failed: {thaw.failed[j.cgroup]}"
            if j.cgroup in lat:
                j.frozen = False
        return lat

    def _split(self, runnable: dict[str, int]) -> tuple[list[Job], list[Job], list[Job]]:
        live = [j for j in self.jobs.values() if not j.ended]
        to_freeze = [j for j in live if j.job_id not in runnable and not j.frozen]
        to_thaw = [j for j in live if j.job_id in runnable and j.frozen]
        return live, to_freeze, to_thaw

    def _freeze(
        self,
        jobs: list[Job],
        errors: dict[str, str],
        between: Callable[[], None] | None = None,
    ) -> dict[str, float]:
        """Freeze ``jobs``, confirmed; ``between`` runs after the requests (driver.freeze_many)."""
        if not jobs:
            return {}
        lat: dict[str, float] = {}
        try:
            lat = self.driver.freeze_many([j.cgroup for j in jobs], between=between)
        except FreezeError as e:
            lat = e.done
            for j in jobs:
                if j.cgroup in e.failed:
                    errors[j.job_id] = f"freeze failed: {e}"
        except (CgroupError, OSError) as e:
            for j in jobs:
                errors[j.job_id] = f"freeze failed: {e}"
        for j in jobs:
            if j.cgroup in lat:
                j.frozen = True
        return lat

    def _thaw(self, jobs: list[Job], errors: dict[str, str]) -> dict[str, float]:
        if not jobs:
            return {}
        lat: dict[str, float] = {}
        try:
            lat = self.driver.thaw_many([j.cgroup for j in jobs])
        except (CgroupError, OSError) as e:
            for j in jobs:
                errors[j.job_id] = f"thaw failed: {e}"
        for j in jobs:
            if j.cgroup in lat:
                j.frozen = False
        return lat

    def _set_weights(
        self, jobs: list[Job], runnable: dict[str, int], errors: dict[str, str]
    ) -> None:
        # A local scheme owns the weights (its boosts); the quantum only freezes and thaws.
        if self.local.active:
            return
        for j in jobs:
            w = runnable.get(j.job_id)
            if w is not None and w != j.weight:
                try:
                    self.driver.set_weight(j.cgroup, w)
                    j.weight = w
                except (CgroupError, OSError) as e:
                    errors[j.job_id] = f"weight failed: {e}"

    def _finish(
        self,
        live: list[Job],
        freeze_lat: dict[str, float],
        thaw_lat: dict[str, float],
        errors: dict[str, str],
        t0: float,
        measure: frozenset[str] | None = None,
    ) -> dict[str, Any]:
        """The ack both modes share: CPU since the previous apply, latencies, errors, and
        the bytes of the I/O devices in ``measure`` (None: all of them)."""
        done_ns = time.monotonic_ns()
        apply_s = time.perf_counter() - t0
        cpu = self._cpu_deltas()
        want = DEVICES if measure is None else DEVICES & measure
        # Reading a device's bytes costs the jobs' core time at every switch (the network's
        # most: each job's sockets, issue 32); a policy that reads only the CPU is not
        # sent them. A device not read in the previous ack has stale bases: this read
        # only renews them, and the ack carries nothing for it.
        stale = want - self._measured
        self._measured = want
        io = self._io_deltas() if "disk" in want else {}
        net = self._net_deltas(live) if "net" in want else {}
        if "disk" in stale:
            io = {}
        if "net" in stale:
            net = {}
        by_cg = {j.cgroup: j.job_id for j in live}
        for lat in freeze_lat.values():
            self.metrics.freeze_latency.observe(lat)
        for lat in thaw_lat.values():
            self.metrics.thaw_latency.observe(lat)
        self.metrics.quanta_applied.inc()
        ack: dict[str, Any] = {
            "cpu_ns": cpu,
            "freeze_latency_s": {by_cg[c]: v for c, v in freeze_lat.items()},
            "thaw_latency_s": {by_cg[c]: v for c, v in thaw_lat.items()},
            "applied_monotonic_ns": done_ns,
            "apply_duration_s": apply_s,
            "weights_enforced": self.driver.capabilities.weights_enforced,
            "errors": errors,
        }
        if io:
            # (read, write) block I/O bytes per job since the previous ack; a key older
            # controllers ignore (docs/controller.md)
            ack["io_bytes"] = io
        if net:
            ack["net_bytes"] = net  # (sent, received) TCP bytes per job, the same way
        return ack

    def _net_deltas(self, live: list[Job]) -> dict[str, list[int]]:
        """Each live job's TCP bytes since the previous ack (agent/netuse.py); nothing
        when the node's sockets cannot be read (one warning)."""
        if self.netmeter is None:
            return {}
        pids: dict[str, list[int]] = {}
        for j in live:
            with contextlib.suppress(CgroupError, OSError):
                pids[j.job_id] = self.driver.pids(j.cgroup)
        try:
            return self.netmeter.deltas(pids)
        except Exception as e:  # e.g. a kernel without pidfd_getfd: once, then never again
            log.warning("jobs' network use not reported from now on: %s", e)
            self.netmeter = None
            return {}

    # ---- time-triggered plans (agent/plan.py) --------------------------------------
    def submit_plan(self, plan: Plan) -> dict[str, Any] | None:
        """A quantum with an instant: kept until then (returns None, the ack follows
        from the loop), or applied now if the instant has passed (returns the ack).

        Raises :class:`TooFar` for an instant beyond the fail-safe timeout.
        """
        try:
            offer, replaced = self.plans.offer(plan, self.wall())
        except TooFar:
            self.metrics.tt_refused.inc()
            raise
        self.metrics.tt_plans.inc()
        self._answer_replaced(replaced, plan.q)
        if offer is Offer.LATE:
            self.metrics.tt_late.inc()
            log.info(
                "quantum %d arrived %.6f s after its instant: applied late",
                plan.q,
                self.wall() - plan.at,
            )
            return self._applied(plan)
        return None

    def replace_pending(self, q: int) -> None:
        """An immediate quantum arrived: it replaces a pending plan."""
        self._answer_replaced(self.plans.replace(), q)

    def _answer_replaced(self, old: Plan | None, q: int) -> None:
        if old is None:
            return
        self.metrics.tt_replaced.inc()
        log.warning("quantum %d replaced by quantum %d before its instant", old.q, q)
        self._reply(
            old,
            wire.ERROR,
            {
                "code": "replaced",
                "reason": f"quantum {old.q} replaced by quantum {q} before its instant",
            },
        )

    def _reply(self, plan: Plan, mtype: str, data: dict[str, Any]) -> None:
        conn = plan.conn
        if isinstance(conn, AgentConn) and conn.open and not conn.closing:
            self.server.send(conn, mtype, data, plan.seq)

    def _applied(self, plan: Plan) -> dict[str, Any]:
        ack = self.apply_at(plan)
        self.last_q = plan.q
        ack.update(q=plan.q, node=self.cfg.node)
        return ack

    def _fire_due_plan(self) -> None:
        """Apply the pending plan once its instant is within ``EARLY_S``; ack it."""
        plan = self.plans.due(self.wall())
        if plan is None:
            return
        self._reply(plan, wire.ACK, self._applied(plan))

    def _drop_plan(self, why: str) -> None:
        plan = self.plans.drop()
        if plan is None:
            return
        log.warning("quantum %d dropped before its instant: %s", plan.q, why)
        self._reply(plan, wire.ERROR, {"code": "dropped", "reason": f"quantum {plan.q}: {why}"})

    def _cpu_deltas(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for j in list(self.jobs.values()):
            if j.ended:
                if j.final_usage_ns is not None:
                    out[j.job_id] = max(0, j.final_usage_ns - j.usage_base_ns)
                    j.usage_base_ns = j.final_usage_ns
                    j.final_usage_ns = None  # reported once
                continue
            try:
                now = self.driver.cpu_usage_ns(j.cgroup)
            except (CgroupError, OSError):
                continue
            out[j.job_id] = max(0, now - j.usage_base_ns)
            j.usage_base_ns = now
        return out

    def _io_now(self, cgroup: str) -> tuple[int, int] | None:
        if self.io_unavailable is not None:
            return None
        try:
            b = self.driver.io_bytes(cgroup)
        except (CgroupError, OSError):
            return None
        return b.read, b.write

    def _io_deltas(self) -> dict[str, list[int]]:
        """Each job's block I/O bytes (read, write) since the previous ack; a job whose
        group cannot be read is left out (the controller then counts no disk use)."""
        out: dict[str, list[int]] = {}
        if self.io_unavailable is not None:
            return out
        for j in list(self.jobs.values()):
            now = j.final_io if j.ended else self._io_now(j.cgroup)
            if j.ended:
                j.final_io = None  # reported once
            if now is None:
                continue
            base = j.io_base or (0, 0)
            out[j.job_id] = [max(0, now[0] - base[0]), max(0, now[1] - base[1])]
            j.io_base = now
        return out

    # ---- metrics ---------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self.lock:
            live = [j for j in self.jobs.values() if not j.ended]
            cgs = {j.job_id: j.cgroup for j in live}
            now = time.monotonic()
            frozen_s = {j.job_id: j.frozen_for(now) for j in live}
        snap = Snapshot(
            node=self.cfg.node,
            job_frozen_s=frozen_s,
            heartbeat_age_s=self.failsafe.age(),
            failsafe_active=self.failsafe.active,
            cdc=self.local.last_status if self.local.active else None,
        )
        for jid, cg in cgs.items():
            # A job may end between the copy and the read.
            with contextlib.suppress(CgroupError, OSError):
                snap.job_cpu_ns[jid] = self.driver.cpu_usage_ns(cg)
        try:
            snap.node_cpu_ns = self.driver.cpu_usage_ns(self.parent)
            snap.capacity_cpus = self.driver.cpu_capacity(self.parent)
        except (CgroupError, OSError):
            snap.node_cpu_ns = None
        return snap
