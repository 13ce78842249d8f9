"""Benchmarks of the backlog: choosing the next task, `status` over many tasks, and a hand-over
with its checkout prepared ahead.

    .venv/bin/python benchmarks/bench_backlog.py [--quick] [--runs N]

(a) choosing the next task for a worker that just finished: the graph of 1,000 tasks (a third
    blocked by up to three earlier ones, priorities mixed, a quarter done) built and the queue
    matched against 32 workers (31 busy), in memory (`omp.tasks.graph`); target <= 50 ms;
(b) the same as the store does it, under the task guard: every task file read, the choice,
    the claim written (`omp.tasks.queue.handover`), as a completing call does it; and as the
    monitor does it, its records kept between scans (`omp.tasks.queue.Reader`: a `lstat` per
    task, only the changed files read again);
(c) `omp team status TEAM --json` (a child process, as a person runs it) with 1,000 tasks
    against 10, timed in turns; target: <= 3x;
(d) a task's checkout in a 2,000-file repository: made at hand-over time (`git worktree add`,
    what a hand-over would wait for without preparation) vs prepared ahead and brought up to
    the target (a fast-forward of one changed file) at hand-over time.

Everything lives in a fresh temporary directory (HOME and git isolated), removed at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402

WORKERS = 32


def isolate(home: Path) -> None:
    for key in list(os.environ):
        if key.startswith(("GIT_", "OMP_")):
            del os.environ[key]
    os.environ.update(
        {
            "HOME": str(home),
            "XDG_STATE_HOME": str(home / "state"),
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@example.invalid",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@example.invalid",
        }
    )


def records(n: int, workers: int, seed: int = 7) -> list[dict[str, Any]]:
    """`n` backlog task records: a third blocked by earlier ones, a quarter done, all but one
    worker holding a task."""
    from omp.tasks import queue

    rng = random.Random(seed)
    out = []
    for i in range(1, n + 1):
        blocked = (
            sorted({str(rng.randint(1, i - 1)) for _ in range(rng.randint(1, 3))})
            if i > 1 and rng.random() < 0.33
            else []
        )
        rec = queue.new_task(str(i), f"task {i}", "some words " * 10, blocked_by=blocked,
                             priority=rng.choice([0, 0, 0, 1, 2]))  # fmt: skip
        rec["order"] = i
        if i <= n // 4:
            rec.update(status="completed", owner=f"worker-{1 + i % workers}")
        out.append(rec)
    busy = 0
    for rec in out:
        if busy >= workers - 1:
            break
        if rec["status"] == "pending" and not rec["blockedBy"]:
            rec.update(status="in_progress", owner=f"worker-{busy + 2}", claimToken="x")
            busy += 1
    return out


def bench_choose(n: int, runs: int) -> float:
    from omp.tasks.graph import Graph, Worker, choose

    recs = records(n, WORKERS)
    team = [Worker(f"worker-{i}", "copilot") for i in range(1, WORKERS + 1)]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        g = Graph(recs)
        held = g.held()
        free = [w for w in team if w.name not in held]
        picks = choose(g, free, team)
        times.append(time.perf_counter() - t0)
        assert picks and picks[0][0].name == "worker-1", picks[:1]
    return statistics.median(times)


def make_team(root: Path, name: str, n: int) -> None:
    """A headless team of 32 workers with `n` backlog tasks written as the store writes them."""
    from omp.store.paths import StatePaths
    from omp.tasks import queue
    from omp.team.setup import create_team

    (root / ".git").mkdir(parents=True, exist_ok=True)
    create_team(root, name, WORKERS)
    team = StatePaths(root).team(name)
    recs = records(n, WORKERS)
    for r in recs:
        r.pop("order", None)
    queue.add(team, recs)


def bench_handover(root: Path, runs: int, *, cached: bool = False) -> float:
    """A worker's next task from the store; `cached`: the records read through the monitor's
    `Reader` (only what changed is read again: here the two tasks each round moves)."""
    from omp.store.paths import StatePaths
    from omp.tasks import queue, tasks

    times = []
    team = StatePaths(root).team("big")
    reader = queue.Reader(lambda: time.time() + 3600) if cached else None  # (none is racy)
    if reader is not None:
        reader(team)  # the monitor read them on an earlier scan
    for _ in range(runs):
        t0 = time.perf_counter()
        got = queue.handover(team, only=["worker-1"], read=reader)
        times.append(time.perf_counter() - t0)
        assert len(got) == 1, got
        tid = str(got[0][1]["id"])
        tasks.transition(team, tid, worker="worker-1", from_status="in_progress",
                         to_status="completed", token=got[0][1]["claimToken"])  # fmt: skip
    return statistics.median(times)


def bench_status(pairs: list[tuple[Path, str]], runs: int) -> list[float]:
    """Median seconds of `omp team status TEAM --json` for each (root, team), the teams timed
    in turns round by round (a loaded machine slows them alike, so their ratio holds)."""
    cmds = [[sys.executable, "-m", "omp", "team", "status", team, "--json"] for _, team in pairs]
    envs = [dict(os.environ, OMP_ROOT=str(root)) for root, _ in pairs]
    for cmd, env in zip(cmds, envs, strict=True):
        subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm the caches
    times: list[list[float]] = [[] for _ in pairs]
    for _ in range(runs):
        for i, (cmd, env) in enumerate(zip(cmds, envs, strict=True)):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, check=False)
            times[i].append(time.perf_counter() - t0)
            assert proc.returncode == 0, proc.stderr
    return [statistics.median(t) for t in times]


def make_repo(root: Path, files: int) -> None:
    from omp.workspace.git import git

    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    body = ("x" * 79 + "\n") * 12
    for i in range(files):
        d = root / f"pkg{i % 40:02d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f"# {i}\n{body}")
    git(root, "add", "-A", timeout=600)
    git(root, "commit", "-q", "-m", "initial", timeout=600)


def bench_checkout(work: Path, files: int, runs: int) -> tuple[float, float]:
    """(a task's worktree made at hand-over time, a prepared one brought up to the target)."""
    from omp.backlog import worktrees as task_worktrees
    from omp.backlog.settings import Backlog
    from omp.workspace import repo
    from omp.workspace.git import git

    proj = work / "proj"
    make_repo(proj, files)
    bl = Backlog("manual", "main", True, str(work / "trees"), None)
    spec = task_worktrees.spec_of(proj)
    made: list[float] = []
    refreshed: list[float] = []
    for r in range(runs):
        t0 = time.perf_counter()
        with task_worktrees.provisional_at(proj, "bench", bl, f"a{r}", spec) as rec:
            pass
        made.append(time.perf_counter() - t0)
        # prepared ahead from main as it was; main then moves by one file
        (proj / "pkg00" / "mod00000.py").write_text(f"# changed {r}\n")
        git(proj, "commit", "-qam", f"main moves {r}")
        tip = repo.head(proj)
        t0 = time.perf_counter()
        res = git(Path(rec["path"]), "merge", "--ff-only", "-q", str(tip))
        refreshed.append(time.perf_counter() - t0)
        assert res.rc == 0
    return statistics.median(made), statistics.median(refreshed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs")
    ap.add_argument("--runs", type=int, default=0, help="repetitions per timing")
    opts = ap.parse_args()
    n = 100 if opts.quick else 1000
    small = 10
    files = 200 if opts.quick else 2000
    runs = opts.runs or (3 if opts.quick else 15)
    work = Path(tempfile.mkdtemp(prefix="omp-bench-backlog-"))
    rows: list[tuple[str, str, str, str]] = []
    try:
        home = work / "home"
        home.mkdir()
        isolate(home)
        chose = bench_choose(n, runs)
        rows.append(
            (
                f"a | next task: graph + queue, {n:,} tasks, {WORKERS} workers (memory)",
                f"{chose * 1000:.2f} ms",
                "≤ 50 ms",
                "yes" if chose <= 0.05 else "NO",
            )
        )
        big, little = work / "big", work / "little"
        make_team(big, "big", n)
        make_team(little, "little", small)
        handed = bench_handover(big, min(runs, 20))
        rows.append(
            (
                f"b | next task from the store: read all, choose, claim, {n:,} task files "
                "(a completing call)",
                f"{handed * 1000:.1f} ms",
                "—",
                "—",
            )
        )
        cached = bench_handover(big, min(runs, 20), cached=True)
        rows.append(
            (
                f"b | the same in the monitor (records kept between scans), {n:,} tasks",
                f"{cached * 1000:.1f} ms",
                "≤ 50 ms",
                "yes" if cached <= 0.05 else "NO",
            )
        )
        s_big, s_small = bench_status([(big, "big"), (little, "little")], max(3, runs // 2))
        ratio = s_big / s_small
        rows.append((f"c | `omp team status --json`, {n:,} tasks vs {small}",
                     f"{s_big * 1000:.0f} ms vs {s_small * 1000:.0f} ms ({ratio:.2f}x)", "≤ 3x",
                     "yes" if ratio <= 3 else "NO"))  # fmt: skip
        made, refreshed = bench_checkout(work, files, max(2, runs // 3))
        rows.append((f"d | a task's checkout at hand-over, {files:,} files: made then vs "
                     "prepared ahead (fast-forward to the target)",
                     f"{made * 1000:.0f} ms vs {refreshed * 1000:.0f} ms", "—", "—"))  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in machine_lines():
        print(line)
    print()
    print("| | Benchmark | Median | Target | Meets target |")
    print("|---|---|---|---|---|")
    for name, value, target, ok in rows:
        key, _, what = name.partition(" | ")
        print(f"| {key} | {what} | {value} | {target} | {ok} |")


if __name__ == "__main__":
    main()
