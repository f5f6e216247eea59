"""The tests of tests/unit/testbed/test_remote.py that start processes or sockets."""

from __future__ import annotations

import subprocess

from testbed import remote
from tests.support.remote import hosts


def test_the_scripts_are_valid_sh() -> None:
    for h in hosts().values():
        scripts = [remote.status_script(h), remote.clean_script(h)]
        for d in remote.daemons_of(h):
            scripts += [remote.start_script(h, d), remote.stop_script(h, d),
                        remote.log_command(h, d), remote.metrics_command(d)]  # fmt: skip
        for s in scripts:
            r = subprocess.run(["sh", "-n"], input=s, text=True, capture_output=True, check=False)
            assert r.returncode == 0, (s, r.stderr)
