"""CPU lists as the kernel writes them (``cpuset.cpus``, ``/sys/devices/system/cpu/online``)."""

from __future__ import annotations


def parse_cpu_list(spec: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]``. Raises ValueError on anything else."""
    out: list[int] = []
    for part in spec.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if sep:
            a, b = int(lo), int(hi)
            if b < a:
                raise ValueError(f"bad CPU range {part!r}")
            out.extend(range(a, b + 1))
        else:
            out.append(int(part))
    return sorted(set(out))


def count_cpus(spec: str) -> int:
    return len(parse_cpu_list(spec))


def format_cpu_list(cpus: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``, the form cpuset.cpus takes."""
    parts: list[str] = []
    run: list[int] = []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            parts.append(_fmt(run))
        run = [c]
    if run:
        parts.append(_fmt(run))
    return ",".join(parts)


def _fmt(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
