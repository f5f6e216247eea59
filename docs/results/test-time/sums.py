"""Sum the root tier's 25 slowest phases of ci-0412611-slowest.txt by module (and the
fault tests together): python3 docs/results/test-time/sums.py"""

import re
from pathlib import Path

text = (Path(__file__).parent / "ci-0412611-slowest.txt").read_text()
root = text.split("slowest 25 durations")[1].split("# the live")[0]
rows = [
    (float(s), name.split("::")[0]) for s, _, name in re.findall(r"([\d.]+)s (\w+)\s+(\S+)", root)
]
print(f"the 25 phases: {sum(s for s, _ in rows):.2f} s")
by: dict[str, float] = {}
for s, module in rows:
    by[module] = by.get(module, 0.0) + s
for module, s in sorted(by.items(), key=lambda kv: -kv[1]):
    print(f"{s:.2f} s  {module}")
faults = sum(s for m, s in by.items() if m.startswith("tests/faults/"))
print(f"{faults:.2f} s  tests/faults/ together")
