from __future__ import annotations

import fcntl
import json
import os
import queue
import select
import signal
import stat
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from omp import demo_agent
from omp.demo_agent import DemoAgent, Screen, find_inbox_path, is_answer
from omp.demo_shell import ShellApi
from omp.invocation import omp_command

REPO = Path(__file__).resolve().parents[1]
Result = dict[str, Any]


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("OMP_ROOT", "OMP_TEAM", "OMP_WORKER", "OMP_TEAM_WORKER"):
        monkeypatch.delenv(var, raising=False)


# ---- helpers ------------------------------------------------------------------------------


class FakeApi:
    """Records calls; answers from per-command reply lists, else a plausible success."""

    def __init__(self, **replies: list[Result]) -> None:
        self.calls: list[tuple[str, Result]] = []
        self.replies = {k.replace("_", "-"): v for k, v in replies.items()}

    def __call__(self, sub: str, payload: Result) -> Result:
        self.calls.append((sub, json.loads(json.dumps(payload))))
        queued = self.replies.get(sub)
        if queued:
            return queued.pop(0)
        if sub == "claim-task":
            return {"ok": True, "task": {"id": payload["task_id"]}, "claimToken": "tok-1"}
        if sub == "mailbox-read":
            return {"ok": True, "messages": []}
        return {"ok": True}

    def subs(self) -> list[str]:
        return [s for s, _ in self.calls]

    def bodies(self) -> list[str]:
        return [p["body"] for s, p in self.calls if s == "send-message"]


def vt(out: str, cols: int = 80) -> list[str]:
    """The visible rows after `out`, for the few sequences the demo agent uses."""
    rows: list[list[str]] = [[]]
    r = c = 0
    saved = (0, 0)
    i = 0
    while i < len(out):
        if out.startswith("\x1b7", i):
            saved, i = (r, c), i + 2
            continue
        if out.startswith("\x1b8", i):
            (r, c), i = saved, i + 2
            continue
        if out.startswith("\x1b[1A", i):
            r, i = max(0, r - 1), i + 4
            continue
        if out.startswith("\x1b[2K", i):
            rows[r], i = [], i + 4
            continue
        ch = out[i]
        i += 1
        if ch == "\r":
            c = 0
        elif ch == "\n":
            r += 1
        elif ch >= " ":
            if c >= cols:  # deferred wrap, as terminals do
                r, c = r + 1, 0
            while len(rows) <= r:
                rows.append([])
            row = rows[r]
            row.extend(" " * (c + 1 - len(row)))
            row[c] = ch
            c += 1
        while len(rows) <= r:
            rows.append([])
    lines = ["".join(x).rstrip() for x in rows]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class Term:
    def __init__(self, *, ansi: bool = True) -> None:
        self.out: list[str] = []
        self.screen = Screen(self.out.append, ansi=ansi, columns=lambda: 80)

    @property
    def text(self) -> str:
        return "".join(self.out)

    def rows(self) -> list[str]:
        return vt(self.text)


def inbox_file(root: Path, team: str = "t", worker: str = "worker-1", body: str = "") -> Path:
    wdir = root / ".omp" / "state" / "team" / team / "workers" / worker
    wdir.mkdir(parents=True, mode=0o700)
    path = wdir / "inbox.md"
    path.write_text(
        body
        or f"# {worker} in omp team {team}\n\nTask ID: 3\nWorker: {worker}\n\n"
        "## Task\nWrite the release notes for v2 and make them short,\nfriendly and correct.\n\n"
        "## Steps\n1. Claim it\n"
    )
    return path


def make_agent(
    tmp_path: Path,
    api: Callable[[str, Result], Result],
    *,
    term: Term | None = None,
    team: str | None = "t",
    worker: str | None = "worker-1",
    work_seconds: float = 0.0,
) -> DemoAgent:
    return DemoAgent(
        team=team,
        worker=worker,
        root=tmp_path,
        api=api,
        screen=(term or Term()).screen,
        lines=queue.Queue(),
        work_seconds=work_seconds,
        tick=0.01,
    )


def trigger(path: Path) -> str:
    return f"Read {path} and follow it."


# ---- 1. inbox: claim, start, work, complete, done ------------------------------------------


