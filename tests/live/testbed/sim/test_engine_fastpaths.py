"""The tests of tests/unit/testbed/sim/test_engine_fastpaths.py that start processes or sockets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.tiers import REPO


def test_simulate_on_a_trace_loads_no_cluster_daemon_plot_or_numpy_code(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text(
        "; MaxProcs: 4\n"
        + "".join(
            f"{i} {i * 5} -1 10 2 -1 -1 2 20 -1 1 1 -1 -1 -1 -1 -1 -1\n" for i in range(1, 30)
        )
    )
    code = (
        "import json, sys\n"
        "from testbed.cli import main\n"
        f"rc = main(['simulate', '--policy', 'easy', '--workload', 'swf:{trace}',"
        f" '--out', '{tmp_path / 'out'}'])\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout
    rc, modules = json.loads(out.splitlines()[-1])
    assert rc == 0
    assert (tmp_path / "out" / "jobs-easy.csv").exists()
    forbidden = (
        "testbed.cluster",
        "agent",
        "controller.client",
        "controller.daemon",
        "controller.flags",
        "matplotlib",
        "numpy",
        "tqdm",
        "pyroute2",
        "testbed.commands.controller",
        "testbed.commands.jobs",
        "testbed.commands.cluster",
        "testbed.commands.experiment",
    )
    loaded = [m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert loaded == []
