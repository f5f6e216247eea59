"""Ad-hoc operations on cosched nodes over SSH (fabric): status, start, stop, logs, clean.

The hosts come from an Ansible inventory (the one the playbook deploys with, or the
one ``cosched cluster up --ssh`` writes), so both tools reach the same machines with
the same user, key and known_hosts. What runs where follows the roles in ansible/:
every host of the ``agents`` group runs an agent, every host of ``controller`` the
controller. How a daemon is started and stopped follows the role too:

* ``systemctl`` on the units ``cosched_agent_unit`` / ``cosched_controller_unit``
  (default ``cosched-agent`` / ``cosched-controller``) when the inventory's
  ``service_manager`` is ``systemd`` (the roles' default) and the node runs systemd;
* otherwise the commands of ``service_manager: none``
  (ansible/roles/common/tasks/daemon_none.yml): ``start-stop-daemon`` with the
  pidfile ``<cosched_run_dir>/<daemon>.pid``, the log ``<cosched_log_dir>/<daemon>.log``
  and the flags the role wrote to ``<cosched_config_dir>/<daemon>.env``
  (``COSCHED_AGENT_ARGS=...``, split on white space as systemd splits them), so a
  daemon started here is "already running" to the playbook and the other way round.

One SSH connection per host, hosts in parallel. A host that cannot be reached gets
one line saying so and why; the others complete; the command then exits 1.

Values of the inventory may refer to other variables the simple way the roles'
defaults do (``"{{ cosched_prefix }}/run"``); anything more than a variable name
inside ``{{ }}`` is refused with the variable's name (this is not Ansible).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from common.errors import CoschedError, UsageError
from common.names import CONTROLLER_METRICS_PORT, METRICS_PORT

CONNECT_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 60.0
MAX_PARALLEL = 16

# The roles' defaults (ansible/roles/*/defaults/main.yml) for what this module reads.
DEFAULTS: dict[str, Any] = {
    "ansible_user": "root",
    "ansible_port": 22,
    "service_manager": "systemd",
    "cosched_prefix": "/opt/cosched",
    "cosched_venv": "{{ cosched_prefix }}/venv",
    "cosched_venv_python": "{{ cosched_venv }}/bin/python",
    "cosched_config_dir": "{{ cosched_prefix }}/etc",
    "cosched_run_dir": "{{ cosched_prefix }}/run",
    "cosched_log_dir": "{{ cosched_prefix }}/log",
    "cosched_state_dir": "{{ cosched_prefix }}/state",
    "cosched_agent_unit": "cosched-agent",
    "cosched_controller_unit": "cosched-controller",
    "cosched_agent_metrics_port": METRICS_PORT,
    "cosched_controller_metrics_port": CONTROLLER_METRICS_PORT,
    "cosched_agent_cgroup_leaf": "",
}

# service_manager none with cosched_agent_cgroup_leaf set: the agent role's prologue
# (ansible/roles/agent/vars/main.yml, agent_enter_cgroup) that moves the process into
# the leaf and execs the agent, same PID and executable. Kept equal to the role's
# (tests/unit/testbed/test_remote.py compares them).
AGENT_ENTER_CGROUP = (
    "import os, sys; "
    "from common.cgroups.driver import Cgroups; "
    "from common.cgroups.layout import detect_layout; "
    "leaf, backend = sys.argv[1], sys.argv[2]; "
    "files = Cgroups(detect_layout(backend)).procs_files(leaf); "
    'files or sys.exit(f"agent: cgroup {leaf} is in no hierarchy -- make it first '
    '(cosched cluster up --no-agents does)"); '
    '[open(f, "w").write(str(os.getpid())) for f in files]; '
    "os.execv(sys.executable, [sys.executable, *sys.argv[3:]])"
)


class RemoteError(CoschedError):
    """A bad inventory or selection: nothing was run."""


# ----------------------------------------------------------------- inventory


@dataclass(frozen=True)
class RemoteHost:
    name: str
    address: str
    user: str
    port: int
    key_file: str | None
    known_hosts: str | None  # from ``-o UserKnownHostsFile=`` in ansible_ssh_common_args
    strict: bool  # StrictHostKeyChecking=yes: an unknown host key is refused
    groups: tuple[str, ...]
    vars: dict[str, Any] = field(default_factory=dict, compare=False)
    host_key_checking: str = "yes"  # the inventory's StrictHostKeyChecking, as written

    def var(self, name: str) -> Any:
        return resolve(name, self.vars)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.address})"


_REF = re.compile(r"\{\{\s*(\w+)\s*\}\}")
MAX_GROUP_DEPTH = 50


def resolve(name: str, variables: dict[str, Any], depth: int = 0) -> Any:
    """``variables[name]`` (or the roles' default) with ``{{ var }}`` references filled in."""
    if depth > 10:
        raise RemoteError(f"inventory variable {name} refers to itself", fix="fix the inventory")
    value = variables.get(name, DEFAULTS.get(name))
    if not isinstance(value, str) or "{{" not in value:
        return value

    def sub(m: re.Match[str]) -> str:
        return str(resolve(m.group(1), variables, depth + 1))

    out = _REF.sub(sub, value)
    if "{{" in out:
        raise RemoteError(
            f"inventory variable {name} = {value!r} is a Jinja expression",
            fix="give it a plain value (cosched remote fills in only {{ variable }})",
        )
    return out


def _ssh_options(args: str) -> dict[str, str]:
    """``-o Key=Value`` options of ansible_ssh_common_args, keys lower-cased."""
    opts: dict[str, str] = {}
    words = shlex.split(args or "")
    for i, w in enumerate(words):
        opt = None
        if w == "-o" and i + 1 < len(words):
            opt = words[i + 1]
        elif w.startswith("-o") and len(w) > 2:
            opt = w[2:]
        if opt:
            key, _, value = opt.replace(" ", "=", 1).partition("=")
            opts[key.strip().lower()] = value.strip()
    return opts


def parse_inventory(
    data: Any, source: str = "inventory", extra: dict[str, Any] | None = None
) -> list[RemoteHost]:
    """Hosts of a YAML inventory (all: vars/hosts/children), variables merged as Ansible
    does for these simple cases: all < parent group < child group < host < ``extra``
    (``-e``, as ansible-playbook's extra vars win over everything)."""
    if not isinstance(data, dict) or not data:
        raise RemoteError(f"{source} is not a YAML inventory", fix="give an inventory like "
                          "ansible/inventory/example/hosts.yml")  # fmt: skip
    hostvars: dict[str, dict[str, Any]] = {}
    hostgroups: dict[str, list[str]] = {}

    def mapping(value: Any, what: str) -> dict[Any, Any]:
        value = value or {}
        if not isinstance(value, dict):
            raise RemoteError(f"{source}: {what} is not a mapping", fix="fix the inventory")
        return value

    def walk(group: str, body: Any, inherited: dict[str, Any], depth: int = 0) -> None:
        if depth > MAX_GROUP_DEPTH:  # a YAML alias can make a group its own child
            raise RemoteError(f"{source}: groups nested deeper than {MAX_GROUP_DEPTH} at "
                              f"{group}", fix="fix the inventory")  # fmt: skip
        body = mapping(body, f"group {group}")
        gvars = {**inherited, **mapping(body.get("vars"), f"group {group}'s vars")}
        for host, hv in mapping(body.get("hosts"), f"group {group}'s hosts").items():
            own = mapping(hv, f"host {host}'s variables")
            merged = hostvars.setdefault(str(host), {})
            # a host seen in an earlier group keeps its own variables over group ones
            hostvars[str(host)] = {**gvars, **merged, **own}
            hostgroups.setdefault(str(host), [])
            if group not in hostgroups[str(host)]:
                hostgroups[str(host)].append(group)
        for child, cbody in mapping(body.get("children"), f"group {group}'s children").items():
            walk(str(child), cbody, gvars, depth + 1)

    for group, body in data.items():
        walk(str(group), body, {})
    hosts = []
    for name, hv in hostvars.items():
        hv = {**hv, **(extra or {})}
        opts = _ssh_options(str(resolve("ansible_ssh_common_args", hv) or ""))
        key = resolve("ansible_ssh_private_key_file", hv)
        checking = opts.get("stricthostkeychecking", "ask").lower()
        strict = checking in ("yes", "ask")
        raw_port = resolve("ansible_port", hv)
        try:
            port = -1 if isinstance(raw_port, bool) else int(raw_port)
        except (TypeError, ValueError, OverflowError):
            port = -1
        if not 0 < port < 65536:
            raise RemoteError(
                f"{source}: host {name}: ansible_port {raw_port!r} is not a port number",
                fix="give 1-65535",
            )
        hosts.append(
            RemoteHost(
                name=name,
                address=str(resolve("ansible_host", hv) or name),
                user=str(resolve("ansible_user", hv)),
                port=port,
                key_file=str(key) if key else None,
                known_hosts=opts.get("userknownhostsfile"),
                strict=strict,
                groups=tuple(hostgroups[name]),
                vars={"inventory_hostname": name, **hv},
                host_key_checking=checking,
            )
        )
    return hosts


def extra_vars(items: Iterable[str]) -> dict[str, Any]:
    """``-e`` values as ansible-playbook takes them: ``@file.yml`` or ``key=value``."""
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        if item.startswith("@"):
            try:
                data = yaml.safe_load(Path(item[1:]).read_text())
            except (OSError, yaml.YAMLError) as err:
                raise UsageError(f"-e {item}: {err}", fix="give a readable YAML file") from None
            if not isinstance(data, dict):
                raise UsageError(f"-e {item} is not a mapping", fix="key: value lines")
            out.update(data)
        elif "=" in item:
            key, _, value = item.partition("=")
            out[key.strip()] = yaml.safe_load(value) if value else ""
        else:
            raise UsageError(f"-e {item!r}", fix="give key=value or @file.yml")
    return out


def load_inventory(path: str, extra: dict[str, Any] | None = None) -> list[RemoteHost]:
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as err:
        raise RemoteError(
            f"cannot read inventory {path}: {err.strerror}",
            fix="give -i INVENTORY (`cosched cluster up --ssh` writes "
            "$COSCHED_STATE_DIR/inventory.yml)",
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise RemoteError(f"inventory {path} is not valid YAML: {err}", fix="fix it") from None
    return parse_inventory(data, path, extra)


def select(hosts: list[RemoteHost], limit: str | None) -> list[RemoteHost]:
    """The hosts named in ``limit`` (comma-separated host or group names), in inventory order."""
    if not limit:
        return hosts
    wanted = [w.strip() for w in limit.split(",") if w.strip()]
    known = {h.name for h in hosts} | {g for h in hosts for g in h.groups}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise UsageError(
            f"--limit names no host or group: {', '.join(unknown)}",
            fix=f"one of {', '.join(sorted(known))}",
        )
    return [h for h in hosts if h.name in wanted or set(h.groups) & set(wanted)]


# ------------------------------------------------------------------- daemons


@dataclass(frozen=True)
class Daemon:
    """One cosched daemon of a host, named as the roles name it."""

    name: str  # agent-<node> | controller
    kind: str  # agent | controller
    unit: str
    env_file: str
    env_var: str
    pidfile: str
    log: str
    python: str
    metrics_url: str | None
    cgroup_leaf: str = ""
    backend: str = "auto"


def daemons_of(host: RemoteHost) -> list[Daemon]:
    out = []
    run, log, conf = (host.var(v) for v in ("cosched_run_dir", "cosched_log_dir",
                                             "cosched_config_dir"))  # fmt: skip
    py = str(host.var("cosched_venv_python"))
    addr = host.var("cosched_control_address")
    if "agents" in host.groups:
        name = f"agent-{host.var('cosched_node_name') or host.name}"
        port = host.var("cosched_agent_metrics_port")
        out.append(
            Daemon(
                name,
                "agent",
                str(host.var("cosched_agent_unit")),
                f"{conf}/{name}.env",
                "COSCHED_AGENT_ARGS",
                f"{run}/{name}.pid",
                f"{log}/{name}.log",
                py,
                f"http://{addr}:{port}/metrics" if addr else None,
                str(host.var("cosched_agent_cgroup_leaf") or ""),
                str(host.var("cosched_agent_backend") or "auto"),
            )
        )
    if "controller" in host.groups:
        port = host.var("cosched_controller_metrics_port")
        out.append(
            Daemon(
                "controller",
                "controller",
                str(host.var("cosched_controller_unit")),
                f"{conf}/controller.env",
                "COSCHED_CONTROLLER_ARGS",
                f"{run}/controller.pid",
                f"{log}/controller.log",
                py,
                f"http://{addr}:{port}/metrics" if addr else None,
            )
        )
    return out


def _q(s: object) -> str:
    return shlex.quote(str(s))


def _use_systemd(host: RemoteHost) -> str:
    """Shell: sets SM=systemd when the inventory wants systemd and the node runs it."""
    want = str(host.var("service_manager"))
    return f"SM=none; [ {_q(want)} = systemd ] && [ -d /run/systemd/system ] && SM=systemd\n"


_FETCH = (
    "import sys, urllib.request\n"
    "try:\n"
    "    r = urllib.request.urlopen(sys.argv[1], timeout=2)\n"
    "    sys.stdout.write(r.read().decode() if sys.argv[2] == 'body' else 'ok')\n"
    "except Exception as e:\n"
    "    print('no answer (%s)' % (getattr(e, 'reason', None) or e)); sys.exit(1)\n"
)


def status_script(host: RemoteHost) -> str:
    """One round trip: ``key: value`` lines the parser below reads."""
    lines = [
        _use_systemd(host),
        'echo "manager: $SM"',
        't=$(stat -fc %T /sys/fs/cgroup 2>/dev/null); case "$t" in '
        'cgroup2fs) c=v2;; tmpfs) [ -e /sys/fs/cgroup/unified ] && c="v1 (hybrid)" || c=v1;; '
        '*) c="unknown ($t)";; esac; echo "cgroup: $c"',
        'echo "load: $(cut -d" " -f1-3 /proc/loadavg)"',
        'echo "hostname: $(hostname)"',
    ]
    for d in daemons_of(host):
        lines.append(
            f'if [ "$SM" = systemd ]; then s=$(systemctl is-active {_q(d.unit)} 2>&1); '
            f"else if start-stop-daemon --status --pidfile {_q(d.pidfile)} --exec {_q(d.python)}; "
            f'then s="running, pid $(cat {_q(d.pidfile)})"; '
            f'elif [ -e {_q(d.pidfile)} ]; then s="not running (stale pidfile)"; '
            f'else s="not running"; fi; fi; echo "{d.name}: $s"'
        )
        if d.metrics_url:
            lines.append(
                f'echo "{d.name} metrics: $(python3 -c {_q(_FETCH)} {_q(d.metrics_url)} ok 2>&1)"'
            )
    return "\n".join(lines) + "\n"


def parse_status(out: str) -> dict[str, str]:
    res = {}
    for line in out.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            res[key.strip()] = value.strip()
    return res


def start_script(host: RemoteHost, d: Daemon) -> str:
    """Start ``d`` as the role does (systemd, or start-stop-daemon with the role's flags)."""
    # the daemon's own argv after the executable: [-c prologue leaf backend] -m kind $args
    # -P: the working directory never reaches sys.path (docs/security.md); the prologue
    # execs the rest of its argv, so the daemon gets -P too.
    argv = (
        ["-P", "-c", _q(AGENT_ENTER_CGROUP), _q(d.cgroup_leaf), _q(d.backend)]
        if d.kind == "agent" and d.cgroup_leaf
        else []
    ) + ["-P", "-m", d.kind, "$args"]
    run_dir, log_dir = os.path.dirname(d.pidfile), os.path.dirname(d.log)
    return "\n".join([
        _use_systemd(host),
        f'if [ "$SM" = systemd ]; then systemctl start {_q(d.unit)} && echo started; exit; fi',
        f"[ -r {_q(d.env_file)} ] || {{ echo 'no {d.env_file}: deploy first "
        f"(ansible-playbook site.yml)'; exit 3; }}",
        f"args=$(sed -n 's/^{d.env_var}=//p' {_q(d.env_file)})",
        f"mkdir -p {_q(run_dir)} && mkdir -p -m 700 {_q(log_dir)}",
        f"[ -e {_q(d.log)} ] || (umask 077; : > {_q(d.log)})",
        "set -f  # the flags split on white space only, as systemd splits them",
        f"start-stop-daemon --start --quiet --background --make-pidfile "
        f"--pidfile {_q(d.pidfile)} --output {_q(d.log)} --chdir / --exec {_q(d.python)} -- "
        + " ".join(argv),
        "rc=$?",
        'case $rc in 1) echo "already running"; exit 0;; 0) ;; *) exit $rc;; esac',
        f"sleep 1; start-stop-daemon --status --pidfile {_q(d.pidfile)} --exec {_q(d.python)} "
        f'&& echo "started, pid $(cat {_q(d.pidfile)})" && exit 0',
        f'echo "exited at once; the end of {d.log}:"; tail -n 5 {_q(d.log)}; exit 1',
    ]) + "\n"  # fmt: skip


def stop_script(host: RemoteHost, d: Daemon) -> str:
    return "\n".join([
        _use_systemd(host),
        f'if [ "$SM" = systemd ]; then systemctl stop {_q(d.unit)} && echo stopped; exit; fi',
        f"start-stop-daemon --stop --quiet --pidfile {_q(d.pidfile)} --exec {_q(d.python)} "
        "--retry TERM/15/KILL/5 --remove-pidfile",
        'case $? in 0) echo stopped;; 1) echo "was not running";; *) exit 1;; esac',
    ]) + "\n"  # fmt: skip


def log_command(host: RemoteHost, d: Daemon) -> str:
    """The daemon's log on stdout: the journal under systemd, its log file otherwise."""
    return (
        _use_systemd(host)
        + f'if [ "$SM" = systemd ]; then journalctl -u {_q(d.unit)} --no-pager -o short-precise; '
        f"else cat {_q(d.log)}; fi\n"
    )


def metrics_command(d: Daemon) -> str:
    # fetched on the node: real nodes' metrics ports face the control network only
    return f"python3 -c {_q(_FETCH)} {_q(d.metrics_url)} body\n"


def clean_script(host: RemoteHost) -> str:
    """``cosched clean`` on the node, with the node's own state dir."""
    venv = host.var("cosched_venv")
    return (
        f"COSCHED_STATE_DIR={_q(host.var('cosched_state_dir'))} {_q(f'{venv}/bin/cosched')} clean\n"
    )


# ------------------------------------------------------------------ running


class Result(Protocol):
    stdout: str
    stderr: str
    return_code: int


class Connection(Protocol):
    """What is used of :class:`fabric.Connection` (faked in tests/unit/testbed/test_remote.py)."""

    def run(self, command: str, **kwargs: Any) -> Result: ...

    def close(self) -> None: ...


@dataclass
class HostReport:
    host: RemoteHost
    ok: bool
    lines: list[str] = field(default_factory=list)
    data: dict[str, str] = field(default_factory=dict)

    def format(self) -> str:
        head = f"{self.host.label}:"
        if len(self.lines) == 1:
            return f"{head} {self.lines[0]}"
        return "\n".join([head, *(f"  {ln}" for ln in self.lines)])


def connect(host: RemoteHost, timeout: float = CONNECT_TIMEOUT_S) -> Connection:
    """A fabric connection that trusts only the inventory's known_hosts when it names one
    (fabric itself would add unknown host keys)."""
    import paramiko
    from fabric import Config
    from fabric import Connection as FabricConnection

    cfg = Config(overrides={"load_ssh_configs": False, "run": {"in_stream": False}})
    kwargs: dict[str, Any] = {"look_for_keys": False, "allow_agent": False,
                              "banner_timeout": timeout, "auth_timeout": timeout}  # fmt: skip
    if host.key_file:
        kwargs["key_filename"] = host.key_file
    conn = FabricConnection(host.address, user=host.user, port=host.port, config=cfg,
                            connect_timeout=timeout, connect_kwargs=kwargs)  # fmt: skip
    if host.known_hosts:
        conn.client.load_host_keys(host.known_hosts)
    if host.strict:
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
    else:  # the inventory chose to trust unknown keys: say so every time it happens
        conn.client.set_missing_host_key_policy(_loud_policy(host))
    return cast(Connection, conn)


def _loud_policy(host: RemoteHost) -> Any:
    """Accept an unknown host key as the inventory asks (``no``/``accept-new``), with one
    loud line on stderr naming the host and the key (issue 28: it was silent)."""
    import paramiko

    class Loud(paramiko.AutoAddPolicy):  # type: ignore[misc]
        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            print(
                f"cosched remote: WARNING: {host.label}: accepted a host key this machine "
                f"does not know, {key.get_name()} {key.fingerprint} "
                f"(StrictHostKeyChecking={host.host_key_checking} in the inventory): whoever "
                "answered at that address is trusted; put the host's key in "
                "UserKnownHostsFile and set StrictHostKeyChecking=yes",
                file=sys.stderr,
                flush=True,
            )
            super().missing_host_key(client, hostname, key)

    return Loud()


def unreachable_reason(err: BaseException) -> str:
    """One line: why the host could not be reached, and what to check."""
    import paramiko

    if isinstance(err, paramiko.BadHostKeyException | paramiko.SSHException) and (
        "not found in known_hosts" in str(err) or isinstance(err, paramiko.BadHostKeyException)
    ):
        return f"host key not trusted ({err}) — check the inventory's UserKnownHostsFile"
    if isinstance(err, paramiko.AuthenticationException):
        return f"login refused ({err}) — check ansible_user and ansible_ssh_private_key_file"
    if isinstance(err, socket.timeout | TimeoutError):
        return "no answer (timed out) — is the host up and its sshd listening?"
    if isinstance(err, paramiko.ssh_exception.NoValidConnectionsError | ConnectionError):
        return f"connection refused or failed ({err}) — is sshd running there?"
    return f"{type(err).__name__}: {err}"


Op = Callable[[Connection, RemoteHost], HostReport]


def run_on(
    hosts: Iterable[RemoteHost],
    op: Op,
    connector: Callable[[RemoteHost], Connection] = connect,
    parallel: int = MAX_PARALLEL,
) -> list[HostReport]:
    """``op`` on every host in parallel; an unreachable host's report says so."""
    import paramiko
    from invoke.exceptions import CommandTimedOut

    def one(h: RemoteHost) -> HostReport:
        conn: Connection | None = None
        try:
            conn = connector(h)
            return op(conn, h)
        except CommandTimedOut as err:
            why = f"TIMED OUT: a command ran longer than {err.timeout} s"
            return HostReport(h, False, [f"{why} — is the host overloaded or a daemon hanging?"])
        except (OSError, paramiko.SSHException, EOFError) as err:
            return HostReport(h, False, [f"UNREACHABLE: {unreachable_reason(err)}"])
        finally:
            if conn is not None:
                conn.close()

    hosts = list(hosts)
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(hosts)))) as pool:
        return list(pool.map(one, hosts))


