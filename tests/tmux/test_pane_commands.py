"""Every command omp hands an agent runs, exactly as printed, from a real shell in a real pane.

What a real agent does: its shell tool runs the line its inbox (or a nudge) printed. Here the
"agent" of each worker pane is a shell, plain (`sh -i`) or a login bash whose profile rewrites
PATH, and omp was launched the way the README installs it: `.venv/bin/omp`, venv not activated,
so no `omp` on anyone's PATH. The test types each printed command into the pane unchanged (only
the slots an agent fills are filled) and reads what it printed.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.tmux import Tmux
from tests.helpers import child_env, poll

pytestmark = [pytest.mark.tmux, pytest.mark.slow]  # real shells in real panes, a venv built

VENV_OMP = Path(sys.executable).parent / "omp"
BARE_PATH = "/usr/bin:/bin"  # no venv, no omp
# A printed command: the omp words (one shell word, or `<python> -m omp`), then the API call.
PRINTED = re.compile(r"(?:'[^']*'|[^\s'`]+)(?: -m omp)? team api [a-z-]+ --input '[^']*' --json")

SHELLS = {
    "plain-sh": (["sh", "-i"], None),
    # A login shell whose profile throws away the PATH the pane was given.
    "login-bash": (["bash", "--login", "-i"], f"export PATH={BARE_PATH}\nPS1='$ '\n"),
}


@pytest.fixture(params=sorted(SHELLS))
def team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    if shutil.which("tmux") is None or shutil.which("bash") is None:
        pytest.skip("tmux and bash are needed")
    if not VENV_OMP.is_file():
        pytest.skip(f"no console script at {VENV_OMP}: omp is not installed in a venv")
    command, profile = SHELLS[request.param]
    home = tmp_path / "home"
    home.mkdir()
    if profile:
        (home / ".bash_profile").write_text(profile)
    proj = tmp_path / "proj"
    (proj / ".omp").mkdir(parents=True)
    (proj / ".omp" / "agents.toml").write_text(
        "[agents.shell]\n"
        f"command = {json.dumps(command)}\n"
        "ready_patterns = ['^[$#] ?$']\n"  # sh's prompt is `# ` for root
        "prompt_pattern = '^[$#] '\n"
        "busy_patterns = ['^omp-never-busy$']\n"
        "startup_timeout = 60\n"
    )
    socket = f"omp-test-{secrets.token_hex(4)}"
    env = child_env(home, PATH=BARE_PATH, SHELL="/bin/sh", ENV="")
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    launch = ["team", "launch", "2:shell", "write a haiku", "--name", "t", "--socket", socket]
    proc = subprocess.run(
        [str(VENV_OMP), *launch, "--nudge-leader", "--json"],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    tmux = Tmux(socket_name=socket, config_file="/dev/null")
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = json.loads(proc.stdout)
        yield {"out": out, "tmux": tmux, "proj": proj, "shell": request.param, "tmp": tmp_path}
    finally:
        tmux.kill_server()


def run_in_pane(tmux: Tmux, pane: str, line: str, out: Path) -> Any:
    """Type `line` into the pane's shell, unchanged, with its output sent to a file."""
    tmux.send_literal(pane, f"{line} > {out} 2>&1; echo done-{out.name}")
    tmux.send_key(pane, "Enter")
    poll(lambda: any(f"done-{out.name}" == ln.strip() for ln in tmux.capture(pane, lines=60)), 30)
    text = out.read_text()
    try:
        return json.loads(text)
    except ValueError:
        pytest.fail(f"{line!r} printed {text!r}")


def test_every_printed_command_runs_from_the_worker_and_leader_panes(
    team: dict[str, Any],
) -> None:
    tmux: Tmux = team["tmux"]
    proj: Path = team["proj"]
    tmp: Path = team["tmp"]
    workers = {w["name"]: w for w in team["out"]["workers"]}
    pane = workers["worker-1"]["paneId"]
    state = proj / ".omp" / "state" / "team" / "t"
    inbox = (state / "workers" / "worker-1" / "inbox.md").read_text()

    # A plain shell keeps the PATH launch gave the pane (led by omp's bin directory, although
    # tmux 3.3a replaces `-e PATH`); a login shell's profile throws it away, and then there is
    # no `omp` at all: the inbox's commands must not depend on one.
    probe = tmp / "which.txt"
    tmux.send_literal(pane, f"command -v omp > {probe}; echo done-which")
    tmux.send_key(pane, "Enter")
    poll(lambda: any(ln.strip() == "done-which" for ln in tmux.capture(pane, lines=60)), 30)
    bare = probe.read_text().strip()
    assert bare == ("" if team["shell"] == "login-bash" else str(VENV_OMP))

    printed = PRINTED.findall(inbox)
    subs = [re.search(r" team api (\S+)", c).group(1) for c in printed]  # type: ignore[union-attr]
    assert subs[:4] == ["claim-task", "send-message", "transition-task-status", "mailbox-read"]
    assert all(c.startswith(str(VENV_OMP) + " ") for c in printed), printed

    token = None
    for i, cmd in enumerate(printed):
        if "<claimToken>" in cmd:
            assert token is not None
            cmd = cmd.replace("<claimToken>", token)
        cmd = cmd.replace("<text>", "started").replace("<one-line summary>", "a haiku")
        reply = run_in_pane(tmux, pane, cmd, tmp / f"out-{i}.json")
        assert reply.get("ok") is True, (cmd, reply)
        if subs[i] == "claim-task":
            token = reply["claimToken"]
    task = json.loads((state / "tasks" / "1.json").read_text())
    assert (task["status"], task["result"]) == ("completed", "a haiku")

    # The leader's pane (a shell too): the nudge it was typed names a command that works there.
    leader = team["out"]["leaderPaneId"]
    screen = "\n".join(tmux.capture(leader, lines=200))
    nudge = re.search(r"Read them: (.*? --json)", screen)
    assert nudge is not None, screen
    read = run_in_pane(tmux, leader, nudge.group(1), tmp / "leader.json")
    assert read["ok"] is True and [m["body"] for m in read["messages"]] == ["started"]
