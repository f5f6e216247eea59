"""testbed/remote.py: the inventory, the daemons of a host, the scripts, and the
per-host reports, with fabric's connection faked (a ``run`` returning canned output)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko
import pytest
import yaml

from common.errors import UsageError
from testbed import remote
from testbed.cli import main
from testbed.cluster import sshd as sshd_mod
from tests.support.remote import INVENTORY, hosts

REPO = Path(__file__).resolve().parents[3]


def test_inventory_hosts_groups_and_ssh_settings() -> None:
    hs = hosts()
    assert list(hs) == ["head", "n0", "n1"]
    head, n1 = hs["head"], hs["n1"]
    assert head.groups == ("controller", "monitor") and head.address == "10.0.0.254"
    assert n1.groups == ("agents",) and n1.port == 2222 and hs["n0"].port == 22
    assert n1.user == "root" and n1.key_file == "/k/id"
    assert n1.known_hosts == "/k/known_hosts" and n1.strict
    # group vars over all's, "{{ var }}" filled in, the roles' defaults below everything
    assert n1.var("cosched_run_dir") == "/srv/cs/agents-run"
    assert head.var("cosched_run_dir") == "/srv/cs/run"
    assert head.var("cosched_venv_python") == "/srv/cs/venv/bin/python"


def test_the_inventory_cluster_up_ssh_writes_is_read_back() -> None:
    paths = sshd_mod.SshPaths("/run/cosched")
    hs = [sshd_mod.SshHost("head", "10.212.0.254", None),
          sshd_mod.SshHost("n0", "10.212.0.1", "cosched-n0", "10.211.0.1")]  # fmt: skip
    got = {h.name: h for h in remote.parse_inventory(
        yaml.safe_load(sshd_mod.render_inventory(hs, paths)))}  # fmt: skip
    assert got["n0"].address == "10.212.0.1" and got["n0"].key_file == paths.client_key
    assert got["n0"].known_hosts == paths.known_hosts and got["n0"].strict
    assert got["n0"].var("cosched_local_cluster") is True
    assert set(got["head"].groups) == {"controller", "monitor"}


def test_the_example_inventory_of_the_roles_is_read() -> None:
    path = REPO / "ansible/inventory/example/hosts.yml"
    if not path.exists():
        pytest.skip("no ansible/inventory/example/hosts.yml in this checkout")
    hs = {h.name: h for h in remote.load_inventory(str(path))}
    assert {"head0", "n0", "n3"} <= set(hs)
    assert hs["n3"].var("cosched_data_rate_mbit") == 100
    assert hs["n0"].var("cosched_data_rate_mbit") == 1000


def test_a_jinja_expression_is_refused_by_name() -> None:
    inv = {"all": {"hosts": {"a": {"cosched_prefix": "{{ base | default('/x') }}"}}}}
    (h,) = remote.parse_inventory(inv)
    with pytest.raises(remote.RemoteError, match="cosched_prefix"):
        h.var("cosched_run_dir")


def test_not_an_inventory_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    p.write_text("- just\n- a list\n")
    with pytest.raises(remote.RemoteError, match="not a YAML inventory"):
        remote.load_inventory(str(p))


def test_limit_by_host_and_group_and_unknown_names() -> None:
    all_ = list(hosts().values())
    assert [h.name for h in remote.select(all_, "agents")] == ["n0", "n1"]
    assert [h.name for h in remote.select(all_, "n1,controller")] == ["head", "n1"]
    with pytest.raises(UsageError, match="n7"):
        remote.select(all_, "n7")


def test_daemons_are_named_and_placed_as_the_roles_do() -> None:
    hs = hosts()
    (a,) = remote.daemons_of(hs["n1"])
    assert a.name == "agent-node-one" and a.kind == "agent"
    assert a.pidfile == "/srv/cs/agents-run/agent-node-one.pid"
    assert a.log == "/srv/cs/log/agent-node-one.log"
    assert a.env_file == "/srv/cs/etc/agent-node-one.env"
    assert a.metrics_url == "http://10.212.0.2:9096/metrics"
    (c,) = remote.daemons_of(hs["head"])
    assert c.name == "controller" and c.metrics_url == "http://10.212.0.254:9097/metrics"


def test_the_cgroup_prologue_is_the_agent_roles() -> None:
    path = REPO / "ansible/roles/agent/vars/main.yml"
    if not path.exists():
        pytest.skip("no ansible/roles/agent in this checkout")
    role = yaml.safe_load(path.read_text())["agent_enter_cgroup"]
    assert " ".join(role.split()) == " ".join(remote.AGENT_ENTER_CGROUP.split())


def test_start_and_stop_use_the_roles_pidfile_log_and_flags() -> None:
    h = hosts()["n0"]
    (d,) = remote.daemons_of(h)
    start = remote.start_script(h, d)
    assert "start-stop-daemon --start --quiet --background --make-pidfile" in start
    assert "--pidfile /srv/cs/agents-run/agent-n0.pid --output /srv/cs/log/agent-n0.log" in start
    assert "--exec /srv/cs/venv/bin/python -- -P -m agent $args" in start
    assert "s/^COSCHED_AGENT_ARGS=//p' /srv/cs/etc/agent-n0.env" in start
    stop = remote.stop_script(h, d)
    assert "--retry TERM/15/KILL/5 --remove-pidfile" in stop
    leaf = remote.RemoteHost(**{**h.__dict__, "vars": {**h.vars,
                             "cosched_agent_cgroup_leaf": "cosched/n0/agent"}})  # fmt: skip
    (dl,) = remote.daemons_of(leaf)
    assert "-- -P -c " in remote.start_script(leaf, dl)
    assert "cosched/n0/agent auto -P -m agent $args" in remote.start_script(leaf, dl)


@dataclass
class FakeResult:
    stdout: str
    stderr: str = ""
    return_code: int = 0


class FakeConn:
    """fabric.Connection's run(), answering by the first word that matches the script."""

    def __init__(self, answers: dict[str, FakeResult]) -> None:
        self.answers = answers
        self.ran: list[str] = []
        self.closed = False

    def run(self, command: str, **kwargs: Any) -> FakeResult:
        assert kwargs.get("hide") and kwargs.get("warn")
        self.ran.append(command)
        for key, res in self.answers.items():
            if key in command:
                return res
        return FakeResult("", "no answer faked", 1)

    def close(self) -> None:
        self.closed = True


