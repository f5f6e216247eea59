"""Message delay (apps/mp/stats.py, docs/cdc.md "MD"): measured for every receive from the
start of the wait that needed it to its completion, into the state page and the report."""

from __future__ import annotations

import time
from typing import Any

from agent import nicproto
from apps.mp import Comm
from apps.mp.stats import Stats
from tests.support.mp_helpers import spmd


def test_md_is_the_wait_for_a_late_message_and_small_for_one_already_there() -> None:
    def body(c: Comm) -> Any:
        if c.rank == 0:
            c.barrier()
            time.sleep(0.05)
            c.send(1, b"late", 1)
            c.send(1, b"early", 2)
            c.barrier()
            return None
        c.barrier()
        c.recv(0, 1)  # waits ~50 ms
        time.sleep(0.05)  # "early" is there long before it is asked for
        c.recv(0, 2)
        c.barrier()
        return list(c.stats.md_samples), nicproto.read_state(c.page.mem), c.report()

    samples, st, rep = spmd(2, body)[1]
    # two barrier releases, "late", "early"
    assert len(samples) == st.md_count == st.consumed == rep["md_count"] == 4
    late, early = samples[1], samples[2]
    assert 0.04e9 <= late <= 0.5e9
    assert early < 1e6  # matching a queued message: microseconds
    assert st.md_sum_ns == sum(samples)
    assert st.md_buckets[nicproto.md_bucket(late / 1e9)] >= 1
    assert sum(st.md_buckets) == 4
    assert rep["md_mean_us"] == round(sum(samples) / 4 / 1e3, 3)
    assert rep["md_max_us"] == round(max(samples) / 1e3, 3)
    assert rep["messages_received"] == 4 and rep["bytes_received"] == len(b"lateearly") + 2


def test_a_wait_on_a_request_completed_earlier_counts_zero() -> None:
    def body(c: Comm) -> Any:
        if c.rank == 0:
            c.send(1, b"x", 1)
            c.barrier()
            return None
        r = c.irecv(0, 1)
        c.barrier()  # the progress of the barrier completes r
        assert r.done
        c.wait(r)
        return c.stats.md_samples

    samples = spmd(2, body)[1]
    assert samples[-1] == 0


def test_report_percentiles_and_the_bounded_sample() -> None:
    s = Stats()
    for k in range(1, 101):
        s.on_receive(k * 1000)
    rep = s.summary()
    assert rep["md_count"] == 100 and rep["md_p50_us"] in (50.0, 51.0) and rep["md_p99_us"] == 99.0
    assert rep["md_mean_us"] == 50.5 and rep["md_max_us"] == 100.0
    q = rep["md_quantiles_us"]
    assert len(q) == 101 and q[0] == 1.0 and q[100] == 100.0 and q == sorted(q)
    assert q[50] == rep["md_p50_us"] and q[99] == rep["md_p99_us"]
    assert Stats().summary()["md_quantiles_us"] == []
    s.on_receive(-5)  # clock noise is never a negative delay
    assert s.md_samples[-1] == 0


def test_md_buckets_are_16_increasing_bounds_ending_at_inf() -> None:
    b = nicproto.MD_BUCKETS_S
    assert len(b) == 16 and b[-1] == float("inf") and list(b) == sorted(set(b))
    assert nicproto.md_bucket(0) == 0 and nicproto.md_bucket(b[3]) == 3
    assert nicproto.md_bucket(b[3] * 1.01) == 4 and nicproto.md_bucket(1e9) == 15
    assert nicproto.STATE_FIELDS_END == 192 <= nicproto.STATE_SIZE


def test_the_page_holds_the_ranks_message_bytes() -> None:
    """Sent and received bytes on the state page: a job's network demand (N + 1 gangs)."""
    page = bytearray(nicproto.STATE_SIZE)
    nicproto.init_state(page)
    s = Stats(page=page)
    assert nicproto.read_bytes(page) == (0, 0)
    s.on_send(100)
    s.on_send(28)
    s.on_arrival(4096, 3)
    assert nicproto.read_bytes(page) == (128, 4096) == (s.sent_bytes, s.received_bytes)
    assert nicproto.read_state(page).consumed == 0  # the fields before are untouched
