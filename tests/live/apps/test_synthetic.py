"""The tests of tests/unit/apps/test_synthetic.py that start processes or sockets."""

from __future__ import annotations

import threading

from apps.synthetic import (
    run,
)
from common.ports import free_port
from tests.support.apps import synthetic_cfg


def test_ranks_communicate_through_the_library_and_agree_on_stop() -> None:
    port = free_port()
    out: dict[int, dict[str, object]] = {}

    def rank(r: int) -> None:
        env = {"COSCHED_RANK": str(r), "COSCHED_SIZE": "3", "COSCHED_PORT": str(port)}
        argv = ["--duration", "0.2", "--gcomp", "2000", "--comm", "nn", "--msg-bytes", "100"]
        out[r] = run(synthetic_cfg(argv, env))

    ts = [threading.Thread(target=rank, args=(r,)) for r in (2, 0, 1)]  # any start order
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    counts = {r: res["barriers"] for r, res in out.items()}
    assert len(counts) == 3 and len(set(counts.values())) == 1  # the same barrier stops all
    msgs = out[1]["messages"]
    assert isinstance(msgs, dict)
    # each iteration: 2 neighbour messages + the barrier's arrive and release
    assert msgs["messages_received"] == 3 * counts[1]
    assert msgs["md_count"] == msgs["messages_received"]
