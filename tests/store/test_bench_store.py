"""benchmarks/bench_store.py runs (tiny sizes) and prints its table: structure, never timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_benchmark
from tests.store.redis_server import binary


@pytest.mark.slow
def test_bench_store_quick_prints_both_backends(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_store.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("- machine: ") for line in lines)
    header = "| Benchmark | Median |"
    rows = [line for line in lines[lines.index(header) + 2 :] if line.startswith("| ")]
    backends = ("files", "redis") if binary() else ("files",)
    for name in backends:
        for what in ("send one message", "read 10 new lines", "undelivered of", "claim a task"):
            assert any(what in r and f"({name})" in r for r in rows), (what, name)
        assert any("fresh process" in r and f"({name})" in r for r in rows)
    assert not any("| |" in r for r in rows)  # every row has a value
