"""A real GitHub Copilot CLI team on the scripted model: how long a worker takes to reach omp.

    .venv/bin/python benchmarks/bench_copilot_team.py [--runs N] [--quick]

Each run launches 2 Copilot CLI 1.0.102 workers through the real `omp team launch` (a private
tmux server, HOME pinned, the scripted model of tests/agents on loopback) and waits for allDone.
Measured per run:

- launch: `omp team launch` until it returned (both agents started and handed their trigger);
- whole run: launch start until `omp team status` says allDone;
- trigger -> first omp call: server side, from the request carrying a worker's trigger to the
  request carrying its claim-task output (the model answers at once: this is the CLI's own
  overhead for two tool turns, `cat` of the inbox then `claim-task`).

Needs the pinned CLI (`scripts/install-agent-clis.sh`); prints why and exits 0 without it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402
from tests.agents.clis import AgentTeam, find_copilot, poll  # noqa: E402
from tests.agents.scripted_model import ScriptedModel  # noqa: E402
from tests.agents.worker_policy import CLAIMED, WorkerPolicy  # noqa: E402


def trigger_to_claim(model: ScriptedModel, worker: str) -> float:
    part = f"/workers/{worker}/inbox.md"
    t_trigger = None
    for ex in list(model.requests):
        msgs = ex.chat.messages
        users = [str(m.get("content")) for m in msgs if m.get("role") == "user"]
        if not any(part in u for u in users):
            continue
        t_trigger = t_trigger or ex.chat.received
        if any(m.get("role") == "tool" and CLAIMED in str(m.get("content")) for m in msgs):
            return ex.chat.received - t_trigger
    raise RuntimeError(f"{worker}: no claim seen\n{model.dump()}")


def one_run(copilot: Path) -> tuple[float, float, list[float]]:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel(WorkerPolicy()) as model:
        team = AgentTeam(Path(tmp), copilot, model)
        try:
            t0 = time.monotonic()
            team.launch(2)
            launched = time.monotonic() - t0
            poll(lambda: team.status()["allDone"], "allDone", timeout=180)
            whole = time.monotonic() - t0
            lat = [trigger_to_claim(model, w) for w in ("worker-1", "worker-2")]
        finally:
            team.close()
    return launched, whole, lat


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one run")
    args = ap.parse_args()
    copilot, why = find_copilot()
    print("\n".join(machine_lines()))
    if copilot is None:
        print(f"skipped: {why}")
        return 0
    runs = 1 if args.quick else args.runs
    launch, whole, lat = [], [], []
    for i in range(runs):
        a, b, c = one_run(copilot)
        launch.append(a)
        whole.append(b)
        lat.extend(c)
        print(f"run {i + 1}/{runs}: launch {a:.1f} s, allDone {b:.1f} s", file=sys.stderr)
    print(f"\nCopilot CLI 1.0.102, 2 workers, scripted model; medians of {runs} run(s)\n")
    print("| measure | median | min | max |")
    print("|---|---|---|---|")
    for name, xs in (
        ("`omp team launch` of 2 workers (both triggered)", launch),
        ("whole run: launch to allDone", whole),
        ("trigger to the first omp call's output (per worker)", lat),
    ):
        med, lo, hi = statistics.median(xs), min(xs), max(xs)
        print(f"| {name} | {med:.2f} s | {lo:.2f} s | {hi:.2f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
