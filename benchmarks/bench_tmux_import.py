"""What each tmux door costs to import, against the interpreter floor (the figures quoted in
omp/tmux/__init__.py's docstring).

    .venv/bin/python benchmarks/bench_tmux_import.py [--runs N]

Each row is a fresh interpreter (`python -c ...`), N runs (default 15), rows interleaved so a busy
moment of a shared machine hits them all alike. Two figures per row: the whole process (wall
time, as a caller pays it) and the import alone, timed inside the process; min and median of
each (on a shared machine the min is the cost, the median adds the neighbours' load):
- the floor: `pass`;
- the thin client, what per-call paths load to read or type into a pane: `omp.tmux` and
  `omp.mail.typein`;
- libtmux, what only the leader's once-per-team pane lifecycle loads: `omp.tmux.lifecycle`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402

ROWS = {
    "interpreter floor (`pass`)": "pass",
    "thin client (`import omp.tmux`)": "import omp.tmux",
    "thin client + typing (`omp.mail.typein`)": "import omp.mail.typein",
    "`import libtmux`": "import libtmux",
    "lifecycle (`omp.tmux.lifecycle`, libtmux)": "import omp.tmux.lifecycle",
}


def once(code: str) -> tuple[float, float]:
    """(the process's wall ms, the import's own ms)."""
    timed = f"import time; t = time.perf_counter(); {code}; print(time.perf_counter() - t)"
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", timed], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return (time.perf_counter() - t0) * 1000, float(out) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    for code in ROWS.values():  # warm the bytecode caches
        once(code)
    wall: dict[str, list[float]] = {name: [] for name in ROWS}
    own: dict[str, list[float]] = {name: [] for name in ROWS}
    for _ in range(args.runs):
        for name, code in ROWS.items():
            w, i = once(code)
            wall[name].append(w)
            own[name].append(i)
    print("\n".join(machine_lines()))
    print()
    print("| import | process ms, min / median | the import alone ms, min / median |")
    print("|---|---|---|")
    for name in ROWS:
        ws, xs = wall[name], own[name]
        print(
            f"| {name} | {min(ws):.1f} / {statistics.median(ws):.1f} "
            f"| {min(xs):.1f} / {statistics.median(xs):.1f} |"
        )


if __name__ == "__main__":
    main()
