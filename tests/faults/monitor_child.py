"""A monitor process for the kill tests: the real `run_monitor` loop, a fake tmux adapter.

Run as a script (`python monitor_child.py --root R --token T --log L [--block-at N]`); the token is
an argument of its own, as in `omp team monitor-run`, so `monitor_ctl.pid_alive` recognises it.
Every line the monitor types is recorded in `--log` as it is typed (one JSON line, one write).
With `--block-at N`, the process's N-th send hangs after being recorded, so a test can SIGKILL
it exactly there: after the reservation was saved and the line typed, before the outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omp.monitor import loop as monitor
from omp.monitor.policy import IDLE_PROMPT, Intervals

FAKE_SERVER = {
    "socket_path": "/nonexistent/omp-fault.sock",
    "server_pid": 4242,
    "server_started_at": 1700000000,
}


@dataclass(frozen=True)
class FakePane:
    dead: bool = False
    in_mode: bool = False
    session_id: str = "$1"
    window_id: str = "@1"
    activity: float | None = None


class FakeTmux:
    def __init__(self, log: str, block_at: int) -> None:
        self.log = log
        self.block_at = block_at
        self.sent = 0

    def server_identity(self) -> Mapping[str, Any] | None:
        return FAKE_SERVER

    def pane_states(self, pane_ids: Sequence[str]) -> Mapping[str, FakePane | None]:
        return {p: FakePane() for p in pane_ids}

    def capture(self, pane_id: str, lines: int = 40) -> list[str]:
        return ["❯ "]  # the demo profile's idle prompt: every pane is always ready

    def capture_many(self, pane_ids: Sequence[str], lines: int = 40) -> dict[str, list[str]]:
        return {p: self.capture(p, lines) for p in pane_ids}

    def deliver(
        self,
        pane_id: str,
        text: str,
        profile: Any,
        *,
        guard: Callable[[], str | None] | None = None,
        on_submitted: Callable[[], None] | None = None,
        **_: Any,
    ) -> bool:
        if guard is not None and guard() is not None:  # as type_line: asked under the lock
            return False
        kind = "idle" if text == IDLE_PROMPT else "unread"
        line = json.dumps({"pid": os.getpid(), "pane": pane_id, "kind": kind}) + "\n"
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        self.sent += 1
        if self.sent == self.block_at:
            Path(f"{self.log}.blocked.{os.getpid()}").touch()
            time.sleep(3600)  # until SIGKILL
        if on_submitted is not None:
            on_submitted()
        return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--block-at", type=int, default=0)
    args = ap.parse_args()
    fake = FakeTmux(args.log, args.block_at)
    iv = Intervals(scan=0.01, idle_delay=0.05, unread_repeat=0.05)
    received: list[str] = []  # SIGTERM ends it cleanly, as it ends `omp team monitor-run`
    signal.signal(signal.SIGTERM, lambda signum, _frame: received.append("SIGTERM"))
    monitor.run_monitor(
        Path(args.root),
        args.token,
        adapter_factory=lambda _socket: fake,
        intervals=iv,
        stop=lambda: received[0] if received else None,
    )


if __name__ == "__main__":
    main()
