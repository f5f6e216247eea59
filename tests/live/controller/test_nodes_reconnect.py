"""The controller's agent pool reconnects in the background (issue 13, partition test):
an agent that accepts but never answers (a node cut off, a hung agent) must not stall
the quantum loop for the connect timeout on every retry."""

from __future__ import annotations

import socket
import time

from common.ports import free_port
from controller.nodes import AgentPool, NodeInfo


def test_maintain_does_not_block_on_an_agent_that_never_answers() -> None:
    with socket.socket() as silent:  # the kernel completes the handshake; nobody replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        node = NodeInfo("n0", silent.getsockname(), "10.0.0.1")
        pool = AgentPool([node], b"k" * 32, timeout=2.0)
        try:
            t0 = time.monotonic()
            pool.maintain()
            took = time.monotonic() - t0
            assert took < 0.5, f"maintain blocked {took:.2f} s (the hello waits 2 s)"
            assert pool.connected() == {"n0": False}
            # the attempt fails in its thread after the timeout and is collected later
            end = time.monotonic() + 5
            while "n0" in pool._connecting:
                assert time.monotonic() < end
                time.sleep(0.05)
                pool._collect_connections()
            assert pool.connected() == {"n0": False}
            assert pool._last_error["n0"]
        finally:
            pool.close()


def test_connect_all_with_some_missing_returns_them_unless_all_required() -> None:
    import pytest

    from controller.nodes import AgentsUnreachable

    port = free_port()  # nobody listens (below the ephemeral range: no self-connect)
    pool = AgentPool([NodeInfo("n0", ("127.0.0.1", port), "10.0.0.1")], b"k" * 32, timeout=0.2)
    try:
        # none answers: refused either way (a controller with no node stops, one line)
        with pytest.raises(AgentsUnreachable, match=r"agent n0 at 127\.0\.0\.1"):
            pool.connect_all(0.2, require_all=False)
        assert "agent n0 at 127.0.0.1:" in pool.unreachable_line(["n0"])
    finally:
        pool.close()
