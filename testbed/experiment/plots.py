"""Plotting for every study's report: matplotlib without a display, figures saved one way.

Reports draw their PNGs from the data alone (results.json), so ``cosched experiment report``
draws the same figures again; their bytes depend on the matplotlib version, the Markdown does
not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, dpi: int = 90, *, tight: bool = True) -> Path:
    """Write ``fig`` to ``path`` and close it."""
    plt = pyplot()
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
