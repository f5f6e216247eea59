"""The controller daemon: one selector-driven loop, one quantum at a time.

One thread runs the quantum rounds on a fixed grid of boundaries (time-triggered with
``--lead-ms``) and answers requests between them, so nothing needs a lock; the metrics
thread only reads what the loop sets. Why, and the upgrade path (``shutdown``, then
``--restore``): docs/controller.md, "The daemon's loop".
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import selectors
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from agent.realtime import set_realtime
from common.errors import CoschedError, UsageError
from common.names import AGENT_PORT, DEFAULT_RUN_DIR, controller_socket
from controller import checkpoint as ckpt
from controller.api import Caller, Context, handle
from controller.archive import JobArchive
from controller.jobs import RequestError
from controller.metrics import ControllerMetrics
from controller.nodes import RECONNECT_EVERY, AgentPool, NodeInfo
from controller.operator import OperatorConfig
from controller.relaypool import RelayInfo, RelayPool
from controller.scheduler import Scheduler
from controller.server import Server, user_exists

log = logging.getLogger("controller")


@dataclass
class DaemonConfig:
    policy: str
    params: dict[str, object]
    nodes: list[NodeInfo]
    key: bytes
    quantum: float = 0.1
    run_dir: str = DEFAULT_RUN_DIR
    listen_tcp: tuple[str, int] | None = None
    metrics: tuple[str, int] | None = None
    checkpoint: str | None = None
    checkpoint_every: float = 5.0
    restore: bool = False
    fifo_priority: int = 20
    lead_ms: float = 20.0  # controller/flags.py DEFAULT_LEAD_MS; 0 = immediate mode
    ack_devices: str = "policy"  # "all": agents read every device's bytes (--ack-devices)
    # Operator uids besides root and the daemon's own user (controller/rights.py)
    operators: frozenset[int] = field(default_factory=frozenset)
    connect_timeout: float = 15.0
    keep_ended: int = 200  # ended jobs kept in memory; older ones go to the job archive
    job_env: dict[str, str] = field(default_factory=dict)  # quantum.net_env of the cluster
    relays: list[RelayInfo] = field(default_factory=list)  # controller/relay.py; [] = direct
    user_keys: dict[str, bytes] | None = None  # --user-keys: TCP clients as users


def _cpu_count(cpus: str) -> int:
    total = 0
    for part in cpus.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            total += int(hi) - int(lo) + 1
        else:
            total += 1
    return total


def nodes_from_cluster(state: dict[str, Any], port: int = AGENT_PORT) -> list[NodeInfo]:
    """Nodes of /run/cosched/cluster.json (testbed/cluster/state.py)."""
    cpu = state.get("cpu") or {}
    mech = cpu.get("mechanism", "none")
    per = cpu.get("per_node") or []
    out = []
    for i, n in enumerate(state.get("nodes", [])):
        capacity = float(os.cpu_count() or 1)
        p = per[i] if i < len(per) else {}
        if mech == "cpuset" and p.get("cpus"):
            capacity = float(_cpu_count(str(p["cpus"])))
        elif mech == "cfs" and p.get("quota_us") and p.get("period_us"):
            capacity = p["quota_us"] / p["period_us"]
        elif mech == "shared" and cpu.get("cpus_per_node"):
            # k nodes on one core: each may count on 1/k of it under contention
            capacity = float(cpu["cpus_per_node"])
        out.append(
            NodeInfo(
                name=str(n["name"]),
                # emulated nodes (agent/emulated.py) each have a port of their own
                address=(str(n["ctl_ip"]), int(n.get("agent_port", port))),
                data_ip=str(n.get("data_ip") or n["ctl_ip"]),
                capacity=capacity,
            )
        )
    if not out:
        raise ValueError("cluster state lists no nodes")
    return out


def relays_from_cluster(state: dict[str, Any]) -> list[RelayInfo]:
    """The relays an emulated cluster's state lists (testbed/cluster/emulated.py); [] if none."""
    # a table with the relays (`cosched cluster up --emulated-nodes`, `python -m
    # agent.emulated --state`); a bare `"emulated": true` (the latter's files before
    # 2026-11-25) has none
    em = state.get("emulated")
    if not isinstance(em, dict):
        return []
    return [
        RelayInfo(str(r["name"]), (str(r["ctl_ip"]), int(r["port"])), tuple(map(str, r["nodes"])))
        for r in em.get("relays") or []
    ]


def _set_realtime(prio: int) -> None:
    set_realtime(prio, "quantum boundaries may slip under load")


