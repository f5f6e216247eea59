"""Prometheus (and Grafana, where installed) for the local cluster.

Two halves (docs/monitoring.md):

* pure: the scrape targets of a cluster and the ``prometheus.yml`` that
  scrapes them. Each agent's exporter address is read from the command line
  ``cluster up`` recorded for it (``--metrics <ctl ip>:9096``); the
  controller's from the command line of the process that serves the
  controller socket (``cosched controller start --metrics HOST:PORT``);
* I/O: ``prometheus`` started as a daemon of its own session, everything under
  ``$COSCHED_STATE_DIR/monitor/`` (configuration, rules, a private TSDB, its
  log, a 0600 pid file with the start time), listening on 127.0.0.1 only;
  ``down`` stops what the pid files name (if the start time still matches) and
  removes the directory.

Where it runs: on the host, in the root network namespace. The control
network's bridge lives in ``cosched-ctl`` but the host has a veth on it,
``csc-host`` with the host's control address (10.212.0.254/24 by default), so
the host reaches every node's control address directly (as
``cluster status`` does for its metrics probe); the controller runs on the
host too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from common.addr import AddressError, format_addr, parse_addr
from common.errors import CoschedError
from common.names import CONTROLLER_METRICS_PORT, controller_socket, state_dir
from common.private import append_private
from testbed.cluster.agents import log_tail
from testbed.cluster.state import ClusterState

PROMETHEUS_PORT = 9090  # Prometheus's own allocation; `cosched monitor up --port` moves it
GRAFANA_PORT = 3000
LISTEN_HOST = "127.0.0.1"
MONITOR_DIR = "monitor"
SCRAPE_INTERVAL_S = 2.0  # quanta are 0.05-1 s here; 2 s keeps a 1 m rate well fed
AGENT_JOB = "cosched-agent"
CONTROLLER_JOB = "cosched-controller"
CONTROLLER_NODE = "host"  # the controller's node label: it runs on the host

REPO = Path(__file__).resolve().parents[1]
RULES_DIR = REPO / "prometheus" / "rules"
DASHBOARDS_DIR = REPO / "grafana" / "dashboards"
GRAFANA_PROVISIONING = REPO / "grafana" / "provisioning"
# What grafana/provisioning/*.yml read from Grafana's environment.
GRAFANA_URL_ENV = "COSCHED_PROMETHEUS_URL"
GRAFANA_DASHBOARDS_ENV = "COSCHED_GRAFANA_DASHBOARDS"


class MonitorError(CoschedError):
    pass


# -- pure: targets and configuration -------------------------------------------------


@dataclass(frozen=True)
class Target:
    job: str
    address: str  # host:port as Prometheus wants it ([v6]:port)
    node: str


def metrics_flag(argv: Sequence[str]) -> tuple[str, int] | None:
    """The ``--metrics HOST:PORT`` of a daemon's command line, or None (exporter off)."""
    value: str | None = None
    for i, arg in enumerate(argv):
        if arg == "--metrics" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--metrics="):
            value = arg.partition("=")[2]
    if value is None:
        return None
    try:
        return parse_addr(value)
    except AddressError:
        return None


def scrape_address(addr: tuple[str, int]) -> str:
    """Where to scrape an exporter bound to ``addr``: a wildcard is reached on loopback."""
    host, port = addr
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return format_addr((host, port))


def agent_targets(st: ClusterState) -> tuple[list[Target], list[str]]:
    """One target per node whose agent serves metrics, and a note for each that does not."""
    if st.emulated:
        raise MonitorError(
            "an emulated cluster's agents have no metrics endpoint (agent/emulated.py)",
            fix="monitor a cluster made by 'cosched cluster up' without --emulated-nodes",
        )
    records = {a.node: a for a in st.agents}
    targets, notes = [], []
    for node in st.nodes:
        name = str(node["name"])
        rec = records.get(name)
        if rec is None:
            notes.append(f"{name}: no agent recorded, not scraped")
            continue
        addr = metrics_flag(rec.cmd)
        if addr is None:
            notes.append(f"{name}: agent started without --metrics, not scraped")
            continue
        targets.append(Target(AGENT_JOB, scrape_address(addr), name))
    return targets, notes