def test_inbox_trigger_runs_the_whole_task_lifecycle(tmp_path: Path) -> None:
    api, term = FakeApi(), Term()
    agent = make_agent(tmp_path, api, term=term)
    path = inbox_file(tmp_path)
    agent.handle(trigger(path))

    base = {"team_name": "t", "task_id": "3", "worker": "worker-1"}
    desc = "Write the release notes for v2 and make them short, friendly and correct."
    assert api.calls[0] == ("claim-task", base)
    assert api.calls[1] == (
        "send-message",
        {"team_name": "t", "from": "worker-1", "to": "leader",
         "body": f"worker-1 started task 3: {desc[:80]}"},
    )  # fmt: skip
    sub, done = api.calls[2]
    assert sub == "transition-task-status"
    assert {k: v for k, v in done.items() if k != "result"} == {
        **base, "from": "in_progress", "to": "completed", "claim_token": "tok-1"
    }  # fmt: skip
    assert isinstance(done["result"], str) and "\n" not in done["result"] and done["result"]
    assert api.calls[3] == (
        "send-message",
        {"team_name": "t", "from": "worker-1", "to": "leader", "body": "worker-1 completed task 3"},
    )
    assert len(api.calls) == 4

    result = tmp_path / ".omp/state/team/t/workers/worker-1/result.md"
    assert stat.S_IMODE(result.stat().st_mode) == 0o600
    text = result.read_text()
    assert "worker-1" in text and "task 3" in text and "Messages answered" in text

    assert "worker-1 working on task 3 (esc to interrupt)" in term.text  # shown while working
    rows = term.rows()
    assert rows[-1] == "❯" and not any("working" in r for r in rows[-3:])
    assert any("completed task 3" in r for r in rows)
    assert agent.task_state == "completed"


