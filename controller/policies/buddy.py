"""Buddy placement in the Ousterhout matrix (``placement = buddy``, controller/policies/matrix.py).

What the papers say. Feitelson & Rudolph's Distributed Hierarchical Control maps a gang of
``s`` threads to a controller whose block of processors is the least power of two >= ``s``,
the blocks forming a buddy system (after Peterson & Norman; §2, §3.2), and loses a block's
unused processors to internal fragmentation (§4.1) unless *selective disabling* lets
smaller gangs run on them (§2). Feitelson's *Packing Schemes for Gang Scheduling* (1996)
finds a buddy-system mapping one of the two best packings and says it "depends on the
capability to gang-schedule jobs in multiple slots, if there is space". Wiseman &
Feitelson 2003 §3.1 says only that ParPar's master "maintains the gang scheduling matrix":
whether its matrix used this rule is not established by the material at hand
(docs/paired-fidelity.md).

What we chose:

* A gang of ``k`` holds, in its row, the aligned block ``[a, a + b)``, ``b`` the least
  power of two >= ``k`` and ``a`` a multiple of ``b``, and runs on the block's ``k`` lowest
  nodes (DHC's "minimize the fragmentation" mapping fills a block from its low end).
* The other ``b - k`` cells are *held*: no other gang is placed on them in that row. They
  are idle cells all the same, so alternate scheduling (Wiseman & Feitelson 2003 §2.6) may
  run jobs of other rows there -- our reading of selective disabling and of "multiple
  slots, if there is space".
* Within a row the block is the one a buddy allocator would split off: among the free
  aligned blocks of width ``b``, the one whose largest free aligned enclosing block is
  smallest (ties: the lowest address). The matrix takes rows first-fit.
* When ``nodes`` is not a power of two the tree is that of the next power of two with the
  missing nodes held for ever; a block cut short by them still serves a gang that fits in
  what remains, and a gang wider than every such block gets the whole row.
* Compaction and homogeneity moves carry a job's whole block (matrix.py), so blocks stay
  aligned.
"""

from __future__ import annotations


def buddy_block(held: int, nodes: int, size: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(nodes, block) for a gang of ``size`` in a row whose held cells are the bit set
    ``held``, or None if the row has no free aligned block for it. ``block`` is empty when
    it equals the nodes (the gang holds nothing more)."""
    width = 1 << (size - 1).bit_length()
    span = 1 << (nodes - 1).bit_length()  # the buddy tree's width
    real = (1 << nodes) - 1
    taken = held | (((1 << span) - 1) & ~real)  # nodes past the machine are held
    best: tuple[int, int] | None = None  # (largest free enclosing block's width, start)
    for start in range(0, span, width):
        if min(start + width, nodes) - start < size:
            continue
        if taken & (((1 << width) - 1) << start) & real:
            continue
        free_width = width
        while free_width < span:
            parent = start & ~(2 * free_width - 1)
            if taken & (((1 << (2 * free_width)) - 1) << parent):
                break
            free_width *= 2
        if best is None or free_width < best[0]:
            best = (free_width, start)
    if best is None:
        return None
    start = best[1]
    block = tuple(range(start, min(start + width, nodes)))
    return block[:size], (() if len(block) == size else block)
