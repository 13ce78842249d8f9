"""No keystroke ever lands in a permission prompt (issue 20, section 4), on real tmux.

A fake agent in a private tmux server draws Claude Code 2.1.328's permission prompt (captured
offline) and records every byte typed into its pane. Mail arrives for it (the send path tries to
nudge), and the monitor scans many times with re-nudges due every 0.1 s: the agent receives
nothing, and the worker is reported as needing a person everywhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.mail.mailbox import Mailbox
from omp.monitor import attention
from omp.monitor.loop import run_monitor
from omp.monitor.policy import Intervals
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tmux import Tmux
from omp.views import status as team_status
from omp.views import wait as wait_mod
from tests.helpers import FIXTURES, child_env, make_project, poll, run_api, run_omp
from tests.monitor.test_monitor_policy import TOKEN, own_lock
from tests.monitor.test_monitor_tmux import make_live_team

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

AGENTS = FIXTURES / "agents"


@pytest.fixture
def project(tmp_path: Path, tmux_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for key in list(os.environ):
        if key.startswith("OMP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")  # the test runs the monitor itself
    yield make_project(tmp_path / "proj")


def test_a_permission_prompt_receives_no_keystroke_and_is_reported(
    project: Path, omp_tmux: Tmux, tmp_path: Path
) -> None:
    root = project
    keys = tmp_path / "keys-received"
    agent = [
        sys.executable,
        str(AGENTS / "screen_agent.py"),
        str(FIXTURES / "screens" / "claude-16-permission-prompt.txt"),
        str(keys),
    ]
    panes = make_live_team(root, omp_tmux, "t", 2, agent, session="omp-team-t")
    tp = StatePaths(root).team("t")
    raw = team_config.load(tp).raw
    raw.update(agent="claude", tmuxSession="omp-team-t")
    team_config.write(tp, raw)
    pane = panes["worker-1"]
    poll(
        lambda: (
            keys.exists() and any("Do you want to proceed?" in ln for ln in omp_tmux.capture(pane))
        ),
        what="the permission prompt on screen",
    )

    # Mail arrives: the send stores it and does not type the nudge.
    env = child_env(Path(os.environ["HOME"]), OMP_ROOT=str(root), OMP_NO_MONITOR="1")
    sent = run_api(
        "send-message",
        {"team_name": "t", "from": "worker-2", "to": "worker-1", "body": "please run the tests"},
        env=env,
    )
    assert sent.rc == 0, sent
    assert sent.json["nudged"] is False and sent.json["nudge"] == "deferred"
    assert "needs a person (permission prompt)" in sent.json["nudgeReason"]

    # The monitor scans 20 times, a re-nudge due on every scan.
    own_lock(StatePaths(root))
    iv = Intervals(scan=0.05, unread_repeat=0.1)
    result = run_monitor(root, TOKEN, intervals=iv, max_scans=20)
    assert result["reason"] == "max-scans" and result["scans"] == 20
    assert result["nudgesSent"] == 0

    assert keys.read_bytes() == b""  # not one byte reached the prompt
    assert Mailbox(tp, "worker-1").unread_count() == 1  # the mail waits, safe
    cfg = team_config.load(tp)
    need = attention.read(cfg)["workers"]["worker-1"]
    assert need["what"] == "permission prompt"
    assert need["lines"][0] == "Do you want to proceed?"
    rows = {w["name"]: w for w in team_status.team_status(cfg)["workers"]}
    assert rows["worker-1"]["needsYou"]["what"] == "permission prompt"

    # wait returns at once, exit 14 with --exit-codes, naming how to attach.
    out = run_omp("team", "wait", "t", "--exit-codes", "--json", cwd=root, env=env)
    assert out.rc == wait_mod.EXIT_ATTENTION == 14, out
    (a,) = [x for x in out.json["attention"] if x["worker"] == "worker-1"]
    sock = str(omp_tmux.server_identity()["socket_path"])  # type: ignore[index]
    assert a["attach"].startswith("tmux -S ") and sock in a["attach"]
    assert f"select-pane -t {pane}" in a["attach"]
    # the attach line works: select-pane names a real pane on that server
    assert os.system(a["attach"].split(" && ")[0] + " >/dev/null 2>&1") == 0

    # events and the leader's one message
    ev = run_omp("team", "events", "t", cwd=root, env=env)
    assert "worker-1 needs you: permission prompt" in ev.stdout
    msgs, _, _ = Mailbox(tp, "leader").listing(undelivered_only=False, limit=50)
    mine = [m for m in msgs if m.get("intent") == "needs_person" and m["from"] == "worker-1"]
    assert len(mine) == 1
    assert keys.read_bytes() == b""
