"""What each tmux door costs to import, against the interpreter floor (the figures quoted in
omp/tmux/__init__.py's docstring).

    .venv/bin/python benchmarks/bench_tmux_import.py [--runs N]

Each row is a fresh interpreter (`python -c ...`), median and p90 of N runs (default 15), rows
interleaved so a busy moment of a shared machine hits them all alike:
- the floor: `pass`;
- the thin client, what per-call paths load to read or type into a pane: `omp.tmux` and
  `omp.team.typein`;
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
    "thin client + typing (`omp.team.typein`)": "import omp.team.typein",
    "`import libtmux`": "import libtmux",
    "lifecycle (`omp.tmux.lifecycle`, libtmux)": "import omp.tmux.lifecycle",
}


def once(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    for code in ROWS.values():  # warm the bytecode caches
        once(code)
    times: dict[str, list[float]] = {name: [] for name in ROWS}
    for _ in range(args.runs):
        for name, code in ROWS.items():
            times[name].append(once(code))
    floor = statistics.median(times["interpreter floor (`pass`)"])
    print("\n".join(machine_lines()))
    print()
    print("| import | median ms | p90 ms | over the floor |")
    print("|---|---|---|---|")
    for name, xs in times.items():
        med = statistics.median(xs)
        p90 = sorted(xs)[max(0, round(0.9 * len(xs)) - 1)]
        print(f"| {name} | {med:.1f} | {p90:.1f} | +{med - floor:.1f} |")


if __name__ == "__main__":
    main()