def controller_target(argv: Sequence[str] | None) -> Target | None:
    """The controller's exporter, from the command line it was started with."""
    addr = metrics_flag(argv) if argv else None
    return Target(CONTROLLER_JOB, scrape_address(addr), CONTROLLER_NODE) if addr else None


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def _duration(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def render_config(
    agents: Sequence[Target],
    controller: Target | None,
    *,
    rule_files: Sequence[str] = ("rules/recording.yml", "rules/alerts.yml"),
    scrape_interval_s: float = SCRAPE_INTERVAL_S,
    run_id: str | None = None,
) -> str:
    """``prometheus.yml`` for these targets: the layout of prometheus/prometheus.yml.

    ``run_id`` becomes a ``run`` label on every target, so series of one
    ``monitor up`` can be told from another's (the experiment dashboard's $run).
    """
    interval = _duration(scrape_interval_s)
    timeout = _duration(max(0.5, scrape_interval_s * 0.8))
    lines = [
        "# Written by `cosched monitor up` for the local cluster (testbed/monitor.py).",
        "global:",
        f"  scrape_interval: {interval}",
        f"  scrape_timeout: {timeout}",
        f"  evaluation_interval: {interval}",
        "  external_labels:",
        "    cluster: cosched-local",
        "rule_files:",
        *[f"  - {_q(r)}" for r in rule_files],
        "scrape_configs:",
    ]

    def job(name: str, targets: Sequence[Target], honor_labels: bool) -> list[str]:
        out = [f"  - job_name: {_q(name)}"]
        if honor_labels:
            out.append("    honor_labels: true  # the agent's own node label, same value")
        out.append("    static_configs:")
        for t in targets:
            out += [
                f"      - targets: [{_q(t.address)}]",
                "        labels:",
                f"          node: {_q(t.node)}",
                *([f"          run: {_q(run_id)}"] if run_id else []),
            ]
        if not targets:
            out[-1] = "    static_configs: []"
        return out

    lines += job(CONTROLLER_JOB, [controller] if controller else [], False)
    lines += job(AGENT_JOB, agents, True)
    return "\n".join(lines) + "\n"


# ${name} / ${name:format}, [[name]] (the old syntax), $name
_GRAFANA_VAR = re.compile(r"\$\{([A-Za-z_][\w:]*)\}|\[\[([A-Za-z_]\w*)\]\]|\$([A-Za-z_]\w*)")


def substitute_grafana_vars(expr: str, *, node: str = ".+", interval: str = "1m") -> str:
    """A dashboard ``expr`` Prometheus can run: Grafana's variables replaced.

    ``$node`` (and any other template variable, in regex matchers) becomes a
    match-all regex; the interval variables become ``interval``; ``$__range``
    5 m.
    """
    fixed = {
        "__rate_interval": interval,
        "__interval": interval,
        "__range": "5m",
        "__range_s": "300",
        "__interval_ms": "60000",
    }

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        name = name.split(":")[0]
        if name in fixed:
            return fixed[name]
        return node

    return _GRAFANA_VAR.sub(sub, expr)


def dashboard_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every Prometheus target of every panel, rows included."""
    out: list[tuple[str, str]] = []

    def walk(panels: Sequence[Any]) -> None:
        for p in panels:
            if not isinstance(p, dict):
                continue
            for t in p.get("targets") or []:
                if isinstance(t, dict) and t.get("expr") and not t.get("hide"):
                    out.append((str(p.get("title", "")), str(t["expr"])))
            walk(p.get("panels") or [])

    walk(dashboard.get("panels") or [])
    for row in dashboard.get("rows") or []:  # the old schema
        if isinstance(row, dict):
            walk(row.get("panels") or [])
    return out


# -- I/O: paths, the controller's command line, daemons -------------------------------


@dataclass(frozen=True)
class MonitorPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "prometheus.yml"

    @property
    def rules(self) -> Path:
        return self.root / "rules"

    @property
    def data(self) -> Path:
        return self.root / "prometheus-data"

    @property
    def log(self) -> Path:
        return self.root / "prometheus.log"

    @property
    def pidfile(self) -> Path:
        return self.root / "prometheus.pid"

    @property
    def grafana(self) -> Path:
        return self.root / "grafana"

    @property
    def grafana_pidfile(self) -> Path:
        return self.root / "grafana.pid"


def monitor_paths(directory: str | None = None) -> MonitorPaths:
    return MonitorPaths(Path(directory or state_dir()) / MONITOR_DIR)


def controller_argv(run_dir: str | None = None, timeout_s: float = 2.0) -> list[str] | None:
    """The command line of the process serving the controller socket, or None.

    The peer of a unix socket connection is known to the kernel (SO_PEERCRED):
    this finds the controller of *this* run directory, however it was started.
    """
    path = controller_socket(run_dir)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(path)
            creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid = struct.unpack("3i", creds)[0]
        return list(psutil.Process(pid).cmdline())
    except (OSError, psutil.Error):
        return None


@dataclass(frozen=True)
class Daemon:
    name: str
    pid: int
    start_time: float
    url: str
    cmd: list[str]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def write_pidfile(path: Path, d: Daemon) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(d.to_dict(), f)
    os.chmod(path, 0o600)


def read_pidfile(path: Path) -> Daemon | None:
    try:
        d = json.loads(path.read_text())
        return Daemon(str(d["name"]), int(d["pid"]), float(d["start_time"]), d["url"], d["cmd"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def alive(d: Daemon) -> bool:
    """``d`` still runs: same pid *and* start time (a reused pid is a stranger)."""
    try:
        p = psutil.Process(d.pid)
        return bool(
            abs(p.create_time() - d.start_time) < 0.05 and p.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


def stop_daemon(d: Daemon, timeout_s: float = 10.0) -> bool:
    """SIGTERM (Prometheus flushes its head block), SIGKILL after ``timeout_s``."""
    if not alive(d):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(d.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive(d):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(d.pid, os.WNOHANG)  # ours when `up` rolls back
        time.sleep(0.05)
    if alive(d):
        with contextlib.suppress(ProcessLookupError):
            os.kill(d.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(d.pid, 0 if d.pid in _children else os.WNOHANG)
    return True


_children: set[int] = set()


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def http_get(url: str, timeout_s: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, b""
    except (urllib.error.URLError, OSError):
        return 0, b""


def _last_line(path: Path) -> str:
    """The log's last line, for a one-line error."""
    lines = log_tail(str(path), 600).strip().splitlines()
    return lines[-1] if lines else "no output"


def spawn(
    name: str,
    cmd: list[str],
    log: Path,
    pidfile: Path,
    url: str,
    cwd: Path,
    env: dict[str, str] | None = None,
) -> Daemon:
    with append_private(str(log)) as out:
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,  # outlives `cosched monitor up` and its terminal
            close_fds=True,
        )
    _children.add(proc.pid)
    d = Daemon(name, proc.pid, psutil.Process(proc.pid).create_time(), url, cmd)
    write_pidfile(pidfile, d)
    return d


