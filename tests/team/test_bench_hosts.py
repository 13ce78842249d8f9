"""benchmarks/bench_hosts.py (a team over two hosts): its usage runs anywhere; with root, sshd,
tmux and redis-server, `--quick` runs a small team of each kind and prints its table (structure,
never timing)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import run_benchmark
from tests.store.redis_server import binary as redis_binary
from tests.tmux.sshd_server import missing_reason


def test_bench_hosts_help_runs_and_names_its_options(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_hosts.py", "--help", timeout=60)
    assert proc.returncode == 0, proc.stderr
    for option in ("--quick", "--runs", "--workers", "--teams"):
        assert option in proc.stdout, option
    assert "two hosts" in proc.stdout


def test_bench_hosts_refuses_an_odd_team_before_it_starts_anything(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_hosts.py", "--workers", "3", timeout=60)
    assert proc.returncode == 2
    assert "--workers takes an even number" in proc.stderr
    assert "Traceback" not in proc.stderr


why = missing_reason() or (
    None if redis_binary() and shutil.which("tmux") else "tmux and redis-server are needed"
)


@pytest.mark.slow
@pytest.mark.tmux
@pytest.mark.skipif(why is not None, reason=str(why))
def test_bench_hosts_quick_prints_every_team_and_figure(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_hosts.py", "--quick", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("- machine: ") for line in lines)
    assert any(line.startswith("- load average") for line in lines)
    header = "| | 1 here + 1 on the ssh host, Redis | 2 here, Redis | 2 here, files |"
    assert header in lines, lines
    rows = [line for line in lines[lines.index(header) + 2 :] if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert len(cells) == 8 and all(len(c) == 4 for c in cells), rows
    assert all(v.endswith((" s", " ms")) for c in cells[:7] for v in c[1:]), rows
    assert cells[7][1:] == ["1 of 1"] * 3, rows  # every hand-over finished
