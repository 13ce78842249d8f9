"""Benchmarks of `omp team resume` on real tmux (private servers; never the user's).

    .venv/bin/python benchmarks/bench_resume.py [--quick]

(a) `omp team resume` of 8 demo workers whose tmux server was killed, as a process: from the
    command to every worker's trigger typed (resume returns once each agent was handed its
    `Read .../resume.md and follow it.`); beside it `omp team launch` of 8, the same way;
(b) `omp team resume` of one dead pane in a live team of 8 (in place: the other 7 untouched).

All state lives in a fresh temporary directory, removed at the end; no monitor is started
(`OMP_NO_MONITOR=1`). Target: (a) ≤ 5000 ms, as launch's.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402
from omp.tmux import Tmux  # noqa: E402

OMP = [str(Path(sys.executable).parent / "omp")]
if not os.path.exists(OMP[0]):
    OMP = [sys.executable, "-m", "omp"]
WORKERS = 8


def project(tmp: Path, name: str) -> Path:
    root = tmp / name
    (root / ".git").mkdir(parents=True)
    return root


def env_for(tmp: Path, sock: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a warm bytecode cache, as after an install
    env.update(
        HOME=str(tmp / "home"),
        SHELL="/bin/sh",
        PYTHONPYCACHEPREFIX=str(tmp / "pycache"),
        OMP_TMUX_SOCKET=sock,
        OMP_NO_MONITOR="1",
        OMP_DEMO_WORK_SECONDS="0.2",
    )
    return env


def omp(root: Path, env: dict[str, str], *args: str) -> tuple[float, Any]:
    """(seconds, the JSON answer) of one omp process; exits on a failure."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*OMP, *args, "--json"], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"omp {' '.join(args)} failed: {proc.stdout}{proc.stderr}")
    return took, json.loads(proc.stdout)


def wait_for(probe: Any, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def bench_all(tmp: Path, runs: int) -> tuple[list[float], list[float]]:
    """(launch, resume) seconds of each run: 8 workers, their server killed in between."""
    launches, resumes = [], []
    for r in range(runs):
        sock = f"omp-bench-{secrets.token_hex(4)}"
        root = project(tmp, f"all-{r}")
        env = env_for(tmp, sock)
        took, _ = omp(root, env, "team", "launch", f"{WORKERS}:demo", "bench", "--name", "b")
        launches.append(took)
        Tmux(socket_name=sock).kill_server()
        took, res = omp(root, env, "team", "resume", "b")
        if len(res["resumed"]) != WORKERS:
            raise SystemExit(f"resume brought back {len(res['resumed'])} of {WORKERS}: {res}")
        resumes.append(took)
        Tmux(socket_name=sock).kill_server()
    return launches, resumes


def bench_one(tmp: Path, runs: int) -> list[float]:
    """Seconds of resuming one dead pane of a live team of 8."""
    out = []
    for r in range(runs):
        sock = f"omp-bench-{secrets.token_hex(4)}"
        root = project(tmp, f"one-{r}")
        env = env_for(tmp, sock)
        _, res = omp(root, env, "team", "launch", f"{WORKERS}:demo", "bench", "--name", "b")
        tmux = Tmux(socket_name=sock)
        pane = res["workers"][4]["paneId"]
        tmux.send_key(pane, "C-c")  # the demo agent exits; its pane stays, dead

        wait_for(lambda t=tmux, p=pane: _dead(t, p), "the pane to die")
        took, res = omp(root, env, "team", "resume", "b")
        if [w["name"] for w in res["resumed"]] != ["worker-5"]:
            raise SystemExit(f"expected worker-5 alone: {res}")
        out.append(took)
        tmux.kill_server()
    return out


def _dead(tmux: Tmux, pane: str) -> bool:
    st = tmux.pane_states([pane])[pane]
    return st is not None and st.dead


def ms(x: float) -> str:
    return f"{x * 1000:.0f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="one run: a smoke test, not a measure")
    args = ap.parse_args()
    runs = 1 if args.quick else 5
    print("\n".join(machine_lines()))
    with tempfile.TemporaryDirectory(prefix="omp-bench-") as d:
        tmp = Path(d)
        (tmp / "home").mkdir()
        launches, resumes = bench_all(tmp, runs)
        one = bench_one(tmp, runs)
    rows = [
        ("a", f"omp team resume of {WORKERS} demo workers (server killed), to every trigger typed",
         ms(statistics.median(resumes)), "≤ 5000 ms"),
        ("a", f"omp team launch of {WORKERS} demo workers, the same way (for scale)",
         ms(statistics.median(launches)), "-"),
        ("b", f"omp team resume of 1 dead pane in a live team of {WORKERS}",
         ms(statistics.median(one)), "-"),
    ]  # fmt: skip
    print()
    print(f"| | measure ({runs} run(s) each) | median | target |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |")


if __name__ == "__main__":
    main()
