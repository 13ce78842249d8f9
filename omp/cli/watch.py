"""`--watch`: redraw a read-only view about once a second until Ctrl-C."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from omp.cli import output
from omp.errors import OmpError
from omp.textsafe import visible


def watch_loop(
    body: Callable[[], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    *,
    interval: float = 1.0,
    max_frames: int | None = None,
    as_json: bool = False,
) -> None:
    """Redraw `render(body())` until Ctrl-C; with `as_json`, print each frame as one JSON object
    on a line of its own instead (JSON Lines: no screen clearing, no stamp line)."""
    frames = 0
    tty = sys.stdout.isatty() and not as_json
    try:
        while max_frames is None or frames < max_frames:
            if as_json:
                try:
                    frame = body()
                except OmpError as err:
                    frame = err.to_json()
                output.emit_json(frame)
            else:
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
        if not as_json:
            sys.stdout.write("\n")
            sys.stdout.flush()
        output.interrupted()  # 130, as every command stopped by Ctrl-C
    except BrokenPipeError:  # `| head`: the reader is gone, so is the point of watching
        pass
    raise SystemExit(0)