STATUS_OUT = """manager: none
cgroup: v1 (hybrid)
load: 0.5 0.4 0.3
hostname: n0
agent-n0: running, pid 42
agent-n0 metrics: ok
"""


def test_status_report_of_a_host() -> None:
    h = hosts()["n0"]
    rep = remote.op_status(FakeConn({"manager": FakeResult(STATUS_OUT)}), h)
    assert rep.ok
    assert rep.lines == [
        "manager none, cgroup v1 (hybrid), load 0.5 0.4 0.3, hostname n0",
        "agent-n0: running, pid 42; metrics ok",
    ]
    down = STATUS_OUT.replace("running, pid 42", "not running")
    assert not remote.op_status(FakeConn({"manager": FakeResult(down)}), h).ok


def test_an_unreachable_host_says_why_and_the_others_complete() -> None:
    conns: list[FakeConn] = []

    def connector(h: remote.RemoteHost) -> FakeConn:
        if h.name == "n1":
            raise paramiko.ssh_exception.NoValidConnectionsError(
                {("10.0.0.2", 2222): ConnectionRefusedError(111, "Connection refused")}
            )
        if h.name == "head":
            raise TimeoutError("timed out")
        c = FakeConn({"manager": FakeResult(STATUS_OUT)})
        conns.append(c)
        return c

    reps = {r.host.name: r for r in remote.run_on(hosts().values(), remote.op_status, connector)}
    assert reps["n0"].ok and conns[0].closed
    assert not reps["n1"].ok and "UNREACHABLE: connection refused" in reps["n1"].format()
    assert "is sshd running there?" in reps["n1"].format()
    assert "UNREACHABLE: no answer (timed out)" in reps["head"].format()
    assert reps["head"].format().startswith("head (10.0.0.254): UNREACHABLE")


def test_unreachable_reasons_name_the_inventory_setting_to_check() -> None:
    auth = remote.unreachable_reason(paramiko.AuthenticationException("Authentication failed."))
    assert "ansible_ssh_private_key_file" in auth
    key = remote.unreachable_reason(
        paramiko.SSHException("Server '10.0.0.1' not found in known_hosts")
    )
    assert "UserKnownHostsFile" in key
    assert "timed out" in remote.unreachable_reason(TimeoutError())


