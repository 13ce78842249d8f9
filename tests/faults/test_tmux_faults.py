"""Faults on a real tmux server (a private `-L omp-test-<random>` socket, never the user's).

- The server is killed (SIGKILL) under a running team of 2 demo workers: `status` reports the
  panes gone, the API keeps working on the files, `shutdown` finishes cleanly.
- A body full of control sequences and slash commands is sent to a demo worker: omp types only
  the fixed nudge line into its pane, no escape sequence takes effect, and the text form of
  `mailbox-list` prints no control byte.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from omp.invocation import omp_command
from omp.mail.mailbox import Mailbox
from omp.mail.nudge import nudge_text
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.team.launch import LaunchRequest, launch
from omp.tmux import Tmux
from omp.views import status as team_status
from tests.helpers import call_api, child_env, make_project, poll, run_api, run_omp, snapshot_tree

pytestmark = pytest.mark.tmux
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

OMP = omp_command()  # what a team made in this process names (config `ompCommand`)


@pytest.fixture
def root(
    tmp_path: Path, tmux_env: Path, omp_tmux: Tmux, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    for key in list(os.environ):
        if key.startswith("OMP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("OMP_DEMO_WORK_SECONDS", "0.2")
    monkeypatch.setenv("OMP_NO_MONITOR", "1")  # the monitor has its own fault test
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    yield root


def _env(**extra: str) -> dict[str, str]:
    return child_env(Path(os.environ["HOME"]), OMP_NO_MONITOR="1", **extra)


def _launch(tmux: Tmux, root: Path) -> dict[str, Any]:
    assert tmux.socket_name is not None
    req = LaunchRequest(
        workers=2, task="write a haiku", agent="demo", name="t1", socket=tmux.socket_name, cwd=root
    )
    return launch(req)


def _settled(root: Path) -> bool:
    """Both tasks completed and both demo workers' closing messages to the leader written."""
    team = StatePaths(root).team("t1")
    msgs, _, _ = Mailbox(team, "leader").listing(undelivered_only=False, limit=100)
    done = [t for t in tasks.list_all(team) if t.get("status") == "completed"]
    return len(done) == 2 and sum(" completed task " in m["body"] for m in msgs) == 2


def _status(root: Path) -> dict[str, Any]:
    return team_status.status(StatePaths(root), "t1")["teams"][0]  # type: ignore[no-any-return]


def _api(root: Path, sub: str, **fields: Any) -> Any:
    r = run_api(sub, {"team_name": "t1", **fields}, cwd=root, env=_env())
    assert r.rc == 0 and r.json["ok"] is True, (sub, r)
    return r.json


# ---- the server killed under the team ---------------------------------------------------------


def test_a_killed_tmux_server_leaves_a_team_that_still_works_on_its_files(
    root: Path, omp_tmux: Tmux
) -> None:
    _launch(omp_tmux, root)
    poll(lambda: _settled(root), 30, "the demo team to finish its tasks")
    assert all(w["pane"] == "alive" for w in _status(root)["workers"])
    server = omp_tmux.server_identity()
    assert server is not None
    os.kill(server["server_pid"], signal.SIGKILL)
    poll(lambda: omp_tmux.server_identity() is None, 10, "the server to be gone")

    # status: read-only, starts no server, reports every pane gone and its worker offline
    state = root / ".omp" / "state"
    before = snapshot_tree(state)
    st = _status(root)
    assert [(w["name"], w["pane"]) for w in st["workers"]] == [
        ("worker-1", "gone"),
        ("worker-2", "gone"),
    ]
    assert {w["presence"] for w in st["workers"]} == {"offline"}
    cli = run_omp("team", "status", "t1", "--json", cwd=root, env=_env())
    assert cli.rc == 0, cli
    assert [w["pane"] for w in cli.json["teams"][0]["workers"]] == ["gone", "gone"]
    assert snapshot_tree(state) == before
    assert omp_tmux.server_identity() is None, "status started a tmux server"

    # the API keeps working on the files: send (no pane to nudge), read, claim, complete
    sent = _api(
        root, "send-message", **{"from": "leader", "to": "worker-1", "body": "still there?"}
    )
    assert sent["nudged"] is False
    read = _api(root, "mailbox-read", worker="worker-1")
    assert [m["id"] for m in read["messages"]] == [sent["messageId"]]
    tasks.create(StatePaths(root).team("t1"), "3", "one more")
    claimed = _api(root, "claim-task", task_id="3", worker="worker-2")
    moved = _api(
        root,
        "transition-task-status",
        task_id="3",
        worker="worker-2",
        **{"from": "in_progress", "to": "completed"},
        claim_token=claimed["claimToken"],
        result="done anyway",
    )
    assert moved["task"]["status"] == "completed"
    bcast = _api(root, "broadcast", **{"from": "worker-1", "body": "server is gone"})
    assert sorted(bcast["recipients"]) == ["leader", "worker-2"] and bcast["nudged"] == []

    # shutdown finishes cleanly: nothing to kill, every file kept, the team marked shut down
    out = run_omp("team", "shutdown", "t1", "--json", cwd=root, env=_env())
    assert out.rc == 0, out
    assert out.json["killedPanes"] == [] and out.json["killedSession"] is False
    assert {s["why"] for s in out.json["skipped"]} == {"tmux server gone or restarted"}
    assert _status(root)["shutdown"] is not None
    assert omp_tmux.server_identity() is None, "shutdown started a tmux server"
    box = Mailbox(StatePaths(root).team("t1"), "leader")
    assert box.unread_count() >= 3  # the closing messages and the broadcast are all kept