def test_in_a_worktree_it_commits_everything_as_the_inbox_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--carry-changes` hands the worker the leader's uncommitted diff: the inbox's
    `add -A && commit` puts it in the worker's commit, so its completion is not refused."""
    from tests.workspace.gitrepo import g, isolate_git, make_repo, write

    isolate_git(monkeypatch, tmp_path)
    repo = make_repo(tmp_path / "proj")
    wt = tmp_path / "wt"
    g(repo, "worktree", "add", "-q", "-b", "omp/t/worker-1", str(wt))
    write(wt / "README.md", "# demo, carried from the leader\n")  # a tracked file changed
    write(wt / "notes" / "new.txt", "carried too\n")  # and one git does not know yet
    agent = make_agent(tmp_path, FakeApi())
    committed = agent.commit_work("1", "write it", wt)
    assert committed.startswith("work/worker-1-task-1.md (")
    assert g(wt, "status", "--porcelain", "--untracked-files=all") == ""
    assert g(wt, "show", "HEAD:README.md") == "# demo, carried from the leader"
    files = g(wt, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(files) == ["README.md", "notes/new.txt", "work/worker-1-task-1.md"]


def test_resumed_in_a_worktree_it_commits_there_before_it_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `omp team resume` the demo agent reads resume.md, then its inbox again: the inbox
    says where its worktree is. It completed without committing anything (nothing to merge)."""
    from omp.mail import bootstrap
    from tests.workspace.gitrepo import g, isolate_git, make_repo

    isolate_git(monkeypatch, tmp_path)
    repo = make_repo(tmp_path / "proj")
    wt = tmp_path / "wt"
    g(repo, "worktree", "add", "-q", "-b", "omp/t/worker-1", str(wt))
    inbox = inbox_file(
        tmp_path,
        body=bootstrap.inbox_markdown(
            team="t", worker="worker-1", task_id="1", description="count", teammates=[],
            result_path=tmp_path / "result.md", omp="omp",
            worktree=(str(wt), "omp/t/worker-1"),
        ),
    )  # fmt: skip
    resume = inbox.with_name("resume.md")
    resume.write_text(
        bootstrap.resume_markdown(
            team="t", worker="worker-1", restarted_at="2026-12-01T00:00:00.000Z",
            why="the team's tmux server was gone", inbox=inbox, conversation_resumed=False,
            task={"id": "1", "status": "in_progress", "owner": "worker-1", "claimToken": "tok-9"},
            result_path=tmp_path / "result.md",
            worktree={"path": str(wt), "branch": "omp/t/worker-1", "ahead": 0, "uncommitted": []},
            unread=0, omp="omp",
        )
    )  # fmt: skip
    api = FakeApi()
    agent = make_agent(tmp_path, api)
    agent.handle(trigger(resume))
    done = [p for s, p in api.calls if s == "transition-task-status"]
    assert [d["to"] for d in done] == ["completed"] and done[0]["claim_token"] == "tok-9"
    assert "committed work/worker-1-task-1.md" in done[0]["result"]
    assert g(wt, "rev-list", "--count", "main..HEAD") == "1"


def test_start_message_caps_the_description_at_80_chars(tmp_path: Path) -> None:
    api = FakeApi()
    long = "word " * 40
    path = inbox_file(tmp_path, body=f"Task ID: `t-9`\n\n## Description\n{long}\n## Next\nx\n")
    make_agent(tmp_path, api).handle(trigger(path))
    assert api.calls[0][1]["task_id"] == "t-9"  # backticks around the id are tolerated
    assert api.bodies()[0] == "worker-1 started task t-9: " + " ".join(long.split())[:80]


def test_description_falls_back_to_the_claimed_task(tmp_path: Path) -> None:
    claim = {"ok": True, "task": {"description": "from the task store"}, "claimToken": "k"}
    api = FakeApi(claim_task=[claim])
    path = inbox_file(tmp_path, body="Task ID: 5\n")
    make_agent(tmp_path, api).handle(trigger(path))
    assert api.bodies()[0] == "worker-1 started task 5: from the task store"


def test_identity_comes_from_the_inbox_path_when_env_is_missing(tmp_path: Path) -> None:
    api = FakeApi()
    path = inbox_file(tmp_path, team="blue", worker="worker-2")
    make_agent(tmp_path, api, team=None, worker=None).handle(f"please read '{path}' now")
    assert api.calls[0][1] == {"team_name": "blue", "task_id": "3", "worker": "worker-2"}
    assert (tmp_path / ".omp/state/team/blue/workers/worker-2/result.md").is_file()


def test_a_completed_task_is_not_redone_on_a_second_trigger(tmp_path: Path) -> None:
    api = FakeApi()
    agent = make_agent(tmp_path, api)
    path = inbox_file(tmp_path)
    agent.handle(trigger(path))
    n = len(api.calls)
    agent.handle(trigger(path))
    assert len(api.calls) == n


def test_claim_refused_tells_the_leader_and_stops(tmp_path: Path) -> None:
    refused = {"ok": False, "error": "task_not_pending", "message": "task 3 is completed"}
    api, term = FakeApi(claim_task=[refused]), Term()
    make_agent(tmp_path, api, term=term).handle(trigger(inbox_file(tmp_path)))
    assert api.subs() == ["claim-task", "send-message"]
    assert api.bodies() == [
        "worker-1 could not claim task 3: claim-task: task 3 is completed [task_not_pending]"
    ]
    assert "task 3 is completed [task_not_pending]" in term.text
    assert not (tmp_path / ".omp/state/team/t/workers/worker-1/result.md").exists()


def test_failed_completion_marks_the_task_failed_with_the_reason(tmp_path: Path) -> None:
    bad = {"ok": False, "error": "claim_token_mismatch", "message": "token does not match"}
    api, term = FakeApi(transition_task_status=[bad]), Term()
    agent = make_agent(tmp_path, api, term=term)
    agent.handle(trigger(inbox_file(tmp_path)))
    assert api.subs() == [
        "claim-task",
        "send-message",
        "transition-task-status",
        "transition-task-status",
        "send-message",
    ]
    failed = api.calls[3][1]
    assert failed["from"] == "in_progress" and failed["to"] == "failed"
    assert failed["claim_token"] == "tok-1" and "token does not match" in failed["result"]
    assert api.bodies()[-1].startswith("worker-1 failed task 3: ")
    assert "token does not match" in api.bodies()[-1]
    assert agent.task_state == "failed"
    rows = term.rows()
    assert rows[-1] == "❯" and not any("working" in r for r in rows[-3:])


def test_unwritable_result_fails_the_task(tmp_path: Path) -> None:
    path = inbox_file(tmp_path)
    wdir = path.parent
    (wdir / "result.md").symlink_to(tmp_path / "elsewhere.md")  # the store refuses symlinks
    api = FakeApi()
    make_agent(tmp_path, api).handle(trigger(path))
    assert api.subs()[-2:] == ["transition-task-status", "send-message"]
    assert api.calls[-2][1]["to"] == "failed"
    assert not (tmp_path / "elsewhere.md").exists()


def test_a_claim_reply_without_a_token_fails_without_a_transition(tmp_path: Path) -> None:
    api = FakeApi(claim_task=[{"ok": True, "task": {}}])
    make_agent(tmp_path, api).handle(trigger(inbox_file(tmp_path)))
    assert api.subs() == ["claim-task", "send-message", "send-message"]
    assert api.bodies()[-1].startswith("worker-1 failed task 3: ")


def test_missing_inbox_or_task_id_is_reported(tmp_path: Path) -> None:
    api, term = FakeApi(), Term()
    agent = make_agent(tmp_path, api, term=term)
    agent.handle(f"Read {tmp_path}/nope/workers/worker-1/inbox.md and follow it.")
    assert "cannot read" in term.text and api.subs() == ["send-message"]
    agent.handle(trigger(inbox_file(tmp_path, body="no id here\n")))
    # an inbox without a task (a launch with no TASK): wait quietly for the leader
    assert "no task yet; waiting for the leader" in term.text
    assert api.subs() == ["send-message"]  # nothing claimed, nothing new sent


def test_input_typed_while_busy_is_queued_then_handled(tmp_path: Path) -> None:
    api, term = FakeApi(), Term()
    agent = make_agent(tmp_path, api, term=term, work_seconds=0.3)
    agent.lines.put("are you there?")
    agent.lines.put(None)  # and then the input closes
    path = inbox_file(tmp_path)
    started = time.monotonic()
    agent.handle(trigger(path))
    assert time.monotonic() - started >= 0.3  # the work ran its time despite the input
    assert list(agent.pending) == ["are you there?", None]
    assert "● queued: are you there?" in term.text
    assert demo_agent.run(agent) == 0
    assert "● noted: are you there?" in term.text
    assert term.rows()[-1] == "❯"


# ---- 2. mail -------------------------------------------------------------------------------


def msg(mid: str, sender: str, body: str, **extra: Any) -> Result:
    return {"id": mid, "from": sender, "to": "worker-1", "body": body, "timestamp": "t", **extra}


NUDGE = (
    "You have 4 new message(s). Read them: omp team api mailbox-read "
    """--input '{"team_name":"t","worker":"worker-1"}' --json"""
)


def test_mail_is_shown_and_teammates_are_answered_once(tmp_path: Path) -> None:
    batch = [
        msg("m1", "worker-2", "Can you check the parser?\nDetails follow."),
        msg("m2", "worker-3", "Re: your question"),
        msg("m3", "worker-2", "thanks", ref_message_id="m0"),
        msg("m4", "leader", "keep going"),
    ]
    api = FakeApi(mailbox_read=[{"ok": True, "messages": batch}, {"ok": True, "messages": batch}])
    term = Term()
    agent = make_agent(tmp_path, api, term=term)
    agent.handle(NUDGE)
    agent.handle(NUDGE)  # the same mail again: still answered only once
    assert api.calls[0] == ("mailbox-read", {"team_name": "t", "worker": "worker-1"})
    sends = [p for s, p in api.calls if s == "send-message"]
    assert sends == [
        {"team_name": "t", "from": "worker-1", "to": "worker-2",
         "body": "Re: Can you check the parser?\nDetails follow.", "ref_message_id": "m1"},
    ]  # fmt: skip
    rows = term.rows()
    for shown in ("✉ worker-2: Can you check the parser?", "✉ worker-3: Re: your question",
                  "✉ leader: keep going"):  # fmt: skip
        assert shown in rows
    assert rows[-1] == "❯"


def test_reply_quotes_the_first_60_chars(tmp_path: Path) -> None:
    body = "x" * 59 + "yz" + "tail"
    api = FakeApi(mailbox_read=[{"ok": True, "messages": [msg("a", "worker-2", body)]}])
    make_agent(tmp_path, api).handle(NUDGE)
    assert api.bodies() == ["Re: " + body[:60]]


def test_leader_status_question_is_answered_once_with_the_task_state(tmp_path: Path) -> None:
    api = FakeApi()
    agent = make_agent(tmp_path, api)
    agent.handle(trigger(inbox_file(tmp_path)))
    ask = msg("L1", "leader", "What is your status?")
    api.replies["mailbox-read"] = [{"ok": True, "messages": [ask]}] * 2
    agent.handle(NUDGE)
    agent.handle(NUDGE)
    replies = [p for s, p in api.calls if s == "send-message" and p["to"] == "leader"][2:]
    assert len(replies) == 1
    assert replies[0]["ref_message_id"] == "L1" and "task 3 completed" in replies[0]["body"]
    assert replies[0]["body"].startswith("Re: ")


def test_two_demo_agents_never_ping_pong(tmp_path: Path) -> None:
    """A shared in-memory mailbox between two agents: a question, one answer, then silence."""
    boxes: dict[str, list[Result]] = {"worker-1": [], "worker-2": []}
    counter = iter(range(1000))

    def api(sub: str, payload: Result) -> Result:
        if sub == "send-message":
            rec = {"id": f"id{next(counter)}", "from": payload["from"], "to": payload["to"]}
            rec["body"] = payload["body"]
            if "ref_message_id" in payload:
                rec["ref_message_id"] = payload["ref_message_id"]
            boxes.setdefault(payload["to"], []).append(rec)
            return {"ok": True, "messageId": rec["id"]}
        if sub == "mailbox-read":
            out, boxes[payload["worker"]] = boxes[payload["worker"]], []
            return {"ok": True, "messages": out}
        raise AssertionError(sub)

    a = make_agent(tmp_path, api, worker="worker-1")
    b = make_agent(tmp_path, api, worker="worker-2")
    api("send-message", {"from": "worker-1", "to": "worker-2", "body": "ping"})
    for _ in range(5):  # deliver nudges back and forth until the mail dries up
        b.handle("You have 1 new message(s).")
        a.handle("You have 1 new message(s).")
    assert a.replied == set() and b.replied == {"id0"}
    assert boxes == {"worker-1": [], "worker-2": []}
    assert next(counter) == 2  # exactly two messages ever: the ping and one answer


def test_an_answer_is_recognised_without_ref_field() -> None:
    assert is_answer({"body": "Re: ping"})
    assert is_answer({"body": "  Re: ping"})
    assert is_answer({"body": "ping", "ref_message_id": "x"})
    assert not is_answer({"body": "ping", "ref_message_id": None})
    assert not is_answer({"body": "Really?"})


def test_mailbox_errors_and_empty_mail_are_shown(tmp_path: Path) -> None:
    err = {"ok": False, "error": "unknown_recipient", "message": "no such worker"}
    api, term = FakeApi(mailbox_read=[err]), Term()
    agent = make_agent(tmp_path, api, term=term)
    agent.handle(NUDGE)
    agent.handle(NUDGE)
    assert "mailbox-read: no such worker [unknown_recipient]" in term.text
    assert "● no new messages" in term.text
    assert api.subs() == ["mailbox-read", "mailbox-read"]


def test_identity_can_come_from_the_nudge_itself(tmp_path: Path) -> None:
    api = FakeApi()
    make_agent(tmp_path, api, team=None, worker=None).handle(NUDGE)
    assert api.calls == [("mailbox-read", {"team_name": "t", "worker": "worker-1"})]


def test_peer_escape_sequences_never_reach_the_terminal(tmp_path: Path) -> None:
    evil = msg("e", "worker-2", "hi\x1b[2J\x1b]0;owned\x07 there")
    api, term = FakeApi(mailbox_read=[{"ok": True, "messages": [evil]}]), Term()
    make_agent(tmp_path, api, term=term).handle(NUDGE)
    assert "\x1b[2J" not in term.text and "\x1b]0" not in term.text
    assert "✉ worker-2: hi there" in term.rows()


# ---- 3./4. idle prompt, anything else -----------------------------------------------------

IDLE = "Continue working on your assigned task and report concrete progress (not ACK-only)."


def test_idle_prompt_never_sends(tmp_path: Path) -> None:
    api, term = FakeApi(), Term()
    agent = make_agent(tmp_path, api, term=term)
    agent.handle(IDLE)
    assert "no task assigned yet" in term.text and api.calls == []
    agent.handle(trigger(inbox_file(tmp_path)))
    n = len(api.calls)
    for _ in range(3):
        agent.handle(IDLE)
    assert len(api.calls) == n
    assert "● task 3 is completed; nothing new to report" in term.rows()


def test_other_lines_are_noted_and_blank_lines_just_reprompt(tmp_path: Path) -> None:
    api, term = FakeApi(), Term()
    agent = make_agent(tmp_path, api, term=term)
    term.screen.say("banner")
    term.screen.submitted("hello")
    agent.handle("hello")
    term.screen.submitted("")
    agent.handle("   ")
    assert api.calls == []
    assert "● noted: hello" in term.rows()
    assert term.rows()[-1] == "❯"


# ---- screen layout -------------------------------------------------------------------------


def test_screen_keeps_the_prompt_last_and_the_busy_line_right_above() -> None:
    term = Term()
    s = term.screen
    s.say("● banner")
    assert term.rows() == ["● banner", "❯"]
    s.busy("⠋ w working on task 1 (esc to interrupt)")
    assert term.rows()[-2:] == ["⠋ w working on task 1 (esc to interrupt)", "❯"]
    s.busy("⠙ w working on task 1 (esc to interrupt)")  # in-place refresh: nothing scrolls
    assert term.rows() == ["● banner", "⠙ w working on task 1 (esc to interrupt)", "❯"]
    # A line typed while busy: the terminal echoes it after the prompt, then a newline.
    term.out.append("queued text\r\n")
    s.submitted("queued text")
    s.say("● queued: queued text")
    assert term.rows() == [
        "● banner",
        "● queued: queued text",
        "⠙ w working on task 1 (esc to interrupt)",
        "❯",
    ]
    s.done("● done")
    assert term.rows() == ["● banner", "● queued: queued text", "● done", "❯"]


def test_a_long_echo_that_wrapped_is_cleared_whole() -> None:
    term = Term()
    s = term.screen
    s.say("● banner")
    s.busy("⠋ busy working (esc to interrupt)")
    long = "y" * 150  # two rows at 80 columns with the prompt
    term.out.append(long + "\r\n")
    s.submitted(long)
    s.say("● queued")
    assert term.rows() == ["● banner", "● queued", "⠋ busy working (esc to interrupt)", "❯"]


def test_plain_output_when_not_a_terminal() -> None:
    term = Term(ansi=False)
    s = term.screen
    s.say("a")
    s.busy("b working")
    s.busy("c working")  # no per-tick spam in a log
    s.done("d")
    assert term.text == "a\n❯ \nb working\n❯ \nd\n❯ "


def test_find_inbox_path(tmp_path: Path) -> None:
    spaced = tmp_path / "my project" / "workers" / "w" / "inbox.md"
    spaced.parent.mkdir(parents=True)
    spaced.write_text("Task ID: 1")
    assert find_inbox_path(f"Read {spaced} and follow it.") == spaced
    assert find_inbox_path(f'open "{spaced}"') == spaced
    assert find_inbox_path("no path here") is None
    assert find_inbox_path("Read /x/y/inbox.md now") == Path("/x/y/inbox.md")
    rel = find_inbox_path("see workers/w/inbox.md", cwd=tmp_path / "my project")
    assert rel == spaced


# ---- the real API, end to end (no tmux) ---------------------------------------------------


def test_against_the_real_team_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omp.mail import bootstrap
    from omp.store.paths import StatePaths
    from omp.team import setup

    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.setenv("OMP_ROOT", str(root))
    monkeypatch.chdir(REPO)
    setup.create_team(root, "t", 2, task="say hello")
    team = StatePaths(root).team("t")
    inbox = team.worker_dir("worker-1") / "inbox.md"
    text = bootstrap.inbox_markdown(
        team="t",
        worker="worker-1",
        task_id="1",
        description="say hello (part 1/2)",
        teammates=["worker-2"],
        result_path=team.worker_dir("worker-1") / "result.md",
        omp=omp_command(),
    )
    inbox.write_text(text)
    shell = ShellApi()
    agent = DemoAgent(
        team="t", worker="worker-1", root=root, api=shell, screen=Term().screen,
        lines=queue.Queue(), work_seconds=0.0, tick=0.01, learn=shell.learn,
    )  # fmt: skip
    agent.handle(bootstrap.trigger_line(inbox))
    task = json.loads(team.task("1").read_text())
    assert task["status"] == "completed" and task["owner"] == "worker-1"
    leader = [json.loads(x) for x in team.mailbox("leader").read_text().splitlines()]
    bodies = [m["body"] for m in leader if m.get("type") == "message"]
    assert bodies == ["worker-1 started task 1: say hello (part 1/2)", "worker-1 completed task 1"]
    # Every call went through a shell, starting with the omp the inbox names; the claim ran
    # byte for byte as printed.
    assert [ln.split(" team api ")[0] for ln in shell.ran] == [omp_command()] * 4
    assert shell.ran[0] in text
    bad = shell("claim-task", {"team_name": "nope", "task_id": "1"})
    assert bad["ok"] is False and isinstance(bad.get("error"), str)
    assert ShellApi()("claim-task", {})["error"] == "no_command"  # it read no command yet


# ---- the real program in a pseudo-terminal -------------------------------------------------

# Ctrl-C as a terminal's program gets it: a pytest started in the background by a script
# (`cmd &` without job control) ignores SIGINT, and its children would inherit that.
CHILD = """
import json, os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from omp import demo_agent
log = os.environ["FAKE_API_LOG"]
def fake(sub, payload):
    with open(log, "a") as f:
        f.write(json.dumps([sub, payload]) + "\\n")
    if sub == "claim-task":
        return {"ok": True, "task": {}, "claimToken": "tok"}
    return {"ok": True, "messages": []}
sys.exit(demo_agent.main(runner=fake))
"""


class Pty:
    def __init__(self, env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        os.close(slave)
        self.raw = b""

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait_for(self, pred: Callable[[list[str], str], bool], timeout: float = 20.0) -> list[str]:
        """Read until `pred(rows, raw_text)` holds after some chunk; the rows at that moment."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.raw.decode("utf-8", "replace")
            rows = vt(text)
            if pred(rows, text):
                return rows
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("timed out; screen:\n" + "\n".join(rows[-10:]))
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError("pty closed; screen:\n" + "\n".join(rows[-10:]))
                self.raw += chunk

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self.master)


def last_is_prompt(rows: list[str]) -> bool:
    return bool(rows) and rows[-1] == "❯"


def test_real_program_in_a_pty(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    path = inbox_file(root)
    log = tmp_path / "api.jsonl"
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "OMP_ROOT": str(root),
        "OMP_TEAM": "t",
        "OMP_WORKER": "worker-1",
        "OMP_TEAM_WORKER": "1",
        "OMP_DEMO_WORK_SECONDS": "0.3",
        "FAKE_API_LOG": str(log),
        "TERM": "xterm",
    }
    pty = Pty(env)
    try:
        rows = pty.wait_for(lambda r, _: last_is_prompt(r))
        assert "omp demo agent: worker-1 of team t" in rows[0]

        pty.send("hello agent\n")
        rows = pty.wait_for(lambda r, _: "● noted: hello agent" in r and last_is_prompt(r))
        assert rows[-3:] == ["❯ hello agent", "● noted: hello agent", "❯"]

        pty.send(trigger(path) + "\n")
        busy = pty.wait_for(lambda r, _: any("working on task 3" in x for x in r[-3:]))
        assert busy[-1] == "❯" and "working on task 3 (esc to interrupt)" in busy[-2]
        rows = pty.wait_for(lambda r, _: any("completed task 3" in x for x in r))
        rows = pty.wait_for(lambda r, _: last_is_prompt(r))
        assert not any("working" in x for x in rows[-3:])
        calls = [json.loads(x)[0] for x in log.read_text().splitlines()]
        assert calls == ["claim-task", "send-message", "transition-task-status", "send-message"]
        assert (root / ".omp/state/team/t/workers/worker-1/result.md").is_file()

        pty.proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean exit, no traceback
        assert pty.proc.wait(timeout=20) == 0
        assert "Traceback" not in pty.raw.decode("utf-8", "replace")
    finally:
        pty.close()


def test_end_of_input_exits_0(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "OMP_ROOT": str(tmp_path)}
    env["FAKE_API_LOG"] = str(tmp_path / "log")
    pty = Pty(env)
    try:
        pty.wait_for(lambda r, _: last_is_prompt(r))
        pty.send("\x04")  # Ctrl-D at an empty prompt
        assert pty.proc.wait(timeout=20) == 0
    finally:
        pty.close()
