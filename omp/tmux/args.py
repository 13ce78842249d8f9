"""What every tmux call is built from: the separators, the error texts that mean "gone", and the
argument lists for a new pane's environment and command.

Below both the thin client (`client.py`) and libtmux's object API (`lifecycle.py`), which share it.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence

from omp.errors import OmpError

SEP = "\x1f"  # unit separator: cannot occur in ids, numbers or command names
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
NO_SERVER = ("no server running on", "error connecting to", "server exited unexpectedly")
NO_TARGET = ("can't find pane", "can't find window", "can't find session")


def env_args(env: Mapping[str, str] | None) -> list[str]:
    args: list[str] = []
    for key, value in (env or {}).items():
        if not key or "=" in key or CONTROL.search(key):
            raise OmpError("invalid_input", f"invalid environment variable name {key!r}")
        args += ["-e", f"{key}={value}"]
    return args


def command_args(command: Sequence[str] | None, env: Mapping[str, str] | None = None) -> list[str]:
    if not command:
        return []
    path = (env or {}).get("PATH")
    if path:
        # tmux 3.3a gives a new pane the PATH of the tmux client, whatever `-e PATH=` says, so the
        # command sets it itself (`env` execs the program: the pane's process is still the agent).
        # `env` by absolute path: it is looked up on the very PATH that may lack it.
        env_prog = "/usr/bin/env" if os.path.exists("/usr/bin/env") else "env"
        command = [env_prog, f"PATH={path}", *command]
    # tmux runs several arguments directly but a single one through the default shell: quote it
    # (a path with spaces stays one word) and exec it, or the pane's foreground process would be
    # the shell and the agent would look like it had exited.
    words = [f"exec {shlex.quote(command[0])}"] if len(command) == 1 else list(command)
    return ["--", *words]
