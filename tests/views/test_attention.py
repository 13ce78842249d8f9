"""A worker that needs a person (issue 20, section 4), with the monitor's fake clock and tmux.

Seen within one scan, in `status`, `wait`, `events` and one leader message per episode; a
restarted monitor tells nobody twice; nothing is typed into such a pane.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omp.cli import replies
from omp.errors import OmpError
from omp.mail.mailbox import Mailbox
from omp.monitor import attention
from omp.record import config as team_config
from omp.record import history
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.views import status as team_status
from omp.views import wait as wait_mod
from tests.helpers import FIXTURES, assert_reply, isolate, make_project
from tests.monitor.test_monitor_policy import (
    FakeClock,
    FakePane,
    FakeTmux,
    World,
    live_config,
    own_lock,
)

SCREENS = FIXTURES / "screens"  # Claude Code 2.1.328, captured
PROMPT = (SCREENS / "claude-16-permission-prompt.txt").read_text(encoding="utf-8").splitlines()
IDLE = (SCREENS / "claude-14-idle-after-turn.txt").read_text(encoding="utf-8").splitlines()
BUSY = (SCREENS / "claude-10-busy-spinner.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    """test_monitor_policy's world: a live-looking team of three on a fake tmux server."""
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    workers, leader = live_config(root)
    fake = FakeTmux(panes={p: FakePane() for p in [*workers.values(), leader]})
    own_lock(StatePaths(root))
    return World(root, StatePaths(root), fake, FakeClock(), workers, leader)


def claude_team(w: World) -> None:
    """The fake team runs Claude Code: its screens are judged by the claude profile."""
    tp = w.paths.team("t")
    raw = team_config.load(tp).raw
    raw["agent"] = "claude"
    raw["tmuxSession"] = "omp-team-t"
    team_config.write(tp, raw)
    for pane in w.workers.values():
        w.fake.screens[pane] = IDLE


def leader_mail(w: World) -> list[dict[str, Any]]:
    msgs, _, _ = Mailbox(w.paths.team("t"), "leader").listing(undelivered_only=False, limit=100)
    return [m for m in msgs if m.get("intent") == "needs_person"]


def events(w: World) -> list[dict[str, Any]]:
    evs, _ = history.read_since(w.paths.team("t"), 0)
    return [e for e in evs if e.get("type") == "attention"]


def cfg(w: World) -> team_config.TeamConfig:
    return team_config.load(w.paths.team("t"))


