"""Token budgets: a worker's recorded session grows under a running loop, the monitor's scan
finds the budget crossed, the leader is told once, idle prompts stop, and the leader's next stop
ends the loop. The monitor runs with a fake clock and a fake tmux (tests/team/
test_monitor_policy.py); the session is the recorded Copilot one (tests/fixtures/usage/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp import clock, modes
from omp.cli import replies
from omp.cli.hook_stop import handle
from omp.cli.team_text import wait_text
from omp.errors import OmpError
from omp.mail.mailbox import Mailbox
from omp.monitor import attention
from omp.monitor.loop import Monitor
from omp.monitor.policy import IDLE_PROMPT
from omp.record import budget as budgets
from omp.record import config as team_config
from omp.store.names import LEADER
from omp.store.paths import StatePaths
from omp.usage.totals import Tokens
from omp.views.wait import wait
from tests.helpers import REPO, assert_reply, isolate, make_project, records
from tests.monitor.test_monitor_policy import (
    READY,
    TOKEN,
    FakeClock,
    FakePane,
    FakeTmux,
    live_config,
    own_lock,
    scan_long,
)
from tests.usage import fixtures as fx

# The recorded Copilot session: a head, then three model calls. Call n moved 1000n+11 fresh
# input, 100n cache reads and 10n+3 output tokens: 1124, 2234 and 3344 in all.
PER_CALL = [1124, 2234, 3344]


class Session:
    """Worker-1's Copilot session record, written out call by call."""

    def __init__(self, path: Path) -> None:
        src = fx.records("copilot")[0].read_bytes().splitlines(keepends=True)
        marks = [i for i, line in enumerate(src) if b'"session.usage_record"' in line]
        assert len(marks) == 3
        self.parts = [b"".join(src[: marks[0]])]
        self.parts += [
            b"".join(src[a:b]) for a, b in zip(marks, [*marks[1:], len(src)], strict=True)
        ]
        self.path = path
        self.calls = 0
        path.write_bytes(self.parts[0])

    def call(self) -> None:
        """The next model call lands in the record."""
        self.calls += 1
        with self.path.open("ab") as f:
            f.write(self.parts[self.calls])


class World:
    def __init__(self, tmp_path: Path, **config: Any) -> None:
        self.root = make_project(tmp_path / "proj")
        self.paths = StatePaths(self.root)
        self.panes, self.leader = live_config(self.root)
        self.team = self.paths.team("t")
        raw = team_config.load(self.team).raw
        raw.update(config)
        team_config.write(self.team, raw)
        self.fake = FakeTmux(panes={p: FakePane() for p in [*self.panes.values(), self.leader]})
        for p in [*self.panes.values(), self.leader]:
            self.fake.screens[p] = READY
        own_lock(self.paths)
        self.clock = FakeClock()
        self.session = Session(tmp_path / "copilot-events.jsonl")
        # what worker-1's stop hook records (branch `resume`)
        self.team.session("worker-1").write_text(
            json.dumps({"agent": "copilot", "sessionId": "s1",
                        "transcriptPath": str(self.session.path)})
        )  # fmt: skip

    def monitor(self) -> Monitor:
        return Monitor(self.root, TOKEN, clock=self.clock, adapter_factory=lambda s: self.fake)

    def scan_for(self, mon: Monitor, seconds: float, step: float = 5.0) -> None:
        end = self.clock.t + seconds
        while True:
            mon.scan()
            if self.clock.t + step > end + 1e-9:
                return
            self.clock.sleep(step)

    def leader_mail(self) -> list[dict[str, Any]]:
        path = self.team.mailbox(LEADER)
        return [r for r in records(path) if r.get("type") == "message"] if path.exists() else []

    def crossings(self) -> list[dict[str, Any]]:
        return list(budgets.read(self.team)["crossings"])

    def prompts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for pane, text in self.fake.sent:
            if text == IDLE_PROMPT:
                out[pane] = out.get(pane, 0) + 1
        return out

    def leader_stop(self, text: str = "still working") -> dict[str, Any]:
        """The leader's agent (Claude Code) stops: what omp's stop hook answers."""
        p = json.loads((REPO / "tests/fixtures/hooks/claude-Stop.json").read_text())
        p.update(cwd=str(self.root), last_assistant_message=text, session_id="leader-1")
        p["stop_hook_active"] = False
        env = {"HOME": str(self.root.parent / "home"), "OMP_HOOK_DEDUPE_MS": "0"}
        _, out = handle(json.dumps(p).encode(), env)
        obj = json.loads(out) if out.strip() else {}
        assert isinstance(obj, dict)
        return obj


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    isolate(monkeypatch, tmp_path)
    return World(tmp_path, budgetTokens=PER_CALL[0] + PER_CALL[1] - 100)


