"""Benchmarks of workers' git worktrees: what `--workspace worktree` costs over `shared`.

    .venv/bin/python benchmarks/bench_worktrees.py [--quick] [--runs N]

On a repository of 5,000 files (~1 KiB each, 50 directories, one commit):
(a) what both workspaces run before a launch: `has_commit` (the default) and the count of the
    leader's uncommitted files;
(b) 8 workers' worktrees made as launch makes them (`create.provisioned`, one after the other),
    against none (shared: 0); and per worktree; beside it the floor, 8 plain
    `git worktree add` of the same tree (what git itself takes to check 5,000 files out);
(c) the disk each worktree takes: its checkout plus git's admin directory (its own index),
    against the leader's checkout;
(d) a 2,000-file `node_modules` put into a worktree: linked (`[worktree] link`) vs copied
    (`copy`), the provisioning step alone, and the disk it takes there;
(e) removing the 8 worktrees and their branches (`remove.remove_worktree`).

Everything lives in a fresh temporary directory with git isolated from the user's config (HOME,
GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM=1), removed at the end. No targets: the issue
asks for the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402
from omp.workspace import create, remove, repo  # noqa: E402
from omp.workspace.git import git, version  # noqa: E402

WORKERS = 8


def isolate(home: Path) -> None:
    for key in list(os.environ):
        if key.startswith(("GIT_", "OMP_")):
            del os.environ[key]
    os.environ.update(
        {
            "HOME": str(home),
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@example.invalid",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@example.invalid",
        }
    )


def write_tree(root: Path, files: int, dirs: int, size: int = 1000) -> None:
    body = ("x" * 79 + "\n") * (size // 80)
    for i in range(files):
        d = root / f"pkg{i % dirs:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f"# file {i}\n{body}")


def make_repo(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write_tree(root, files, 50)
    (root / ".gitignore").write_text("node_modules/\n")
    git(root, "add", "-A", timeout=600)
    git(root, "commit", "-q", "-m", "initial", timeout=600)


def disk_bytes(path: Path, *, checkout_only: bool = False) -> int:
    """Blocks allocated under `path` (what `du` counts), symlinks not followed; with
    `checkout_only`, without `.git/` and omp's `.omp/` (where the worktrees are)."""
    if path.is_symlink():
        return os.lstat(path).st_blocks * 512
    total = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        if checkout_only:
            dirnames[:] = [d for d in dirnames if d not in (".git", ".omp")]
        for name in (*dirnames, *filenames):
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_blocks * 512
    return total


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def make_workers(proj: Path, base: str, prefix: str = "w") -> tuple[float, list[create.Worktree]]:
    made: list[create.Worktree] = []
    t0 = time.perf_counter()
    for i in range(1, WORKERS + 1):
        name = f"{prefix}{i}"
        path = create.worktree_dir(proj, "bench", name)
        with create.provisioned(proj, path, create.branch_name("bench", name), base) as c:
            made.append(c.worktree)  # launch writes the team's config here
    return time.perf_counter() - t0, made


def raw_worktree_add(proj: Path, base: str, where: Path) -> float:
    """Seconds for WORKERS bare `git worktree add` calls (then removed, untimed)."""
    paths = [where / f"raw{i}" for i in range(WORKERS)]
    t0 = time.perf_counter()
    for i, path in enumerate(paths):
        git(proj, "worktree", "add", "-q", "-b", f"raw{i}", str(path), base, timeout=600)
    took = time.perf_counter() - t0
    for i, path in enumerate(paths):
        git(proj, "worktree", "remove", "--force", str(path))
        git(proj, "branch", "-D", "-q", f"raw{i}")
    return took


