"""`omp doctor`'s pane check: does a pane started the way launch starts one reach this omp?

A throwaway private tmux server (`-L omp-doctor-<random>`, no config file; never the user's) runs
one pane with the environment launch gives a worker of the chosen agent, and in it the user's
shell as a login shell (its profile may rewrite PATH), which runs the command every agent text
names (`omp.invocation`) and looks up a bare `omp`. The server is killed before the check returns,
so nothing is left behind and no state file is written.
"""

from __future__ import annotations

import os
import secrets
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from omp import __version__, invocation

if TYPE_CHECKING:
    from omp.agents import AgentProfile
    from omp.doctor.check import Check

MARK = "OMPDOCTOR"
TIMEOUT = 15.0


def _script(omp: str) -> str:
    return (
        f'v=$({omp} --version 2>&1); printf "{MARK} version=%s\\n" "$v"; '
        f'printf "{MARK} bare=%s\\n" "$(command -v omp)"; '
        f'printf "{MARK} done\\n"; sleep 60'
    )


def _shell() -> str:
    sh = os.environ.get("SHELL", "")
    return sh if os.path.isabs(sh) and os.access(sh, os.X_OK) else "/bin/sh"


def probe(root: Path, profile: AgentProfile, *, timeout: float = TIMEOUT) -> dict[str, str]:
    """Run the check pane; `{"version": ..., "bare": ...}` as the pane printed them."""
    from omp.team.launch import worker_env
    from omp.tmux import Tmux

    omp = invocation.omp_command()
    env = worker_env(
        os.environ, profile, team="doctor", worker="doctor", root=root, token="doctor", omp=omp
    )
    tmux = Tmux(socket_name=f"omp-doctor-{secrets.token_hex(4)}", config_file="/dev/null")
    try:
        _, _, pane = tmux.new_session(
            "omp-doctor",
            cwd=root,
            command=[_shell(), "-l", "-c", _script(omp)],
            env=env,
            width=200,
            height=20,
        )
        deadline = time.monotonic() + timeout
        while True:
            lines = tmux.capture(pane, lines=20)
            if any(ln.strip() == f"{MARK} done" for ln in lines) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        tmux.kill_server()
    out: dict[str, str] = {}
    for ln in lines:
        if ln.startswith(f"{MARK} ") and "=" in ln:
            key, _, value = ln[len(MARK) + 1 :].partition("=")
            out[key] = value.strip()
    return out


def check(root: Path, profile: AgentProfile) -> Check:
    from omp.doctor.check import Check

    omp = invocation.omp_command()
    seen = probe(root, profile)
    want = f"omp {__version__}"
    shell = os.path.basename(_shell())
    if seen.get("version") != want:
        got = seen.get("version") or "nothing (the pane printed no answer in time)"
        return Check(
            "pane-omp",
            "fail",
            f"a {profile.name} worker's pane ({shell} login shell) cannot run {omp}: got {got}",
            f"check that `{omp} --version` runs from a new terminal; if omp moved or its venv "
            "was removed, reinstall it (pipx install, or pip install in a venv) and run "
            "omp doctor from that install",
        )
    bare = seen.get("bare") or ""
    found = shlex.join([bare]) if bare else "no omp"
    if bare and os.path.realpath(bare) == os.path.realpath(invocation.omp_argv()[0]):
        return Check("pane-omp", "ok", f"worker panes run this omp ({omp}); `omp` there is too")
    return Check(
        "pane-omp",
        "ok",
        f"worker panes run this omp ({omp}) as every text names it; a bare `omp` there finds "
        f"{found} (agents are never told to use it)",
    )