def test_a_budget_crossed_mid_loop_ends_the_loop_at_the_next_stop_and_the_leader_is_told_once(
    world: World,
) -> None:
    modes.start_ralph(world.paths, "keep going", max_iterations=50)
    mon = world.monitor()
    world.session.call()
    world.scan_for(mon, 35)
    assert world.crossings() == [] and world.leader_mail() == []
    assert world.prompts() == {p: 1 for p in world.panes.values()}  # the loop is driven
    assert world.leader_stop().get("decision") == "block"

    world.session.call()  # the second call crosses the budget
    mon.scan()
    [c] = world.crossings()
    assert c["scope"] == "team" and c["used"] == PER_CALL[0] + PER_CALL[1] and c["mailed"]
    [mail] = world.leader_mail()
    assert mail["from"] == "omp" and mail["intent"] == "budget" and mail["auto"] is True
    assert "team t crossed its token budget (3,358 of 3,258 tokens)" in mail["body"]
    assert "nothing was killed" in mail["body"]
    events = records(world.team.events)
    assert next(e for e in events if e["type"] == "budget")["used"] == 3358

    # no more idle prompts, whatever the time; more calls, more scans, a restarted monitor:
    # still one mail
    world.session.call()
    scan_long(world, mon, 30 * 60)
    world.scan_for(world.monitor(), 120)
    assert world.prompts() == {p: 1 for p in world.panes.values()}
    assert len(world.leader_mail()) == 1 and len(world.crossings()) == 1

    # `wait` says it needs the person while that message is unread, then no more
    cfg = team_config.load(world.team)
    res = wait(cfg, timeout=1, clock=world.clock, sleep=world.clock.sleep, unreachable=no_tmux)
    assert res["event"] == "attention" and res["eventCode"] == 14
    [a] = res["attention"]
    assert a["kind"] == "budget" and "worker" not in a and a["budget"]["used"] == 3358
    assert a["what"] == "the team's token budget is crossed (3,358 of 3,258 tokens)"
    assert a["messageId"] == mail["id"]
    assert_reply(res, replies.WaitReply)
    assert_reply(a, replies.BudgetAttention)
    assert_reply(a["budget"], replies.Crossing)
    text = wait_text(res)
    assert "the team needs you: the team's token budget is crossed" in text, text
    Mailbox(world.team, LEADER).mark([mail["id"]])
    res = wait(cfg, timeout=1, clock=world.clock, sleep=world.clock.sleep, unreachable=no_tmux)
    assert res["event"] == "timeout"

    # the leader's next stop ends the loop and says why; the one after is a plain allow
    reply = world.leader_stop()
    assert reply.get("decision") != "block"
    assert "token budget" in reply.get("systemMessage", ""), reply
    state = modes.read_state(world.paths, "ralph")
    assert state is not None and state["active"] is False and state["endReason"] == "budget"
    assert state["lastDecision"]["why"] == "budget"
    assert world.leader_stop() == {}


def no_tmux(cfg: Any) -> None:
    return None  # the fake team's panes are not on a real tmux server


def test_a_loop_started_after_the_crossing_is_the_persons_decision_and_runs(world: World) -> None:
    modes.start_ralph(world.paths, "keep going")
    mon = world.monitor()
    world.session.call()
    world.session.call()
    mon.scan()
    assert len(world.crossings()) == 1
    later = clock.parse_iso(world.crossings()[0]["at"])
    assert later is not None
    state = modes.start_ralph(world.paths, "go on anyway")
    state["startedAt"] = clock.iso(later + 1)  # started after the crossing
    modes.write_state(world.paths, "ralph", state)
    world.scan_for(mon, 35)
    assert world.prompts() == {p: 1 for p in world.panes.values()}
    assert world.leader_stop().get("decision") == "block"
    assert len(world.leader_mail()) == 1


def test_a_worker_budget_holds_that_worker_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    w = World(tmp_path, workerBudgetTokens=PER_CALL[0])
    modes.start_ralph(w.paths, "keep going")
    mon = w.monitor()
    w.session.call()
    w.scan_for(mon, 35)
    [c] = w.crossings()
    assert (c["scope"], c["worker"], c["budget"]) == ("worker", "worker-1", PER_CALL[0])
    [mail] = w.leader_mail()
    assert mail["from"] == "worker-1" and "worker-1 crossed its worker token budget" in mail["body"]
    cfg = team_config.load(w.team)
    res = wait(cfg, timeout=1, clock=w.clock, sleep=w.clock.sleep, unreachable=no_tmux)
    assert res["event"] == "attention" and res["attention"][0]["worker"] == "worker-1"
    assert res["attention"][0]["what"].startswith("its token budget is crossed")
    held = w.panes["worker-1"]
    assert w.prompts() == {p: 1 for p in w.panes.values() if p != held}
    assert w.leader_stop().get("decision") != "block"  # the loop ends at the leader's stop