def remove_workers(proj: Path, made: list[create.Worktree]) -> float:
    t0 = time.perf_counter()
    for wt in made:
        remove.remove_worktree(proj, wt.path, wt.branch, target="main")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs")
    ap.add_argument("--runs", type=int, default=0, help="repetitions per timing")
    opts = ap.parse_args()
    files = 300 if opts.quick else 5000
    deps = 100 if opts.quick else 2000
    runs = opts.runs or (1 if opts.quick else 5)
    work = Path(tempfile.mkdtemp(prefix="omp-bench-wt-"))
    rows: list[tuple[str, str]] = []
    try:
        home = work / "home"
        home.mkdir()
        isolate(home)
        proj = work / "proj"
        print(f"preparing a repository of {files:,} files...", file=sys.stderr)
        make_repo(proj, files)
        base = repo.head(proj)
        assert base is not None

        prep: list[float] = []
        for _ in range(max(3, runs)):
            t0 = time.perf_counter()
            repo.has_commit(proj)
            create.uncommitted_count(proj)
            prep.append(time.perf_counter() - t0)
        rows.append(
            (
                f"a | before a launch, both workspaces: `has_commit` + uncommitted count, "
                f"{files:,} files",
                f"{statistics.median(prep) * 1000:.0f} ms",
            )
        )

        made_s: list[float] = []
        floor_s: list[float] = []
        removed_s: list[float] = []
        made: list[create.Worktree] = []
        for r in range(runs):  # interleaved with the floor: both see the same machine noise
            floor_s.append(raw_worktree_add(proj, base, work / "raw"))
            took, made = make_workers(proj, base)
            made_s.append(took)
            if r < runs - 1:
                removed_s.append(remove_workers(proj, made))
        med = statistics.median(made_s)
        rows.append(
            (
                f"b | {WORKERS} worktrees made (worktree) vs none (shared), {files:,} files",
                f"{med * 1000:.0f} ms vs 0 ms ({med * 1000 / WORKERS:.0f} ms per worktree)",
            )
        )
        floor = statistics.median(floor_s)
        rows.append(
            (
                f"b | the floor: {WORKERS} plain `git worktree add` of the same tree",
                f"{floor * 1000:.0f} ms ({floor * 1000 / WORKERS:.0f} ms per worktree)",
            )
        )

        checkout = disk_bytes(proj, checkout_only=True)
        admin_root = proj / ".git" / "worktrees"
        per = [disk_bytes(wt.path) + disk_bytes(admin_root / wt.path.name) for wt in made]
        admin = statistics.median(disk_bytes(admin_root / wt.path.name) for wt in made)
        rows.append(
            (
                "c | disk per worktree (checkout + git's admin dir) vs the leader's checkout",
                f"{mib(statistics.median(per))} (admin {mib(admin)}) vs {mib(checkout)}",
            )
        )
        removed_s.append(remove_workers(proj, made))

        (proj / "node_modules").mkdir()
        write_tree(proj / "node_modules", deps, 40, size=4000)
        dep_bytes = disk_bytes(proj / "node_modules")
        # the provisioning step alone, in one worker's checkout (the checkout's own cost is (b))
        path = create.worktree_dir(proj, "bench", "deps")
        with create.provisioned(proj, path, create.branch_name("bench", "deps"), base) as c:
            wt = c.worktree
        timings: dict[str, tuple[float, int]] = {}
        for how in ("link", "copy"):
            spec = create.Provision(**{how: ("node_modules",)})
            times: list[float] = []
            size = 0
            for _ in range(runs):
                t0 = time.perf_counter()
                create.provision(proj, wt.path, spec)
                times.append(time.perf_counter() - t0)
                size = disk_bytes(wt.path / "node_modules")
                dst = wt.path / "node_modules"
                if dst.is_symlink():
                    dst.unlink()
                else:
                    shutil.rmtree(dst)
            timings[how] = (statistics.median(times), size)
        remove.remove_worktree(proj, wt.path, wt.branch, target="main")
        rows.append(
            (
                f"d | `[worktree]` a {deps:,}-file node_modules ({mib(dep_bytes)}): link vs copy",
                f"{timings['link'][0] * 1000:.0f} ms, {mib(timings['link'][1])} vs "
                f"{timings['copy'][0] * 1000:.0f} ms, {mib(timings['copy'][1])}",
            )
        )
        rows.append(
            (
                f"e | {WORKERS} worktrees and branches removed",
                f"{statistics.median(removed_s) * 1000:.0f} ms",
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(machine_lines()))
    print(f"git: {'.'.join(map(str, version()))}")
    print()
    print("| | Benchmark | Median | Target | Meets target |")
    print("|---|---|---|---|---|")
    for what, value in rows:
        letter, _, name = what.partition(" | ")
        print(f"| {letter} | {name} | {value} | — | — |")


if __name__ == "__main__":
    main()
