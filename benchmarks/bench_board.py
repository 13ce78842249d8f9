"""The board (`omp team board`) watching a demo team of 24 workers, in Debian's chromium.

    .venv/bin/python benchmarks/bench_board.py [--quick] [--workers N] [--rounds N]

A throwaway git repository (as `omp demo` makes one), a private tmux server (never the user's),
`omp team launch 24:demo` with a worktree per worker and the project's monitor running, waited
until every task is done and idle. Then `omp team board` in a child process, and its page open in
chromium (Playwright with the system browser: `/usr/bin/chromium`, or OMP_BENCH_CHROMIUM).

(a) a task that moves: a new task written to the store (`omp.tasks.tasks.create`), then claimed
    through `omp team api claim-task`, each timed from just before the change until the page's
    task board shows it (polled in the page every 10 ms);
(b) a worker's screen that changes: a few characters typed into an idle demo worker's pane
    (`tmux send-keys -l`, erased again after), timed until the page's screen of that worker shows
    them;
(c) the board server's CPU while nothing changes, the page open: its own time plus its reaped
    children (the tmux clients it runs) over 30 s (5 s with --quick), after 10 s of settling;
    beside it the tmux server's time over the same window.

Targets (issue 30): a state change on the page within 1 s with 24 workers; the server under 2%
of one core while nothing changes.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
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

CHROMIUM = os.environ.get("OMP_BENCH_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TICK = os.sysconf("SC_CLK_TCK")


def say(msg: str) -> None:
    sys.stderr.write(f"[bench_board] {msg}\n")
    sys.stderr.flush()


def omp(*args: str, cwd: Path, env: dict[str, str], timeout: float = 180) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "omp", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise SystemExit(f"omp {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return json.loads(proc.stdout) if "--json" in args else proc.stdout


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(own user+system, reaped children's user+system) of a process, seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


def wait_for(check: Any, timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer rounds, a shorter CPU window")
    ap.add_argument("--workers", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=None)
    opts = ap.parse_args()
    rounds = opts.rounds or (3 if opts.quick else 10)
    window = 5.0 if opts.quick else 30.0
    settle = 3.0 if opts.quick else 10.0

    from playwright.sync_api import sync_playwright

    from omp.cli.demo import make_repo
    from omp.store.paths import StatePaths
    from omp.tasks import tasks
    from omp.tmux import Tmux

    work = Path(tempfile.mkdtemp(prefix="omp-bench-board-")).resolve()
    sock = f"omp-bench-board-{secrets.token_hex(4)}"
    tmux = Tmux(socket_name=sock, config_file="/dev/null")
    home = work / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    env.update(HOME=str(home), SHELL="/bin/sh", OMP_TMUX_SOCKET=sock)
    env.update(OMP_DEMO_WORK_SECONDS="0.5")
    env.pop("TMUX", None)
    board: subprocess.Popen[str] | None = None
    rows: list[tuple[str, str, str, str, str]] = []
    try:
        repo, _ = make_repo(work)
        say(f"launching {opts.workers} demo workers in {repo}")
        name = "bench"
        omp(
            "team", "launch", f"{opts.workers}:demo", "write a haiku", "--name", name,
            "--workspace", "worktree", "--json", cwd=repo, env=env, timeout=300,
        )  # fmt: skip
        wait_for(
            lambda: omp("team", "status", name, "--json", cwd=repo, env=env)["teams"][0]["allDone"],
            300,
            "the team done",
        )
        team = StatePaths(repo).team(name)
        cfg_panes = json.loads((team.config).read_text())["workers"]
        pane = cfg_panes[0]["paneId"]
        board = subprocess.Popen(
            [sys.executable, "-m", "omp", "team", "board", name],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert board.stdout is not None
        url = board.stdout.readline().strip()
        say(f"board at {url.split('?')[0]}")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_function(
                f"() => document.querySelectorAll('#workers tbody tr').length == {opts.workers}",
                timeout=60000,
            )
            # every branch row read (the board reads them a few per tick at first)
            page.wait_for_function(
                "() => ![...document.querySelectorAll('#workers tbody td')]"
                ".some(td => td.textContent.includes('reading'))",
                timeout=120000,
            )

            def timed(change: Any, probe: str) -> float:
                t0 = time.perf_counter()
                change()
                # a function, not an expression: the page's CSP forbids eval of a string
                page.wait_for_function("() => " + probe, timeout=10000, polling=10)
                return time.perf_counter() - t0

            created, claimed, typed = [], [], []
            for i in range(rounds):
                tid = str(1000 + i)
                created.append(
                    timed(
                        lambda tid=tid: tasks.create(team, tid, f"bench task {tid}"),
                        f"!!document.querySelector('[data-column=ready] [data-task=\"{tid}\"]')",
                    )
                )
                payload = json.dumps({"team_name": name, "task_id": tid, "worker": "worker-2"})
                claimed.append(
                    timed(
                        lambda p=payload: omp(
                            "team", "api", "claim-task", "--input", p, cwd=repo, env=env
                        ),
                        "!!document.querySelector("
                        f"'[data-column=in_progress] [data-task=\"{tid}\"]')",
                    )
                )
                # claim-task costs a process start before the change lands: subtract nothing,
                # it is what a person sees after an agent's call
                mark = f"zq{i}x"
                typed.append(
                    timed(
                        lambda m=mark: tmux.send_literal(pane, m),
                        "document.querySelector('figure[data-worker=\"worker-1\"] pre')"
                        f".textContent.includes('{mark}')",
                    )
                )
                tmux.send_key(pane, "C-u")
                time.sleep(1.5)  # idle again between rounds: the slower idle pace is measured
            say(f"settling {settle:g} s, then {window:g} s of idle CPU")
            time.sleep(settle)
            server_pid = int(tmux.cmd("display-message", "-p", "#{pid}").strip())
            a, sa = cpu_seconds(board.pid), cpu_seconds(server_pid)
            t0 = time.monotonic()
            time.sleep(window)
            dt = time.monotonic() - t0
            z, sz = cpu_seconds(board.pid), cpu_seconds(server_pid)
            browser.close()
        own = (z[0] - a[0]) / dt * 100
        kids = (z[1] - a[1]) / dt * 100
        tserver = (sz[0] - sa[0]) / dt * 100

        def ms(xs: list[float]) -> str:
            return f"{statistics.median(xs) * 1000:.0f} ms (max {max(xs) * 1000:.0f})"

        def ok(xs: list[float]) -> str:
            return "yes" if max(xs) < 1.0 else "no"

        n = opts.workers
        rows = [
            (
                "a",
                f"a new task on the page's board ({n} workers)",
                ms(created),
                "< 1 s",
                ok(created),
            ),
            ("a", "a task claimed (`claim-task`) moves column", ms(claimed), "< 1 s", ok(claimed)),
            (
                "b",
                "text typed in an idle worker's pane on its screen",
                ms(typed),
                "< 1 s",
                ok(typed),
            ),
            (
                "c",
                f"board server CPU, idle, page open ({window:g} s): own + tmux clients",
                f"{own + kids:.2f}% ({own:.2f}% + {kids:.2f}%)",
                "< 2% of a core",
                "yes" if own + kids < 2 else "no",
            ),
            ("c", "the tmux server over the same window", f"{tserver:.2f}%", "—", "—"),
        ]
    finally:
        if board is not None:
            board.terminate()
            try:
                board.wait(timeout=10)
            except subprocess.TimeoutExpired:
                board.kill()
        try:
            omp("team", "shutdown", "bench", "--json", cwd=work / "repo", env=env)
        except (SystemExit, Exception):
            pass
        tmux.kill_server()
        shutil.rmtree(work, ignore_errors=True)
    print("# omp team board\n")
    print("\n".join(machine_lines()))
    print()
    print("| | Benchmark | Median | Target | Meets target |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
