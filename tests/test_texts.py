"""The words an agent reads, pinned: the inbox, the launch trigger, the nudge, the idle prompt, and
the errors an agent meets for the common mistakes. Short, exact, with the team's real names.

A change here is a change to omp's interface with every agent: make it on purpose.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from omp.mail import bootstrap
from omp.mail.nudge import nudge_text
from tests.helpers import call_api, isolate, make_project, make_team

TEAM = "haiku"
INBOX_LIMIT = 2048
# The omp every text names is an absolute command, quoted for the shell where it needs it.
OMP = "/opt/omp tools/bin/omp"
OMP_WORDS = shlex.quote(OMP)
CMD = re.compile(r"(?:'[^']*'|\S+) team api (\S+) --input '(\{.*?\})' --json")


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    proj = make_project(tmp_path / "proj")
    make_team(proj, TEAM, 3, task="write a haiku")
    monkeypatch.setenv("OMP_ROOT", str(proj))  # the inbox's commands carry no cwd
    return proj


def _inbox(
    root: Path, description: str = "x", worker: str = "worker-1", omp: str = OMP_WORDS
) -> str:
    others = [w for w in ("worker-1", "worker-2", "worker-3") if w != worker]
    return bootstrap.inbox_markdown(
        team=TEAM,
        worker=worker,
        task_id=worker.rsplit("-", 1)[1],
        description=description,
        teammates=others,
        result_path=root / ".omp/state/team" / TEAM / "workers" / worker / "result.md",
        omp=omp,
    )


def _api(capsys: pytest.CaptureFixture[str], sub: str, payload: dict[str, Any]) -> Any:
    return call_api(capsys, sub, payload)


# ---- the inbox ------------------------------------------------------------------------------


def test_inbox_is_under_2kb_without_the_task_text(root: Path) -> None:
    text = _inbox(root, description="x")
    assert len(text.encode()) < INBOX_LIMIT, len(text.encode())


WORKTREE = (
    "/home/somebody/.local/state/omp/worktrees/project-1a2b3c4d5e/haiku/worker-1",
    "omp/haiku/worker-1",
)


@pytest.mark.parametrize("backlog", [False, True])
def test_inbox_with_a_worktree_and_a_check_stays_under_2kb(root: Path, backlog: bool) -> None:
    """Every agent reads it first and pays for it on every turn: with the worktree section
    (its path once, not in every command) and a backlog's claimed task, still under 2 KiB."""
    extra: dict[str, Any] = {}
    if backlog:
        token = "worker-1-1796134551848-87aa720a"
        extra = {"claim_token": token, "backlog": bootstrap.Backlog("main", "omp")}
    text = bootstrap.inbox_markdown(
        team=TEAM, worker="worker-1", task_id="1", description="x",
        teammates=["worker-2", "worker-3"],
        result_path=root / ".omp/state/team" / TEAM / "workers/worker-1/result.md",
        omp=OMP_WORDS, worktree=WORKTREE, verify="pytest -q", **extra,
    )  # fmt: skip
    assert len(text.encode()) < INBOX_LIMIT, len(text.encode())
    assert text.count(WORKTREE[0]) == 2  # where it works, and the one commit line
    if backlog:
        assert "claim-task" not in text and "do not claim it" in text
        assert '"claim_token":"worker-1-1796134551848-87aa720a"' in text
        assert "omp then mails you your next task" in text


def test_inbox_names_this_team_and_worker_and_leaves_no_template_slot(root: Path) -> None:
    text = _inbox(root, description="write a haiku (part 1/3)")
    assert text.startswith(f"# worker-1 in omp team {TEAM}\n")
    assert "Task ID: 1\nWorker: worker-1\n" in text
    assert "write a haiku (part 1/3)" in text
    assert "Teammates: worker-2, worker-3." in text
    assert str(root / ".omp/state/team/haiku/workers/worker-1/result.md") in text
    # Only the three values the agent itself fills in are left open.
    slots = set(re.findall(r"<[a-z][^<>]*>", text))
    assert slots == {"<claimToken>", "<text>", "<one-line summary>"}, slots


