"""What tests/unit/testbed/test_monitor.py
and tests/live/testbed/test_monitor.py share."""

from __future__ import annotations

from testbed.cluster.agents import agent_command
from testbed.cluster.state import AgentRecord, ClusterState


def cluster(nodes: int = 2, metrics: bool = True) -> ClusterState:
    st = ClusterState(status="up")
    st.addresses = {"host_ctl_ip": "10.212.0.254"}
    for i in range(nodes):
        name, ip = f"n{i}", f"10.212.0.{i + 1}"
        st.nodes.append({"name": name, "ctl_ip": ip})
        cmd = agent_command(name, ip, "/k", f"cosched/{name}")
        if not metrics:
            j = cmd.index("--metrics")
            del cmd[j : j + 2]
        st.agents.append(AgentRecord(name, 1000 + i, 0.0, cmd, "/dev/null"))
    return st
