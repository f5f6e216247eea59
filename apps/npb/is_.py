"""NPB IS: parallel integer sort by buckets with an all-to-all key exchange.

Problem (NPB report RNR-94-007 §2.3, NPB 3.x ``is``): TOTAL_KEYS keys in
[0, MAX_KEY), key i = floor(MAX_KEY/4 * (r_{4i+1} + r_{4i+2} + r_{4i+3} +
r_{4i+4})) from ``randlc`` (seed 314159265), so a rank generates its own
share by skipping ahead. Iteration k (1..10) first sets key k = k and key
k + 10 = MAX_KEY - k, then ranks every key. Partial verification checks the
rank of five test keys against NPB's table (shifted by the iteration number
as the specification says); full verification checks that the keys, placed
by their ranks, are sorted across all ranks.

One ranking (NPB's MPI version): count local keys per bucket (the top bits
of a key), Allreduce the bucket sizes (with the five test keys' values
hidden behind them, as NPB does), give each rank a contiguous run of
buckets holding about TOTAL_KEYS / ranks keys, Alltoall how many keys go
where, Alltoallv the keys, and count the received keys per value: the prefix
sums are the ranks. Yu & Byun 2011 Table 2: Allreduce, Alltoall and Alltoallv, a
third of the messages each.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import numpy as np

from apps.npb.randdp import SEED, skip, vranlc
from apps.npb.runner import Kernel, Rep, entry
from apps.npb.transport import Transport

MAX_ITERATIONS = 10
TEST_ARRAY_SIZE = 5


@dataclass(frozen=True)
class IsClass:
    total_log2: int
    max_key_log2: int
    buckets_log2: int
    test_index: tuple[int, ...]
    test_rank: tuple[int, ...]

    @property
    def total(self) -> int:
        return 1 << self.total_log2

    @property
    def max_key(self) -> int:
        return 1 << self.max_key_log2

    def expected_rank(self, i: int, iteration: int, cls: str) -> int:
        """NPB's partial verification rule per class (test key i at this iteration)."""
        base = self.test_rank[i]
        if cls == "S":
            return base + iteration if i <= 2 else base - iteration
        if cls == "W":
            return base + (iteration - 2) if i < 2 else base - iteration
        # class A
        return base + (iteration - 1) if i <= 2 else base - (iteration - 1)


CLASSES = {
    "S": IsClass(16, 11, 9, (48427, 17148, 23627, 62548, 4431), (0, 18, 346, 64917, 65463)),
    "W": IsClass(
        20,
        16,
        10,
        (357773, 934767, 875723, 898999, 404505),
        (1249, 11698, 1039987, 1043896, 1048018),
    ),
    "A": IsClass(
        23,
        19,
        10,
        (2112377, 662041, 5336171, 3642833, 4250760),
        (104, 17523, 123928, 8288932, 8388264),
    ),
}


