"""What the Redis store costs against the files (issue 31): a send, a mailbox read and a claim
on each backend, through the store interface (`omp.store.backend`).

    .venv/bin/python benchmarks/bench_store.py [--quick] [--runs N]

(a) one call in a warm process (the library cost): a send of one ~300-byte message; reading
    what came since a cursor (10 new lines); the undelivered messages of a mailbox holding
    10,000 delivered ones and 10 unread (for the files also through today's indexed
    `omp.mail.mailbox.Mailbox`, which the per-call commands use); a claim of a pending task.
(b) one call in a fresh process, as an agent pays it, in CPU time (user + system of the child:
    steadier than the wall clock on shared cores): `omp team api send-message` (between workers;
    to the leader, which appends an event to the team's history besides, also in wall time),
    `mailbox-list` and `claim-task`; `python -c` that opens the store and sends one message;
    against `python -c pass` and an import of redis-py alone.
(c) 8 processes sending 300 messages each to one mailbox at once: messages per second.

The Redis server is a private `redis-server` on 127.0.0.1 started here (appendonly yes,
appendfsync always: what the chaos tests prove safe), its files and the project in a fresh
temporary directory removed at the end. Loopback only: a network adds its round trips (one per
call here but `update`'s WATCH/GET/MULTI, which is three). No targets: the issue asks for the
figures and for when the store is worth it (docs/remote.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402
from omp import ids  # noqa: E402
from omp.store import select  # noqa: E402
from omp.store.backend import Store  # noqa: E402

TEAM = "bench"


def message(to: str = "worker-1") -> dict[str, Any]:
    return {
        "type": "message",
        "id": ids.new_id(),
        "from": "leader",
        "to": to,
        "body": "x" * 200,
        "timestamp": "2026-01-01T00:00:00.000Z",
    }


def timed(fn: Callable[[], object], runs: int) -> float:
    """Median seconds of `runs` calls."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 0.1 else f"{seconds * 1000:.0f} ms"


