"""A sender process for the concurrency and chaos tests: `count` messages to one mailbox, each
through the store's `send`, one at a time; each id is written to the ack file only after `send`
returned (acknowledged), so the ack file is a lower bound of what the store must hold.

    python -m tests.store.conformance.writer <team> <recipient> <writer> <count> <ackfile>

The store is the one OMP_ROOT / OMP_STORE select. With a start index (`OMP_TEST_FROM`) a writer
killed and started again goes on where its ack file ends.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omp.store.backend import View


def main(argv: list[str]) -> int:
    team, recipient, writer, count, ackfile = argv
    from omp import ids
    from omp.store import select

    store = select.open_store(Path(os.environ["OMP_ROOT"]))
    seen: list[int] = []

    def check(view: View) -> None:  # odd writers send through a check (a limit's way)
        seen.append(view.unread)

    ack = Path(ackfile)
    done = len(ack.read_text().split()) if ack.exists() else 0
    with ack.open("a") as out:
        for seq in range(done, int(count)):
            mid = ids.new_id()
            msg = {
                "type": "message",
                "id": mid,
                "from": f"w{writer}",
                "to": recipient,
                "body": f"{writer}:{seq} " + "x" * 300,
                "timestamp": "2026-01-01T00:00:00.000Z",
            }
            store.send(team, recipient, [msg], check=check if int(writer) % 2 else None)
            out.write(mid + "\n")
            out.flush()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
