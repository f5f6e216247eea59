"""The reproduction ledger, docs/reproduction.md: every result of the five papers' evaluations
beside ours, generated from the committed results (``cosched experiment ledger``).

:data:`ROWS` lists, paper by paper, each result the evaluation reports (a figure, a table or
a stated claim, with its section) and either the claims (testbed/experiment/claims.py) that
measure it in a committed results file, or why it was not attempted. The verdicts are the
claims' own, by claims.RULES; a row measured in several configurations takes the worst.
A test regenerates the ledger and fails when the committed file differs, or when a row
names a claim its results file does not hold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testbed.experiment import claims as claims_mod
from testbed.experiment import pipeline, registry
from testbed.experiment.claims import Claim, Verdict
from testbed.experiment.results import REPO, ResultsError

DEFAULT_OUT = REPO / "docs" / "reproduction.md"
DEFAULT_RESULTS = REPO / "docs" / "results"


@dataclass(frozen=True)
class Row:
    """One result of a paper's evaluation."""

    where: str  # section, figure or table
    says: str  # the result, as the paper states it
    source: str = ""  # the results folder under docs/results holding our claims
    claims: tuple[str, ...] = ()  # claim ids in that folder's results.json
    not_attempted: str = ""  # why no committed result measures it
    note: str = ""  # how our measurement differs from the paper's


W = "paired-vs-gang-2node"
S = "paired-scale-fig10-12"  # issue 25: the paper's scale, five seeds
T = "paired-trace-fig3-13"  # issue 25: Figs. 3 and 13
TN = "in the simulator, five seeds jittering the copies"
TL = "live: 2 nodes at 1 s quanta, repeated runs alternating which setting runs first"
SN = "at the paper's scale: 16 nodes, 1,000 jobs, five seeds, the execution model of issue 25"
P = "paired-placement"  # issue 25: the matrix's placement rule
PN = (
    SN + "; gangs placed in aligned power-of-two blocks (the buddy system of Feitelson & "
    "Rudolph's DHC; the paper does not state ParPar's rule) instead of first-fit"
)
CS = "cdc-paper-scale"  # issue 24: the CDC simulator at the paper's node count and speeds
CSN = (
    "in the simulator: 16 nodes at the paper's two speeds, five seeds; 20-job streams "
    "(the paper: 100), SB, HYBRID and CC-B only"
)
CH = "cdc-paper-scale-heavy100"  # issue 24: the same at the paper's 100-job streams
CHN = (
    "in the simulator: 16 nodes at the paper's two speeds; 100-job streams (heavy load, "
    "wait-dominated as the paper's), SB, HYBRID and CC-B only; fluid mode's whole_reps "
    "and past_queued options, whose error against the default fluid mode on the 20-job "
    "streams is in docs/results/cdc-paper-scale-subset-approx/compare.txt"
)
CF = "cdc-paper-scale-fig9"  # issue 24: Fig. 9's WL5, 50 CG jobs at once
CFN = (
    "in the simulator: 16 nodes at the paper's two speeds; WL5's 50 CG jobs at once, MPL 5, "
    "SB, HYBRID and CC-B only, seeds 1-3 (the paper: one run); fluid mode's whole_reps "
    "option (past_queued has nothing to act on when every job arrives at once)"
)


def _sim_fig7_8(source: str, size: str, note: str) -> tuple[Row, ...]:
    """Fig. 7(a)'s and 8(a)'s claims as the CDC simulator's study ``source`` judges them."""
    return (
        Row("§5.3, Fig. 7(a)", "CC-B reduces the response time by up to 36.6 % against SB "
            f"(tolerance: at least half of it), simulated{size}", source,
            ("yb2011/sim/cc-b-vs-sb-avg-response-time-heavy-load",), note=note),
        Row("§5.3, Fig. 7(a)", f"…and by up to 24.7 % against HYBRID, simulated{size}", source,
            ("yb2011/sim/cc-b-vs-hybrid-avg-response-time-heavy-load",), note=note),
        Row("§5.3, Fig. 8(a)", "CC-B reduces the BCR by up to 22 % and the MD by up to 25 % "
            f"against SB, simulated{size}", source,
            ("yb2011/sim/cc-b-vs-sb-bcr-heavy-load", "yb2011/sim/cc-b-vs-sb-md-heavy-load"),
            note=note),
    )  # fmt: skip


