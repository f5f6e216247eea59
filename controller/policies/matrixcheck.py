"""The Ousterhout matrix's invariants (:meth:`OusterhoutMatrix.check`, used by tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.policies.base import PolicyError

if TYPE_CHECKING:
    from controller.policies.matrix import OusterhoutMatrix


def check_matrix(m: OusterhoutMatrix) -> None:
    """PolicyError unless cells, job index, node and block bit sets, stamps and the row
    limit agree."""
    seen: dict[int, tuple[int, list[int]]] = {}
    for s, row in enumerate(m._rows):
        if len(row) != m.nodes:
            raise PolicyError(f"row {s} has {len(row)} cells, expected {m.nodes}")
        for n, job in enumerate(row):
            if job is None:
                continue
            if job in seen and seen[job][0] != s:
                raise PolicyError(f"job {job} appears in rows {seen[job][0]} and {s}")
            seen.setdefault(job, (s, []))[1].append(n)
    if set(seen) != set(m._where):
        raise PolicyError("cell contents and job index disagree")
    claimed: dict[int, int] = {}
    for job, (s, nodes) in seen.items():
        where = m._where[job]
        if (where.slot, where.nodes) != (s, tuple(nodes)):
            raise PolicyError(f"job {job}: index says {where}, cells say {s}")
        if m._mask.get(job) != sum(1 << n for n in nodes):
            raise PolicyError(f"job {job}: node bit set disagrees with its cells")
        if not set(where.nodes) <= set(where.held) or where.block == where.nodes:
            raise PolicyError(f"job {job}: block {where.block} does not extend its nodes")
        held = sum(1 << n for n in where.held)
        if m._held.get(job) != held:
            raise PolicyError(f"job {job}: held bit set disagrees with its block")
        if claimed.get(s, 0) & held:
            raise PolicyError(f"job {job}: its block overlaps another job's in row {s}")
        claimed[s] = claimed.get(s, 0) | held
    if len(m._stamps) != len(m._rows) or len(set(m._stamps)) != len(m._rows):
        raise PolicyError("row stamps disagree with the rows")
    if set(m._mask) != set(m._where) or set(m._held) != set(m._where):
        raise PolicyError("node bit sets and job index disagree")
    if m.max_slots is not None and len(m._rows) > m.max_slots:
        raise PolicyError(f"{len(m._rows)} rows exceed max_slots={m.max_slots}")
