"""ansible/: lint (production profile), syntax, the argument specs, and the roles' logic.

Cheap checks that need no SSH and change nothing on the host but a temporary
directory: ansible-lint and ``--syntax-check``; an inventory without a required
variable stops at the role's argument spec, which names it; the daemons' flags
the roles render are the ones ``cosched cluster up`` passes and the daemons'
own parsers accept; the HTB burst is testbed/cluster/shaping.py's; the
``service_manager: none`` task file starts a real process once, leaves it alone
on a second run and stops it. The deploy over SSH is
tests/integration/test_deploy_ssh.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import yaml

from tests.support.ansible import (
    ANSIBLE_DIR,
    LINT,
    PLAYBOOK,
    ansible_env,
    local_inventory,
    playbook,
    recap,
)

needs_ansible = pytest.mark.skipif(
    not PLAYBOOK.exists(), reason="ansible-core not installed (pip install -e '.[dev]')"
)


# ----------------------------------------------------------------- lint and syntax


@pytest.mark.skipif(not LINT.exists(), reason="ansible-lint not installed (the dev extra)")
def test_ansible_lint_production_profile_is_clean(tmp_path: Path) -> None:
    out = subprocess.run(
        [str(LINT), "--offline", "--profile", "production", "--strict"],
        capture_output=True,
        text=True,
        cwd=ANSIBLE_DIR,
        env=ansible_env(tmp_path),
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in out.stderr + out.stdout


@needs_ansible
def test_syntax_check(tmp_path: Path) -> None:
    inv = "inventory/example/hosts.yml"
    playbook(tmp_path, "--syntax-check", "-i", inv, "site.yml", check=True)


def test_every_role_has_defaults_specs_handlers_and_phase_tags() -> None:
    for role in sorted((ANSIBLE_DIR / "roles").iterdir()):
        for part in ("defaults/main.yml", "meta/argument_specs.yml", "handlers/main.yml"):
            assert (role / part).is_file(), f"{role.name}: {part}"
        main = yaml.safe_load((role / "tasks/main.yml").read_text())
        tags = {t for task in main for t in task.get("tags", [])}
        assert {"preflight", "install", "configure", "service"} <= tags, role.name
        # every module call is fully qualified (ansible-lint checks it too; this says where)
        for f in (role / "tasks").glob("*.yml"):
            for task in yaml.safe_load(f.read_text()) or []:
                modules = [k for k in task if "." in k]
                assert modules, f"{f}: {task.get('name')} uses a short module name"


# ------------------------------------------------------------------ bad inventory


@needs_ansible
def test_missing_required_variable_is_named_by_the_argument_spec(tmp_path: Path) -> None:
    # n0 has no cosched_control_address: the agent role's spec stops it and names it
    inv = local_inventory(tmp_path, {"n0": {}}, cosched_key_src=str(_key(tmp_path)))
    out = playbook(tmp_path, "-i", str(inv), "site.yml", "--limit", "n0", "--check",
                   "--tags", "preflight")  # fmt: skip
    assert out.returncode != 0
    assert "TASK [agent : Validating arguments against arg spec 'main'" in out.stdout, out.stdout
    assert "missing required arguments: cosched_control_address" in out.stdout, out.stdout
    assert recap(out.stdout)["n0"]["failed"] == 1


# ------------------------------------------------------------------- role logic


def _key(tmp: Path) -> Path:
    key = tmp / "cluster.key"
    if not key.exists():
        key.write_text("ab" * 32)
        key.chmod(0o600)
    return key


RENDER = """
- name: Render the agent's and the controller's command lines
  hosts: agents:controller
  gather_facts: false
  tasks:
    - name: Load the agent role's variables
      ansible.builtin.include_role:
        name: agent
        tasks_from: preflight
        public: true
      when: inventory_hostname in groups['agents']
    - name: Load the controller role's variables
      ansible.builtin.include_role:
        name: controller
        tasks_from: preflight
        public: true
      when: inventory_hostname in groups['controller']
    - name: Write them out
      ansible.builtin.copy:
        content: >-
          {{ {'agent': agent_argv | default([]), 'controller': controller_args | default([]),
              'burst': agent_burst_bytes | default(0) | int} | to_json }}
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
        mode: "0600"
      delegate_to: localhost
      check_mode: false