def _sh(conn: Connection, script: str, timeout: float = COMMAND_TIMEOUT_S) -> Result:
    return conn.run(script, hide=True, warn=True, timeout=timeout)


def _out(r: Result) -> str:
    text = (r.stdout + r.stderr).strip()
    return " | ".join(text.splitlines()) if text else f"exit status {r.return_code}"


def op_status(conn: Connection, host: RemoteHost) -> HostReport:
    r = _sh(conn, status_script(host))
    data = parse_status(r.stdout)
    lines = [
        f"manager {data.get('manager', '?')}, cgroup {data.get('cgroup', '?')}, "
        f"load {data.get('load', '?')}, hostname {data.get('hostname', '?')}"
    ]
    ok = r.return_code == 0
    for d in daemons_of(host):
        state = data.get(d.name, "unknown")
        line = f"{d.name}: {state}"
        if d.metrics_url:
            line += f"; metrics {data.get(d.name + ' metrics', '?')}"
        lines.append(line)
        ok = ok and (state.startswith("running") or state == "active")
    if not daemons_of(host):
        lines.append("no cosched daemon here (in neither the agents nor the controller group)")
    return HostReport(host, ok, lines, data)


def _daemon_op(kind: str, script: Callable[[RemoteHost, Daemon], str], which: str) -> Op:
    def op(conn: Connection, host: RemoteHost) -> HostReport:
        lines, ok = [], True
        ds = [d for d in daemons_of(host) if which in ("all", d.kind)]
        # agents before the controller on start, the controller first on stop
        ds.sort(key=lambda d: (d.kind == "controller") == (kind == "start"))
        for d in ds:
            r = _sh(conn, script(host, d))
            ok = ok and r.return_code == 0
            lines.append(f"{d.name}: {_out(r)}")
        if not ds:
            lines.append(f"no {'daemon' if which == 'all' else which} to {kind} here")
        return HostReport(host, ok, lines)

    return op


