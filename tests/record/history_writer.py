"""A writer of a team's history for the tests: `count` events, one `history.record` each (the
real hand-over: the files, or the store `OMP_STORE` selects), each `{"type": "note", "writer",
"seq"}`.

    python -m tests.record.history_writer <root> <team> <writer> <count>
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    root, team, writer, count = argv
    from omp.record import config, history
    from omp.store.paths import StatePaths

    cfg = config.load(StatePaths(Path(root)).team(team))
    for seq in range(int(count)):
        history.record(cfg.paths, {"type": "note", "writer": writer, "seq": seq})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
