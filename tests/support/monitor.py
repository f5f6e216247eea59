"""Prometheus and `cosched monitor` from the live monitoring tests: a client for the
query API, the CLI, the synthetic job and the check that nothing is left."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from testbed import monitor as mon
from tests.support.live import Live

REPO = Path(__file__).resolve().parents[2]


# ~10 s of wall time, then it ends on its own.
SHORT = ["python3", "-c", "import time\nt=time.time()\nwhile time.time()-t<10: pass"]


def _groups() -> dict[str, list[str]]:
    import re

    text = (REPO / "prometheus/rules/recording.yml").read_text()
    out: dict[str, list[str]] = {}
    for block in text.split("  - name: ")[1:]:
        name = block.split()[0]
        out[name] = re.findall(r"record: (\S+)", block)
    return out


def _synthetic(iterations: int) -> list[str]:
    return [sys.executable, "-m", "apps.synthetic", "--gcomp", "150000", "--iterations",
            str(iterations), "--connect-timeout", "20", "--comm", "nn", "--msg-bytes", "8192",
            "--comm-rounds", "1"]  # fmt: skip


class Prom:
    """Prometheus's HTTP API, as the live monitoring tests ask it."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _get(self, path: str, params: list[tuple[str, str]]) -> Any:
        q = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{q}", timeout=5) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as err:  # 400: the expression does not parse
            raise AssertionError(f"{path} {params}: {err.read().decode()}") from err
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/query", [("query", expr)])["result"])

    def label_values(self, match: str, label: str, start: float) -> list[str]:
        series = self._get("/api/v1/series", [("match[]", match), ("start", f"{start:.3f}")])
        return sorted({s[label] for s in series if label in s})

    def wait(self, expr: str, timeout: float, ok: Any = bool) -> tuple[list[dict[str, Any]], float]:
        t0 = time.monotonic()
        result: list[dict[str, Any]] = []
        while time.monotonic() - t0 < timeout:
            result = self.query(expr)
            if ok(result):
                return result, time.monotonic() - t0
            time.sleep(0.5)
        raise AssertionError(f"{expr}: no data within {timeout:g} s (last {result})")


def _tear_down(env: dict[str, str], state_dir: Path, lv: Live) -> None:
    """monitor down (and its library call, if the command failed), controller, cluster."""
    with contextlib.suppress(Exception):
        print(_cli("monitor", "down", env=env))
    mon.down(str(state_dir))
    lv.stop()
    with contextlib.suppress(Exception):
        lv.down()


def _assert_nothing_left(paths: mon.MonitorPaths, daemon: mon.Daemon | None) -> None:
    assert not paths.root.exists()
    assert daemon is not None and not mon.alive(daemon)
    strays = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if any(str(paths.root) in a for a in (p.info["cmdline"] or []))
    ]
    assert strays == []


def _cli(*args: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "testbed.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout
