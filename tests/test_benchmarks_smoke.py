"""The benchmark script runs (tiny sizes) and prints its table. Structure only, never timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_benchmark


@pytest.mark.slow
def test_bench_messaging_quick_prints_the_machine_and_the_table(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_messaging.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    lines = out.splitlines()
    for key in ("CPU", "Cores", "Python", "OS", "Date"):
        assert any(line.startswith(f"| {key} | ") for line in lines), key
    header = "| | Benchmark | Median | Target | TypeScript original | Meets target |"
    assert header in lines
    rows = [line for line in lines[lines.index(header) + 2 :] if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert all(len(c) == 6 for c in cells), rows
    assert {c[0] for c in cells} == {"a", "b", "c", "d", "e", "f"}
    assert all(c[2] and c[2] != "—" for c in cells)  # every row has a measured value
    names = " ".join(c[1] for c in cells)
    for what in (
        "send-message",
        "python -c pass",
        "mailbox-list",
        "peak RSS",
        "jsonl.append",
        "Mailbox.append_messages",
        "mailbox-mark-delivered",
        "omp team status",
        "no index yet",
        "omp team list",
        "omp doctor",
        "TypeScript `team status`",
        "before the fast count",
        "omp ralph status",
    ):
        assert what in names or what in out, what
    assert "lines/s" in out and "MiB" in out and " ms" in out
    assert "send 122 ms" in out and "324 MiB" in out and "315 ms" in out
    # the work directory is removed afterwards and nothing lands in the cwd
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


@pytest.mark.slow
def test_bench_lifecycle_quick_prints_its_table(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_lifecycle.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = "| | Benchmark | Median | Target | Meets target |"
    assert header in lines
    rows = [line for line in lines[lines.index(header) + 2 :] if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows] == ["a", "a", "a", "a", "b", "c", "c"]
    assert sum("parse path" in r and "(same bytes)" in r for r in rows) == 2
    assert all(" ms" in r or " µs" in r for r in rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


@pytest.mark.slow
def test_bench_tmux_import_prints_a_row_per_door(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_tmux_import.py", "--runs", "1", timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    rows = lines[lines.index("|---|---|---|") + 1 :]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert all(len(c) == 3 and " / " in c[1] and " / " in c[2] for c in cells), rows
    assert [c[0] for c in cells] == [
        "interpreter floor (`pass`)",
        "thin client (`import omp.tmux`)",
        "thin client + typing (`omp.mail.typein`)",
        "`import libtmux`",
        "lifecycle (`omp.tmux.lifecycle`, libtmux)",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


@pytest.mark.slow
def test_bench_usage_quick_prints_a_row_per_cli(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_usage.py", "--quick", timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("- machine: ") for line in lines)
    tables = [i for i, line in enumerate(lines) if line.startswith("| CLI | record |")]
    assert len(tables) == 2, proc.stdout  # the readers, then `omp team usage`
    for header, width in zip(tables, (8, 9), strict=True):
        rows = []
        for line in lines[header + 2 :]:
            if not line.startswith("| "):
                break
            rows.append(line)
        cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
        assert [c[0] for c in cells] == ["copilot", "claude", "codex", "gemini", "pi"]
        assert all(len(c) == width and c[1] == "2 MB" for c in cells), rows
        assert all(c[3].endswith(" ms") and c[5].endswith(" ms") for c in cells)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


@pytest.mark.slow
def test_bench_worktrees_quick_prints_its_table(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_worktrees.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("machine: ") for line in lines)
    assert any(line.startswith("git: ") for line in lines)
    header = "| | Benchmark | Median | Target | Meets target |"
    assert header in lines
    rows = [line for line in lines[lines.index(header) + 2 :] if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert [c[0] for c in cells] == ["a", "b", "b", "c", "d", "e"]
    assert all(len(c) == 5 and (" ms" in c[2] or "MiB" in c[2]) for c in cells), rows
    assert "8 worktrees made" in cells[1][1] and "vs 0 ms" in cells[1][2]
    assert "plain `git worktree add`" in cells[2][1]
    assert "disk per worktree" in cells[3][1] and "MiB" in cells[3][2]


@pytest.mark.slow
def test_bench_merge_quick_prints_its_table(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_merge.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("- machine: ") for line in lines)
    header = "| | Benchmark | Median |"
    assert header in lines
    rows = [line for line in lines[lines.index(header) + 2 :] if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert [c[0] for c in cells] == ["a", "a", "b", "b", "c"]
    assert "git processes" in cells[0][1] and int(cells[0][2]) > 0


@pytest.mark.slow
@pytest.mark.tmux
def test_bench_resume_quick_prints_its_table(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_resume.py", "--quick", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    header = "| | measure (1 run(s) each) | median | target |"
    assert header in lines
    rows = [line for line in lines[lines.index(header) + 2 :] if line.startswith("| ")]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert [c[0] for c in cells] == ["a", "a", "b"], rows
    assert "resume of 8 demo workers" in cells[0][1] and "launch of 8" in cells[1][1]
    assert all(c[2].endswith(" ms") for c in cells), rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


@pytest.mark.slow
def test_bench_backlog_quick_prints_its_table(tmp_path: Path) -> None:
    proc = run_benchmark(tmp_path, "bench_backlog.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = "| | Benchmark | Median | Target | Meets target |"
    assert header in lines
    rows = [line for line in lines[lines.index(header) + 2 :] if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows] == ["a", "b", "b", "c", "d"]
    assert "100 tasks, 32 workers" in proc.stdout and " ms" in proc.stdout
