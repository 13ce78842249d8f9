"""Benchmarks of a team's life after launch: the event log, delete and prune.

    .venv/bin/python benchmarks/bench_lifecycle.py [--quick] [--runs N] [--before REV]

(a) `omp team events T --since END --json` (nothing new) on a log of 100,000 events: what a
    leader polling with a cursor pays per call; and the whole log read once (time, peak RSS);
    then `events --json` of the whole log, two logs of 100,000 events (all messages, and a mix
    of omp's kinds: tasks with results beyond ASCII and on several lines, members, attention
    with its `seq`), in the same rounds: now, the parse path (every line parsed and encoded
    again, what `--follow` prints, which the output must equal byte for byte) and, with
    `--before REV`, omp at that commit (`git archive` of its `omp/`);
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


def timed(
    args: list[str], cwd: Path, env: dict[str, str], omp: list[str] | None = None
) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of one omp process (`omp`: how to start it)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*(omp or OMP), *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
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


# `python -c` of omp's entry point from the tree named by argv[1] (every variant alike)
LAUNCH = (
    "import sys\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "{patch}"
    "from omp.cli import main\n"
    "sys.argv[0] = 'omp'\n"
    "sys.exit(main())\n"
)
# `events --json` with every line parsed and encoded again: the reference the output must equal,
# `history.iter_since`'s work and `_print(evs, as_json=True)`'s, a block at a time
PARSE_PATH = (
    "from omp.cli import events_json, output\n"
    "from omp.store import jsonl\n"
    "from omp.textsafe import visible\n"
    "def parse_path(data, start, prefix, shapes):\n"
    "    chunk = jsonl.Chunk(start=start, end=start)\n"
    "    jsonl.parse_lines(data, start, chunk)\n"
    "    evs = []\n"
    "    for off, length, rec in chunk.records:\n"
    "        if rec.get('type') != 'log':\n"
    "            rec['cursor'] = prefix + str(off + length)\n"
    "            evs.append(rec)\n"
    "    text = ''.join(output.dumps(e) + '\\n' for e in evs)\n"
    "    return visible(text).encode('utf-8', 'replace'), len(evs)\n"
    "events_json.render = parse_path\n"
)


def write_mixed_log(root: Path, team: str, n: int) -> None:
    """`n` events of omp's kinds as its writer encodes them (`jsonl.encode`)."""
    from omp.store import jsonl

    at = "2026-11-30T23:49:22.000Z"
    out = []
    for i in range(n):
        k = i % 10
        w = f"worker-{i % 8 + 1}"
        ev: dict[str, object]
        if k < 5:
            ev = {"type": "message", "id": f"01M8{i:022d}", "from": w, "to": "leader"}
            if k == 4:
                ev["event"] = "task_done"
        elif k < 8:
            # a worker's result: beyond ASCII (an em dash), and every third on two lines
            result = f"done {i} — tests pass" + ("\nsee notes.md" if k == 7 else "")
            ev = {"type": "task", "taskId": str(i), "from": "in_progress", "to": "completed"}
            ev.update(owner=w, result=result)
        elif k == 8:
            ev = {"type": "attention", "worker": w, "change": "started"}
            ev.update(what="permission prompt", seq=i)
        else:
            ev = {"type": "member", "worker": w, "change": "online"}
        out.append(jsonl.encode({**ev, "at": at}))
    with open(StatePaths(root).team(team).dir / "events.jsonl", "ab") as f:
        f.write(b"".join(out))


def whole_log_rounds(
    root: Path, env: dict[str, str], teams: list[str], trees: dict[str, tuple[Path, str]], runs: int
) -> dict[tuple[str, str], float]:
    """Median ms of `events T --json` per (team, variant), the variants interleaved round by
    round (load hits all alike); each variant's output checked against the parse path's."""
    times: dict[tuple[str, str], list[float]] = {}
    for team in teams:
        outs = {}
        for name, (tree, patch) in trees.items():
            cmd = [sys.executable, "-c", LAUNCH.format(patch=patch), str(tree)]
            args = [*cmd, "team", "events", team, "--json"]
            outs[name] = subprocess.run(args, cwd=root, env=env, capture_output=True).stdout
        if outs["now"] != outs["parse path"]:
            raise SystemExit(f"events {team} --json differs from the parse path")
    for _ in range(runs):
        for team in teams:
            for name, (tree, patch) in trees.items():
                cmd = [sys.executable, "-c", LAUNCH.format(patch=patch), str(tree)]
                took, _ = timed(["team", "events", team, "--json"], root, env, cmd)
                times.setdefault((team, name), []).append(took)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def before_tree(rev: str, work: Path) -> Path:
    """omp's package at commit `rev`, exported beside the benchmark's state."""
    dest = work / "before"
    dest.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "omp"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


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
    ap.add_argument("--before", metavar="REV", help="also time `events --json` of omp at REV")
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
        create_team(root, "mixed", 2)
        write_mixed_log(root, "mixed", events)
        trees = {"now": (ROOT, ""), "parse path": (ROOT, PARSE_PATH)}
        if opts.before:
            trees["before"] = (before_tree(opts.before, work), "")
        medians = whole_log_rounds(root, env, ["big", "mixed"], trees, max(1, runs // 3))
        for team, what in (("big", "all messages"), ("mixed", "omp's kinds mixed")):
            now, ref = medians[(team, "now")], medians[(team, "parse path")]
            old = (
                f"before ({opts.before}) {medians[(team, 'before')]:.0f} ms, "
                if opts.before
                else ""
            )
            rows.append(
                (
                    f"a | `events --json` of {events:,} events, {what}: the same rounds",
                    f"{old}parse path {ref:.0f} ms, now {now:.0f} ms (same bytes)",
                    "—",
                    "—",
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
