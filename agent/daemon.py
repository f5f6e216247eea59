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
from typing import Any

from agent.api import AgentAPI, Refused
from agent.failsafe import FailSafe, Transition
from agent.jobs import Job, JobError, check_job_id, job_cgroup, spawn_rank
from agent.local import LocalScheduler
from agent.metrics import AgentMetrics, Snapshot
from agent.realtime import set_realtime
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

log = logging.getLogger("agent")

# Exits of our own children wake the loop via SIGCHLD (see run()); this
# interval only bounds how late a reattached job's end (not our child, no
# SIGCHLD) or a missed signal is noticed. Fewer wakeups = less agent CPU.
REAP_INTERVAL = 0.5
# The agent's own leaf below its node group: cgroup v2 enables controllers
# (cpu.weight for the jobs) only in groups that hold no process themselves.
AGENT_LEAF = "agent"


_WAKEUP = object()  # selector tag of the signal wake-up pipe


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
    freeze_timeout: float = 1.0


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        driver: CgroupDriver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = config
        explicit = bool(config.cgroup_parent.strip("/"))
        self.driver = driver or open_cgroups(
            config.backend or "auto",
            root=config.cgroup_root,
            # An explicit parent (the cluster gives one) needs no base lookup.
            base="" if explicit else None,
            freeze_timeout=config.freeze_timeout,
        )
        self.parent = (
            config.cgroup_parent.strip("/")
            if explicit
            else base_join(self.driver.layout.base, "cosched", config.node)
        )
        self.jobs: dict[str, Job] = {}
        self.failsafe = FailSafe(config.failsafe_timeout, clock)
        self.lock = threading.Lock()
        self.metrics = AgentMetrics(self.snapshot)
        self.sel = selectors.DefaultSelector()
        self.last_q: int | None = None
        self._next_reap = 0.0
        self._pending_remove: dict[str, float] = {}  # cgroup -> give-up time
        self._stopping = False
        self.local = LocalScheduler(self)
        self.api = AgentAPI(self)
        self.server = AgentServer(self.sel, config.key, config.node, self.api.dispatch, self._heard)

    # ---- lifecycle --------------------------------------------------------
    def start(self) -> None:
        self.cfg.run_dir.mkdir(parents=True, exist_ok=True)
        prepare_base(self.driver)  # a delegated unit's processes go to a leaf
        self.driver.ensure_parent(self.parent, ())
        if os.getpid() in self.driver.pids(self.parent):
            self.driver.enter_leaf(self.parent, AGENT_LEAF, os.getpid())
        self.driver.ensure_parent(self.parent)
        try:
            self.driver.pin_freezer(self.parent)
        except (CgroupError, OSError) as e:
            log.warning("cannot pin the freezer on (%s): switches cost a little more", e)
        self._reattach()
        self.server.listen(self.cfg.listen)
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
        set_realtime(self.cfg.fifo_priority, "thaws may complete late under load")

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
            self.step(min(self.failsafe.time_left(), REAP_INTERVAL, self.local.timeout()))

    def step(self, timeout: float) -> None:
        for key, mask in self.sel.select(max(0.0, timeout)):
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
        if self.failsafe.poll() is Transition.ACTIVATE:
            self._activate_failsafe()
        now = time.monotonic()
        if now >= self._next_reap:
            self._next_reap = now + REAP_INTERVAL
            self.reap()

    def shutdown(self) -> None:
        """Never leave a job frozen behind: thaw everything, default weights."""
        self.local.close()
        self._release_all("agent exiting")
        with contextlib.suppress(CgroupError, OSError):
            self.driver.unpin_freezer(self.parent)
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
        try:
            if self.driver.pids(job.cgroup):
                self.driver.kill_all(job.cgroup)  # stragglers the ranks left behind
        except (CgroupError, OSError):
            pass
        with self.lock:
            job.ended = True
            job.exit_code = code
            job.end_reason = reason
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

    def _emit(self, event: dict[str, Any]) -> None:
        self.server.send_event(event)  # or kept for the next controller session

    def _heard(self, conn: AgentConn) -> None:
        if self.failsafe.heard() is Transition.RESUME:
            log.warning("controller is back (%s): leaving fail-safe, obeying again", conn.peer)

    @property
    def listener(self) -> socket.socket | None:
        return self.server.listener

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
        base_env = dict(os.environ) if d.get("inherit_env", True) else {}
        base_env.update(env_extra)
        base_env.update(self.local.job_env())
        base_env.update(
            COSCHED_JOB_ID=jid,
            COSCHED_NODE=self.cfg.node,
            COSCHED_NRANKS=str(d.get("size", len(ranks))),
        )
        out_dir = self.cfg.run_dir / f"job-{jid}"
        job = Job(jid, cg, weight=weight, frozen=frozen, run_dir=out_dir)
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
                proc = spawn_rank(self.driver, cg, d["argv"], env, out_dir, rank, d.get("cwd"))
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
            "launched job %s ranks %s pids %s frozen=%s",
            jid,
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
    def apply(self, runnable: dict[str, int]) -> dict[str, Any]:
        """Freeze the others, set weights, thaw the runnable; report CPU since last time."""
        t0 = time.perf_counter()
        live = [j for j in self.jobs.values() if not j.ended]
        errors: dict[str, str] = {}
        to_freeze = [j for j in live if j.job_id not in runnable and not j.frozen]
        to_thaw = [j for j in live if j.job_id in runnable and j.frozen]
        # Freeze first so outgoing and incoming gangs never overlap.
        freeze_lat: dict[str, float] = {}
        try:
            freeze_lat = self.driver.freeze_many([j.cgroup for j in to_freeze])
        except FreezeError as e:
            freeze_lat = e.done
            for j in to_freeze:
                if j.cgroup in e.failed:
                    errors[j.job_id] = f"freeze failed: {e}"
        except (CgroupError, OSError) as e:
            for j in to_freeze:
                errors[j.job_id] = f"freeze failed: {e}"
        for j in to_freeze:
            if j.cgroup in freeze_lat:
                j.frozen = True
        for j in live:
            w = runnable.get(j.job_id)
            # A local scheme owns the weights (its boosts); the quantum only freezes and thaws.
            if w is not None and w != j.weight and not self.local.active:
                try:
                    self.driver.set_weight(j.cgroup, w)
                    j.weight = w
                except (CgroupError, OSError) as e:
                    errors[j.job_id] = f"weight failed: {e}"
        thaw_lat: dict[str, float] = {}
        try:
            thaw_lat = self.driver.thaw_many([j.cgroup for j in to_thaw])
        except (CgroupError, OSError) as e:
            for j in to_thaw:
                errors[j.job_id] = f"thaw failed: {e}"
        for j in to_thaw:
            if j.cgroup in thaw_lat:
                j.frozen = False
        done_ns = time.monotonic_ns()
        apply_s = time.perf_counter() - t0
        cpu = self._cpu_deltas()
        by_cg = {j.cgroup: j.job_id for j in live}
        for lat in freeze_lat.values():
            self.metrics.freeze_latency.observe(lat)
        for lat in thaw_lat.values():
            self.metrics.thaw_latency.observe(lat)
        self.metrics.quanta_applied.inc()
        return {
            "cpu_ns": cpu,
            "freeze_latency_s": {by_cg[c]: v for c, v in freeze_lat.items()},
            "thaw_latency_s": {by_cg[c]: v for c, v in thaw_lat.items()},
            "applied_monotonic_ns": done_ns,
            "apply_duration_s": apply_s,
            "weights_enforced": self.driver.capabilities.weights_enforced,
            "errors": errors,
        }

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

    # ---- metrics ---------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self.lock:
            cgs = {j.job_id: j.cgroup for j in self.jobs.values() if not j.ended}
        snap = Snapshot(
            node=self.cfg.node,
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