Q7 = ("paired-fig7-q1-quiet", "paired-fig7-q1-quiet-2")  # issue 25: Fig. 7 live, paper's way
Q8 = "paired-fig8-q1"  # issue 25: Fig. 8 live at 2, 4 and 8 nodes, 1 s quanta
QN = (
    "live as the paper ran it: 1 s quanta, one I/O device per node that the node's jobs "
    "share (the paper's local disk); 2 nodes with a core each, the host quiet; run {k} of "
    "two (mix 1 across the runs: docs/results/paired-fig7-q1-quiet-2/mix1_pairing.txt)"
)
Q8N = (
    "live at 1 s quanta with a shared I/O device per node, 2, 4 and 8 nodes sharing this "
    "host's 2 cores (the paper: 2, 4, 8, 12 PCs); one run per size"
)


def _live_fig7(source: str, note: str) -> tuple[Row, ...]:
    """Fig. 7's claims (top and bottom) as a live run of the paired-live study judges them."""
    top = (
        ("mix0", "with compute-bound jobs only, no meaningful difference between paired and "
         "strict gang"),
        ("compute-gain", "compute-bound jobs progress faster beside I/O-bound ones, "
         "especially with two or three I/O-bound jobs"),
        ("io-gain", "I/O-bound jobs progress faster, especially with two or three "
         "compute-bound jobs"),
        ("io-several", "several I/O-bound jobs gain little: they contend for the disk"),
        ("mix1-io", "one I/O-bound job among three compute-bound ones advances almost four "
         "times faster (tolerance: at least 3×)"),
        ("mix1-compute", "…without compromising the compute-bound jobs (tolerance: a loss of "
         "at most 10 %)"),
    )  # fmt: skip
    return (
        *(Row("§4.1.2, Fig. 7 top", says + ", at the paper's quanta", source,
              tuple(f"wf2003/fig7/{cid}/{c}" for c in ("paired-fig4-prose", "paired-best-fit")),
              note=note) for cid, says in top),
        *(Row("§4.1.2, Fig. 7 bottom", f"best-fit matching, mix {m}: the slots' shares of "
              "matching the paper explains (tolerance: 10 points per slot), at the paper's "
              "quanta", source, (f"wf2003/fig7-bottom/best-fit-mix{m}",), note=note)
          for m in (1, 2, 3, 4)),
        Row("§4.1.2, Fig. 7 bottom", "Fig. 4's matching spreads the matching much more "
            "equitably over the slots, at the paper's quanta", source,
            ("wf2003/fig7-bottom/fig4-equitable",), note=note),
    )  # fmt: skip


def _live_fig8(source: str, note: str) -> tuple[Row, ...]:
    """Fig. 8's claims as a live run of the paired-live study at several sizes judges them."""
    return (
        Row("§4.1.2, Fig. 8", "with compute-bound jobs only, the cluster's size has no real "
            "impact, at the paper's quanta", source,
            ("wf2003/fig8/compute-only/paired-fig4-prose",), note=note),
        Row("§4.1.2, Fig. 8", "the I/O-bound jobs' rate falls as the cluster grows, at the "
            "paper's quanta", source, ("wf2003/fig8/io-falls",), note=note),
        Row("§4.1.2, Fig. 8", "with enough I/O-bound jobs, the compute-bound jobs' rate rises "
            "with the size, at the paper's quanta", source,
            ("wf2003/fig8/compute-rises/paired-fig4-prose",), note=note),
    )  # fmt: skip