def test_inbox_commands_are_exact(root: Path) -> None:
    text = _inbox(root)
    found = [(m.group(1), json.loads(m.group(2))) for m in CMD.finditer(text)]
    # Every command names the omp that launched the team, never a bare `omp` found on PATH.
    # (and one pointer to `team api --help` for the rest: the task conversations)
    assert text.count(f"{OMP_WORDS} team api ") == len(found) + 1 >= 6
    assert f"{OMP_WORDS} team api --help\n" in text
    assert re.search(r"(^|\s)omp team api", text) is None
    subs = [s for s, _ in found]
    assert subs[:4] == ["claim-task", "send-message", "transition-task-status", "mailbox-read"]
    cmds = dict(found)
    assert cmds["claim-task"] == {"team_name": TEAM, "task_id": "1", "worker": "worker-1"}
    assert cmds["send-message"] == {
        "team_name": TEAM,
        "from": "worker-1",
        "to": "leader",
        "body": "<text>",
    }
    assert cmds["transition-task-status"] == {
        "team_name": TEAM,
        "task_id": "1",
        "worker": "worker-1",
        "from": "in_progress",
        "to": "completed",
        "claim_token": "<claimToken>",
        "result": "<one-line summary>",
    }
    assert cmds["mailbox-read"] == {"team_name": TEAM, "worker": "worker-1"}


