"""A relay passes a quantum's ``measure`` (the devices whose bytes the acks carry) on to
its agents, and leaves it out where the controller did (issue 32)."""

from __future__ import annotations

from typing import Any

from controller.nodes import NodeInfo, QuantumResult
from controller.relay import Relay, RelayConfig

KEY = b"k" * 32


class _Pool:
    def __init__(self) -> None:
        self.nodes = [NodeInfo("n0", ("127.0.0.1", 1), "10.0.0.1")]
        self.clients: dict[str, object] = {"n0": object()}
        self.measures: list[Any] = []

    def quantum(self, q: int, commands: dict[str, Any], at: float | None = None,
                start: float | None = None, measure: Any = None) -> dict[str, Any]:  # fmt: skip
        self.measures.append(measure)
        return {n: QuantumResult(n, {"q": q, "cpu_ns": {}}, None, 1) for n in commands}


def test_the_relay_passes_measure_on() -> None:
    r = Relay(RelayConfig("r0", ("127.0.0.1", 1), [], KEY))
    pool = _Pool()
    r.pool = pool  # type: ignore[assignment]
    batch: dict[str, Any] = {"q": 1, "start": 0.0, "commands": {"n0": {"1": 100}}}
    r._on_batch(dict(batch, measure=[]))
    r._on_batch(dict(batch, measure=["disk"]))
    r._on_batch(batch)  # an older controller: the agents read every device
    assert pool.measures == [[], ["disk"], None]
