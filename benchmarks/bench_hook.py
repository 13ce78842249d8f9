"""Benchmark of `omp hook stop`, the command every agent CLI runs at every stop (issue 11).

    .venv/bin/python benchmarks/bench_hook.py           # 30 rounds, about a minute
    .venv/bin/python benchmarks/bench_hook.py --quick   # 3 rounds, a smoke run
    .venv/bin/python benchmarks/bench_hook.py --python /tmp/py313/bin/python  # another Python

Prints the machine, then a table of medians: one fresh `omp hook stop` process per case and
round (the console script next to the interpreter, warm bytecode cache), stdin from a file, as a
CLI runs it; CPU time (user + system) of each, every case run in each round with `python -c pass`
of the same interpreter, and its ratio to that floor taken in the round (`benchmarks/cputime.py`).
Everything happens in a temporary project, removed afterwards. Targets: a stop without a loop
(every stop of every agent) at most 2.5x the floor; any stop under 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import cputime  # noqa: E402
from benchmarks.machine import machine_lines  # noqa: E402

TARGET_MS = 100.0
TARGET_RATIO = 2.5  # a stop without a loop, against `python -c pass`


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


WORKER_TOKEN = "bench-launch"
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
    raw["launchToken"] = WORKER_TOKEN  # the panes of this launch carry it
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
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--runs", type=int, default=30, help="rounds (each runs every case once)")
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter whose omp runs (its venv's console script, else `PYTHON -m omp`)",
    )
    args = ap.parse_args(argv)
    runs = 3 if args.quick else args.runs
    python, omp_words = cputime.interpreter(args.python)
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
        omp = [*omp_words, "hook", "stop"]
        events = 200 if args.quick else 5000
        _transcript(proj / "events.jsonl", events, 2 * runs + 4)

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

        leader = {"TMUX_PANE": "%1", "TMUX": f"{LEADER_SOCK},{LEADER_SERVER},0"}
        # a worker pane of the team: its session recorded (once, then found unchanged)
        worker = {"OMP_TEAM_WORKER": "1", "OMP_TEAM": "bench", "OMP_WORKER": "worker-1",
                  "OMP_LAUNCH_TOKEN": WORKER_TOKEN, "OMP_ROOT": str(proj)}  # fmt: skip
        # name -> (stdin of round i, environment on top): the cases, in the table's order
        quiet: dict[str, tuple[Callable[[int], bytes], dict[str, str]]] = {
            "no active loop (every stop of every agent)": (claude, {}),
            "no active loop, a team's leader pane: its session recorded": (claude, leader),
            "a worker pane of a team: its session recorded": (claude, worker),
        }
        looping: dict[str, tuple[Callable[[int], bytes], dict[str, str]]] = {
            "active loop, Claude/Codex payload: block + state write + log": (claude, {}),
            f"active loop, Copilot payload, reply from a {events}-event transcript": (copilot, {}),
            "a duplicate fire of one stop (replayed)": (lambda i: copilot(0), {}),
        }
        _team(proj)
        results: list[tuple[str, cputime.Rounds, bool]] = []
        for cases in (quiet, looping):
            if cases is looping:
                _ralph(proj)
            rounds = cputime.Rounds([python, "-c", "pass"], env, proj)
            for i in range(-1, runs):  # round -1 warms the bytecode cache: not counted
                n = 10_000 if i < 0 else i + (runs if cases is looping else 0)
                jobs = {name: cputime.job(omp, make(n), x) for name, (make, x) in cases.items()}
                rounds.round(jobs, keep=i >= 0)
            results += [(name, rounds, cases is quiet) for name in cases]
        print("# `omp hook stop`\n")
        for line in machine_lines():
            print(f"- {line}")
        print(f"- omp's Python: {_version(python)}")
        print(f"- rounds: {runs}; command: {' '.join(omp)}; CPU time (user + system) per process\n")
        print("| case | median CPU | × floor | target | meets |")
        print("|---|---|---|---|---|")
        floor = results[0][1].median("floor") * 1000
        print(f"| `python -c pass` (the floor, not omp) | {floor:.1f} ms | 1.00× | — | — |")
        for name, rounds, no_loop in results:
            cpu, ratio = rounds.median(name) * 1000, rounds.ratio(name)
            if no_loop:
                target, ok = f"≤ {TARGET_RATIO}× the floor", ratio <= TARGET_RATIO
            else:
                target, ok = f"< {TARGET_MS:.0f} ms", cpu < TARGET_MS
            print(f"| {name} | {cpu:.1f} ms | {ratio:.2f}× | {target} | {'yes' if ok else 'no'} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _version(python: str) -> str:
    code = "import platform; print(platform.python_version())"
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
