"""Finding 3 (issue 28): a module planted in the directory root works from is not imported.
Root running ``cosched cluster up`` and ``cosched controller start`` in a directory the
attacker owns (/tmp, say) started ``python -m agent`` and ``python -m controller`` there,
so the attacker's ``common/``, ``agent/`` or ``controller/`` package ran as root. Daemons
now start with ``-I`` (or ``-P``) from ``/`` (common/daemons.py)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.security_sandbox import Sandbox, root_env

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a real local cluster"),
]

PLANT = """\
import os
with open({marker!r} + "-" + __name__ + "-" + str(os.getpid()), "w") as f:
    f.write(str(os.geteuid()))
"""


def _cosched(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command, as root types it, in ``cwd``."""
    cli = os.path.join(os.path.dirname(sys.executable), "cosched")
    argv = [cli] if os.path.exists(cli) else [sys.executable, "-P", "-m", "testbed.cli"]
    env = root_env()
    return subprocess.run([*argv, *args], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=180)  # fmt: skip


@pytest.mark.timeout(300)
def test_daemons_do_not_import_from_the_callers_directory(root_cluster_env: Path) -> None:
    box = Sandbox()
    pid = 0
    try:
        attacker = box.add_user("attacker")
        plant = box.root / "plant"
        plant.mkdir()
        marker = box.drop / "planted"
        for pkg in ("common", "agent", "controller"):
            (plant / pkg).mkdir()
            (plant / pkg / "__init__.py").write_text(PLANT.format(marker=str(marker)))
        for path in [plant, *plant.rglob("*")]:
            os.chown(path, attacker.uid, attacker.gid)
        up = _cosched(plant, "cluster", "up", "--nodes", "2", "--cpus-per-node", "1")
        started = _cosched(plant, "controller", "start", "--policy", "gang", "--run-dir",
                           str(box.run), "--wait", "60")  # fmt: skip
        m = re.search(r"pid (\d+)", started.stdout)
        pid = int(m.group(1)) if m else 0
        ran = sorted(p.name for p in box.drop.glob("planted-*"))
        assert not ran, f"planted modules ran as root: {ran}"
        assert up.returncode == 0, up.stderr
        assert started.returncode == 0, started.stderr
        sock = str(box.run / "controller.sock")
        status = _cosched(plant, "controller", "status", "--socket", sock)
        assert status.returncode == 0 and "n0" in status.stdout, status.stderr
    finally:
        if pid:
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                proc.send_signal(signal.SIGTERM)
                proc.wait(15)
        _cosched(Path("/"), "cluster", "down")
        box.close()
