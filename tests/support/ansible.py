"""Running ansible/site.yml from the tests: the project's ansible-playbook, a private
ANSIBLE_HOME, a local inventory, and the play recap parsed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


ANSIBLE_DIR = REPO / "ansible"


BIN = Path(sys.executable).parent


PLAYBOOK = BIN / "ansible-playbook"


LINT = BIN / "ansible-lint"


def ansible_env(tmp: Path) -> dict[str, str]:
    """Environment for ansible-playbook that keeps Ansible's files under ``tmp``.

    The SSH control path must be short (a unix socket path is at most 107 bytes)
    and no ControlPersist master may outlive the run, so multiplexing is off.
    """
    home = tmp / "ansible-home"
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"),
        ANSIBLE_HOME=str(home),
        ANSIBLE_LOCAL_TEMP=str(home / "tmp"),
        ANSIBLE_REMOTE_TEMP=str(home / "remote-tmp"),
        # unused while multiplexing is off; set so that ~/.ansible/cp is never made
        ANSIBLE_SSH_CONTROL_PATH_DIR=str(home / "cp"),
        ANSIBLE_SSH_ARGS="-o ControlMaster=no -o ControlPath=none",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_RETRY_FILES_ENABLED="False",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def playbook(
    tmp: Path, *args: str, check: bool = False, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [str(PLAYBOOK), *args],
        capture_output=True,
        text=True,
        cwd=ANSIBLE_DIR,
        env=ansible_env(tmp),
        timeout=timeout,
    )
    if check:
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    return out


def recap(stdout: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP as {host: {ok: n, changed: n, unreachable: n, failed: n, ...}}."""
    text = stdout.split("PLAY RECAP", 1)[-1]
    hosts: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
        if m:
            hosts[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return hosts


def local_inventory(tmp: Path, agents: dict[str, dict[str, object]], **all_vars: object) -> Path:
    """An inventory of hosts run with the local connection and this interpreter."""
    inv = {
        "all": {
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "service_manager": "none",
                "cosched_install_from": "none",
                "cosched_venv_python": sys.executable,
                "cosched_manage_packages": False,
                "cosched_manage_sysctls": False,
                **all_vars,
            },
            "children": {
                "controller": {"hosts": {"c0": {"cosched_control_address": "10.212.0.254"}}},
                "agents": {"hosts": agents},
            },
        }
    }
    path = tmp / "inventory" / "hosts.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(inv))
    return path