def op_start(which: str = "all") -> Op:
    return _daemon_op("start", start_script, which)


def op_stop(which: str = "all") -> Op:
    return _daemon_op("stop", stop_script, which)


def op_logs(out_dir: str) -> Op:
    """Each daemon's log and its /metrics into ``out_dir/<host>/``."""

    def op(conn: Connection, host: RemoteHost) -> HostReport:
        dest = Path(out_dir) / host.name
        dest.mkdir(parents=True, exist_ok=True, mode=0o700)
        lines, ok = [], True
        for d in daemons_of(host):
            r = _sh(conn, log_command(host, d))
            path = dest / f"{d.name}.log"
            _write(path, r.stdout)
            if r.return_code == 0:
                lines.append(f"{d.name} log: {len(r.stdout)} bytes -> {path}")
            else:
                ok = False
                lines.append(f"{d.name} log: not read ({_out(r)})")
            if d.metrics_url:
                m = _sh(conn, metrics_command(d), timeout=15)
                if m.return_code == 0:
                    mpath = dest / f"{d.name}.prom"
                    _write(mpath, m.stdout)
                    lines.append(f"{d.name} metrics: {len(m.stdout)} bytes -> {mpath}")
                else:
                    ok = False
                    lines.append(f"{d.name} metrics: {_out(m)}")
        if not daemons_of(host):
            lines.append("no cosched daemon here")
        return HostReport(host, ok, lines)

    return op


def _write(path: Path, text: str) -> None:
    # logs carry every user's job commands (docs/security.md): 0600, never through a link
    from common.private import write_private

    write_private(path, text)


def op_clean(conn: Connection, host: RemoteHost) -> HostReport:
    """Stop the host's daemons, then ``cosched clean`` there. A node of the local cluster
    reached over SSH (``cluster up --ssh``: ``cosched_local_cluster: true``) shares the
    kernel of every other node: ``cosched clean`` there would take the whole local
    cluster down (and the session's own sshd with it), so it is skipped and said so."""
    stopped = op_stop()(conn, host)
    lines = list(stopped.lines) if daemons_of(host) else []
    # cosched_emulated: the variable's name in inventories written before it was renamed
    if host.var("cosched_local_cluster") or host.var("cosched_emulated"):
        lines.append(
            "cosched clean: skipped on a node of the local cluster (one kernel for the "
            "whole cluster) — `cosched cluster down` on the host removes it all"
        )
        return HostReport(host, stopped.ok, lines)
    r = _sh(conn, clean_script(host), timeout=120)
    lines.append(f"cosched clean: {_out(r)}")
    return HostReport(host, stopped.ok and r.return_code == 0, lines)
