"""benchmarks/bench_hook.py runs (3 rounds) and prints the machine and its table.

Structure only, never timing: speed targets live in the benchmark, not in tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_benchmark


@pytest.mark.slow
def test_bench_hook_quick_prints_the_machine_and_a_row_per_case(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_hook.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("- machine: ") for line in lines)
    assert any(line.startswith("- python: ") for line in lines)
    assert any(line.startswith("- omp's Python: ") for line in lines)
    header = "| case | median CPU | × floor | target | meets |"
    rows = [r for r in lines[lines.index(header) + 2 :] if r.startswith("| ")]
    assert len(rows) == 7  # the floor and six cases
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1].endswith(" ms") and float(cells[1][:-3]) > 0
        assert cells[2].endswith("×") and float(cells[2][:-1]) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