class Daemon:
    def __init__(self, cfg: DaemonConfig) -> None:
        self.cfg = cfg
        self.pool: AgentPool | RelayPool = (
            RelayPool(cfg.nodes, cfg.relays, cfg.key)
            if cfg.relays
            else AgentPool(cfg.nodes, cfg.key)
        )
        self.sched = Scheduler(
            cfg.policy,
            cfg.params,
            self.pool,
            config=OperatorConfig(quantum=cfg.quantum),
            job_env=cfg.job_env,
        )
        self.sched.ack_all_devices = cfg.ack_devices == "all"
        self.metrics = ControllerMetrics()
        self.sel = selectors.DefaultSelector()
        self.server: Server | None = None
        self.ctx = Context(
            self.sched,
            self,
            # uids from the kernel, never from LOGNAME/USER (issue 28)
            operators=cfg.operators | {0, os.geteuid()},
            user_exists=user_exists,
        )
        self.stopping = False
        self._shutdown_checkpoint = False
        self.last_checkpoint: str | None = None
        self.last_checkpoint_error: str | None = None
        self._next_save = 0.0
        self.reconcile_report: dict[str, Any] | None = None

    # ---- api.Daemon --------------------------------------------------------------
    def write_checkpoint(self) -> str:
        if not self.cfg.checkpoint:
            raise ckpt.CheckpointError("no checkpoint path: start the controller with --checkpoint")
        path = ckpt.write(self.cfg.checkpoint, self.sched.to_payload())
        self.last_checkpoint = f"{path} at {time.strftime('%H:%M:%S')}"
        self._next_save = time.monotonic() + self.cfg.checkpoint_every
        return path

    def request_shutdown(self, checkpoint: bool) -> str | None:
        # Requests are served between quanta: the current quantum is complete.
        # No --checkpoint: stop all the same (only a signal stopped it before); the
        # reply says no checkpoint was written.
        path = self.write_checkpoint() if checkpoint and self.cfg.checkpoint else None
        self.stopping = True
        log.info("shutdown requested (checkpoint %s)", path)
        return path

    def lead_s(self) -> float:
        """The lead in effect: ``--lead-ms``, at most half the quantum; 0 where quanta
        switch no gangs (batch, cdc) or in immediate mode."""
        if self.cfg.lead_ms <= 0 or not self.sched.fam.switches_gangs:
            return 0.0
        return min(self.cfg.lead_ms / 1000.0, self.sched.cfg.quantum / 2)

    def archive_path(self) -> str:
        """Beside the checkpoint when there is one (it outlives /run), else in the run dir."""
        if self.cfg.checkpoint:
            return self.cfg.checkpoint + ".jobs.jsonl"
        return os.path.join(self.cfg.run_dir, "jobs.jsonl")

    def _open_archive(self, restoring: bool) -> JobArchive:
        """The job archive (controller/archive.py). A fresh start numbers jobs from 1
        again, so an old archive is moved aside to ``.prev`` rather than mixed in."""
        path = self.archive_path()
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        archive = JobArchive(path)  # ArchiveError (one line) for a link or an open file
        if not restoring and os.path.exists(path):
            os.replace(path, path + ".prev")
            log.info("a fresh start: the previous job archive is now %s.prev", path)
        return archive

    def status_extra(self) -> dict[str, Any]:
        t = self.sched.telemetry
        table = self.sched.table
        skew = t.skew_percentiles()
        lead = self.lead_s()
        c = t.counters
        return {
            "skew_p99_s": skew["p99"],
            "switch_mode": "time-triggered" if lead > 0 else "immediate",
            "lead_ms": lead * 1000.0,
            "timed_quanta": c.timed_quanta,
            "late_plans": c.late_plans,
            "missed_boundaries": c.missed_boundaries,
            "failed_commands": c.failed_commands,
            **t.switch_percentiles(),
            "failsafe": "agents thaw all jobs after their fail-safe timeout without us",
            "checkpoint": self.last_checkpoint,
            "checkpoint_error": self.last_checkpoint_error,
            "reconcile": self.reconcile_report,
            "jobs_in_memory": len(table.jobs),
            "jobs_archived": sum(table.archived_counts.values()),
            "job_archive": table.archive.path if table.archive else None,
            "pid": os.getpid(),
        }

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        payload = None
        if self.cfg.restore:
            if not self.cfg.checkpoint:
                raise UsageError("--restore needs a checkpoint", fix="give --checkpoint PATH")
            try:
                payload = ckpt.read(self.cfg.checkpoint)
            except ckpt.CheckpointError as e:
                # The file stays as it is: the operator may fall back to a copy.
                raise CoschedError(
                    f"refusing to restore: {e}",
                    fix="start without --restore, or give an intact copy with --checkpoint",
                ) from None
        # AgentsUnreachable (one line) only when no agent answers; with some, the
        # controller runs with the nodes it has, says which are missing, and keeps
        # trying them in the background (a job placed on one fails with the reason).
        missing = self.pool.connect_all(self.cfg.connect_timeout, require_all=False)
        if missing:
            log.warning(
                "running with %d of %d nodes; %s; retried every %g s",
                len(self.cfg.nodes) - len(missing),
                len(self.cfg.nodes),
                self.pool.unreachable_line(missing),
                RECONNECT_EVERY,
            )
        self.sched.table.archive = self._open_archive(payload is not None)
        self.sched.table.keep_ended = self.cfg.keep_ended
        if payload is not None:
            try:
                self.sched.restore(payload)
            except RequestError as e:
                raise CoschedError(
                    f"refusing to restore {self.cfg.checkpoint}: {e}",
                    fix="start without --restore, or give an intact copy with --checkpoint",
                ) from None
            self.reconcile_report = self.sched.reconcile()
            log.info("restored %d job(s) from %s", len(self.sched.table.jobs), self.cfg.checkpoint)
        if self.cfg.metrics is not None:
            try:
                self.metrics.serve(*self.cfg.metrics)
            except OSError as e:
                host, port = self.cfg.metrics
                raise CoschedError(
                    f"cannot serve metrics on {host}:{port}: {e.strerror or e}",
                    fix="give another --metrics HOST:PORT",
                ) from None
        sock = controller_socket(self.cfg.run_dir)
        try:
            self.server = Server(
                self.sel,
                self._handle,
                unix_path=sock,
                tcp=self.cfg.listen_tcp,
                key=self.cfg.key,
                user_keys=self.cfg.user_keys,
            )
        except OSError as e:
            where = f"{sock} or tcp {self.cfg.listen_tcp}" if self.cfg.listen_tcp else sock
            raise CoschedError(
                f"cannot listen on {where}: {e.strerror or e}",
                fix="is another controller running (`cosched controller status`)? "
                "is the run directory writable (root, or --run-dir)?",
            ) from None
        extra = self.sched.fam.describe()
        log.info(
            "controller: policy %s%s, %d node(s), quantum %.3fs, socket %s%s",
            self.cfg.policy,
            f" (MPL {extra['mpl']}, scheme {extra['scheme']})" if "mpl" in extra else "",
            len(self.cfg.nodes),
            self.sched.cfg.quantum,
            sock,
            f", tcp {self.cfg.listen_tcp[0]}:{self.cfg.listen_tcp[1]}"
            if self.cfg.listen_tcp
            else "",
        )
        lead = self.lead_s()
        if lead > 0:
            log.info(
                "time-triggered switches: each plan sent %.1f ms before its quantum boundary%s",
                lead * 1e3,
                f" (--lead-ms {self.cfg.lead_ms:g} capped at half the quantum)"
                if lead * 1e3 < self.cfg.lead_ms
                else "",
            )
        else:
            log.info("switches applied on arrival (immediate mode)")
        _set_realtime(self.cfg.fifo_priority)

    def _handle(self, request: object, caller: Caller) -> dict[str, Any]:
        return handle(self.ctx, request, caller)

    def run(self) -> None:
        self.start()
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.loop()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            self.close()

    def _on_signal(self, signum: int, frame: object) -> None:
        log.info("signal %d: stopping after this quantum", signum)
        self._shutdown_checkpoint = True
        self.stopping = True

    def loop(self) -> None:
        assert self.server is not None
        # The next quantum boundary; its round runs ``lead`` before it.
        boundary = time.monotonic() + self.lead_s()
        self._next_save = boundary + self.cfg.checkpoint_every
        while not self.stopping:
            lead = self.lead_s()
            now = time.monotonic()
            if now >= boundary - lead:
                at = None
                if lead > 0:
                    # The boundary on the agents' clock, converted at the last moment.
                    at = time.time() + (boundary - time.monotonic())
                self.sched.tick(at)
                self.metrics.update(self.sched)
                boundary = self._next_boundary(boundary, lead)
                if self.cfg.checkpoint and time.monotonic() >= self._next_save:
                    self._autosave()
                continue
            for key, mask in self.sel.select(max(0.0, boundary - lead - now)):
                if self.server.owns(key.data):
                    self.server.ready(key.data, mask)
            self.server.sweep()  # handshake and idle deadlines (common/guard.py)
            self.pool.maintain()
        if self._shutdown_checkpoint and self.cfg.checkpoint:
            self._autosave()

    def _next_boundary(self, boundary: float, lead: float) -> float:
        q = self.sched.cfg.quantum
        nxt = boundary + q
        now = time.monotonic()
        if lead <= 0:
            # Immediate mode, as it always was: fell behind -> re-anchor, do not burst.
            return nxt if nxt > now else now + q
        if nxt <= now:
            # The round ran past the next boundary: stay on the grid, skip whole quanta.
            skipped = math.floor((now - nxt) / q) + 1
            self.sched.telemetry.counters.missed_boundaries += skipped
            log.warning(
                "quantum round overran by %.1f ms: %d boundary(ies) skipped",
                (now - nxt) * 1e3,
                skipped,
            )
            nxt += skipped * q
        return nxt

    def _autosave(self) -> None:
        try:
            self.write_checkpoint()
            self.last_checkpoint_error = None
        except OSError as e:
            self.last_checkpoint_error = str(e)
            self._next_save = time.monotonic() + self.cfg.checkpoint_every
            log.error("checkpoint failed: %s", e)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        self.pool.close()
        self.metrics.shutdown()
        with contextlib.suppress(Exception):
            self.sel.close()
        log.info("controller stopped")