def test_start_orders_agents_before_the_controller_and_stop_the_reverse() -> None:
    both = remote.RemoteHost("x", "10.0.0.9", "root", 22, None, None, False,
                             ("agents", "controller"), {"service_manager": "none"})  # fmt: skip
    conn = FakeConn({"start-stop-daemon": FakeResult("started, pid 7\n")})
    rep = remote.op_start()(conn, both)
    assert rep.ok and [ln.split(":")[0] for ln in rep.lines] == ["agent-x", "controller"]
    rep = remote.op_stop()(conn, both)
    assert [ln.split(":")[0] for ln in rep.lines] == ["controller", "agent-x"]
    only = remote.op_stop("controller")(conn, both)
    assert [ln.split(":")[0] for ln in only.lines] == ["controller"]


def test_logs_are_copied_0600_with_the_metrics(tmp_path: Path) -> None:
    h = hosts()["n0"]
    conn = FakeConn({"cat /srv/cs/log/agent-n0.log": FakeResult("line 1\n"),
                     "urlopen": FakeResult("cosched_agent_up 1\n")})  # fmt: skip
    rep = remote.op_logs(str(tmp_path))(conn, h)
    assert rep.ok, rep.lines
    log = tmp_path / "n0" / "agent-n0.log"
    assert log.read_text() == "line 1\n" and (log.stat().st_mode & 0o077) == 0
    assert (tmp_path / "n0" / "agent-n0.prom").read_text() == "cosched_agent_up 1\n"


def test_clean_stops_then_cleans_but_not_on_a_local_cluster_node() -> None:
    h = hosts()["n0"]
    conn = FakeConn({"--stop": FakeResult("stopped\n"), " clean": FakeResult("nothing to clean")})
    rep = remote.op_clean(conn, h)
    assert rep.ok and rep.lines[-1] == "cosched clean: nothing to clean"
    assert "COSCHED_STATE_DIR=/srv/cs/state /srv/cs/venv/bin/cosched clean" in conn.ran[-1]
    emu = remote.RemoteHost(**{**h.__dict__, "vars": {**h.vars, "cosched_local_cluster": True}})
    conn = FakeConn({"--stop": FakeResult("stopped\n")})
    rep = remote.op_clean(conn, emu)
    assert rep.ok and "skipped on a node of the local cluster" in rep.lines[-1]
    assert not any(" clean\n" in c for c in conn.ran)


def test_cli_without_an_inventory_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COSCHED_STATE_DIR", str(tmp_path))
    assert main(["remote", "status"]) == 1
    err = capsys.readouterr().err
    assert "no inventory given" in err and "--ssh" in err and "Traceback" not in err


def test_extra_vars_win_and_may_refer_to_the_inventory_name(tmp_path: Path) -> None:
    f = tmp_path / "extra.yml"
    f.write_text("cosched_prefix: /d/{{ inventory_hostname }}\nservice_manager: none\n")
    extra = remote.extra_vars([f"@{f}", "cosched_agent_metrics_port=9196"])
    hs = {h.name: h for h in remote.parse_inventory(INVENTORY, extra=extra)}
    (d,) = remote.daemons_of(hs["n0"])
    assert d.pidfile == "/d/n0/agents-run/agent-n0.pid"
    assert hs["n0"].var("cosched_log_dir") == "/d/n0/log"
    assert d.metrics_url == "http://10.212.0.1:9196/metrics"
    with pytest.raises(UsageError, match="key=value"):
        remote.extra_vars(["novalue"])


def test_a_command_that_hangs_is_reported_not_raised() -> None:
    from invoke.exceptions import CommandTimedOut

    class Hangs(FakeConn):
        def run(self, command: str, **kwargs: Any) -> FakeResult:
            raise CommandTimedOut(None, timeout=60)  # type: ignore[arg-type]

    (rep,) = remote.run_on([hosts()["n0"]], remote.op_status, lambda h: Hangs({}))
    assert not rep.ok and "TIMED OUT" in rep.format() and "60 s" in rep.format()
