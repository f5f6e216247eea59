"""``python -m agent.release``: the agent unit's ``ExecStopPost`` on a systemd host.

systemd starts a delegated unit's main process (and its ``ExecStartPre``) in
the unit's own cgroup, which cgroup v2 refuses while that cgroup passes
controllers on: the agent enabled ``cpu`` there for its job groups, and a
restart with jobs still running below it (``KillMode=process``) failed with
status 219/CGROUP (seen on a systemd node of ``cluster up --systemd``,
docs/deploy.md). This gives the controllers back once the agent has exited,
however it exited (:func:`common.cgroups.delegation.release_base`; systemd
runs ``ExecStopPost`` of a delegated unit in the unit's ``.control`` leaf);
the agent that starts next enables them again and reattaches the jobs. Off
cgroup v2, or outside a delegated unit, it does nothing.
"""

from __future__ import annotations

import argparse
import sys

from common.cgroups import open_cgroups
from common.cgroups.delegation import release_base
from common.errors import CoschedError
from common.exits import report

PROG = "agent.release"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agent.release", description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="auto", choices=["auto", "v1", "v2"],
                   help="the agent's --backend (default %(default)s)")  # fmt: skip
    args = p.parse_args(argv)
    try:
        cg = open_cgroups(args.backend)
        changed = release_base(cg)
    except CoschedError as err:
        return report(PROG, err)
    if changed:
        print(f"{PROG}: controllers given back in {len(changed)} group(s) of /{cg.layout.base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