PAPERS: dict[str, tuple[Row, ...]] = {
    "Wiseman & Feitelson 2003": (
        Row("§2.3, Fig. 3", "eq. (1)'s prediction follows a job's measured CPU utilization",
            T, ("wiseman2003/fig3/prediction",),
            note="one live run on 2 nodes at 1 s quanta, the host quiet"),
        Row("§4.1.2, Fig. 7 top", "with compute-bound jobs only, no meaningful difference "
            "between paired and strict gang", W,
            tuple(f"wf2003/fig7/mix0/{c}" for c in ("paired-fig4", "paired-fig4-prose",
                                                     "paired-best-fit")),
            note="2 nodes with a core each (the paper: 8 PCs)"),
        Row("§4.1.2, Fig. 7 top", "compute-bound jobs progress faster beside I/O-bound ones, "
            "especially with two or three I/O-bound jobs", W,
            tuple(f"wf2003/fig7/compute-gain/{c}" for c in ("paired-fig4", "paired-fig4-prose",
                                                             "paired-best-fit"))),
        Row("§4.1.2, Fig. 7 top", "I/O-bound jobs progress faster, especially with two or "
            "three compute-bound jobs", W,
            tuple(f"wf2003/fig7/io-gain/{c}" for c in ("paired-fig4", "paired-fig4-prose",
                                                        "paired-best-fit"))),
        Row("§4.1.2, Fig. 7 top", "several I/O-bound jobs gain little: they contend for the "
            "disk", W,
            tuple(f"wf2003/fig7/io-several/{c}" for c in ("paired-fig4", "paired-fig4-prose",
                                                           "paired-best-fit")),
            note="our emulated devices are per-rank waits that never contend"),
        Row("§4.1.2, Fig. 7 top", "one I/O-bound job among three compute-bound ones advances "
            "almost four times faster (tolerance: at least 3×)", W,
            tuple(f"wf2003/fig7/mix1-io/{c}" for c in ("paired-fig4", "paired-fig4-prose",
                                                        "paired-best-fit"))),
        Row("§4.1.2, Fig. 7 top", "…without compromising the compute-bound jobs (tolerance: "
            "a loss of at most 10 %)", W,
            tuple(f"wf2003/fig7/mix1-compute/{c}" for c in ("paired-fig4", "paired-fig4-prose",
                                                             "paired-best-fit"))),
        *(Row("§4.1.2, Fig. 7 bottom", f"best-fit matching, mix {m}: the slots' shares of "
              "matching the paper explains (tolerance: 10 points per slot)", W,
              (f"wf2003/fig7-bottom/best-fit-mix{m}",)) for m in (1, 2, 3, 4)),
        Row("§4.1.2, Fig. 7 bottom", "Fig. 4's matching spreads the matching much more "
            "equitably over the slots", W, ("wf2003/fig7-bottom/fig4-equitable",)),
        Row("§4.1.2, Fig. 7", "…with no harm to the barriers per second: the total is very "
            "similar to best fit's",
            not_attempted="the rates of both are in the report, but no claim compares totals"),
        *(row for k, q in enumerate(Q7, 1) for row in _live_fig7(q, QN.format(k=k))),
        Row("§4.1.2, Fig. 8", "with compute-bound jobs only, the cluster's size has no real "
            "impact", "paired-vs-gang/fig8", ("wf2003/fig8/compute-only/paired-fig4-prose",),
            note="2 and 4 nodes on 2 cores (the paper: 2, 4, 8, 12 PCs)"),
        Row("§4.1.2, Fig. 8", "the I/O-bound jobs' rate falls as the cluster grows (one I/O "
            "server)", "paired-vs-gang/fig8", ("wf2003/fig8/io-falls",),
            note="no shared I/O server here: each rank's device is its own wait"),
        Row("§4.1.2, Fig. 8", "with enough I/O-bound jobs, the compute-bound jobs' rate rises "
            "with the size", "paired-vs-gang/fig8",
            ("wf2003/fig8/compute-rises/paired-fig4-prose",)),
        *_live_fig8(Q8, Q8N),
        Row("§4.1.2, Fig. 9", "the granularity has little impact on the rate of progress",
            "paired-vs-gang/fig9", ("wf2003/fig9/granularity/paired-fig4-prose",)),
        Row("§4.2.1, Fig. 10", "at load 0.5 paired gang's response time is about twice faster "
            "(tolerance ±10 %)", "sim-paired-fig10-12", ("wf2003/fig10/ratio-0.5",),
            note="in the simulator with the execution model measured live; the paper ran ParPar"),
        Row("§4.2.1, Fig. 10", "at load 0.95 nearly six times faster (tolerance ±10 %)",
            "sim-paired-fig10-12", ("wf2003/fig10/ratio-0.95",)),
        Row("§4.2.1, Fig. 10", "the heavier the load, the larger paired gang's advantage",
            "sim-paired-fig10-12", ("wf2003/fig10/ratio-grows",)),
        Row("§4.2.1, Fig. 11", "strict gang saturates at loads 0.9 and 0.95: the jobs in the "
            "system rise", "sim-paired-fig10-12",
            ("wf2003/fig11/gang-saturates-0.9", "wf2003/fig11/gang-saturates-0.95")),
        Row("§4.2.1, Fig. 11", "paired gang does not saturate even at 0.95",
            "sim-paired-fig10-12", ("wf2003/fig11/paired-no-saturation",)),
        Row("§4.2.2, Figs. 10, 12", "with heterogeneous jobs the performance is similar to "
            "the homogeneous case (tolerance ±15 %)", "sim-paired-fig10-12",
            ("wf2003/fig12/hetero-like-homo",)),
        *(Row(where, says + " (tolerance ±25 %)" * tol, S, (f"wiseman2003/{cid}",), note=SN)
          for where, says, cid, tol in (
              ("§4.2.1, Fig. 10", "at load 0.5 paired gang's response time is about twice "
               "faster", "fig10/ratio-0.5", True),
              ("§4.2.1, Fig. 10", "at load 0.95 nearly six times faster", "fig10/ratio-0.95",
               True),
              ("§4.2.1, Fig. 10", "the heavier the load, the larger paired gang's advantage",
               "fig10/ratio-grows", False),
              ("§4.2.1, Fig. 10", "paired gang's response time and slowdown below strict "
               "gang's", "fig10/paired-faster", False),
              ("§4.2.1, Fig. 11", "above 0.6-0.7 strict gang has dozens of jobs left at the "
               "last arrival", "fig11/dozens-left", False),
              ("§4.2.1, Fig. 11", "at 0.95 strict gang drains for over three hours",
               "fig11/drain-0.95", False),
              ("§4.2.1, Fig. 11", "strict gang saturates at 0.9: the jobs in the system rise",
               "fig11/saturates-0.9", False),
              ("§4.2.1, Fig. 11", "strict gang saturates at 0.95: the jobs in the system rise",
               "fig11/saturates-0.95", False),
              ("§4.2.1, Fig. 11", "paired gang does not saturate even at 0.95",
               "fig11/paired-no-saturation", False),
              ("§4.2.2, Figs. 10, 12", "with heterogeneous jobs the performance is similar "
               "to the homogeneous case", "fig12/hetero-similar", False),
              ("§4.2", "an experiment took 8-11 hours, longer at lower loads",
               "s4.2/run-length", False),
          )),
        *(Row("§4.2.1, Fig. 10", f"at load {load} paired gang's response time is {says} "
              "faster (tolerance ±25 %)", P, (f"wiseman2003/fig10/ratio-{load}-buddy",),
              note=PN)
          for load, says in (("0.5", "about twice"), ("0.95", "nearly six times"))),
        Row("§4.2.3, Fig. 13(a)", "four QCRD copies: high-CPU phases run alone, low-CPU phases "
            "pair", T, ("wiseman2003/fig13/cpu-alone",), note=TN),
        Row("§4.2.3, Fig. 13(a)", "four QCRD copies: high-CPU phases run alone, low-CPU phases "
            "pair", T, ("wiseman2003/fig13/cpu-alone-live",), note=TL),
        Row("§4.2.3, Fig. 13(b)", "detecting sharp changes lengthens the response time by about "
            "1 %", T, ("wiseman2003/fig13/sharp-change-cost",), note=TN),
        Row("§4.2.3, Fig. 13(b)", "detecting sharp changes lengthens the response time by about "
            "1 %", T, ("wiseman2003/fig13/sharp-change-cost-live",), note=TL),
        Row("§4.2.3, Fig. 14", "QCRD-like jobs at load 0.8: paired gang halves the mean "
            "response of strict gang", S, ("wiseman2003/fig14/qcrd-halved",), note=SN),
    ),
    "Rajaei et al. 2008": (
        *(Row("§6, Fig. 5", "gang's makespan is always below lookahead backfilling's",
              "rajaei-gang-vs-backfill", (f"rajaei2008/fig5/{g}",),
              note=f"{g}, over 10-2,000 jobs and the measured switch-cost range")
          for g in ("gang-greedy", "gang-backfill")),
        Row("§6, Fig. 5 (live)", "the same, on 16 jobs on the local cluster", "rajaei-live",
            ("rajaei2008/live/fig5",)),
        Row("§6, Fig. 5", "gang with greedy admission seems superior to gang with backfilling "
            "admission", "rajaei-gang-vs-backfill", ("rajaei2008/greedy/gang-greedy",)),
        Row("§6, Fig. 5 (live)", "the same, live", "rajaei-live", ("rajaei2008/live/greedy",)),
        Row("§6, Fig. 5", "with few jobs, gang with backfilling coalesces with greedy gang",
            not_attempted="not judged separately (the Fig. 5 table shows it: equal at 10 jobs)"),
        *(Row("§6, Fig. 6", "gang's mean wait is far less than lookahead backfilling's, whose "
              "wait grows faster with the number of jobs", "rajaei-gang-vs-backfill",
              (f"rajaei2008/fig6/{g}",), note=g) for g in ("gang-greedy", "gang-backfill")),
        Row("§6, Fig. 6 (live)", "gang's wait below lookahead's, live", "rajaei-live",
            ("rajaei2008/live/fig6",)),
        *(Row("§6, Fig. 7", "with 80 jobs, later arrivals wait longer under backfilling; gang's "
              "waits stay consistently lower", "rajaei-gang-vs-backfill",
              (f"rajaei2008/fig7/{g}",), note=g) for g in ("gang-greedy", "gang-backfill")),
        *(Row("§6, Fig. 8", "makespan improves appreciably from 1 to 5 slots and tends to "
              "worsen beyond 5 (by about 10 ticks)", "rajaei-gang-vs-backfill",
              (f"rajaei2008/fig8/{g}",), note=g) for g in ("gang-greedy", "gang-backfill")),
        *(Row("§6, Fig. 9", "mean wait decreases significantly from 1 to 5 slots",
              "rajaei-gang-vs-backfill", (f"rajaei2008/fig9/{g}",), note=g)
          for g in ("gang-greedy", "gang-backfill")),
        Row("§6, Fig. 9 (live)", "the same, live (1 vs 3 slots)", "rajaei-live",
            ("rajaei2008/live/fig9",)),
        Row("§6", "communication-oriented vs compute-intensive jobs",
            not_attempted="named as a parameter studied; the paper reports no result for it"),
    ),
    "Yu & Byun 2011": (
        Row("§5.3, Fig. 7", "every scheme's response time is much longer under heavy load",
            "cdc-policies", ("yb2011/fig7/heavy-above-light",),
            note="20 jobs of a WL6-like stream on 4 half-core nodes (the paper: 100 jobs, 16 "
            "nodes)"),
        Row("§5.3, Fig. 7", "LOCAL shows the worst response times", "cdc-policies",
            ("yb2011/fig7/local-worst",)),
        Row("§5.3, Fig. 7", "DCS follows next", "cdc-policies", ("yb2011/fig7/dcs-next",)),
        Row("§5.3, Fig. 7", "of the other six, BATCH generally gives the next highest",
            "cdc-policies", ("yb2011/fig7/batch-next",)),
        Row("§5.3, Fig. 7", "the blocking schemes (SB, HYBRID, CC-B) outperform the spinning "
            "ones (LOCAL, DCS, PB, CC-S) in all cases", "cdc-policies",
            ("yb2011/fig7/blocking-beats-spinning",)),
        Row("§5.3, Fig. 7", "CC-B performs the best of all schemes", "cdc-policies",
            ("yb2011/fig7/ccb-best",)),
        Row("§5.3, Fig. 7", "CC-S improves over the other spinning schemes", "cdc-policies",
            ("yb2011/fig7/ccs-best-spinning",)),
        Row("§5.3, Fig. 7(a)", "CC-B reduces the response time by up to 36.6 % against SB "
            "(tolerance: at least half of it)", "cdc-policies",
            ("yb2011/fig7a/cc-b-vs-sb-response",)),
        Row("§5.3, Fig. 7(a)", "…and by up to 24.7 % against HYBRID", "cdc-policies",
            ("yb2011/fig7a/cc-b-vs-hybrid-response",)),
        Row("§5.3, Fig. 7(a)", "CC-S by up to 8.02 % against PB", "cdc-policies",
            ("yb2011/fig7a/cc-s-vs-pb-response",)),
        *_sim_fig7_8(CS, "", CSN),
        *_sim_fig7_8(CH, " at 100 jobs", CHN),
        Row("§5.3, Fig. 8", "the load does not change DCS's and PB's BCR and MD",
            "cdc-policies", ("yb2011/fig8/dcs-pb-bcr-load", "yb2011/fig8/dcs-pb-md-load")),
        Row("§5.3, Fig. 8", "the BCR and MD of DCS, PB and CC-S are larger than those of SB, "
            "HYBRID and CC-B", "cdc-policies",
            ("yb2011/fig8/spinning-bcr-higher", "yb2011/fig8/spinning-md-higher")),
        Row("§5.3, Fig. 8(a)", "CC-B reduces the BCR by up to 22 % and the MD by up to 25 % "
            "against SB", "cdc-policies",
            ("yb2011/fig8a/cc-b-vs-sb-bcr", "yb2011/fig8a/cc-b-vs-sb-md")),
        Row("§5.4, Fig. 9", "CC-B and CC-S always outperform the other blocking and spinning "
            "schemes in execution time, CC-B best across WL1-WL5",
            not_attempted="WL1-WL5 with 50 identical jobs each were not run "
            "(experiments/cdc-npb.toml can run any WLn with the real kernels)"),
        Row("§5.4, Fig. 9", "the benefit of CC grows with the communication intensity "
            "(WL1 < … < WL5)", not_attempted="WL1-WL5 were not run"),
        Row("§5.4, Fig. 9", "WL5 (CG): CC-B's execution time up to 26.8 % below SB's and 13.6 % "
            "below HYBRID's", "cdc-policies",
            ("yb2011/fig9-wl5/cc-b-vs-sb-exec", "yb2011/fig9-wl5/cc-b-vs-hybrid-exec"),
            note="our stand-in: the CG jobs of the WL6 stream, not 50 CG jobs at once"),
        Row("§5.4, Fig. 9", "WL5 (CG): CC-B's execution time up to 26.8 % below SB's and 13.6 % "
            "below HYBRID's, simulated with 50 CG jobs at once", CF,
            ("yb2011/sim/cc-b-vs-sb-avg-execution-time-of-cg",
             "yb2011/sim/cc-b-vs-hybrid-avg-execution-time-of-cg"), note=CFN),
        Row("§5.5, Fig. 10", "from MPL 3 to 5 every scheme's execution time is prolonged",
            "cdc-policies", ("yb2011/fig10/exec-rises-with-mpl",)),
        Row("§5.5, Fig. 10", "LOCAL and DCS increase steeply, the others are more tolerant",
            "cdc-policies", ("yb2011/fig10/local-dcs-steep",)),
        Row("§5.5, Fig. 10", "except LOCAL and DCS, the response time falls with the MPL",
            "cdc-policies", ("yb2011/fig10/response-falls-with-mpl",)),
        Row("§5.5, Fig. 10", "the CC schemes outperform the others at all MPLs", "cdc-policies",
            ("yb2011/fig10/cc-best-all-mpls",)),
        Row("§5.5, Fig. 10", "at MPL 3 the CC schemes reduce the response time by up to 20.3 %",
            "cdc-policies", ("yb2011/fig10/cc-vs-other-cdc-schemes-response",),
            note="ours: the faster CC scheme against the fastest other"),
        Row("§5.5, Fig. 11", "CC's improvement in MD grows with the MPL", "cdc-policies",
            ("yb2011/fig11/md-gain-grows",)),
    ),
    "Gorda & Brooks 1991": (
        Row("§4", "the gang scheduler has been exceptionally stable; no significant "
            "performance bottleneck; the client socket interface is no problem",
            not_attempted="a production system's experience; cosched's equivalents are its "
            "soak and fault tests (docs/security.md), not a reproduction"),
        Row("§4, Fig. 10", "of 35,848 job requests, more than 70 % ran on fewer than 32 "
            "processors; sizes cluster at squares and powers of two",
            not_attempted="a statistic of LLNL's logs; nothing to rerun"),
        Row("§4, Fig. 11", "job arrivals cluster in the late morning and early afternoon",
            not_attempted="a statistic of LLNL's logs"),
        Row("§4, Fig. 12", "the time a job waits swapped out tracks its running time",
            not_attempted="a statistic of LLNL's logs"),
    ),
    "Feitelson & Rudolph 1996": (
        Row("§3.1, Table 1", "the expected load per PE: root 2.57, cube 2.61, ring 2.88, "
            "random 3.01, none 3.30 (load 0.645, any thread, harmonic; tolerance ±10 %)",
            "dhc-table1", tuple(f"fr1996/table1/{b}" for b in
                                ("root", "cube", "ring", "random", "none")),
            note="6,000 gangs per run, three seeds"),
        Row("§3.1, Table 1", "from the root lowest, no balancing highest", "dhc-table1",
            ("fr1996/table1/root-lowest", "fr1996/table1/none-highest")),
        Row("§3.2", "the results for 128 PEs are almost identical to those for 32",
            not_attempted="no committed run at 128 PEs"),
        Row("§3.2, Fig. 2", "with requests from any thread, load balancing is slightly better "
            "than none", "dhc-full", ("fr1996/fig2/balancing-helps",)),
        Row("§3.2, Fig. 2", "the cube pattern and mapping through the root are best", "dhc-full",
            ("fr1996/fig2/cube-root-best",)),
        Row("§3.2, Fig. 2", "random placement performs poorly relative to explicit balancing",
            "dhc-full", ("fr1996/fig2/random-poor",)),
        Row("§3.2, Fig. 3", "with every request from PE #1, no balancing saturates at a very "
            "low load", "dhc-full", ("fr1996/fig3",)),
        Row("§3.2, Fig. 3", "cube connections are better than ring, by a small difference",
            "dhc-full", ("fr1996/fig3/cube-vs-ring",)),
        Row("§3.2, Fig. 3", "both are noticeably inferior to mapping through the root", "dhc-full",
            ("fr1996/fig3/root-best",)),
        Row("§3.2, Fig. 4", "without selective disabling, striving for balance is marginally "
            "better", "dhc-full", ("fr1996/fig4/no-sd",)),
        Row("§3.2, Fig. 4", "with selective disabling, minimizing fragmentation is "
            "significantly better", "dhc-full", ("fr1996/fig4/sd",)),
        Row("§3.3, Fig. 6", "with selective disabling higher run fractions are more probable",
            "dhc-full", ("fr1996/fig6",)),
        Row("§3.3, Fig. 7", "selective disabling improves the run fraction of small and of "
            "large gangs", "dhc-full", ("fr1996/fig7/smallest", "fr1996/fig7/largest")),
        Row("§3.4, Fig. 9", "division by weight between controllers is more effective", "dhc-full",
            ("fr1996/fig9/weight",)),
        Row("§3.4, Fig. 9", "selective disabling's improvement is twice weight's", "dhc-full",
            ("fr1996/fig9/sd-gain",)),
        Row("§3.4, Fig. 9", "the division among a controller's own gangs matters little",
            "dhc-full", ("fr1996/fig9/within",)),
        Row("§3.4, Fig. 10", "uniform/uniform has a higher probability of low run fractions",
            "dhc-full", ("fr1996/fig10",)),
        Row("§3.4, Fig. 11", "uniform/uniform is fairer at low loads", "dhc-full",
            ("fr1996/fig11",)),
        Row("§3.4, Fig. 12", "small gangs always get a better run fraction than large ones",
            "dhc-full", ("fr1996/fig12",)),
        Row("§3.4", "a gang's execution time does not influence its run fraction", "dhc-full",
            ("fr1996/s3.4/exec-time",)),
        Row("§4.1, Claims 1-2", "off-line waste with DHC's partitioning: uniform 25 % / 20 % "
            "(total / selective disabling), harmonic 27.9 % / 10 %, powers of two 0",
            "dhc-full", ("fr1996/s4.1/uniform", "fr1996/s4.1/harmonic", "fr1996/s4.1/pow2")),
        Row("§4.2, Claim 3", "without the power-of-two restriction an optimal off-line "
            "matching wastes nothing", not_attempted="a proof; no computation committed"),
        Row("§4.2, Fig. 18", "on-line FCFS best fit wastes 20-25 % with unit times", "dhc-full",
            ("fr1996/fig18/unit",)),
        Row("§4.2, Fig. 18", "with exponential times (mean 5), 31-37 % at 32 PEs", "dhc-full",
            ("fr1996/fig18/exp32",)),
        Row("§4.2, Fig. 18", "powers of two, exponential times: 49 % at 4,096 PEs", "dhc-full",
            ("fr1996/fig18/pow2-4096",)),
        Row("§4.3, Fig. 19", "uniform sizes fare worst, powers of two best", "dhc-full",
            ("fr1996/fig19/uniform-worst", "fr1996/fig19/pow2-best")),
        Row("§4.3, Fig. 19", "DHC approaches the off-line bounds of §4.1 and outperforms "
            "on-line FCFS best fit", not_attempted="not judged (Fig. 19 draws the bounds)"),
    ),
}  # fmt: skip