def test_inbox_commands_work_as_written(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An agent that copies each command, filling only the slots, gets ok every time."""
    token = None
    for sub, payload in ((m.group(1), m.group(2)) for m in CMD.finditer(_inbox(root))):
        if token is not None:
            payload = payload.replace("<claimToken>", token)
        payload = payload.replace("<text>", "started").replace("<one-line summary>", "done")
        out = _api(capsys, sub, json.loads(payload))
        assert out.rc == 0 and out.json["ok"] is True, (sub, out)
        if sub == "claim-task":
            token = out.json["claimToken"]
            assert out.json["claim_token"] == token  # both spellings, as the TS tool reads
    task = json.loads((root / ".omp/state/team/haiku/tasks/1.json").read_text())
    assert (task["status"], task["result"]) == ("completed", "done")


# ---- the lines typed into panes --------------------------------------------------------------


def test_launch_trigger_line(root: Path) -> None:
    inbox = root / ".omp/state/team/haiku/workers/worker-2/inbox.md"
    assert bootstrap.trigger_line(inbox) == f"Read {inbox} and follow it."


def test_nudge_line_carries_count_and_command_never_a_body() -> None:
    assert nudge_text(TEAM, "worker-2", 3, OMP_WORDS) == (
        "You have 3 new message(s). Read them: '/opt/omp tools/bin/omp' team api mailbox-read "
        '--input \'{"team_name":"haiku","worker":"worker-2"}\' --json'
    )


def test_nudge_command_works_as_written(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sent = _api(
        capsys,
        "send-message",
        {"team_name": TEAM, "from": "worker-1", "to": "worker-2", "body": "hello"},
    )
    assert sent.json["ok"] is True
    m = CMD.search(nudge_text(TEAM, "worker-2", 1, OMP_WORDS))
    assert m is not None
    out = _api(capsys, m.group(1), json.loads(m.group(2)))
    assert [(x["from"], x["body"]) for x in out.json["messages"]] == [("worker-1", "hello")]


def test_idle_prompt() -> None:
    policy = pytest.importorskip("omp.monitor.policy")
    assert policy.IDLE_PROMPT == (
        "Continue working on your assigned task and report concrete progress (not ACK-only)."
    )


# ---- errors an agent meets --------------------------------------------------------------------


def _send(capsys: pytest.CaptureFixture[str], **over: Any) -> Any:
    payload = {"team_name": TEAM, "from": "worker-1", "to": "worker-2", "body": "hi"} | over
    return _api(capsys, "send-message", payload)


def test_unknown_recipient_lists_candidates(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _send(capsys, to="worker-9")
    assert out.rc == 1
    assert out.json == {
        "ok": False,
        "error": "unknown_recipient",
        "message": "'worker-9' is not a member of team haiku; "
        "recipients: worker-1, worker-2, worker-3, leader",
        "field": "to",
        "candidates": ["worker-1", "worker-2", "worker-3", "leader"],
    }
    assert not (root / ".omp/state/team/haiku/mailbox/worker-9.jsonl").exists()


def test_invalid_recipient_name(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _send(capsys, to="../x")
    assert out.rc == 2
    assert out.json == {
        "ok": False,
        "error": "invalid_recipient_name",
        "message": "invalid recipient name '../x': use 1-64 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit",
        "name": "../x",
    }


def test_body_too_large_suggests_a_file(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _send(capsys, body="x" * 40000)
    assert out.rc == 2
    assert out.json == {
        "ok": False,
        "error": "body_too_large",
        "message": "body is 40000 bytes of UTF-8, over the 32768-byte limit; write the content "
        "to a file in the project and send its path instead",
        "size": 40000,
        "limit": 32768,
    }


def test_unknown_team_lists_the_teams(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _send(capsys, team_name="haikux")
    assert out.rc == 1
    assert out.json == {
        "ok": False,
        "error": "unknown_team",
        "message": f"no team named 'haikux' under {root}/.omp/state; teams here: haiku",
        "team": "haikux",
        "teams": ["haiku"],
    }


def test_unknown_sender_lists_candidates(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _send(capsys, **{"from": "bob"})
    assert (out.rc, out.json["error"]) == (1, "unknown_sender")
    assert out.json["message"] == "sender 'bob' is neither a worker of team haiku nor 'leader'"
    assert out.json["candidates"] == ["worker-1", "worker-2", "worker-3", "leader"]


def test_unknown_subcommand_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    out = call_api(capsys, None, argv=["sendmessage", "--input", "{}", "--json"])
    assert (out.rc, out.json["error"]) == (2, "unknown_command")
    assert out.json["message"].startswith(
        "unknown team api command 'sendmessage'; commands: send-message, broadcast, "
    )
    assert "send-message" in out.json["candidates"]


def test_missing_field_names_it(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _api(capsys, "send-message", {"team_name": TEAM, "from": "worker-1", "to": "leader"})
    assert out.rc == 2
    assert out.json == {
        "ok": False,
        "error": "invalid_input",
        "message": "missing field 'body'",
        "field": "body",
    }


def test_claiming_a_taken_task_names_its_owner(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claim = {"team_name": TEAM, "task_id": "1"}
    assert _api(capsys, "claim-task", claim | {"worker": "worker-1"}).rc == 0
    out = _api(capsys, "claim-task", claim | {"worker": "worker-2"})
    assert out.rc == 1
    assert out.json["error"] == "task_not_pending"
    assert out.json["message"] == (
        "task 1 is in_progress (owner worker-1); only a pending task can be claimed"
    )


def test_every_error_is_one_line(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = [
        _send(capsys, to="worker-9"),
        _send(capsys, to="../x"),
        _send(capsys, body="x" * 40000),
        _send(capsys, team_name="haikux"),
        _send(capsys, to="worker-1"),
    ]
    for out in outs:
        assert out.json["ok"] is False
        assert "\n" not in out.json["message"] and len(out.json["message"]) < 300, out.json


def test_long_body_is_cut_in_human_output_with_the_id(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = "word " * 100
    sent = _send(capsys, to="leader", body=body)
    mid = sent.json["messageId"]
    payload = {"team_name": TEAM, "worker": "leader"}
    out = call_api(capsys, "mailbox-list", payload, as_json=False)
    line = out.stdout.splitlines()[-1]
    assert line.endswith(f"…  [cut; whole text of {mid}: add --json]"), line
    assert len(line) < 300
    full = _api(capsys, "mailbox-list", payload)
    assert full.json["messages"][0]["body"] == body  # JSON carries the whole body
    # mailbox-read marks what it shows delivered, so it never cuts: the whole body is there
    read = call_api(capsys, "mailbox-read", payload, as_json=False)
    assert body.strip() in read.stdout and "[cut" not in read.stdout


def test_mailbox_read_text_says_the_rest_is_newer_and_unread(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_team(root, "mr", 2)
    for body in ("one", "two", "three"):
        payload = {"team_name": "mr", "from": "leader", "to": "worker-1", "body": body}
        assert call_api(capsys, "send-message", payload).rc == 0
    read = {"team_name": "mr", "worker": "worker-1", "limit": 1}
    out = call_api(capsys, "mailbox-read", read, as_json=False).stdout
    assert ": one" in out and "2 more unread, newer" in out and "older" not in out
    again = call_api(capsys, "mailbox-read", {**read, "limit": 5}).json
    assert [m["body"] for m in again["messages"]] == ["two", "three"]


def test_an_inbox_without_a_task_has_nothing_to_claim() -> None:
    text = bootstrap.inbox_markdown(
        team="t", worker="worker-1", task_id=None, description="", teammates=[],
        result_path=Path("/p/result.md"), omp="/p/bin/omp",
    )  # fmt: skip
    assert "Task ID" not in text and "claim-task" not in text
    assert "None yet: wait" in text and '"to":"worker-1"' not in text  # never told to self-send