def test_a_monitor_killed_after_the_mail_does_not_send_it_twice(world: World) -> None:
    mon = world.monitor()
    world.session.call()
    world.session.call()
    mon.scan()
    assert len(world.leader_mail()) == 1
    # as if the monitor died between the append and marking the crossing mailed
    doc = json.loads(world.team.budget.read_text())
    doc["crossings"][0]["mailed"] = False
    world.team.budget.write_text(json.dumps(doc))
    world.monitor().scan()
    assert len(world.leader_mail()) == 1
    assert world.crossings()[0]["mailed"] is True
    # ... and one killed before the append sends it then
    doc["crossings"][0]["mailId"] = "01NEWMAILID000000000000000"
    world.team.budget.write_text(json.dumps(doc))
    world.monitor().scan()
    assert [m["id"] for m in world.leader_mail()][1] == "01NEWMAILID000000000000000"


def test_a_raised_budget_can_be_crossed_again(world: World) -> None:
    mon = world.monitor()
    world.session.call()
    world.session.call()
    mon.scan()
    raw = team_config.load(world.team).raw
    raw["budgetTokens"] = sum(PER_CALL) - 1
    team_config.write(world.team, raw)
    world.clock.sleep(5)
    mon.scan()
    assert len(world.crossings()) == 1
    world.session.call()
    world.clock.sleep(5)
    mon.scan()
    assert [c["budget"] for c in world.crossings()] == [3258, sum(PER_CALL) - 1]
    assert len(world.leader_mail()) == 2


def test_without_budgets_nothing_is_written(world: World) -> None:
    raw = team_config.load(world.team).raw
    del raw["budgetTokens"]
    team_config.write(world.team, raw)
    mon = world.monitor()
    for _ in range(3):
        world.session.call()
    world.scan_for(mon, 20)
    assert not world.team.budget.exists() and world.leader_mail() == []
    # the index is kept all the same
    assert world.paths.monitor_usage_index("t").exists()


def test_budget_options_are_checked_and_config_toml_gives_the_defaults(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p")
    paths = StatePaths(root)
    assert budgets.for_launch(paths, None, None) == budgets.Budgets(None, None)
    assert budgets.for_launch(paths, 5, None) == budgets.Budgets(5, None)
    for bad in (0, -1, 10**16):
        with pytest.raises(OmpError) as err:
            budgets.for_launch(paths, bad, None)
        assert err.value.code == "invalid_input" and "--budget-tokens" in err.value.message
    (root / ".omp").mkdir()
    (root / ".omp" / "config.toml").write_text(
        "[team]\nstuck_after = 30\nbudget_tokens = 1000000\nworker_budget_tokens = 200000\n"
    )
    assert budgets.for_launch(paths, None, None) == budgets.Budgets(1_000_000, 200_000)
    assert attention.settings(paths).stuck_after == 30.0  # one `[team]` table, keys of both
    assert budgets.for_launch(paths, 7, None) == budgets.Budgets(7, 200_000)
    (root / ".omp" / "config.toml").write_text("[team]\nbudget_token = 1\n")
    with pytest.raises(OmpError) as err:
        budgets.for_launch(paths, None, None)
    assert err.value.code == "invalid_config"
    assert budgets.of_config({"budgetTokens": "9", "workerBudgetTokens": True}) == (None, None)
    assert Tokens(1, 2, 3, 4, 5).total == 14  # what a budget counts: every kind of token


def test_the_crossing_goes_to_the_notify_command_once(world: World) -> None:
    """Queued in `omp.notify`'s outbox (kind `attention`), keyed so a restarted monitor does not
    queue it again."""
    mon = world.monitor()
    world.session.call()
    world.session.call()
    world.scan_for(mon, 30)
    world.monitor().scan()
    queued = records(world.paths.notify_outbox)
    [event] = [e for e in queued if e.get("what") == "budget"]
    assert event["kind"] == "attention" and event["team"] == "t" and "worker" not in event
    assert "crossed its token budget" in event["text"]
    assert event["key"].startswith("budget:t:") and event["key"].endswith(":1")