@dataclass
class _Source:
    path: Path
    command: str
    claims: dict[str, Claim]


def _load(results: Path, folder: str, cache: dict[str, _Source]) -> _Source:
    if folder not in cache:
        path = results / folder / pipeline.RESULTS
        try:
            res = pipeline.read(path)
        except ResultsError as e:
            raise ResultsError(f"ledger: {e}") from None
        found = {c.id: c for c in registry.study(res.kind).claims(res.data)}
        cache[folder] = _Source(path, res.made.command, found)
    return cache[folder]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(paper: str, row: Row, results: Path, cache: dict[str, _Source]) -> tuple[str, Verdict]:
    if row.not_attempted:
        return (
            f"| {row.where} | {_cell(row.says)} | — | **not attempted**: "
            f"{_cell(row.not_attempted)} | — |",
            Verdict.NOT_ATTEMPTED,
        )
    src = _load(results, row.source, cache)
    got = []
    for cid in row.claims:
        if cid not in src.claims:
            raise ResultsError(
                f"ledger: {paper}, {row.where}: {src.path} holds no claim {cid!r}",
                fix="update testbed/experiment/ledger.py or rerun the study",
            )
        got.append(src.claims[cid])
    verdict = claims_mod.worst([c.verdict for c in got])
    ours = "<br>".join(_cell((f"{c.where}: " if len(got) > 1 else "") + c.measured) for c in got)
    if row.note:
        ours += f"<br>*{_cell(row.note)}*"
    why = "; ".join(dict.fromkeys(f"{c.verdict}: {c.why}" if len(got) > 1 else c.why
                                  for c in got if c.why))  # fmt: skip
    return (
        f"| {row.where} | {_cell(row.says)} | {ours} | **{verdict}** ({_cell(why)}) | "
        f"`{_cell(src.command)}`<br>[{row.source}](results/{row.source}/results.json) |",
        verdict,
    )


