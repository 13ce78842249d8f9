"""Benchmarks of the team on real tmux (a private server; never the user's).

    .venv/bin/python benchmarks/bench_team.py [--quick]

(a) launch of 3 and of 8 demo workers, until every worker has been handed its task;
(b) the nudge: from `send-message` returning to the line being on the recipient's screen, and from
    the send's start (the nudge is typed and verified before the send returns), median and p95;
(c) `omp team status` of an 8-worker team, as a process (what a leader agent pays).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402
from omp.store.paths import StatePaths  # noqa: E402
from omp.team.launch import LaunchRequest, launch  # noqa: E402
from omp.tmux import Tmux  # noqa: E402

LIMITS = """[limits]
duplicate_window_seconds = 0
rate_max_messages = 100000
mailbox_max_unread = 100000
"""


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def project(tmp: Path, name: str) -> Path:
    root = tmp / name
    (root / ".git").mkdir(parents=True)
    (root / ".omp").mkdir()
    (root / ".omp" / "config.toml").write_text(LIMITS)
    return root


def bench_launch(tmp: Path, n: int, runs: int) -> list[float]:
    times = []
    for r in range(runs):
        sock = f"omp-bench-{secrets.token_hex(4)}"
        root = project(tmp, f"launch{n}-{r}")
        t0 = time.perf_counter()
        launch(
            LaunchRequest(workers=n, task="bench", agent="demo", name="b", socket=sock, cwd=root)
        )
        times.append(time.perf_counter() - t0)
        Tmux(socket_name=sock).kill_server()
    return times


def count_nudges(tmux: Tmux, pane: str) -> int:
    out = tmux.cmd("capture-pane", "-p", "-J", "-S", "-5000", "-t", pane)
    return out.count("new message(s). Read them")


def bench_nudge(tmp: Path, sends: int) -> tuple[list[float], list[float], list[float]]:
    sock = f"omp-bench-{secrets.token_hex(4)}"
    root = project(tmp, "nudge")
    res = launch(
        LaunchRequest(workers=8, task="bench", agent="demo", name="b", socket=sock, cwd=root)
    )
    tmux = Tmux(socket_name=sock)
    panes = {w["name"]: w["paneId"] for w in res["workers"]}
    env = dict(os.environ, OMP_ROOT=str(root))
    time.sleep(2.0)  # let the demo workers finish their 0.2 s task before measuring
    after_return, from_start, process = [], [], []
    names = list(panes)
    for i in range(sends):
        w = names[i % len(names)]
        before = count_nudges(tmux, panes[w])
        payload = json.dumps({"team_name": "b", "from": "leader", "to": w, "body": f"ping {i}"})
        t0 = time.perf_counter()
        cp = subprocess.run(
            [sys.executable, "-m", "omp", "team", "api", "send-message", "--input", payload,
             "--json"], capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        t1 = time.perf_counter()
        if not json.loads(cp.stdout).get("nudged"):
            print(f"  send {i} to {w}: not nudged", file=sys.stderr)
        while count_nudges(tmux, panes[w]) <= before:
            if time.perf_counter() - t1 > 5:
                break
            time.sleep(0.002)
        t2 = time.perf_counter()
        after_return.append(t2 - t1)
        from_start.append(t2 - t0)
        process.append(t1 - t0)
    tmux.kill_server()
    return after_return, from_start, process


def bench_status(tmp: Path, runs: int) -> tuple[list[float], list[float]]:
    sock = f"omp-bench-{secrets.token_hex(4)}"
    root = project(tmp, "status")
    launch(LaunchRequest(workers=8, task="bench", agent="demo", name="b", socket=sock, cwd=root))
    env = dict(os.environ, OMP_ROOT=str(root))
    proc = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "omp", "team", "status", "b", "--json"],
            capture_output=True, env=env, check=True,
        )  # fmt: skip
        proc.append(time.perf_counter() - t0)
    from omp.views.status import status

    inproc = []
    for _ in range(runs):
        t0 = time.perf_counter()
        status(StatePaths(root), "b")
        inproc.append(time.perf_counter() - t0)
    floor = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        floor.append(time.perf_counter() - t0)
    Tmux(socket_name=sock).kill_server()
    print(f"  (bare interpreter start: median {statistics.median(floor) * 1000:.0f} ms)")
    return proc, inproc


def ms(x: float) -> str:
    return f"{x * 1000:.0f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="few runs: a smoke test, not a measure")
    args = ap.parse_args()
    runs, sends = (1, 4) if args.quick else (5, 50)
    os.environ["OMP_DEMO_WORK_SECONDS"] = "0.2"
    # Measure what a user gets: an installed omp keeps its compiled bytecode between calls.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.pop("TMUX", None)
    print("\n".join(machine_lines()))
    rows = []
    with tempfile.TemporaryDirectory(prefix="omp-bench-") as d:
        tmp = Path(d)
        for n in (3, 8):
            t = bench_launch(tmp, n, runs)
            target = "≤ 5000 ms" if n == 8 else "-"
            rows.append((f"launch {n} demo workers until all handed their task", "median",
                         ms(statistics.median(t)), target))  # fmt: skip
        after, start, proc = bench_nudge(tmp, sends)
        rows.append(("nudge on screen after send-message returned", "median",
                     ms(statistics.median(after)), "-"))  # fmt: skip
        rows.append(("nudge on screen after send-message returned", "p95", ms(p95(after)),
                     "≤ 300 ms"))  # fmt: skip
        rows.append(("nudge on screen from send-message start", "median",
                     ms(statistics.median(start)), "-"))  # fmt: skip
        rows.append(("nudge on screen from send-message start", "p95", ms(p95(start)), "-"))
        rows.append(("send-message process incl. verified nudge", "median",
                     ms(statistics.median(proc)), "-"))  # fmt: skip
        st_proc, st_in = bench_status(tmp, max(3, runs * 4))
        rows.append(("omp team status (8 workers), process", "median",
                     ms(statistics.median(st_proc)), "≤ 150 ms"))  # fmt: skip
        rows.append(("team status (8 workers), in-process", "median",
                     ms(statistics.median(st_in)), "-"))  # fmt: skip
    print()
    print(f"| measure ({runs} launch runs, {sends} sends) | stat | value | target |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |")


if __name__ == "__main__":
    main()
