"""Every app cosched ships, for ``cosched app list`` and ``cosched app run`` (pure).

The NPB-like kernels come from :data:`apps.npb.KERNELS` (their classes and allowed
rank counts); the synthetic program (Wiseman & Feitelson 2003 Fig. 6, with the presets of
apps/presets.py) and the ping-pong take any rank count their code accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.npb import KERNELS
from apps.presets import PRESETS


@dataclass(frozen=True)
class AppInfo:
    name: str
    module: str  # python -m <module>
    ranks: str  # what rank counts it takes, in words
    classes: tuple[str, ...]  # NPB problem classes; () = none
    transports: tuple[str, ...]
    description: str
    min_ranks: int = 1
    rank_rule: str = ""  # "square" / "power2" for NPB; "" = any >= min_ranks
    presets: tuple[str, ...] = ()

    @property
    def npb(self) -> bool:
        return bool(self.classes)


def catalog() -> dict[str, AppInfo]:
    apps = {
        "synthetic": AppInfo(
            "synthetic", "apps.synthetic", "any", (), ("ours",),
            "Wiseman & Feitelson 2003 Fig. 6: compute, file I/O and a barrier per iteration; Yu & "
            "Byun's "
            "communication phases (--comm); presets " + ", ".join(PRESETS),
            presets=PRESETS,
        ),
        "pingpong": AppInfo(
            "pingpong", "apps.pingpong", "2 or more (ranks 0 and 1 play)", (), ("ours",),
            "round-trip latency and bandwidth through the message library", min_ranks=2,
        ),
    }  # fmt: skip
    words = {"square": "squares: 1, 4, 9, 16, ...", "power2": "powers of two: 1, 2, 4, 8, ..."}
    for k in KERNELS.values():
        apps[k.name] = AppInfo(
            k.name, k.module, words[k.rank_rule], k.classes, ("ours", "mpi"),
            f"NPB {k.name.upper()}: {k.description} ({k.intensity} intensity, {k.pattern})",
            rank_rule=k.rank_rule,
        )  # fmt: skip
    return apps


def check(
    app: AppInfo, ranks: int, cls: str | None, transport: str, preset: str | None
) -> str | None:
    """What is wrong with running ``app`` so, in one line, or None."""
    if app.npb:
        k = KERNELS[app.name]
        if not k.allows(ranks):
            return f"{app.name} cannot run on {ranks} ranks: it takes {app.ranks}"
        if cls is not None and cls not in app.classes:
            return f"{app.name} has no class {cls!r}: use one of {', '.join(app.classes)}"
    else:
        if ranks < app.min_ranks:
            return f"{app.name} needs at least {app.min_ranks} ranks"
        if cls is not None:
            return f"{app.name} has no problem classes (--class is for the NPB kernels)"
    if transport not in app.transports:
        return f"{app.name} runs over {' or '.join(app.transports)} only, not {transport!r}"
    if preset is not None and preset not in app.presets:
        return f"{app.name} has no preset {preset!r}" + (
            f": use one of {', '.join(app.presets)}" if app.presets else ""
        )
    if preset == "fine" and ranks < 2:
        return "--preset fine needs 2 or more ranks: its 45 % CPU comes from the barrier wait"
    return None