def generate(
    results: Path = DEFAULT_RESULTS, papers: dict[str, Sequence[Row]] | None = None
) -> str:
    """The ledger's Markdown from the results under ``results``."""
    table: dict[str, Sequence[Row]] = dict(PAPERS) if papers is None else papers
    cache: dict[str, _Source] = {}
    body: list[str] = []
    tally: dict[str, Counter[str]] = {}
    for paper, rows in table.items():
        count: Counter[str] = Counter()
        body += [
            f"## {paper}",
            "",
            "| result | the paper says | our figure | verdict | command and results |",
            "|---|---|---|---|---|",
        ]
        for row in rows:
            line, verdict = _row(paper, row, results, cache)
            body.append(line)
            count[str(verdict)] += 1
        body.append("")
        tally[paper] = count
    order = [str(v) for v in (Verdict.REPRODUCED, Verdict.DIRECTION, Verdict.NOT_REPRODUCED,
                              Verdict.NOT_ATTEMPTED)]  # fmt: skip
    head = [
        "# Reproduction ledger",
        "",
        "Every result of the five papers' evaluations beside ours: our figure, the command "
        "and the results file that hold it, and a verdict. Generated by `cosched experiment "
        "ledger` from docs/results/*/results.json (testbed/experiment/ledger.py lists the "
        "results and the claims that measure them); do not edit by hand. Figures that only "
        "illustrate a mechanism (a matrix, a tree, a proof's drawing) are not results and are "
        "not listed.",
        "",
        "## Verdicts",
        "",
        *(f"* {r}" for r in claims_mod.RULES),
        "",
        "Where the paper states a figure, the row says the tolerance we hold it to (the paper "
        "states none); a result measured in several configurations (matching algorithms, "
        "switch costs, numbers of jobs) takes the worst of their verdicts, and the cell lists "
        "each. Most live studies ran each configuration once, so their best verdict is "
        "*direction only*.",
        "",
        "| paper | " + " | ".join(order) + " |",
        "|---|" + "---|" * len(order),
        *(f"| {p} | " + " | ".join(str(c[o]) for o in order) + " |" for p, c in tally.items()),
        "",
    ]
    return "\n".join(head + body)
