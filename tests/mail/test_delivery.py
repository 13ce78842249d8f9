"""The send path's nudge decision (`omp.mail.delivery`): typed, deferred, not needed, no pane,
unreachable; at most one nudge outstanding per pane. The pane is faked at `deliver_line`; the
real-tmux side is in test_monitor_tmux.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from omp.mail import delivery
from omp.mail.mailbox import Mailbox, new_message
from omp.mail.typein import Delivery
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store.paths import StatePaths
from tests.helpers import isolate, make_project, make_team


class FakePane:
    """`deliver_line` as `type_line` does it: `guard` asked once the pane's lock is held (after
    `meanwhile`: what another typer did while we waited for it), `on_submitted` after a send."""

    def __init__(self) -> None:
        self.reason = "delivered"
        self.typed: list[tuple[str, str, bool]] = []
        self.meanwhile: Callable[[], None] | None = None

    def __call__(self, cfg: TeamConfig, member: str, pane: str, text: str, **kw: Any) -> Delivery:
        if self.meanwhile is not None:
            self.meanwhile()
        why = kw["guard"]() if kw.get("guard") else None
        if why is not None:
            return Delivery(False, "unwanted", screen=why)
        self.typed.append((member, text, bool(kw.get("only_idle"))))
        ok = self.reason == "delivered"
        if ok and kw.get("on_submitted"):
            kw["on_submitted"]()
        return Delivery(ok, self.reason)


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TeamConfig, FakePane]:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")  # a deferral must not start a real monitor
    root = make_project(tmp_path / "proj")
    tp = make_team(root, "t", 2, task="x")
    raw = team_config.load(tp).raw
    for i, w in enumerate(raw["workers"], start=1):
        w["paneId"] = f"%{i}"
    # A private socket nobody serves: never the user's own tmux server.
    sock = str(tmp_path / "no-server.sock")
    raw.update(
        leaderPaneId="%0",
        tmuxIdentity={"socketPath": sock, "serverPid": 1, "serverStartedAt": 2},
    )
    team_config.write(tp, raw)
    fake = FakePane()
    monkeypatch.setattr("omp.mail.panes.deliver_line", fake)
    return team_config.load(StatePaths(root).team("t")), fake


def _mail(cfg: TeamConfig, to: str = "worker-1") -> None:
    Mailbox(cfg.paths, to).append_messages([new_message("worker-2", to, "hi")])


def _nudge(cfg: TeamConfig, to: str = "worker-1") -> delivery.Outcome:
    return delivery.nudge_now(cfg, to, "/x/omp")


def test_typed_only_at_an_idle_prompt_and_then_outstanding(team: Any) -> None:
    cfg, pane = team
    _mail(cfg)
    assert _nudge(cfg) == delivery.Outcome("typed")
    assert pane.typed[-1][2] is True  # asked to type only into an idle screen
    _mail(cfg)
    second = _nudge(cfg)
    assert second == delivery.Outcome("not_needed", "a nudge for this mail is still outstanding")
    assert len(pane.typed) == 1
    # The mail was read: the next message is nudged again, with the count of that moment.
    box = Mailbox(cfg.paths, "worker-1")
    box.mark([m["id"] for m in box.undelivered()[0]])
    _mail(cfg)
    assert _nudge(cfg).state == "typed"
    assert pane.typed[-1][1].startswith("You have 1 new message(s). Read them: /x/omp team api")


def test_the_outstanding_nudge_expires_after_the_renudge_interval(
    team: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, _ = team
    _mail(cfg)
    assert _nudge(cfg).state == "typed"
    rec = delivery.read_record(cfg, "worker-1")
    assert rec is not None
    delivery.write_record(cfg, "worker-1", rec.ids, rec.typed_at - 61)
    _mail(cfg)
    assert _nudge(cfg).state == "typed"


def test_a_nudge_the_monitor_typed_while_the_send_waited_for_the_pane_is_not_typed_again(
    team: Any,
) -> None:
    """The monitor nudges new mail no nudge covers as soon as the pane is idle: it can get the
    pane's lock between the send's append and its nudge. The send sees its record under the
    lock and types nothing (CI: the Copilot re-nudge test saw a second nudge, or `busy`)."""
    cfg, pane = team
    _mail(cfg)

    def monitor_typed() -> None:
        unread = tuple(m["id"] for m in Mailbox(cfg.paths, "worker-1").undelivered()[0])
        delivery.write_record(cfg, "worker-1", unread, time.time())

    pane.meanwhile = monitor_typed
    out = _nudge(cfg)
    assert out == delivery.Outcome("not_needed", "a nudge for this mail is still outstanding")
    assert pane.typed == []
    # mail read while the send waited: nothing typed either
    pane.meanwhile = lambda: Mailbox(cfg.paths, "worker-2").mark(
        [m["id"] for m in Mailbox(cfg.paths, "worker-2").undelivered()[0]]
    )
    _mail(cfg, "worker-2")
    assert _nudge(cfg, "worker-2") == delivery.Outcome("not_needed", "no unread mail any more")
    assert pane.typed == []
    assert delivery.read_record(cfg, "worker-2") is None


def test_a_busy_agent_is_left_to_the_monitor(team: Any) -> None:
    cfg, pane = team
    pane.reason = "busy"
    _mail(cfg)
    out = _nudge(cfg)
    assert out == delivery.Outcome(
        "deferred", "the agent is busy; the monitor nudges once it is idle"
    )
    assert delivery.read_record(cfg, "worker-1") is None  # nothing typed: nothing outstanding


def test_mail_read_meanwhile_needs_no_nudge(team: Any) -> None:
    cfg, pane = team
    assert _nudge(cfg) == delivery.Outcome("not_needed", "no unread mail any more")
    assert pane.typed == []


def test_gone_panes_and_missing_panes_say_why(team: Any) -> None:
    cfg, pane = team
    _mail(cfg)
    pane.reason = "gone"
    gone = _nudge(cfg)
    assert gone.state == "unreachable"
    assert gone.reason == f"its tmux server is gone (no server answers on {cfg.tmux['socketPath']})"
    pane.reason = "dead"
    assert _nudge(cfg) == delivery.Outcome("unreachable", "its agent exited (the pane is dead)")
    _mail(cfg, "leader")
    leader = _nudge(cfg, "leader")
    assert leader.state == "no_pane" and "--nudge-leader" in (leader.reason or "")
    cfg.paths.shutdown.write_text("{}")
    assert _nudge(cfg).reason == "the team was shut down"


def test_covered_since() -> None:
    rec = delivery.Record(100.0, ("a",))
    assert delivery.covered_since(rec, 99.0) == 100.0
    assert delivery.covered_since(rec, 101.0) is None  # newer mail than the last nudge
    assert delivery.covered_since(None, 1.0) is None


def test_a_worker_on_another_host_is_left_to_the_monitor_which_types_there(team: Any) -> None:
    cfg, pane = team
    raw = dict(cfg.raw)
    w2 = raw["workers"][1]
    w2["paneId"] = None
    w2["remote"] = {
        "host": "build1", "root": "/r/root", "worktree": "/r/wt", "branch": "omp/t/worker-2",
        "socket": "omp-p", "pane": "%1",
    }  # fmt: skip
    team_config.write(cfg.paths, raw)
    cfg = team_config.load(cfg.paths)
    _mail(cfg, "worker-2")
    out = _nudge(cfg, "worker-2")
    # deferred, so the send keeps the monitor running; never typed into this server's `%1`
    assert out.state == delivery.DEFERRED and "build1" in str(out.reason), out
    assert pane.typed == []
    # a local worker without a pane is still "no pane"
    raw["workers"][0]["paneId"] = None
    team_config.write(cfg.paths, raw)
    _mail(cfg, "worker-1")
    assert _nudge(team_config.load(cfg.paths), "worker-1").state == delivery.NO_PANE
