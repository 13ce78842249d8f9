"""A team's sections as the board computes them (`omp.board.feed.TeamFeed`) on a headless team:
what a first tick sends, that a tick with no change sends nothing, and that each change sends
only the sections it touches. A fake clock; no tmux, no server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omp.board.feed import STATUS_EVERY, TeamFeed, worker_state
from omp.mail.mailbox import Mailbox, new_message
from omp.record import history
from omp.store.paths import StatePaths
from omp.tasks import tasks
from tests.helpers import isolate, make_project, make_team


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, task="build it")
    return r


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_first_tick_sends_every_section_then_only_what_changed(root: Path) -> None:
    clock = Clock()
    feed = TeamFeed(StatePaths(root), "t", clock=clock)
    first = feed.tick()
    assert {"status", "states", "mail", "usage"} <= set(first)
    assert [w["name"] for w in first["status"]["workers"]] == ["worker-1", "worker-2"]
    assert first["states"] == {"worker-1": "idle", "worker-2": "idle"}
    assert feed.snapshot()["status"] == first["status"]
    clock.now += 0.5
    assert feed.tick() == {}  # nothing changed: nothing sent

    team = StatePaths(root).team("t")
    tasks.claim(team, "1", "worker-1")
    clock.now += 0.5
    moved = feed.tick()
    assert "status" in moved and "mail" not in moved
    rows = {t["id"]: t["status"] for t in moved["status"]["tasks"]}
    assert rows["1"] == "in_progress"
    assert moved["states"]["worker-1"] == "busy"  # headless: its task is running

    Mailbox(team, "worker-2").append_messages(
        [new_message("leader", "worker-2", "<b>hi</b>\x1b[2J")]
    )
    clock.now += 0.5
    mailed = feed.tick()
    assert mailed["mail"][-1]["body"] == "<b>hi</b>\\x1b[2J"  # made visible, kept as text
    assert mailed["mail"][-1]["from"] == "leader"


def test_events_arrive_as_omp_team_events_prints_them(root: Path) -> None:
    clock = Clock()
    feed = TeamFeed(StatePaths(root), "t", clock=clock)
    feed.tick()
    team = StatePaths(root).team("t")
    history.record(team, {"type": "member", "worker": "worker-2", "change": "offline"})
    clock.now += 0.5
    got = feed.tick()["events"]
    assert got["reset"] is False
    assert got["events"][-1]["text"].endswith("worker-2 offline")


def test_status_is_recomputed_as_time_passes(root: Path) -> None:
    clock = Clock()
    feed = TeamFeed(StatePaths(root), "t", clock=clock)
    feed.tick()
    calls: list[int] = []
    real = feed._status

    def counted(cfg: Any) -> dict[str, Any]:
        calls.append(1)
        return real(cfg)

    feed._status = counted  # type: ignore[method-assign]
    clock.now += 1
    feed.tick()
    assert calls == []
    clock.now += STATUS_EVERY
    feed.tick()
    assert calls == [1]


def test_a_team_that_goes_is_said(root: Path) -> None:
    import shutil

    feed = TeamFeed(StatePaths(root), "t")
    feed.tick()
    shutil.rmtree(StatePaths(root).teams / "t")
    got = feed.tick()
    assert got["status"]["error"] == "unknown_team"


@pytest.mark.parametrize(
    ("row", "screen", "word"),
    [
        ({"pane": "dead"}, None, "dead"),
        ({}, {"pane": "gone"}, "dead"),
        ({"needsYou": {"what": "stuck"}}, {"pane": "alive", "screen": "ready"}, "needs you"),
        ({}, {"pane": "alive", "screen": "needs_person"}, "needs you"),
        ({"status": "busy"}, {"pane": "alive", "screen": "busy"}, "busy"),
        ({"status": "busy"}, {"pane": "alive", "screen": "ready"}, "idle"),
        ({}, {"pane": "alive", "screen": "starting"}, "starting"),
        ({"status": "busy", "pane": "none"}, None, "busy"),
        ({"status": "available", "pane": "none"}, None, "idle"),
    ],
)
def test_one_word_per_worker(row: dict[str, Any], screen: dict[str, Any] | None, word: str) -> None:
    assert worker_state(row, screen) == word