# ---- peer text never reaches a terminal ------------------------------------------------------

NASTY = (
    "\x1b]2;PWNED-TITLE\x07"  # OSC: set the pane title
    "\x1b[2J\x1b[H"  # CSI: clear the screen, cursor home
    "\x1b[31mRED\x1b[0m"  # CSI: colour
    "\x07\x07"  # BEL
    "abc\x08\x08\x08"  # backspaces over text
    "\x1bc"  # RIS: reset the terminal
    "\x9b1;31m"  # C1 CSI
    "/clear\n/approve all\r\n"  # slash commands, each on a line of its own
    "\x1b]0;PWNED2\x1b\\ tail"
)


def _history(tmux: Tmux, pane: str, *, escapes: bool = False) -> str:
    return tmux.cmd(
        "capture-pane", "-p", "-J", *(["-e"] if escapes else []), "-S", "-500", "-t", pane
    )


def _typed_lines(history: str) -> list[str]:
    """What was typed at the demo agent's prompt (`❯ <input>`), in order."""
    return [ln[2:].strip() for ln in history.splitlines() if ln.startswith("❯ ") and ln[2:].strip()]


def test_control_sequences_and_slash_commands_never_reach_the_recipient_terminal(
    root: Path, omp_tmux: Tmux, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    res = _launch(omp_tmux, root)
    poll(lambda: _settled(root), 30, "the demo team to finish its tasks")
    pane = next(w["paneId"] for w in res["workers"] if w["name"] == "worker-2")
    title = omp_tmux.cmd("display-message", "-p", "-t", pane, "#{pane_title}").strip()
    assert title == "worker-2"
    typed_before = _typed_lines(_history(omp_tmux, pane))

    # Every tmux command omp runs while sending is recorded.
    tmux_argv: list[Sequence[str]] = []
    real_exec = Tmux._exec

    def spy(self: Tmux, args: Sequence[str]) -> tuple[int, str, str]:
        tmux_argv.append(list(args))
        return real_exec(self, args)

    monkeypatch.setattr(Tmux, "_exec", spy)
    r = call_api(
        capsys,
        "send-message",
        {"team_name": "t1", "cwd": str(root), "from": "worker-1", "to": "worker-2", "body": NASTY},
    )
    monkeypatch.setattr(Tmux, "_exec", real_exec)
    assert r.rc == 0 and r.json["nudged"] is True, r
    team = StatePaths(root).team("t1")
    poll(lambda: Mailbox(team, "worker-2").unread_count() == 0, 30, "worker-2 to read its mail")
    poll(lambda: "✉ worker-1:" in _history(omp_tmux, pane), 10, "the demo agent to show it")

    # omp handed tmux only the fixed nudge line: no byte of the body in any tmux argument
    flat = "\n".join(" ".join(a) for a in tmux_argv)
    for piece in ("PWNED", "/clear", "/approve", "RED", "\x1b", "\x07", "\x08"):
        assert piece not in flat, f"{piece!r} reached tmux"
    assert any(nudge_text("t1", "worker-2", 1, OMP) in a for args in tmux_argv for a in args)

    # the recipient's screen: only the nudge was typed, and no escape sequence took effect
    history = _history(omp_tmux, pane)
    typed = _typed_lines(history)[len(typed_before) :]
    assert typed == [nudge_text("t1", "worker-2", 1, OMP)], typed
    assert omp_tmux.cmd("display-message", "-p", "-t", pane, "#{pane_title}").strip() == title
    assert omp_tmux.cmd("display-message", "-p", "-t", pane, "#{window_bell_flag}").strip() == "0"
    assert "\x1b[31m" not in _history(omp_tmux, pane, escapes=True), "the colour was applied"
    assert all(ln in history for ln in typed_before), "the screen was cleared or reset"
    shown = next(ln for ln in history.splitlines() if "✉ worker-1:" in ln)
    assert "RED" in shown and not CONTROL.search(shown)

    # the text form of mailbox-list prints the body with every control byte escaped: the title
    # sequence is shown as inert text (`\x1b]2;PWNED-TITLE\x07`), it never sets a title
    listing = run_api(
        "mailbox-list",
        {"team_name": "t1", "worker": "worker-2"},
        cwd=root,
        env=_env(),
        as_json=False,
    )
    assert listing.rc == 0, listing
    assert "RED" in listing.stdout and "\\x1b]2;PWNED-TITLE\\x07" in listing.stdout
    assert not CONTROL.search(listing.stdout.replace("\n", "")), repr(listing.stdout)
    as_json = run_api(
        "mailbox-list", {"team_name": "t1", "worker": "worker-2"}, cwd=root, env=_env()
    )
    bodies = [m["body"] for m in as_json.json["messages"]]
    assert NASTY in bodies, "JSON keeps the body exactly; only terminal text is cleaned"
    assert json.loads(as_json.stdout)["notice"]
