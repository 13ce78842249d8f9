"""`omp team wait`: returns on leader mail, a task move, all done, shutdown or timeout; writes
nothing; stats instead of spinning."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from omp.cli.team_text import wait_text
from omp.invocation import omp_command
from omp.mail.mailbox import Mailbox, new_message
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.views import wait as wait_mod
from omp.views.wait import EXIT_ALL_DONE, EXIT_EVENT, EXIT_SHUTDOWN, EXIT_TIMEOUT
from tests.helpers import isolate, make_project, make_team, snapshot_tree


def wait(cfg: TeamConfig, **kw: Any) -> dict[str, Any]:
    """`omp.views.wait.wait`, looking every 20 ms instead of 200: an event found sooner, the
    same answers (the interval is not what these tests are about)."""
    return wait_mod.wait(cfg, **{"poll": 0.02, **kw})


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, task="build it")
    return r


def cfg(root: Path) -> TeamConfig:
    return team_config.load(StatePaths(root).team("t"))


def mail_leader(root: Path, *senders: str) -> None:
    box = Mailbox(StatePaths(root).team("t"), "leader")
    box.append_messages([new_message(s, "leader", f"from {s}") for s in senders])


def meanwhile(fn: Callable[[], object]) -> Callable[[float], None]:
    """A `sleep` for `wait` that makes `fn` happen during the wait: after its first look found
    nothing new, before the next (a timer thread 0.3 s later did the same, and cost 0.3 s)."""
    pending = [fn]

    def sleep(seconds: float) -> None:
        while pending:
            pending.pop()()
        time.sleep(seconds)

    return sleep


def finish(root: Path, tid: str, to: str = "completed") -> None:
    tp = StatePaths(root).team("t")
    _, tok = tasks.claim(tp, tid, f"worker-{tid}")
    tasks.transition(
        tp, tid, worker=f"worker-{tid}", from_status="in_progress", to_status=to, token=tok,
        result=f"done {tid}",
    )  # fmt: skip


def test_unread_mail_returns_at_once_with_count_and_senders(root: Path) -> None:
    mail_leader(root, "worker-1", "worker-2", "worker-1")
    r = wait(cfg(root), timeout=5)
    assert r["event"] == "mail" and r["exitCode"] == EXIT_EVENT == 0
    arg = '\'{"team_name":"t","worker":"leader"}\''
    read = f"{omp_command()} team api mailbox-read --input {arg} --json"
    assert r["messages"] == {
        "count": 3,
        "senders": [{"from": "worker-1", "count": 2}, {"from": "worker-2", "count": 1}],
        "readCommand": read,  # the exact line, for an agent leader to run as is
    }
    assert r["moved"] == [] and r["waitedSeconds"] < 1
    text = wait_text(r)
    assert "3 unread message(s) for the leader from worker-1 (2), worker-2 (1)" in text
    assert f"  read them: {read}" in text


def test_mail_arriving_during_the_wait_ends_it(root: Path) -> None:
    arrived = meanwhile(lambda: mail_leader(root, "worker-2"))
    r = wait(cfg(root), timeout=10, sleep=arrived)
    assert r["event"] == "mail" and r["messages"]["count"] == 1


def test_a_task_moving_ends_the_wait(root: Path) -> None:
    tp = StatePaths(root).team("t")
    r = wait(cfg(root), timeout=10, sleep=meanwhile(lambda: tasks.claim(tp, "1", "worker-1")))
    assert r["event"] == "tasks" and r["exitCode"] == EXIT_EVENT
    assert r["moved"] == [
        {"id": "1", "from": "pending", "to": "in_progress", "owner": "worker-1", "result": None}
    ]
    assert r["tasks"] == {"in_progress": 1, "pending": 1}
    assert "task 1: pending -> in_progress (worker-1)" in wait_text(r)


def test_all_done_has_its_own_exit_code(root: Path) -> None:
    finish(root, "1")
    # Task 2 is claimed before the wait starts: only its end is a move (a claim seen between
    # the claim and the end would rightly be reported as a move of its own).
    tp = StatePaths(root).team("t")
    _, tok = tasks.claim(tp, "2", "worker-2")
    fail_2 = meanwhile(
        lambda: tasks.transition(
            tp, "2", worker="worker-2", from_status="in_progress", to_status="failed",
            token=tok, result="done 2",
        ),
    )  # fmt: skip
    r = wait(cfg(root), timeout=10, sleep=fail_2)
    # Not a failure: exit 0 for an agent's shell tool; the event and its code tell it apart.
    assert (r["event"], r["exitCode"], r["eventCode"]) == ("all_done", 0, EXIT_ALL_DONE)
    assert EXIT_ALL_DONE == 10
    assert r["allDone"] is True
    assert [(m["id"], m["to"]) for m in r["moved"]] == [("2", "failed")]  # 1 was done before
    assert f"all 2 task(s) done; results: {omp_command()} team collect t" in wait_text(r)
    # Already all done: at once, even with mail waiting (the mail is still listed).
    mail_leader(root, "worker-1")
    r = wait(cfg(root), timeout=10)
    assert r["event"] == "all_done" and r["messages"]["count"] == 1


def test_a_team_done_over_its_budget_still_needs_the_person_first(root: Path) -> None:
    """All tasks done while the budget message is unread: `attention` (the person decides what
    the spend means), then, once it was read, `all_done`."""
    finish(root, "1")
    finish(root, "2")
    box = Mailbox(StatePaths(root).team("t"), "leader")
    msg = new_message("omp", "leader", "team t crossed its token budget", {"intent": "budget"})
    box.append_messages([msg])
    r = wait(cfg(root), timeout=5)
    assert r["event"] == "attention" and r["attention"][0]["messageId"] == msg["id"]
    box.mark([msg["id"]])
    assert wait(cfg(root), timeout=5)["event"] == "all_done"


def test_timeout_has_its_own_exit_code(root: Path) -> None:
    t0 = time.monotonic()
    r = wait(cfg(root), timeout=0.1, exit_codes=True)
    assert r["event"] == "timeout" and r["exitCode"] == EXIT_TIMEOUT == 11
    assert 0.1 <= time.monotonic() - t0 < 2
    assert "nothing new after" in wait_text(r)


def test_a_shutdown_ends_the_wait(root: Path) -> None:
    shut = meanwhile(lambda: StatePaths(root).team("t").shutdown.write_text("{}"))
    r = wait(cfg(root), timeout=10, exit_codes=True, sleep=shut)
    assert r["event"] == "shutdown" and r["exitCode"] == EXIT_SHUTDOWN == 12


def test_a_team_without_tasks_is_never_all_done(tmp_path: Path, root: Path) -> None:
    make_team(root, "empty", 1)
    r = wait(team_config.load(StatePaths(root).team("empty")), timeout=0.05)
    assert r["event"] == "timeout"


def test_wait_writes_nothing(root: Path) -> None:
    mail_leader(root, "worker-1")
    state = StatePaths(root).state
    before = snapshot_tree(state)
    assert wait(cfg(root), timeout=1)["event"] == "mail"
    assert snapshot_tree(state) == before
    Mailbox(StatePaths(root).team("t"), "leader").mark(
        [m["id"] for m in Mailbox(StatePaths(root).team("t"), "leader").undelivered()[0]]
    )
    before = snapshot_tree(state)
    assert wait(cfg(root), timeout=0.05)["event"] == "timeout"
    assert snapshot_tree(state) == before


def test_it_stats_instead_of_reading_and_does_not_spin(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Files older than the coarse-mtime window: only a stat change makes it read again.
    old = time.time() - 60
    for dirpath, dirnames, filenames in os.walk(StatePaths(root).state):
        for n in dirnames + filenames:
            os.utime(os.path.join(dirpath, n), (old, old))
    reads = {"n": 0}
    real = Mailbox.undelivered

    def counting(self: Mailbox) -> tuple[list[dict[str, Any]], int]:
        reads["n"] += 1
        return real(self)

    monkeypatch.setattr(Mailbox, "undelivered", counting)
    now = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    r = wait_mod.wait(cfg(root), timeout=10, clock=lambda: now[0], sleep=sleep)  # its own poll
    assert r["event"] == "timeout"
    assert reads["n"] == 1  # once at the start; 50 polls of stat alone after that
    assert abs(sum(sleeps) - 10) < 1e-6 and all(s <= 0.2 + 1e-9 for s in sleeps)
    assert 50 <= len(sleeps) <= 51  # 0.2 s polls (the last may be a float remainder)


def test_bad_timeouts_are_refused(root: Path) -> None:
    from omp.errors import OmpError

    with pytest.raises(OmpError) as exc:
        wait(cfg(root), timeout=-1)
    assert exc.value.code == "invalid_input"


# ---- the command ----------------------------------------------------------------------------


@pytest.fixture
def cli(root: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from omp.cli.monitor_cmds import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    register(app)
    monkeypatch.chdir(root)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def test_cli_exit_codes_and_json(cli: Any, root: Path) -> None:
    r = cli("wait", "t", "--timeout", "0.05", "--json")
    assert r.exit_code == 0  # a timeout is no failure for an agent's shell tool
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["event"] == "timeout" and doc["eventCode"] == 11
    r = cli("wait", "t", "--timeout", "0.05", "--exit-codes", "--json")
    assert r.exit_code == 11 and json.loads(r.stdout)["exitCode"] == 11
    mail_leader(root, "worker-2")
    r = cli("wait", "t", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["messages"]["count"] == 1
    r = cli("wait", "t")
    assert r.exit_code == 0 and "1 unread message(s) for the leader from worker-2 (1)" in r.stdout
    assert cli("wait", "nope", "--json").exit_code == 1
    assert cli("wait", "t", "--timeout", "-1").exit_code == 2


def test_monitor_run_is_hidden(cli: Any) -> None:
    r = cli("--help")
    assert "wait" in r.stdout and "monitor-run" not in r.stdout


def test_exit_codes_are_distinct() -> None:
    codes = [
        EXIT_EVENT,
        EXIT_ALL_DONE,
        EXIT_TIMEOUT,
        EXIT_SHUTDOWN,
        wait_mod.EXIT_GONE,
        wait_mod.EXIT_ATTENTION,
    ]
    assert len(set(codes)) == 6 and not {1, 2, 3} & set(codes)
    assert wait_mod.EXIT_CODES["mail"] == wait_mod.EXIT_CODES["tasks"] == 0


# ---- the cursor: a leader that misses nothing ----------------------------------------------


def snap(root: Path, statuses: str) -> str:
    """The cursor a wait on team t prints for these statuses: team, run, snapshot."""
    return f"t:{wait_mod.run_id(cfg(root))}:{statuses}"


def test_every_wait_returns_a_cursor_of_what_it_saw(root: Path) -> None:
    r = wait(cfg(root), timeout=0.05)
    assert r["event"] == "timeout" and r["cursor"] == snap(root, "1=p,2=p")
    assert r["next"].endswith(f"team wait t --since {snap(root, '1=p,2=p')}")
    assert "wait again: " in wait_text(r) and f"--since {snap(root, '1=p,2=p')}" in wait_text(r)
    mail_leader(root, "worker-1")
    r = wait(cfg(root), timeout=5)
    assert r["event"] == "mail" and r["cursor"] == snap(root, "1=p,2=p")


def test_a_task_that_moved_between_two_waits_is_reported_by_the_second(root: Path) -> None:
    first = wait(cfg(root), timeout=0.05)
    finish(root, "1")  # claimed and completed while nobody waited
    # without a cursor the move is invisible (the old behaviour, kept for compatibility)
    assert wait(cfg(root), timeout=0.05)["event"] == "timeout"
    second = wait(cfg(root), since=first["cursor"], timeout=5)
    assert second["event"] == "tasks" and second["waitedSeconds"] < 1
    assert [(m["id"], m["from"], m["to"]) for m in second["moved"]] == [
        ("1", "pending", "completed")
    ]
    assert second["cursor"] == snap(root, "1=c,2=p")
    # reported once: the next wait from the new cursor does not report it again
    third = wait(cfg(root), since=second["cursor"], timeout=0.05)
    assert third["event"] == "timeout" and third["moved"] == []
    assert third["cursor"] == second["cursor"]


def test_a_cursor_from_a_timeout_still_catches_the_move_after_it(root: Path) -> None:
    tp = StatePaths(root).team("t")
    c = wait(cfg(root), timeout=0.05)["cursor"]
    tasks.claim(tp, "2", "worker-2")
    r = wait(cfg(root), since=c, timeout=5)
    assert [(m["id"], m["to"]) for m in r["moved"]] == [("2", "in_progress")]
    tasks.create(tp, "3", "a new task")  # a task the cursor never saw is reported as new
    r = wait(cfg(root), since=r["cursor"], timeout=5)
    assert [(m["id"], m["from"], m["to"]) for m in r["moved"]] == [("3", None, "pending")]
    assert "task 3: new -> pending" in wait_text(r)


def test_an_unknown_status_is_a_broken_task_outside_the_cursor(root: Path) -> None:
    """A status omp does not know is a broken task file (shown, never silently defaulted);
    the cursor carries the tasks that can be read."""
    tp = StatePaths(root).team("t")
    task = tasks.read(tp, "1")
    assert task is not None
    task["status"] = "blocked"  # another tool's status
    tp.task("1").write_text(json.dumps(task))
    r = wait(cfg(root), timeout=0.05)
    assert r["cursor"] == snap(root, "2=p")
    assert [b["id"] for b in r["brokenTasks"]] == ["1"]
    assert wait(cfg(root), since=r["cursor"], timeout=0.05)["event"] == "timeout"


@pytest.mark.parametrize(
    "bad", ["", "1", "1=", "=p", "../x=p", "1=p,,2=p", "1=p;rm", "1=p,2=p", "-"]
)
def test_a_bad_cursor_is_refused(root: Path, bad: str) -> None:
    from omp.errors import OmpError

    for text in (bad, f"t:{wait_mod.run_id(cfg(root))}:{bad}"):
        if text.count(":") == 2 and text.split(":")[2] in ("1=p,2=p", "-"):
            continue  # a good cursor (the old bare form is refused: it names no team)
        with pytest.raises(OmpError) as exc:
            wait(cfg(root), since=text, timeout=0.1)
        assert exc.value.code == "invalid_cursor" and exc.value.exit_code == 2


def test_cli_since(cli: Any, root: Path) -> None:
    r = cli("wait", "t", "--timeout", "0.2", "--json")
    cursor = json.loads(r.stdout)["cursor"]
    finish(root, "2", "failed")
    state = StatePaths(root).state
    before = snapshot_tree(state)
    r = cli("wait", "t", "--since", cursor, "--json")
    assert r.exit_code == 0, r.stdout
    doc = json.loads(r.stdout)
    assert doc["event"] == "tasks" and doc["moved"][0]["to"] == "failed"
    assert snapshot_tree(state) == before  # still read-only
    r = cli("wait", "t", "--since", "nonsense", "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["error"] == "invalid_cursor"
