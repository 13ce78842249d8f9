"""Benchmark of `omp hook stop`, the command every agent CLI runs at every stop (issue 11).

    .venv/bin/python benchmarks/bench_hook.py           # 30 runs per case, under a minute
    .venv/bin/python benchmarks/bench_hook.py --quick   # 3 runs per case, a smoke run

Prints the machine, then a table of medians: one fresh `omp hook stop` process per run (the
console script next to this interpreter, warm bytecode cache), stdin from a file, as a CLI runs
it. Everything happens in a temporary project, removed afterwards. Target: under 100 ms a call.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import machine_lines  # noqa: E402

TARGET_MS = 100.0


def _omp() -> list[str]:
    script = Path(sys.executable).parent / "omp"
    return [str(script)] if script.exists() else [sys.executable, "-m", "omp"]


def _time(argv: list[str], stdin: bytes, env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, cwd=cwd, capture_output=True, check=True)
    return (time.perf_counter() - t0) * 1000


def _ralph(proj: Path, cap: int = 1_000_000) -> None:
    state = proj / ".omp" / "state"
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    (state / "ralph.json").write_text(
        json.dumps(
            {
                "active": True,
                "iteration": 0,
                "maxIterations": cap,
                "prompt": "benchmark",
                "startedAt": "2026-11-30T00:00:00.000Z",
            }
        )
    )
    os.chmod(state / "ralph.json", 0o600)


LEADER_SOCK = "/tmp/omp-bench-sock"  # never opened: the hook compares it with the config
LEADER_SERVER = 4242


def _team(proj: Path) -> None:
    """A team whose leader pane is `%1` on the server `LEADER_SOCK` names (`$TMUX`)."""
    from omp.record import config as team_config
    from omp.store.paths import StatePaths
    from omp.team.setup import create_team

    create_team(proj, "bench", 3, task="")
    team = StatePaths(proj).team("bench")
    raw = team_config.load(team).raw
    raw["leaderPaneId"] = "%1"
    raw["tmuxIdentity"] = {"socketPath": LEADER_SOCK, "serverPid": LEADER_SERVER,
                           "serverStartedAt": 1, "sessionId": "$0", "windowId": "@0"}  # fmt: skip
    team_config.write(team, raw)


def _transcript(path: Path, events: int, stops: int) -> None:
    """A Copilot events.jsonl of `events` lines whose last lines record stop `stops`."""
    with path.open("w") as f:
        for i in range(events):
            kind = "assistant.message" if i % 3 else "tool.execution_complete"
            data = {"content": f"line {i} " + "x" * 200, "messageId": f"m{i}", "turnId": "0"}
            f.write(json.dumps({"id": f"e{i}", "type": kind, "data": data}) + "\n")
        for ts in range(stops):
            f.write(json.dumps({"type": "assistant.message", "data": {"content": "still"}}) + "\n")
            inp = {"timestamp": 1796075680000 + ts}
            f.write(json.dumps({"type": "hook.start", "data": {"input": inp}}) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="3 runs per case")
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args(argv)
    runs = 3 if args.quick else args.runs
    work = Path(tempfile.mkdtemp(prefix="omp-bench-hook-"))
    try:
        home = work / "home"
        home.mkdir()
        proj = work / "proj"
        (proj / ".git").mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
        env.update(HOME=str(home), PYTHONPYCACHEPREFIX=str(work / "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # a warm bytecode cache, as after an install
        for k in ("COPILOT_CLI", "CODEX_HOME", "GEMINI_PROJECT_DIR", "GEMINI_SESSION_ID"):
            env.pop(k, None)
        omp = [*_omp(), "hook", "stop"]
        events = 200 if args.quick else 5000
        _transcript(proj / "events.jsonl", events, runs + 2)

        def claude(i: int) -> bytes:
            return json.dumps(
                {
                    "session_id": f"bench-{i}",
                    "cwd": str(proj),
                    "hook_event_name": "Stop",
                    "permission_mode": "default",
                    "stop_hook_active": False,
                    "last_assistant_message": f"reply {i}",
                }
            ).encode()

        def copilot(i: int) -> bytes:
            return json.dumps(
                {
                    "sessionId": "bench-copilot",
                    "timestamp": 1796075680000 + i,
                    "cwd": str(proj),
                    "transcriptPath": str(proj / "events.jsonl"),
                    "stopReason": "end_turn",
                    "stop_hook_active": True,
                }
            ).encode()

        def measure(make: Callable[[int], bytes], extra: dict[str, str] | None = None) -> float:
            _time(omp, make(10_000), {**env, **(extra or {})}, proj)  # warm the bytecode cache
            return statistics.median(
                _time(omp, make(i), {**env, **(extra or {})}, proj) for i in range(runs)
            )

        floor = statistics.median(
            _time([sys.executable, "-c", "pass"], b"", env, proj) for _ in range(runs)
        )
        rows: list[tuple[str, float]] = [("`python -c pass` (the floor, not omp)", floor)]
        rows.append(("no active loop (every stop of every agent)", measure(claude)))
        _team(proj)
        rows.append(
            (
                "no active loop, a team's leader pane: its session recorded",
                measure(claude, {"TMUX_PANE": "%1", "TMUX": f"{LEADER_SOCK},{LEADER_SERVER},0"}),
            )
        )
        _ralph(proj)
        rows.append(
            ("active loop, Claude/Codex payload: block + state write + log", measure(claude))
        )
        rows.append(
            (
                f"active loop, Copilot payload, reply from a {events}-event transcript",
                measure(copilot),
            )
        )
        rows.append(("a duplicate fire of one stop (replayed)", measure(lambda i: copilot(0))))
        rows.append(
            ("a worker pane (`OMP_TEAM_WORKER=1`)", measure(claude, {"OMP_TEAM_WORKER": "1"}))
        )
        print("# `omp hook stop`\n")
        for line in machine_lines():
            print(f"- {line}")
        print(f"- runs per case: {runs}; command: {' '.join(omp)}\n")
        print("| case | median | target | meets |")
        print("|---|---|---|---|")
        for name, ms in rows:
            floor_row = name.startswith("`python")
            meets = "—" if floor_row else ("yes" if ms < TARGET_MS else "no")
            target = "—" if floor_row else f"< {TARGET_MS:.0f} ms"
            print(f"| {name} | {ms:.1f} ms | {target} | {meets} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