def wait_ready(d: Daemon, path: str, log: Path, timeout_s: float) -> float:
    """Seconds until ``d.url + path`` answers 200; a daemon that exits is an error."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if not alive(d):
            raise MonitorError(f"{d.name} exited at start: {_last_line(log)} (log: {log})")
        if http_get(d.url + path, timeout_s=1.0)[0] == 200:
            return time.monotonic() - t0
        time.sleep(0.1)
    raise MonitorError(
        f"{d.name} (pid {d.pid}) did not answer {d.url}{path} within {timeout_s:g} s",
        fix=f"see {log}",
    )


@dataclass
class UpReport:
    prometheus: Daemon
    ready_s: float
    agents: list[Target]
    controller: Target | None
    notes: list[str]
    grafana: Daemon | None = None
    grafana_note: str = ""
    run_id: str = ""  # the run label on every target


def default_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def find_grafana() -> str | None:
    return shutil.which("grafana-server") or shutil.which("grafana")


def prepare(
    paths: MonitorPaths,
    st: ClusterState,
    run_dir: str | None,
    scrape_interval_s: float = SCRAPE_INTERVAL_S,
    run_id: str | None = None,
) -> tuple[list[Target], Target | None, list[str]]:
    """Write the configuration and the rules under ``paths.root``; return the targets."""
    agents, notes = agent_targets(st)
    argv = controller_argv(run_dir)
    ctl = controller_target(argv)
    if argv is None:
        notes.append(f"controller: none answers on {controller_socket(run_dir)}, not scraped")
    elif ctl is None:
        notes.append(
            "controller: started without --metrics, not scraped (start it with --metrics "
            f"{st.addresses.get('host_ctl_ip', '10.212.0.254')}:{CONTROLLER_METRICS_PORT})"
        )
    paths.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths.rules.mkdir(mode=0o700, exist_ok=True)
    rule_files = []
    for src in sorted(RULES_DIR.glob("*.yml")):
        shutil.copyfile(src, paths.rules / src.name)
        rule_files.append(f"rules/{src.name}")
    paths.config.write_text(
        render_config(
            agents,
            ctl,
            rule_files=rule_files,
            scrape_interval_s=scrape_interval_s,
            run_id=run_id,
        )
    )
    return agents, ctl, notes


def up(
    st: ClusterState,
    *,
    port: int = PROMETHEUS_PORT,
    grafana: bool = False,
    grafana_port: int = GRAFANA_PORT,
    run_dir: str | None = None,
    directory: str | None = None,
    wait_s: float = 30.0,
    scrape_interval_s: float = SCRAPE_INTERVAL_S,
    run_id: str | None = None,
) -> UpReport:
    """Start Prometheus (and Grafana if asked and installed); roll back on any failure.

    ``run_id`` (default: the UTC start time) labels every target ``run``.
    """
    paths = monitor_paths(directory)
    old = read_pidfile(paths.pidfile)
    if old is not None and alive(old):
        raise MonitorError(
            f"monitoring is already up: {old.name} pid {old.pid} at {old.url}",
            fix="'cosched monitor down' first",
        )
    binary = shutil.which("prometheus")
    if binary is None:
        raise MonitorError(
            "no prometheus binary on PATH", fix="install it (Debian: apt-get install prometheus)"
        )
    if not port_free(LISTEN_HOST, port):
        raise MonitorError(f"{LISTEN_HOST}:{port} is taken", fix="give another --port")
    down(directory)  # a previous run's leftovers (its Prometheus is gone)
    try:
        run_id = run_id or default_run_id()
        agents, ctl, notes = prepare(paths, st, run_dir, scrape_interval_s, run_id)
        paths.data.mkdir(mode=0o700, exist_ok=True)
        url = f"http://{LISTEN_HOST}:{port}"
        cmd = [
            binary,
            f"--config.file={paths.config}",
            f"--storage.tsdb.path={paths.data}",
            "--storage.tsdb.retention.time=2d",
            f"--web.listen-address={LISTEN_HOST}:{port}",
            f"--web.external-url={url}/",
        ]
        prom = spawn("prometheus", cmd, paths.log, paths.pidfile, url, paths.root)
        ready = wait_ready(prom, "/-/ready", paths.log, wait_s)
        report = UpReport(prom, ready, agents, ctl, notes, run_id=run_id)
        if grafana:
            report.grafana, report.grafana_note = _grafana(paths, url, grafana_port, wait_s)
        return report
    except BaseException:
        down(directory)
        raise


def grafana_env(prom_url: str) -> dict[str, str]:
    """The variables grafana/provisioning/*.yml expand, for the local cluster."""
    return {GRAFANA_URL_ENV: prom_url, GRAFANA_DASHBOARDS_ENV: str(DASHBOARDS_DIR)}


def _grafana(
    paths: MonitorPaths, prom_url: str, port: int, wait_s: float
) -> tuple[Daemon | None, str]:
    """Grafana provisioned from the repository's grafana/provisioning/.

    The datasource (fixed uid, URL from $COSCHED_PROMETHEUS_URL) and the file
    provider (path from $COSCHED_GRAFANA_DASHBOARDS) are the files a real node
    gets; only the environment differs. Never run on the host this was written
    on (no Grafana package there).
    """
    binary = find_grafana()
    if binary is None:
        return None, "grafana: not installed (no grafana-server or grafana on PATH), skipped"
    if not port_free(LISTEN_HOST, port):
        raise MonitorError(f"{LISTEN_HOST}:{port} is taken", fix="give another --grafana-port")
    g = paths.grafana
    for sub in ("data", "logs", "plugins"):
        (g / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    ini = g / "grafana.ini"
    ini.write_text(
        f"[server]\nhttp_addr = {LISTEN_HOST}\nhttp_port = {port}\n"
        f"[paths]\ndata = {g / 'data'}\nlogs = {g / 'logs'}\nplugins = {g / 'plugins'}\n"
        f"provisioning = {GRAFANA_PROVISIONING}\n"
        "[auth.anonymous]\nenabled = true\norg_role = Viewer\n"
    )
    homes = ("/usr/share/grafana", "/usr/local/share/grafana")
    home = next((h for h in homes if os.path.isdir(h)), None)
    cmd = [binary] + (["server"] if os.path.basename(binary) == "grafana" else [])
    cmd += [f"--config={ini}"] + ([f"--homepath={home}"] if home else [])
    url = f"http://{LISTEN_HOST}:{port}"
    env = dict(os.environ, **grafana_env(prom_url))
    d = spawn("grafana", cmd, g / "grafana.out", paths.grafana_pidfile, url, g, env=env)
    wait_ready(d, "/api/health", g / "grafana.out", wait_s)
    return d, f"grafana: {url}"


def down(directory: str | None = None) -> list[str]:
    """Stop what the pid files name and remove the monitor directory. What was done."""
    paths = monitor_paths(directory)
    done = []
    for pidfile in (paths.grafana_pidfile, paths.pidfile):
        d = read_pidfile(pidfile)
        if d is not None and stop_daemon(d):
            done.append(f"stopped {d.name} (pid {d.pid})")
    if paths.root.exists():
        shutil.rmtree(paths.root)
        done.append(f"removed {paths.root}")
    return done


def status(directory: str | None = None) -> dict[str, Any]:
    """Daemons, their URLs and, from Prometheus, each target's health."""
    paths = monitor_paths(directory)
    out: dict[str, Any] = {"dir": str(paths.root), "up": False, "daemons": [], "targets": []}
    for pidfile in (paths.pidfile, paths.grafana_pidfile):
        d = read_pidfile(pidfile)
        if d is None:
            continue
        running = alive(d)
        out["daemons"].append({"name": d.name, "pid": d.pid, "url": d.url, "running": running})
        if d.name == "prometheus" and running:
            out["up"] = True
            code, body = http_get(d.url + "/api/v1/targets?state=active")
            if code == 200:
                for t in json.loads(body)["data"]["activeTargets"]:
                    out["targets"].append(
                        {
                            "job": t["labels"].get("job"),
                            "node": t["labels"].get("node"),
                            "address": t["labels"].get("instance"),
                            "health": t.get("health"),
                            "error": t.get("lastError") or "",
                        }
                    )
    return out