def test_a_permission_prompt_is_reported_within_one_scan_everywhere(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omp.mail.panes import PaneView

    # The fake server's panes, as status would see them on a real one: alive.
    monkeypatch.setattr(
        team_status, "pane_views", lambda c: {w: PaneView("alive") for w in c.worker_names}
    )
    claude_team(world)
    world.fake.screens["%1"] = PROMPT
    mon = world.monitor()
    mon.scan()  # one scan
    need = attention.read(cfg(world))["workers"]["worker-1"]
    assert need["what"] == "permission prompt" and need["seq"] == 1
    assert need["lines"] == [
        "Do you want to proceed?",
        "❯ 1. Yes",
        "2. Yes, and always allow access to /home/me/scratch from this project",
    ]
    assert need["attach"] == (
        "tmux -S /tmp/omp-fake-socket select-pane -t %1 && "
        "tmux -S /tmp/omp-fake-socket attach -t omp-team-t"
    )
    # status
    st = team_status.team_status(cfg(world))
    rows = {w["name"]: w for w in st["workers"]}
    assert rows["worker-1"]["needsYou"]["what"] == "permission prompt"
    assert_reply(rows["worker-1"], replies.WorkerStatus)
    assert_reply(rows["worker-1"]["needsYou"], replies.NeedsYou)
    assert rows["worker-2"]["needsYou"] is None
    from omp.cli.team_text import status_text

    text = status_text({"teams": [st]})
    assert "needs you: permission prompt" in text
    # events: one line
    (ev,) = events(world)
    assert ev["worker"] == "worker-1" and ev["change"] == "started" and ev["seq"] == 1
    # the leader: one message, saying what and how to get there
    (msg,) = leader_mail(world)
    assert msg["from"] == "worker-1" and msg["auto"] is True
    assert "worker-1 needs you: permission prompt" in msg["body"]
    assert "Do you want to proceed?" in msg["body"] and "attach -t omp-team-t" in msg["body"]
    # more scans: still one of each
    world.scan_for(mon, 120)
    assert len(leader_mail(world)) == 1 and len(events(world)) == 1


def test_nothing_is_typed_into_the_prompt_while_mail_waits_then_it_goes(world: World) -> None:
    claude_team(world)
    world.fake.screens["%1"] = PROMPT
    world.mail("worker-1", "first", nudged=False)  # its send found the prompt: deferred
    mon = world.monitor()
    world.scan_for(mon, 10 * 60)
    assert world.fake.to("%1") == []  # ten minutes of scans, unread mail, not one keystroke
    world.fake.screens["%1"] = IDLE  # a person answered the prompt
    world.clock.sleep(5)
    mon.scan()
    assert len(world.fake.to("%1")) == 1  # the nudge goes once the dialog is gone
    assert attention.read(cfg(world))["workers"] == {}
    assert [e["change"] for e in events(world)] == ["started", "ended"]


def test_a_restarted_monitor_does_not_tell_the_leader_twice(world: World) -> None:
    claude_team(world)
    world.fake.screens["%2"] = PROMPT
    world.scan_for(world.monitor(), 30)
    world.scan_for(world.monitor(), 30)  # a new process: the episode is in the tracker store
    assert len(leader_mail(world)) == 1 and len(events(world)) == 1
    # The episode ends, a new one starts: one more message.
    world.fake.screens["%2"] = BUSY
    mon = world.monitor()
    world.scan_for(mon, 10)
    world.fake.screens["%2"] = PROMPT
    world.clock.sleep(5)
    mon.scan()
    assert len(leader_mail(world)) == 2
    assert attention.read(cfg(world))["workers"]["worker-2"]["seq"] == 2


def test_a_worker_idle_at_its_prompt_with_work_in_progress_is_stuck(world: World) -> None:
    claude_team(world)
    (world.paths.omp_dir / "config.toml").write_text("[team]\nstuck_after = 120\n")
    tp = world.paths.team("t")
    tasks.claim(tp, "1", "worker-1")  # worker-1 holds task 1, in progress
    mon = world.monitor()
    world.scan_for(mon, 115)
    assert attention.read(cfg(world))["workers"] == {}
    world.clock.sleep(5)
    mon.scan()
    need = attention.read(cfg(world))["workers"]
    assert list(need) == ["worker-1"]  # worker-2 and -3 hold no task in progress
    assert need["worker-1"]["what"] == "idle at its prompt for over 2 min with task 1 in progress"
    # It starts working: the episode ends.
    world.fake.screens["%1"] = BUSY
    world.clock.sleep(5)
    mon.scan()
    assert attention.read(cfg(world))["workers"] == {}


def test_wait_returns_at_once_then_only_for_a_new_episode(world: World) -> None:
    claude_team(world)
    world.fake.screens["%3"] = PROMPT
    world.monitor().scan()
    r = wait_mod.wait(cfg(world), timeout=5, exit_codes=True)
    assert r["event"] == "attention" and r["exitCode"] == wait_mod.EXIT_ATTENTION == 14
    (a,) = r["attention"]
    assert_reply(r, replies.WaitReply)
    assert_reply(a, replies.WaitAttention)
    assert a["worker"] == "worker-3" and a["what"] == "permission prompt"
    assert a["lines"][0] == "Do you want to proceed?" and "select-pane -t %3" in a["attach"]
    # The episode number rides at the end of the team's and run's cursor (issue 21's format).
    run = wait_mod.run_id(cfg(world))
    assert r["cursor"].startswith(f"t:{run}:") and r["cursor"].endswith(",@1")
    assert wait_mod.wait(cfg(world), timeout=5)["exitCode"] == 0  # exit 0 by default
    box = Mailbox(world.paths.team("t"), "leader")
    box.mark([m["id"] for m in box.undelivered()[0]])  # the leader read the episode's message
    # The same episode is not news to a wait that carries the cursor.
    again = wait_mod.wait(cfg(world), since=r["cursor"], timeout=0.3, unreachable=lambda c: None)
    assert again["event"] == "timeout" and again["cursor"].endswith(",@1")
    from omp.cli.team_text import wait_text

    text = wait_text(r)
    assert "worker-3 needs you: permission prompt" in text and "attach:" in text


def test_a_dead_pane_needs_nobody(world: World) -> None:
    claude_team(world)
    world.fake.screens["%1"] = PROMPT
    mon = world.monitor()
    mon.scan()
    assert "worker-1" in attention.read(cfg(world))["workers"]
    world.fake.panes["%1"].dead = True
    world.clock.sleep(5)
    mon.scan()
    assert attention.read(cfg(world))["workers"] == {}


def test_an_earlier_launch_s_file_reads_as_nobody(world: World, tmp_path: Path) -> None:
    claude_team(world)
    world.fake.screens["%1"] = PROMPT
    world.monitor().scan()
    tp = world.paths.team("t")
    raw = team_config.load(tp).raw
    raw["launchToken"] = "lt-2"  # a relaunch: a new generation
    team_config.write(tp, raw)
    assert attention.read(team_config.load(tp))["workers"] == {}
    assert StatePaths(world.root).team("t").attention.exists()


@pytest.mark.parametrize("tail", ["@", "@x", "@\u0663", "@123456789012", "@-1"])
def test_a_wait_cursor_with_an_odd_episode_mark_is_refused(world: World, tail: str) -> None:
    claude_team(world)
    run = wait_mod.run_id(cfg(world))
    with pytest.raises(OmpError) as exc:
        wait_mod.wait(cfg(world), since=f"t:{run}:1=i,{tail}", timeout=0.1)
    assert exc.value.code == "invalid_cursor"


def test_a_wait_cursor_of_an_earlier_run_is_refused_with_its_episode_mark(world: World) -> None:
    """A relaunch starts the episode numbers over: the old `@N` must not hide the new ones."""
    claude_team(world)
    old = wait_mod.encode_cursor(cfg(world), {"1": "in_progress"}, 3)
    assert wait_mod.decode_cursor(cfg(world), old) == {"1": "in_progress"}
    tp = world.paths.team("t")
    raw = team_config.load(tp).raw
    raw["launchToken"] = "lt-2"  # a relaunch
    team_config.write(tp, raw)
    with pytest.raises(OmpError) as exc:
        wait_mod.wait(team_config.load(tp), since=old, timeout=0.1)
    assert exc.value.code == "invalid_cursor" and "earlier run" in exc.value.message


def test_the_leaders_message_ends_each_sentence_once(world: World) -> None:
    """A screen whose last line ends its own sentence ("... yourself.") gets no second period."""
    from omp.monitor.attention import tell_opened

    claude_team(world)
    cfg = team_config.load(world.paths.team("t"))
    lines = ["Sign in to continue.", "Run /login yourself."]
    tell_opened(cfg, "worker-1", "sign in", 1, lines, "%1")
    (msg,) = leader_mail(world)
    assert "Run /login yourself. " in msg["body"] and ".." not in msg["body"], msg["body"]
