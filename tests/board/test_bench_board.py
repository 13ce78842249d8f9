"""benchmarks/bench_board.py runs (2 workers, --quick) and prints the machine and its table.
Structure only, never timing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.board.conftest import CHROMIUM
from tests.helpers import run_benchmark

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def test_bench_board_quick_prints_its_table(tmp_path: Path) -> None:
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("starlette")
    if not os.path.exists(CHROMIUM) or shutil.which("tmux") is None:
        pytest.skip("needs chromium and tmux")
    proc = run_benchmark(tmp_path, "bench_board.py", "--quick", "--workers", "2", "--rounds", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = "| | Benchmark | Median | Target | Meets target |"
    assert header in lines
    rows = [ln for ln in lines[lines.index(header) + 2 :] if ln.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows] == ["a", "a", "b", "c", "c"]
    assert all(" ms " in r for r in rows[:3]) and "%" in rows[3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
