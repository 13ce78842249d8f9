"""`procs.end_after` also ends a team process that started while the panes closed (an agent
relaunching itself on the pane's hangup), which the collection before the close could not see."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from omp import procs


def test_a_process_started_during_the_close_is_ended_too(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_TEAM": "t9", "OMP_WORKER": "worker-1", "OMP_ROOT": str(tmp_path)}
    started: list[subprocess.Popen[bytes]] = []

    def close() -> None:  # the relaunched copy appears only now
        started.append(
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
        )

    try:
        ended = procs.end_after(close, [], procs.EnvMatch("t9", str(tmp_path)))
        assert started[0].wait(timeout=10) is not None  # ended, not left running
        assert ended.found == 1 and ended.left == []
    finally:
        for p in started:
            p.kill()
            p.wait()
