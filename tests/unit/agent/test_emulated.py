"""Emulated agents (agent/emulated.py) driven by the real controller core:
the pure checks; the 64-node smoke version of benchmarks/control_scale.py (issue 15)
is in tests/live/agent/test_emulated.py."""

from __future__ import annotations

import pytest

from agent.emulated import EmulationError, capacity


def test_too_many_nodes_is_one_line_with_the_limit() -> None:
    with pytest.raises(EmulationError) as e:
        capacity(10**8)
    msg = str(e.value)
    assert "at most" in msg and ("RLIMIT_NOFILE" in msg or "MiB" in msg)


def test_the_emulated_hosts_own_state_file_is_a_cluster_the_controller_reads() -> None:
    # `python -m agent.emulated --state` marks its file `"emulated": true`; the
    # controller read that as a relay table and stopped ("'bool' object has no
    # attribute 'get'"); `cluster up --emulated-nodes` writes a table.
    from controller.daemon import nodes_from_cluster, relays_from_cluster

    own = {"emulated": True, "nodes": [{"name": "n0", "ctl_ip": "127.0.0.1", "agent_port": 23000}]}
    assert relays_from_cluster(own) == []
    assert nodes_from_cluster(own)[0].address == ("127.0.0.1", 23000)
    cli = {
        "emulated": {"relays": [{"name": "r0", "ctl_ip": "127.0.0.1", "port": 1, "nodes": ["n0"]}]},
        "nodes": own["nodes"],
    }
    assert [r.name for r in relays_from_cluster(cli)] == ["r0"]
