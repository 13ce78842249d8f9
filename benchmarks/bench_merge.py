"""Benchmark of `omp team merge`: the git processes it starts and the time it takes.

    .venv/bin/python benchmarks/bench_merge.py [--quick] [--runs N] [--workers N]

A repository of 200 files, a headless team of N workers (default 4) with worktrees made as
launch makes them; each worker commits one file of its own and completes its task. Then, each
run on a fresh copy of that state:
(a) `omp team merge TEAM` as a person runs it (a subprocess of the console script): the git
    processes it started (a `git` first on PATH that counts itself, then runs the real one) and
    its wall time; the first branch fast-forwards, the others make merge commits;
(b) the same with nothing to merge (every branch merged already): what a repeated merge costs;
(c) per branch: (a)'s git processes divided by the workers.

Everything lives in a fresh temporary directory with git isolated from the user's config (HOME,
GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM=1), removed at the end. No targets: the issue
asks for the figures, before and after the merge path's git calls were cached.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402
from omp.record import config as team_config  # noqa: E402
from omp.store.paths import StatePaths  # noqa: E402
from omp.tasks import tasks  # noqa: E402
from omp.team import worktrees  # noqa: E402
from omp.team.setup import create_team  # noqa: E402
from omp.workspace.git import git, version  # noqa: E402

OMP = Path(sys.executable).with_name("omp")


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


def counting_git(bindir: Path, log: Path) -> None:
    """A `git` that appends a line to `log`, then runs the real git (found on PATH now)."""
    real = shutil.which("git")
    assert real is not None, "git is not installed"
    bindir.mkdir(parents=True)
    shim = bindir / "git"
    shim.write_text(f'#!/bin/sh\necho x >> "{log}"\nexec "{real}" "$@"\n')
    shim.chmod(0o755)


def make_project(root: Path, workers: int) -> str:
    """The repository and a team `t` whose workers each committed and completed; the team."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for i in range(200):
        (root / f"src{i % 10}").mkdir(exist_ok=True)
        (root / f"src{i % 10}" / f"m{i}.py").write_text(f"x = {i}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    create_team(root, "t", workers, task="build it")
    project = StatePaths(root)
    team = project.team("t")
    cfg = team_config.load(team)
    plan = worktrees.plan(project, root, requested="worktree", carry=False, verify="")
    raw = cfg.raw
    with contextlib.ExitStack() as stack:
        made = worktrees.provision(stack, plan, "t", cfg.worker_names)
        raw["workspace"] = plan.team_json()
        for w in raw["workers"]:
            w["workspace"] = worktrees.entry_json(made, w["name"])
        team_config.write(team, raw)
    cfg = team_config.load(team)
    for w in cfg.worker_names:
        path = Path((cfg.worker(w) or {})["workspace"]["path"])
        (path / f"{w}.txt").write_text(f"by {w}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"{w}: its part")
        tid = str((cfg.worker(w) or {})["taskId"])
        _, token = tasks.claim(team, tid, w)
        tasks.transition(
            team,
            tid,
            worker=w,
            from_status="in_progress",
            to_status="completed",
            token=token,
            result=f"{w} done",
        )
    return "t"


def timed_merge(root: Path, log: Path, bindir: Path) -> tuple[float, int, int]:
    """(seconds, git processes, exit code) of one `omp team merge t`."""
    log.write_text("")
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(OMP), "team", "merge", "t", "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        check=False,
    )
    took = time.perf_counter() - t0
    return took, len(log.read_text().splitlines()), proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one run, 2 workers (CI smoke test)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args(argv)
    runs = 1 if args.quick else max(1, args.runs)
    workers = 2 if args.quick else max(1, args.workers)
    tmp = Path(tempfile.mkdtemp(prefix="omp-bench-merge-"))
    try:
        isolate(tmp / "home")
        log, bindir = tmp / "git-calls.log", tmp / "bin"
        counting_git(bindir, log)
        first: list[tuple[float, int, int]] = []
        again: list[tuple[float, int, int]] = []
        for i in range(runs):
            print(f"run {i + 1}/{runs}: {workers} workers ...", file=sys.stderr)
            proj = tmp / f"run{i}" / "proj"
            make_project(proj, workers)
            first.append(timed_merge(proj, log, bindir))
            again.append(timed_merge(proj, log, bindir))
        med = statistics.median
        rows = [
            (
                "a",
                f"`omp team merge` of {workers} branches: git processes",
                med(r[1] for r in first),
            ),
            (
                "a",
                f"`omp team merge` of {workers} branches: wall time (s)",
                round(med(r[0] for r in first), 2),
            ),
            ("b", "the same again, all merged: git processes", med(r[1] for r in again)),
            ("b", "the same again, all merged: wall time (s)", round(med(r[0] for r in again), 2)),
            ("c", "git processes per branch in (a)", round(med(r[1] for r in first) / workers, 1)),
        ]
        codes = sorted({r[2] for r in first + again})
        print("\n".join(f"- {line}" for line in machine_lines()))
        print(
            f"- git {'.'.join(map(str, version()))}; medians of {runs} run(s); exit codes {codes}"
        )
        print()
        print("| | Benchmark | Median |")
        print("|---|---|---|")
        for key, what, value in rows:
            print(f"| {key} | {what} | {value} |")
        return 0 if codes == [0] else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
