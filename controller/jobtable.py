"""The controller's job table: every job it knows, where each waits, and the archive.

A job is *held* (submitted, not yet handed to the policy: the class rules of
controller/classes.py decide when), then *in the policy* until it ends. Ended
jobs beyond the ``keep_ended`` most recent move to the archive
(controller/archive.py) and leave memory; the table still answers for them.
No I/O but the archive's file; no policy, no agents.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from controller.archive import JobArchive
from controller.jobs import Job, JobSpec, RequestError

log = logging.getLogger("controller.quantum")  # the scheduler's parts log as one


class JobTable:
    """Jobs by id, the held queue, the jobs the policy has, and the archive."""

    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}
        self.next_id = 1
        self.held: list[int] = []  # jobs not yet handed to the policy
        self.in_policy: set[int] = set()
        # Ended jobs beyond the keep_ended most recent go to the archive; without an
        # archive every job is kept.
        self.archive: JobArchive | None = None
        self.keep_ended = 200
        self.archived_counts: Counter[tuple[str, str]] = Counter()

    def add(self, spec: JobSpec, user: str, now: float) -> Job:
        """A new job with the next id, held."""
        job = Job(
            job_id=self.next_id, spec=spec, user=user, submit_time=now, job_class=spec.job_class
        )
        self.next_id += 1
        self.jobs[job.job_id] = job
        self.held.append(job.job_id)
        return job

    def get(self, job_id: object) -> Job:
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            raise RequestError(f"job_id: want an int, got {job_id!r}")
        job = self.jobs.get(job_id)
        if job is None:
            raise RequestError(f"no job {job_id}; see the 'jobs' request for valid ids")
        return job

    def withdraw(self, job_id: int) -> None:
        """Back from the policy to the held queue (the policy was told already)."""
        self.in_policy.discard(job_id)
        self.held.append(job_id)

    def drop(self, job_id: int) -> bool:
        """An ended job leaves both queues; True if the policy had it."""
        if job_id in self.held:
            self.held.remove(job_id)
        if job_id in self.in_policy:
            self.in_policy.discard(job_id)
            return True
        return False

    # ---- views -------------------------------------------------------------------
    def job_counts(self) -> dict[tuple[str, str], int]:
        """Jobs by (state, class), the archived ones included (the exporter's gauge)."""
        c: Counter[tuple[str, str]] = Counter(self.archived_counts)
        for j in self.jobs.values():
            c[(j.state, j.job_class)] += 1
        return dict(c)

    def records(self, now: float, show_all: bool) -> list[dict[str, Any]]:
        """The ``jobs`` request: unfinished jobs, or with ``show_all`` every job, the
        archived ones included."""
        out = [j.record(now) for _, j in sorted(self.jobs.items()) if show_all or not j.ended]
        if show_all and self.archive is not None:
            drop = ("ranks", "argv")
            old = {
                r["job_id"]: {k: v for k, v in r.items() if k not in drop}
                for r in self.archive.records()
                if r.get("job_id") not in self.jobs
            }
            out = sorted([*old.values(), *out], key=lambda r: int(r["job_id"]))
        return out

    def record(self, job_id: object, now: float) -> dict[str, Any]:
        """The ``job`` request: one job with its ranks, from memory or the archive."""
        if isinstance(job_id, int) and job_id not in self.jobs and self.archive is not None:
            rec = self.archive.find(job_id)
            if rec is not None:
                return rec
        return self.get(job_id).record(now, with_ranks=True)

    # ---- memory ------------------------------------------------------------------
    def prune_ended(self, now: float) -> int:
        """Move the oldest ended jobs beyond ``keep_ended`` to the archive; returns how
        many. A job still referenced (held, in the policy) is never moved."""
        if self.archive is None:
            return 0
        ended = [j for j in self.jobs.values() if j.ended and j.job_id not in self.in_policy]
        extra = len(ended) - self.keep_ended
        if extra <= 0:
            return 0
        ended.sort(key=lambda j: (j.end_time or 0.0, j.job_id))
        old = ended[:extra]
        try:
            self.archive.append(j.record(now, with_ranks=True) for j in old)
        except OSError as e:  # keep them in memory; try again later
            log.warning("cannot archive %d ended job(s) to %s: %s", extra, self.archive.path, e)
            return 0
        for j in old:
            self.archived_counts[(j.state, j.job_class)] += 1
            del self.jobs[j.job_id]
        return extra

    # ---- checkpoint (controller/checkpoint.py has the file format) --------------------
    def to_payload(self) -> dict[str, Any]:
        return {
            "next_id": self.next_id,
            "archived_counts": [[st, cls, n] for (st, cls), n in self.archived_counts.items()],
            "jobs": [self.jobs[j].to_dict() for j in sorted(self.jobs)],
        }

    def load(self, payload: Mapping[str, Any]) -> None:
        """The jobs of a checkpoint; both queues empty (the scheduler refills them)."""
        self.jobs = {}
        for d in payload.get("jobs", []):
            job = Job.from_dict(d)
            self.jobs[job.job_id] = job
        self.next_id = max([int(payload.get("next_id", 1)), *[j + 1 for j in self.jobs]])
        self.archived_counts = Counter(
            {(str(st), str(cls)): int(n) for st, cls, n in payload.get("archived_counts", [])}
        )
        self.held, self.in_policy = [], set()
