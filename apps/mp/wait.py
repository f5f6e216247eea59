"""Message-waiting actions (Yu & Byun 2011 Table 1, §2.3).

* ``spin``: poll the sockets without sleeping until the message is there;
* ``block``: sleep in poll() until the kernel says a socket is ready
  (immediate blocking);
* ``spinblock``: spin for ``spin_us``, then block (Dusseau et al.'s spin-block;
  Yu & Byun 2011 set 150 µs after trying 100-300 µs on its hardware).

The sender side has ``spin`` or ``block`` for a send that does not fit in the
socket buffer. The agent chooses them per scheme through COSCHED_WAIT,
COSCHED_SEND_WAIT and COSCHED_SPIN_US (docs/cdc.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apps.mp.errors import MPError

RECV_ACTIONS = ("spin", "block", "spinblock")
SEND_ACTIONS = ("spin", "block")
DEFAULT_SPIN_US = 150.0


@dataclass(frozen=True, slots=True)
class WaitMode:
    recv: str = "spin"
    send: str = "spin"
    spin_us: float = DEFAULT_SPIN_US

    def __post_init__(self) -> None:
        if self.recv not in RECV_ACTIONS:
            raise MPError(f"receive waiting action {self.recv!r}: use one of {RECV_ACTIONS}")
        if self.send not in SEND_ACTIONS:
            raise MPError(f"send waiting action {self.send!r}: use one of {SEND_ACTIONS}")
        if not 0 <= self.spin_us <= 1e7:
            raise MPError(f"spin time {self.spin_us} us is outside 0..1e7")

    def spin_ns(self, sending: bool) -> float:
        """How long a wait spins before it blocks (inf: never blocks)."""
        action = self.send if sending else self.recv
        if action == "spin":
            return float("inf")
        if action == "block":
            return 0.0
        return self.spin_us * 1e3

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WaitMode:
        try:
            spin = float(env.get("COSCHED_SPIN_US", DEFAULT_SPIN_US))
        except ValueError:
            raise MPError(f"COSCHED_SPIN_US={env['COSCHED_SPIN_US']!r} is not a number") from None
        recv, send = env.get("COSCHED_WAIT", "spin"), env.get("COSCHED_SEND_WAIT", "spin")
        if recv not in RECV_ACTIONS:
            raise MPError(f"COSCHED_WAIT={recv!r}: use one of {', '.join(RECV_ACTIONS)}")
        if send not in SEND_ACTIONS:
            raise MPError(f"COSCHED_SEND_WAIT={send!r}: use one of {', '.join(SEND_ACTIONS)}")
        return cls(recv, send, spin)
