"""Benchmark of the usage readers (issue 22): a 50 MB session record, first read vs later reads.

    .venv/bin/python benchmarks/bench_usage.py           # 50 MB records, 5 runs per case
    .venv/bin/python benchmarks/bench_usage.py --quick   # 2 MB records, 3 runs: a smoke run

For each agent CLI, a record is grown to the size by repeating the body of its recorded
session (tests/fixtures/usage/<cli>/), ids renumbered per repeat so every call counts. Then,
in-process (`read_usage`, the call `omp team usage` and `status` will make):
- the first read: the whole file, no saved state (warm page cache);
- a later read with nothing new: the saved state, one fstat and one 4 KiB compare;
- a later read after the CLI appended one more turn (the recorded session's body, a few KB);
- for scale, a naive reader that parses every line with `json.loads` (the first read without
  the marker scan).
Then the same records as a team worker's session (`omp team usage`, issue 22), in-process:
- `usage` with no usage index yet (no monitor ran): the whole record;
- the monitor's first index refresh (the whole record, and the index written);
- `usage` from the index, nothing new; and after one more turn past the index;
- the monitor's refresh after one more turn;
- `omp team usage --json` as a process, from the index (what a person waits for).
Everything happens in a temporary directory, removed afterwards.
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
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import machine_lines  # noqa: E402
from omp.usage.read import read_usage  # noqa: E402
from omp.usage.totals import UsageTotals  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "usage"
RECORDS = {
    "copilot": ".copilot/session-state/*/events.jsonl",
    "claude": ".claude/projects/*/*.jsonl",
    "codex": ".codex/sessions/**/rollout-*.jsonl",
    "gemini": ".gemini/tmp/*/chats/session-*.jsonl",
    "pi": ".pi/agent/sessions/*/*.jsonl",
}
# Per repeat, the ids a reader counts a call once by are made new.
IDS = {
    "claude": [b'"id":"msg_'],
    "gemini": [b'"id":"'],
    "codex": [b'"response_id":"'],
}
TARGET_LATER_MS = 5.0  # a later read of one new turn, whatever the record's size
TARGET_FIRST_S = 2.0  # the first read of 50 MB


def _body(kind: str) -> tuple[bytes, bytes]:
    path = next((FIXTURES / kind / "home").glob(RECORDS[kind]))
    lines = path.read_bytes().splitlines(keepends=True)
    return lines[0], b"".join(lines[1:])


def _turn(kind: str, body: bytes, n: int) -> bytes:
    for key in IDS.get(kind, []):
        body = body.replace(key, key + b"r%d-" % n)
    return body


def _grow(kind: str, path: Path, size: int) -> int:
    head, body = _body(kind)
    n = 0
    with path.open("wb") as f:
        f.write(head)
        written = len(head)
        while written < size:
            turn = _turn(kind, body, n)
            f.write(turn)
            written += len(turn)
            n += 1
    return n


def _ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _naive(path: Path) -> int:
    n = 0
    with path.open("rb") as f:
        for line in f:
            json.loads(line)
            n += 1
    return n


def _team(work: Path, kind: str, record: Path) -> Any:
    """A headless team of one worker whose session (as its stop hook records it) is `record`."""
    from omp.record import config as team_config
    from omp.store.paths import StatePaths
    from omp.team.setup import create_team

    root = work / f"proj-{kind}"
    (root / ".git").mkdir(parents=True)
    create_team(root, "b", 1)
    team = StatePaths(root).team("b")
    raw = team_config.load(team).raw
    raw["workers"][0]["agent"] = kind
    team_config.write(team, raw)
    doc = {"agent": kind, "sessionId": "bench", "transcriptPath": str(record)}
    team.session("worker-1").write_text(json.dumps(doc))
    return team


def _team_row(work: Path, kind: str, path: Path, runs: int) -> tuple[Any, ...]:
    from omp.monitor import usage as index
    from omp.record import config as team_config
    from omp.views.usage import usage

    team = _team(work, kind, path)
    cfg = team_config.load(team)
    idx = team.project.monitor_usage_index("b")

    def fresh() -> object:
        idx.unlink(missing_ok=True)
        return usage(cfg)

    no_index = _ms(fresh, runs)
    t0 = time.perf_counter()
    index.refresh(cfg, {})
    first_refresh = (time.perf_counter() - t0) * 1000
    from_index = _ms(partial(usage, cfg), runs)
    _, body = _body(kind)
    with path.open("ab") as f:
        f.write(_turn(kind, body, 10**6))
    past = _ms(partial(usage, cfg), runs)
    later_refresh = []
    for i in range(runs):
        with path.open("ab") as f:
            f.write(_turn(kind, body, 10**6 + 1 + i))
        t0 = time.perf_counter()
        index.refresh(cfg, {})
        later_refresh.append((time.perf_counter() - t0) * 1000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    argv = [sys.executable, "-m", "omp", "team", "usage", "b", "--json"]

    def cli() -> None:
        subprocess.run(argv, cwd=team.project.root, env=env, check=True, capture_output=True)

    cli()  # warm the bytecode cache
    proc_ms = _ms(cli, runs)
    return (no_index, first_refresh, from_index, past, statistics.median(later_refresh),
            proc_ms, idx.stat().st_size)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="2 MB records, 3 runs per case")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mb", type=float, default=50.0)
    args = ap.parse_args(argv)
    runs = 3 if args.quick else args.runs
    size = int((2.0 if args.quick else args.mb) * 1024 * 1024)
    work = Path(tempfile.mkdtemp(prefix="omp-bench-usage-"))
    rows: list[tuple[str, str, int, float, float, float, float]] = []
    team_rows: list[tuple[Any, ...]] = []
    try:
        for kind in RECORDS:
            path = work / f"{kind}.jsonl"
            turns = _grow(kind, path, size)
            first, state = read_usage(kind, path)
            if not isinstance(first, UsageTotals):
                raise SystemExit(f"{kind}: {first}")
            first_ms = _ms(partial(read_usage, kind, path), runs)
            same_ms = _ms(partial(read_usage, kind, path, state), runs)
            _, body = _body(kind)
            later: list[float] = []
            for i in range(runs):
                with path.open("ab") as f:
                    f.write(_turn(kind, body, turns + i))
                t0 = time.perf_counter()
                got, state = read_usage(kind, path, state)
                later.append((time.perf_counter() - t0) * 1000)
                assert isinstance(got, UsageTotals) and got.tokens.calls > first.tokens.calls
            naive_ms = _ms(partial(_naive, path), 1)
            size_mb = path.stat().st_size / 1024 / 1024
            rows.append((kind, f"{size_mb:.0f} MB", first.tokens.calls, first_ms, same_ms,
                         statistics.median(later), naive_ms))  # fmt: skip
            team_rows.append((kind, f"{size_mb:.0f} MB", *_team_row(work, kind, path, runs)))
            path.unlink()
        print("# Usage readers: a session record read first whole, then incrementally\n")
        for line in machine_lines():
            print(f"- {line}")
        print(f"- runs per case: {runs}; medians; in-process `read_usage`\n")
        print(
            "| CLI | record | calls | first read | later, nothing new | later, one new turn "
            "| naive json.loads of every line | meets target |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for kind, mb, calls, first_ms, same_ms, later_ms, naive_ms in rows:
            meets = first_ms < TARGET_FIRST_S * 1000 * size / (50 * 1024 * 1024) + 50 and (
                later_ms < TARGET_LATER_MS
            )
            print(
                f"| {kind} | {mb} | {calls} | {first_ms:.0f} ms | {same_ms:.3f} ms "
                f"| {later_ms:.2f} ms | {naive_ms:.0f} ms | {'yes' if meets else 'no'} |"
            )
        print(
            f"\nTargets: a later read of one new turn < {TARGET_LATER_MS:.0f} ms at any size; "
            f"the first read of 50 MB < {TARGET_FIRST_S:.0f} s (scaled to the record's size)."
        )
        print("\n## `omp team usage`: one worker whose session record is that size\n")
        print(
            "| CLI | record | usage, no index | monitor's first refresh | usage from the index "
            "| usage, one turn past the index | refresh, one new turn "
            "| `omp team usage --json` process | index size |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for kind, mb, none, first_r, idx_ms, past, later_r, proc_ms, size in team_rows:
            print(
                f"| {kind} | {mb} | {none:.0f} ms | {first_r:.0f} ms | {idx_ms:.2f} ms "
                f"| {past:.2f} ms | {later_r:.2f} ms | {proc_ms:.0f} ms | {size / 1024:.0f} KiB |"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
