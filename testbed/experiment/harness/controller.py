"""The controller of one run, started one way: a fresh process on the cluster's state.

Every live study starts its controller here (``python -m controller`` with the policy,
the quantum and the study's own flags), talks to it through its client, and shuts it down
and reaps it when the run ends, also on failure. Its log is ``RUN_DIR/controller.log``.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.experiment.harness import LiveError


def command(
    state_path: str,
    policy: str,
    quantum: float,
    run_dir: Path,
    params: Mapping[str, object] | None = None,
    args: Sequence[str] = (),
) -> list[str]:
    """The controller's command line: ``params`` as ``--param K=V``, then ``args``."""
    cmd = [
        sys.executable, "-m", "controller",
        "--policy", policy,
        "--quantum", str(quantum),
        "--cluster-state", state_path,
        "--run-dir", str(run_dir),
        "--log-level", "WARNING",
    ]  # fmt: skip
    for k, v in (params or {}).items():
        cmd += ["--param", f"{k}={v}"]
    return [*cmd, *args]


@contextlib.contextmanager
def controller(
    state_path: str,
    policy: str,
    quantum: float,
    run_dir: Path,
    params: Mapping[str, object] | None = None,
    args: Sequence[str] = (),
) -> Iterator[Any]:
    """A fresh controller on the cluster; yields its client (controller.client)."""
    from controller.client import ControllerClient, ControllerError

    run_dir.mkdir(parents=True, exist_ok=True)
    with short_path(run_dir) as where:
        cmd = command(state_path, policy, quantum, where, params, args)
        with (run_dir / "controller.log").open("w") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        client = ControllerClient(str(where / "controller.sock"), retry=20.0, timeout=10.0)
        try:
            wait_socket(where / "controller.sock", proc)
            yield client
            with contextlib.suppress(ControllerError, OSError):
                client.request("shutdown", checkpoint=False)
        finally:
            client.close()
            stop(proc)


#: longest run directory whose controller.sock fits a unix socket's path (108 bytes)
SOCKET_DIR_MAX = 90


@contextlib.contextmanager
def short_path(run_dir: Path) -> Iterator[Path]:
    """``run_dir``, or, when it is too long for the controller's unix socket (a deep
    ``--out``), a short name for it: a link in a private temporary directory (0700,
    so nobody can plant another), removed afterwards. Files still land in ``run_dir``."""
    if len(str(run_dir)) <= SOCKET_DIR_MAX:
        yield run_dir
        return
    tmp = Path(tempfile.mkdtemp(prefix="cosched-run-"))
    link = tmp / "r"
    link.symlink_to(run_dir.resolve(), target_is_directory=True)
    try:
        yield link
    finally:
        link.unlink()
        tmp.rmdir()


def wait_socket(path: Path, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise LiveError(
                f"the controller exited with {proc.returncode}; see {path.parent}/controller.log"
            )
        if time.monotonic() > deadline:
            raise LiveError(f"the controller did not answer within {timeout:g} s")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Reap the controller: it exits on shutdown; SIGTERM, then SIGKILL if it does not."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