"""


@needs_ansible
def test_rendered_flags_are_the_clusters_and_the_daemons_accept_them(tmp_path: Path) -> None:
    from agent.__main__ import build_parser as agent_parser
    from controller.__main__ import build_parser as controller_parser
    from controller.__main__ import config_from_args
    from testbed.cluster.agents import agent_command
    from testbed.cluster.shaping import htb_params

    key = _key(tmp_path)
    agents: dict[str, dict[str, object]] = {
        f"n{i}": {
            "cosched_control_address": f"10.212.0.{i + 1}",
            "cosched_agent_cgroup_parent": f"cosched/n{i}",
            "cosched_agent_cgroup_leaf": f"cosched/n{i}/agent",
            "cosched_agent_hostname": f"n{i}",
            "cosched_key_path": str(key),
            "cosched_data_nic": "lo",
            "cosched_data_rate_mbit": 100 * (i + 1),
        }
        for i in range(2)
    }
    inv = local_inventory(tmp_path, agents, out_dir=str(tmp_path),
                          cosched_controller_params={"max_slots": 4})  # fmt: skip
    (tmp_path / "render.yml").write_text(RENDER)
    playbook(tmp_path, "-i", str(inv), str(tmp_path / "render.yml"), "--check", check=True)

    for i in range(2):
        got = json.loads((tmp_path / f"n{i}.json").read_text())
        argv: list[str] = got["agent"]
        # the cgroup prologue, then the agent exactly as the cluster starts it
        # -P for both: never the working directory on sys.path (docs/security.md)
        assert argv[:3] == [sys.executable, "-P", "-c"]
        assert argv[4:9] == [f"cosched/n{i}/agent", "auto", "-P", "-m", "agent"]
        flags = argv[argv.index("agent") + 1 :]
        cmd = agent_command(f"n{i}", f"10.212.0.{i + 1}", str(key), f"cosched/n{i}")
        want = cmd[cmd.index("agent") + 1 :]
        pairs = dict(zip(want[::2], want[1::2], strict=True))
        for flag, value in pairs.items():
            assert flags[flags.index(flag) + 1] == value, (flag, flags)
        agent_parser().parse_args(flags)  # exits on a flag the agent does not know
        assert got["burst"] == htb_params(100_000_000 * (i + 1)).burst_bytes

    ctl: list[str] = json.loads((tmp_path / "c0.json").read_text())["controller"]
    args = controller_parser().parse_args(ctl)
    assert args.agents == "n0=10.212.0.1:7070,n1=10.212.0.2:7070"
    assert args.metrics == ("10.212.0.254", 9097) and "--param=max_slots=4" in ctl
    ctl[ctl.index("--key-file") + 1] = str(key)  # the node's path does not exist here
    config_from_args(controller_parser().parse_args(ctl))  # raises on a bad policy or key


DAEMON = """
- name: Drive a daemon through common/tasks/daemon_none.yml, one step per item of wants
  hosts: c0
  gather_facts: false
  tasks:
    - name: Each step
      ansible.builtin.include_tasks: step.yml
      loop: "{{ wants }}"
      loop_control:
        loop_var: want
    - name: Write what each step changed
      ansible.builtin.copy:
        content: "{{ steps | to_json }}"
        dest: "{{ out_dir }}/steps.json"
        mode: "0600"
"""
STEP = """
- name: The daemon
  ansible.builtin.include_role:
    name: common
    tasks_from: daemon_none
  vars:
    cosched_daemon_name: probe
    cosched_daemon_argv: ["{{ sleep }}", "600"]
    cosched_daemon_state: "{{ want }}"
    cosched_run_dir: "{{ out_dir }}/run"
    cosched_log_dir: "{{ out_dir }}/log"
- name: Record it
  ansible.builtin.set_fact:
    steps: >-
      {{ steps | default([]) + [{'want': want, 'changed': (result | default({})) is changed,
                                 'pid': lookup('ansible.builtin.file', out_dir ~ '/run/probe.pid',
                                               errors='ignore') | default('', true)}] }}
  vars:
    result: "{{ common_daemon_start if want == 'started' else common_daemon_stop }}"
"""


@needs_ansible
@pytest.mark.skipif(shutil.which("start-stop-daemon") is None, reason="no start-stop-daemon")
def test_service_manager_none_starts_once_and_stops(tmp_path: Path) -> None:
    inv = local_inventory(tmp_path, {}, out_dir=str(tmp_path), sleep=shutil.which("sleep"))
    (tmp_path / "daemon.yml").write_text(DAEMON)
    (tmp_path / "step.yml").write_text(STEP)
    pidfile = tmp_path / "run" / "probe.pid"

    playbook(tmp_path, "-i", str(inv), str(tmp_path / "daemon.yml"), "-e",
             json.dumps({"wants": ["started", "started", "stopped"]}), check=True)  # fmt: skip
    steps = json.loads((tmp_path / "steps.json").read_text())
    try:
        # started; left alone while its pidfile's process runs that executable; stopped
        assert [s["changed"] for s in steps] == [True, False, True], steps
        pids = {int(s["pid"]) for s in steps[:2]}
        assert len(pids) == 1, steps  # the second step did not start another one
        assert stat.S_IMODE((tmp_path / "log" / "probe.log").stat().st_mode) == 0o600
        assert not pidfile.exists()
        # gone, or a zombie until init reaps it (start-stop-daemon detached it)
        pid = pids.pop()
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), 15)
