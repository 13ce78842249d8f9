"""Benchmarks of a team's life after launch: the event log, delete and prune.

    .venv/bin/python benchmarks/bench_lifecycle.py [--quick] [--runs N]

(a) `omp team events T --since END --json` (nothing new) on a log of 100,000 events: what a
    leader polling with a cursor pays per call; and the whole log read once (time, peak RSS);
(b) what the event log adds to a message to or from the leader (`Mailbox.append_messages`, in
    process, median of 2,000): one more locked append;
(c) `omp team prune --dry-run` over 20 shut-down teams (each with an archived run) and a real
    prune of them; `omp team delete` of a team holding 10,000 read messages.

All state lives in a fresh temporary directory, removed at the end. Targets: (a) a poll with
nothing new costs no more than the same call on an empty log (≤ 1.5×), the whole log < 100 MiB;
(b) ≤ 100 µs added.
"""

from __future__ import annotations

import argparse
import json
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
from omp import clock  # noqa: E402
from omp.mail.mailbox import Mailbox, new_message  # noqa: E402
from omp.record import history  # noqa: E402
from omp.store.paths import StatePaths  # noqa: E402
from omp.team.setup import archive_previous_run, create_team  # noqa: E402

OMP = [str(Path(sys.executable).parent / "omp")]
if not os.path.exists(OMP[0]):
    OMP = [sys.executable, "-m", "omp"]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    env["HOME"] = str(home)
    env["PYTHONPYCACHEPREFIX"] = str(home / "pycache")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a warm bytecode cache, as after an install
    return env


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of one omp process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*OMP, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(
            f"omp {' '.join(args)} failed: {proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return took, usage.ru_maxrss / 1024


def median_ms(args: list[str], cwd: Path, env: dict[str, str], runs: int) -> float:
    return statistics.median(timed(args, cwd, env)[0] for _ in range(runs)) * 1000


def write_log(root: Path, team: str, n: int) -> int:
    path = StatePaths(root).team(team).dir / "events.jsonl"
    with open(path, "ab") as f:
        for i in range(n):
            rec = {
                "type": "message",
                "id": f"01M8{i:022d}",
                "from": f"worker-{i % 8 + 1}",
                "to": "leader",
                "at": "2026-11-30T23:49:22.000Z",
            }
            f.write((json.dumps(rec, separators=(",", ":")) + "\n").encode())
    return path.stat().st_size


def append_us(root: Path, team: str, n: int) -> tuple[float, float]:
    """Median µs of an append to a worker and to the leader, interleaved (same machine noise)."""
    tp = StatePaths(root).team(team)
    boxes = {to: Mailbox(tp, to) for to in ("worker-2", "leader")}
    times: dict[str, list[float]] = {to: [] for to in boxes}
    for i in range(n):
        for to, box in boxes.items():
            msg = new_message("worker-1", to, f"bench {i}")
            t0 = time.perf_counter()
            box.append_messages([msg])
            times[to].append(time.perf_counter() - t0)
            box.mark([msg["id"]])  # keep the unread count (and the index) small
    return statistics.median(times["worker-2"]) * 1e6, statistics.median(times["leader"]) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs")
    ap.add_argument("--runs", type=int, default=0, help="process runs per timing")
    opts = ap.parse_args()
    events = 1000 if opts.quick else 100_000
    runs = opts.runs or (3 if opts.quick else 15)
    appends = 50 if opts.quick else 2000
    teams = 3 if opts.quick else 20
    messages = 100 if opts.quick else 10_000
    work = Path(tempfile.mkdtemp(prefix="omp-bench-life-"))
    rows: list[tuple[str, str, str, str]] = []
    try:
        home = work / "home"
        home.mkdir()
        root = work / "proj"
        (root / ".git").mkdir(parents=True)
        env = _env(home)
        os.environ.pop("OMP_ROOT", None)
        print("preparing...", file=sys.stderr)
        create_team(root, "empty", 2)
        create_team(root, "big", 2)
        end = write_log(root, "big", events)
        empty = StatePaths(root).team("empty")
        empty_end = history.cursor_at(empty, (empty.dir / "events.jsonl").stat().st_size)
        big_end = history.cursor_at(StatePaths(root).team("big"), end)
        poll_empty = median_ms(
            ["team", "events", "empty", "--since", empty_end, "--json"], root, env, runs
        )
        poll_big = median_ms(
            ["team", "events", "big", "--since", big_end, "--json"], root, env, runs
        )
        ratio = poll_big / poll_empty
        rows.append(
            (
                f"a | `events --since END` on {events:,} events vs an empty log",
                f"{poll_big:.0f} / {poll_empty:.0f} ms ({ratio:.2f}×)",
                "≤ 1.5×",
                "yes" if ratio <= 1.5 else "no",
            )
        )
        whole = [
            timed(["team", "events", "big", "--json"], root, env) for _ in range(max(1, runs // 3))
        ]
        secs = statistics.median(w[0] for w in whole)
        rss = max(w[1] for w in whole)
        rows.append(
            (
                f"a | `events --json`, the whole log of {events:,} events",
                f"{secs * 1000:.0f} ms, peak RSS {rss:.0f} MiB",
                "< 100 MiB",
                "yes" if rss < 100 else "no",
            )
        )
        to_worker, to_leader = append_us(root, "empty", appends)
        added = to_leader - to_worker
        rows.append(
            (
                "b | `Mailbox.append_messages` to a worker / to the leader (+ its event line)",
                f"{to_worker:.0f} / {to_leader:.0f} µs (+{added:.0f} µs)",
                "≤ +100 µs",
                "yes" if added <= 100 else "no",
            )
        )
        for i in range(teams):
            name = f"old{i}"
            create_team(root, name, 2, task="x")
            tp = StatePaths(root).team(name)
            tp.shutdown.write_text(json.dumps({"shutdownAt": clock.iso(time.time() - 30 * 86400)}))
            os.chmod(tp.shutdown, 0o600)
            archive_previous_run(tp)
            tp.shutdown.write_text(json.dumps({"shutdownAt": clock.iso(time.time() - 30 * 86400)}))
            os.chmod(tp.shutdown, 0o600)
        dry = median_ms(["team", "prune", "--dry-run"], root, env, runs)
        took, _ = timed(["team", "prune"], root, env)
        rows.append(
            (
                f"c | `prune --dry-run` / `prune` of {teams} shut-down teams",
                f"{dry:.0f} / {took * 1000:.0f} ms",
                "—",
                "—",
            )
        )
        create_team(root, "full", 2)
        box = Mailbox(StatePaths(root).team("full"), "worker-1")
        msgs = [new_message("leader", "worker-1", f"m{i} " + "x" * 200) for i in range(messages)]
        for k in range(0, messages, 500):
            box.append_messages(msgs[k : k + 500])
        box.mark([m["id"] for m in msgs])
        took, _ = timed(["team", "delete", "full"], root, env)
        rows.append(
            (
                f"c | `delete` of a team with {messages:,} read messages",
                f"{took * 1000:.0f} ms",
                "—",
                "—",
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(machine_lines()))
    print()
    print("| | Benchmark | Median | Target | Meets target |")
    print("|---|---|---|---|---|")
    for what, value, target, ok in rows:
        letter, _, name = what.partition(" | ")
        print(f"| {letter} | {name} | {value} | {target} | {ok} |")


if __name__ == "__main__":
    main()
