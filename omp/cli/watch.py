"""`--watch`: redraw a read-only view about once a second until Ctrl-C."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from omp.errors import OmpError
from omp.textsafe import visible


def watch_loop(
    body: Callable[[], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    *,
    interval: float = 1.0,
    max_frames: int | None = None,
) -> None:
    frames = 0
    tty = sys.stdout.isatty()
    try:
        while max_frames is None or frames < max_frames:
            try:
                text = render(body())
            except OmpError as err:
                text = f"omp: {err.message} [{err.code}]\n"
            stamp = time.strftime("%H:%M:%S")
            if tty:
                sys.stdout.write("\x1b[H\x1b[2J")
            sys.stdout.write(visible(f"{stamp}  (Ctrl-C to stop)\n{text}"))
            sys.stdout.flush()
            frames += 1
            if max_frames is not None and frames >= max_frames:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        sys.stdout.write("\n")
    raise SystemExit(0)