def make_keys(c: IsClass, first: int, count: int) -> np.ndarray:
    """Keys ``first`` .. ``first + count - 1`` of the global sequence (NPB ``create_seq``)."""
    r = vranlc(4 * count, skip(SEED, 4 * first)).reshape(count, 4)
    x = r[:, 0] + r[:, 1]  # NPB adds the four draws in order
    x = x + r[:, 2]
    x = x + r[:, 3]
    keys: np.ndarray = (c.max_key // 4 * x).astype(np.int32)
    return keys


class IS(Kernel):
    name = "is"

    def setup(self, t: Transport, cls: str, args: argparse.Namespace) -> None:
        self.cname = cls
        self.c = CLASSES[cls]
        self.t = t
        self.nkeys = self.c.total // t.size
        self.first = t.rank * self.nkeys
        self.keys0 = make_keys(self.c, self.first, self.nkeys)
        self.shift = self.c.max_key_log2 - self.c.buckets_log2
        self.nb = 1 << self.c.buckets_log2

    def _rank(self, keys: np.ndarray, iteration: int) -> tuple[int, np.ndarray, int]:
        """One NPB ranking; returns (partial checks passed, my received keys, my lowest key)."""
        t, c = self.t, self.c
        for g, v in ((iteration, iteration), (iteration + MAX_ITERATIONS, c.max_key - iteration)):
            if self.first <= g < self.first + self.nkeys:
                keys[g - self.first] = v
        bucket = keys >> self.shift
        counts = np.bincount(bucket, minlength=self.nb).astype(np.int32)
        hidden = np.zeros(TEST_ARRAY_SIZE, dtype=np.int32)
        for i, g in enumerate(c.test_index):
            if self.first <= g < self.first + self.nkeys:
                hidden[i] = keys[g - self.first]
        totals = t.allreduce(np.concatenate([counts, hidden]), "sum", "buckets")
        btot, test_keys = totals[: self.nb], totals[self.nb :]
        # Rank j takes the buckets from where rank j-1 stopped until it holds >= (j+1) shares.
        cum = np.cumsum(btot.astype(np.int64))
        share = c.total // t.size
        ends = np.searchsorted(cum, share * np.arange(1, t.size + 1), side="left") + 1
        ends[-1] = self.nb
        ends = np.maximum.accumulate(np.minimum(ends, self.nb))
        starts = np.concatenate([[0], ends[:-1]])
        order = np.argsort(bucket, kind="stable")
        sorted_keys = keys[order]
        lcum = np.concatenate([[0], np.cumsum(counts.astype(np.int64))])
        blocks = [sorted_keys[lcum[s] : lcum[e]] for s, e in zip(starts, ends, strict=True)]
        send_counts = np.array([[b.size] for b in blocks], dtype=np.int32)
        recv_counts = t.alltoall(send_counts, "counts")[:, 0]
        got = t.alltoallv(blocks, recv_counts.tolist(), "keys")
        mine = np.concatenate(got) if got else np.zeros(0, dtype=np.int32)
        lo = int(starts[t.rank]) << self.shift
        hi = int(ends[t.rank]) << self.shift
        lesser = int(cum[starts[t.rank] - 1]) if starts[t.rank] > 0 else 0
        # key_buff: count per value in my range; prefix sums = ranks (keys below each value).
        per_value = np.bincount(mine - lo, minlength=hi - lo)
        below = lesser + np.concatenate([[0], np.cumsum(per_value)])  # below[v - lo]: keys < v
        passed = 0
        for i in range(TEST_ARRAY_SIZE):
            k = int(test_keys[i])
            if lo <= k < hi:
                key_rank = int(below[k - lo])
                if key_rank == c.expected_rank(i, iteration, self.cname):
                    passed += 1
        return passed, mine, lesser

    def rep(self, t: Transport) -> Rep:
        keys = self.keys0.copy()
        passed = 0
        mine = np.zeros(0, dtype=np.int32)
        for it in range(1, MAX_ITERATIONS + 1):
            t.mark("iter")
            p, mine, _ = self._rank(keys, it)
            passed += p
        t.mark("post")
        # Full verification: my keys sorted (placed by their ranks), and my lowest key not
        # below the previous rank's highest (one key to the next rank, NPB's full_verify).
        srt = np.sort(mine, kind="stable")
        errors = int(np.count_nonzero(srt[1:] < srt[:-1]))
        if t.size > 1:
            req = t.irecv(t.rank - 1, 50, 1, np.int32) if t.rank > 0 else None
            if t.rank < t.size - 1:
                last = srt[-1:] if srt.size else np.array([-1], dtype=np.int32)
                t.send(t.rank + 1, last.astype(np.int32), 50, "verify")
            if req is not None:
                prev = t.wait(req)
                assert prev is not None
                if srt.size and int(prev[0]) > int(srt[0]):
                    errors += 1
        res = t.allreduce(np.array([passed, errors, srt.size], dtype=np.int64), "sum", "verify")
        passed_all, errors_all, nkeys_all = (int(v) for v in res)
        full_ok = errors_all == 0 and nkeys_all == self.c.total
        verified = passed_all == TEST_ARRAY_SIZE * MAX_ITERATIONS and full_ok
        detail: dict[str, Any] = {
            "partial_passed": passed_all,
            "partial_expected": TEST_ARRAY_SIZE * MAX_ITERATIONS,
            "full_verify_errors": errors_all,
            "keys_ranked": nkeys_all,
        }
        return Rep(MAX_ITERATIONS, verified, detail)

    def text(self, rep: Rep) -> list[str]:
        d = rep.detail
        return [
            f" Partial checks  =  {d['partial_passed']} of {d['partial_expected']}",
            f" Full verify     =  {d['full_verify_errors']} keys out of order, "
            f"{d['keys_ranked']} keys",
        ]


main = entry(IS())

if __name__ == "__main__":
    main()
