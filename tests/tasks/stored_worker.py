"""A worker process for the store's task chaos test: creates, claims and completes `count`
tasks of its own through `omp.tasks.tasks` (the store selected by OMP_STORE), writing each task
id to its ack file once its completion returned.

    python -m tests.tasks.stored_worker <team> <worker> <count> <ackfile>
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    team_name, worker, count, ackfile = argv
    from omp.store.paths import StatePaths
    from omp.tasks import tasks

    team = StatePaths(Path(os.environ["OMP_ROOT"])).team(team_name)
    ack = Path(ackfile)
    done = len(ack.read_text().split()) if ack.exists() else 0
    with ack.open("a") as out:
        for k in range(done, int(count)):
            tid = f"{worker}-{k}"
            if tasks.read(team, tid) is None:
                tasks.create(team, tid, f"task {k} of {worker}")
            task = tasks.read(team, tid)
            assert task is not None
            if task["status"] == "pending":
                _, token = tasks.claim(team, tid, worker)
            else:  # claimed before a kill took the answer away
                token = task["claimToken"]
            if task["status"] != "completed":
                tasks.transition(
                    team, tid, worker=worker, from_status="in_progress", to_status="completed",
                    token=token, result="ok",
                )  # fmt: skip
            out.write(tid + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
