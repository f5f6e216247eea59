"""The tests of tests/unit/apps/mp/test_linkemu.py that start processes or sockets (tests/live/)."""

from __future__ import annotations

import time

from apps.mp import Comm, LinkEmu, WaitMode
from tests.support.mp_helpers import RankProcess, listeners

DELAY_US = 5000.0


def _rtts(link: LinkEmu | None, rounds: int = 30) -> list[float]:
    """Round trips (s, sorted) between this process (rank 0) and an echoing rank 1 process."""
    base, socks = listeners(1)
    env = {"COSCHED_WAIT": "block", "COSCHED_SEND_WAIT": "block"}
    if link is not None:
        env["COSCHED_NET_DELAY_US"] = str(link.delay_us)
    child = RankProcess("echo", 1, 2, base, env)
    try:
        wait = WaitMode("block", "block")
        with Comm(0, 2, port=base, job="t", listener=socks[0], wait=wait, link=link) as c:
            child.line()
            times = []
            for k in range(rounds + 3):
                t0 = time.perf_counter()
                c.send(1, b"ping")
                c.recv(1)
                if k >= 3:  # the first ones warm up
                    times.append(time.perf_counter() - t0)
            c.send(1, b"", 9)
            rc, err = child.finish()
        assert rc == 0, err
    finally:
        child.kill()
    return sorted(times)


def test_injected_delay_is_within_ten_percent_of_the_configured_delay() -> None:
    base = _rtts(None)
    delayed = _rtts(LinkEmu(delay_us=DELAY_US))
    # never early: each direction is held until send time + delay
    assert delayed[0] >= 2 * DELAY_US / 1e6, delayed[:3]
    # both directions are delayed; this run's own unshaped round trip is the reference.
    # The lower quartile, as a loaded machine only ever adds (descheduled ranks).
    q = len(base) // 4
    one_way = (delayed[q] - base[q]) / 2
    assert abs(one_way * 1e6 - DELAY_US) <= 0.1 * DELAY_US, (base[q], delayed[q])