def library_rows(name: str, store: Store, root: Path, runs: int, history: int) -> list[list[str]]:
    rows = []
    store.ensure_team(TEAM)
    send = timed(lambda: store.send(TEAM, "worker-1", [message()]), runs)
    rows.append([f"a | send one message ({name})", ms(send)])

    store.append(TEAM, "outbox/worker-1", [{"n": n} for n in range(100)])
    cursor = store.read(TEAM, "outbox/worker-1").cursor

    def since() -> None:
        store.append(TEAM, "outbox/worker-2", [{"n": n} for n in range(10)])

    store.append(TEAM, "outbox/worker-2", [{"n": -1}])
    c2 = store.read(TEAM, "outbox/worker-2").cursor
    since()
    read = timed(lambda: store.read(TEAM, "outbox/worker-2", c2), runs)
    rows.append([f"a | read 10 new lines from a cursor ({name})", ms(read)])
    del cursor

    # a mailbox of `history` delivered messages and 10 unread
    box = "worker-3"
    batch = 500
    for start in range(0, history, batch):
        msgs = [message(box) for _ in range(min(batch, history - start))]
        store.send(TEAM, box, msgs)
        store.mark_delivered(TEAM, box, [m["id"] for m in msgs])
    store.send(TEAM, box, [message(box) for _ in range(10)])
    und = timed(lambda: store.undelivered(TEAM, box), max(3, runs // 10))
    rows.append([f"a | undelivered of {history:,} delivered + 10 unread ({name})", ms(und)])
    if name == "files":
        from omp.mail.mailbox import Mailbox
        from omp.store.paths import StatePaths

        mb = Mailbox(StatePaths(root).team(TEAM), box)
        mb.undelivered(keep=True)  # its index, as the monitor keeps it (read-only calls never do)
        idx = timed(lambda: mb.listing(undelivered_only=True, limit=50), runs)
        rows.append([f"a | the same through today's indexed Mailbox ({name})", ms(idx)])

    n = [0]

    def claim() -> None:
        n[0] += 1
        tid = f"{name[0]}{n[0]}"
        store.create_task(TEAM, tid, "bench")
        store.claim_task(TEAM, tid, "worker-1")

    claim_s = timed(claim, runs)
    rows.append([f"a | create + claim a task ({name})", ms(claim_s)])
    return rows


def child_cpu(argv: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) one child process took: on 2 shared cores the wall clock of
    a short process swings with the neighbours' load; its own CPU time much less."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def child_wall(argv: list[str], env: dict[str, str]) -> float:
    """The wall clock of one child: what a round trip and the server's fsync add, which CPU
    time does not see."""
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def process_time(argv: list[str], env: dict[str, str], runs: int) -> float:
    return statistics.median(child_cpu(argv, env) for _ in range(runs))


SEND_ONE = (
    "import os; from pathlib import Path; from omp.store import select; from omp import ids; "
    "s = select.open_store(Path(os.environ['OMP_ROOT'])); "
    "s.send('bench', 'worker-1', [{'type': 'message', 'id': ids.new_id(), 'from': 'leader', "
    "'to': 'worker-1', 'body': 'x', 'timestamp': 't'}])"
)

SENDER = (
    "import os, sys; from pathlib import Path; from omp.store import select; from omp import ids; "
    "s = select.open_store(Path(os.environ['OMP_ROOT'])); n = int(sys.argv[1])\n"
    "for i in range(n): s.send('bench', 'worker-9', [{'type': 'message', 'id': ids.new_id(), "
    "'from': 'w', 'to': 'worker-9', 'body': 'x' * 200, 'timestamp': 't'}])"
)


def cli_rows(name: str, root: Path, env: dict[str, str], runs: int) -> list[list[str]]:
    """What an agent pays per call: `omp team api ...` in a fresh process, on a team of
    `runs` workers (one pending task each) made in this project through this store."""
    from omp.team.setup import create_team

    os.environ["OMP_STORE"] = env["OMP_STORE"]
    try:
        create_team(root, "cli", runs, task="bench")
    finally:
        del os.environ["OMP_STORE"]
    (root / ".omp" / "config.toml").write_text(
        "[limits]\nduplicate_window_seconds = 0\nrate_window_seconds = 0\n"
        "rate_max_messages = 1000000\nmailbox_max_unread = 1000000\n"
    )
    api = [sys.executable, "-m", "omp", "team", "api"]

    def call(sub: str, payload: dict[str, Any]) -> list[str]:
        return [*api, sub, "--input", json.dumps({"team_name": "cli", **payload}), "--json"]

    n = [0]

    def timed_calls(
        make: Callable[[int], list[str]],
        cost: Callable[[list[str], dict[str, str]], float] = child_cpu,
    ) -> float:
        out = [cost(make(i), env) for i in range(runs)]
        n[0] += runs
        return statistics.median(out)

    send = timed_calls(
        lambda i: call("send-message", {"from": "worker-1", "to": "worker-2", "body": f"b{i}"})
    )
    # to the leader: the send appends an event to the team's history besides (`omp team events`)
    leader = timed_calls(
        lambda i: call("send-message", {"from": "worker-1", "to": "leader", "body": f"l{i}"})
    )
    leader_wall = timed_calls(
        lambda i: call("send-message", {"from": "worker-1", "to": "leader", "body": f"w{i}"}),
        child_wall,
    )
    listing = timed_calls(lambda i: call("mailbox-list", {"worker": "worker-2", "limit": 10}))
    claim = timed_calls(
        lambda i: call("claim-task", {"worker": f"worker-{i + 1}", "task_id": str(i + 1)})
    )
    return [
        [f"b | `omp team api send-message`, CPU ({name})", ms(send)],
        [
            f"b | `omp team api send-message` to the leader (+ a history event), CPU ({name})",
            ms(leader),
        ],
        [f"b | the same, wall clock ({name})", ms(leader_wall)],
        [f"b | `omp team api mailbox-list`, CPU ({name})", ms(listing)],
        [f"b | `omp team api claim-task`, CPU ({name})", ms(claim)],
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs")
    ap.add_argument("--runs", type=int, default=0, help="repetitions per timing")
    opts = ap.parse_args()
    runs = opts.runs or (5 if opts.quick else 200)
    proc_runs = 3 if opts.quick else 15
    history = 200 if opts.quick else 10_000
    per_sender = 20 if opts.quick else 300
    work = Path(tempfile.mkdtemp(prefix="omp-bench-store-"))
    rows: list[list[str]] = []
    server = None
    try:
        for key in [k for k in os.environ if k.startswith("OMP_")]:
            del os.environ[key]
        home = work / "home"
        home.mkdir()
        os.environ["HOME"] = str(home)
        from tests.store.redis_server import RedisServer, binary

        urls = {"files": "file"}
        if binary() is not None:
            server = RedisServer(work / "redis").start()
            urls["redis"] = server.url + "?ns=bench"
        else:
            print("redis-server not found: the Redis rows are left out", file=sys.stderr)
        env_base = {**os.environ, "PYTHONPATH": str(ROOT)}
        for name, url in urls.items():
            root = work / f"proj-{name}"
            (root / ".git").mkdir(parents=True)
            print(f"{name}: library calls...", file=sys.stderr)
            store = select.open_store(root, url=url)
            rows += library_rows(name, store, root, runs, history)
            env = {**env_base, "OMP_ROOT": str(root), "OMP_STORE": url}
            print(f"{name}: processes...", file=sys.stderr)
            rows.append(
                [
                    f"b | a fresh process opens the store and sends one message, CPU ({name})",
                    ms(process_time([sys.executable, "-c", SEND_ONE], env, proc_runs)),
                ]
            )
            rows += cli_rows(name, root, env, proc_runs)
            senders = [
                subprocess.Popen([sys.executable, "-c", SENDER, str(per_sender)], env=env)
                for _ in range(8)
            ]
            t0 = time.perf_counter()
            for p in senders:
                p.wait()
            took = time.perf_counter() - t0
            got = len(store.read(TEAM, "mailbox/worker-9").records)
            assert got == 8 * per_sender, got
            rows.append(
                [
                    f"c | 8 processes x {per_sender} sends to one mailbox ({name})",
                    f"{got / took:,.0f} messages/s (incl. process start)",
                ]
            )
            store.close()
        floor = process_time([sys.executable, "-c", "pass"], env_base, proc_runs)
        rows.append(["b | the floor: `python -c pass`, CPU", ms(floor)])
        if server is not None:
            imp = process_time([sys.executable, "-c", "import redis"], env_base, proc_runs)
            rows.append(["b | `python -c 'import redis'` (redis-py alone), CPU", ms(imp)])
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("# Store backends: files vs Redis\n")
    for line in machine_lines():
        print(f"- {line}")
    if server is not None:
        print("- redis-server on 127.0.0.1, appendonly yes, appendfsync always")
    print("\n| Benchmark | Median |\n|---|---|")
    for what, value in sorted(rows, key=lambda r: r[0][0]):
        print(f"| {what} | {value} |")


if __name__ == "__main__":
    main()
