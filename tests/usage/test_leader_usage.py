"""The leader's row of `omp team usage`: its session found from its own stop hook's record
(`workers/leader/session.json`, written by the hook in the leader's pane) or from its pane's
processes, the workers' records never taken for it; when still unknown, a row saying why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from omp.monitor import usage as index
from omp.usage.totals import Tokens
from omp.views.usage import usage
from tests.helpers import child_env, isolate, run_cli, snapshot_tree
from tests.usage import fixtures as fx
from tests.usage.team import Team, agent_process, move_cwd, new_team, touch_now, worker_home

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

SOCK = "/tmp/omp-test-sock/leader"


def tokens(row: dict[str, Any]) -> Tokens:
    return Tokens(row["calls"], row["input"], row["output"], row["cacheRead"], row["cacheWrite"])


def leader_row(rows: list[index.Row]) -> index.Row:
    [row] = [r for r in rows if r.role == "leader"]
    return row


def led(team: Team, agent: str | None, pane: str | None = "%1") -> None:
    team.update(
        leaderAgent=agent,
        leaderPaneId=pane,
        tmuxIdentity={"socketPath": SOCK, "serverPid": 77, "serverStartedAt": 1,
                      "sessionId": "$0", "windowId": "@0"},
    )  # fmt: skip


def test_the_leader_panes_hook_makes_the_leaders_row_real(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop hook run in the leader's pane (tmux's variables naming the team's leader pane)
    records the session; `omp team usage` then counts it, the workers' budget still does not."""
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    led(team, "claude")
    home, main, stop = worker_home("claude", tmp_path / "leader-home")
    assert not index.snapshot(team.cfg, {})[1].totals  # unknown before
    env = child_env(home, TMUX_PANE="%1", TMUX=f"{SOCK},77,0")
    r = run_cli("hook", "stop", input=json.dumps({**stop, "cwd": str(team.root)}),
                cwd=team.root, env=env)  # fmt: skip
    assert r.rc == 0, r
    result = usage(team.cfg)
    row = {m["name"]: m for m in result["members"]}["leader"]
    assert tokens(row) == fx.EXPECTED["claude"], row
    assert row["how"].startswith("the stop hook's record"), row
    assert row["records"] == [str(main)]
    assert result["totals"]["counted"] == ["leader"]
    team.update(budgetTokens=10**6)
    assert usage(team.cfg)["budget"]["used"] == 0  # the leader's session is the person's


@pytest.mark.parametrize("name", ["copilot", "codex"])
def test_the_leader_panes_process_names_its_record(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copilot's session lock and Codex's open rollout name the record outright."""
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    led(team, name)
    home, main, _ = worker_home(name, tmp_path / "leader-home")
    held = main.parent / "inuse.4242.hold" if name == "copilot" else main
    held.touch()
    with agent_process(home, team.root, [held]) as pid:
        row = leader_row(index.snapshot(team.cfg, {"leader": pid}))
    assert row.how.startswith("the pane's process"), row
    assert row.records == (str(main),) and row.tokens == fx.EXPECTED[name]


@pytest.mark.parametrize("name", ["claude", "gemini", "pi"])
def test_a_leader_sharing_its_cwd_with_a_worker_gets_its_own_record_not_the_workers(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the cwd: the worker's record names its inbox, the leader's is the other one."""
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    kind = fx.kind(name)
    led(team, kind)
    team.set_agent("worker-1", kind)
    home, main, _ = worker_home(name, tmp_path / "agent-home")
    cwd = team.root
    worker_rec = move_cwd(name, home, main, cwd, str(team.inbox("worker-1")))
    # the leader's session: the same calls, in a file of its own beside the worker's
    text = worker_rec.read_text().replace(str(team.inbox("worker-1")), "the plan")
    if kind == "gemini":  # a session of its own: its id in its first line
        text = text.replace(
            "b347ddeb-2fe8-4747-813d-ef03c255e18c", "1eade400-0000-4000-8000-000000000001"
        )
    leader_rec = worker_rec.with_name(
        "session-2026-12-01T00-00-leader00.jsonl" if kind == "gemini" else "leader-0001.jsonl"
    )
    leader_rec.write_text(text)
    with agent_process(home, cwd, []) as lpid, agent_process(home, cwd, []) as wpid:
        touch_now(worker_rec, leader_rec)
        rows = index.snapshot(team.cfg, {"worker-1": wpid, "leader": lpid})
    worker, leader = rows
    assert worker.records == (str(worker_rec),), worker
    assert leader.records == (str(leader_rec),), leader
    assert leader.how.startswith("the pane's process"), leader
    assert leader.tokens == fx.EXPECTED[name] == worker.tokens


def test_two_sessions_that_could_be_the_leaders_are_said_never_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    led(team, "claude")
    home, main, _ = worker_home("claude", tmp_path / "agent-home")
    rec = move_cwd("claude", home, main, team.root, "nothing of a worker's")
    other = rec.with_name("another-0002.jsonl")  # the person's other session in the folder
    shutil.copy(rec, other)
    with agent_process(home, team.root, []) as pid:
        touch_now(rec, other)
        row = leader_row(index.snapshot(team.cfg, {"leader": pid}))
    assert row.totals is None and row.problem == "unknown", row
    assert row.why is not None and "leader's session" in row.why and "2 records" in row.why


@pytest.mark.parametrize(
    ("agent", "pane", "pid", "why"),
    [
        ("claude", None, None, "the team records no leader pane"),
        (None, "%1", None, "the leader's agent is not known"),
        ("claude", "%1", None, "its pane is not running"),
    ],
)
def test_an_unknown_leader_says_why_never_zeros(
    agent: str | None,
    pane: str | None,
    pid: int | None,
    why: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    led(team, agent, pane)
    before = snapshot_tree(team.root / ".omp")
    row = {m["name"]: m for m in usage(team.cfg)["members"]}["leader"]
    assert row["unreadable"] == "unknown" and "calls" not in row and "total" not in row
    assert why in row["why"] and "workers/leader/session.json" in row["why"], row
    assert snapshot_tree(team.root / ".omp") == before


def test_the_monitor_keeps_the_leaders_record_in_its_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found once from the pane, kept: a later read with the pane gone reads on from the index."""
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    led(team, "copilot")
    home, main, _ = worker_home("copilot", tmp_path / "leader-home")
    held = main.parent / "inuse.4242.hold"
    held.touch()
    with agent_process(home, team.root, [held]) as pid:
        index.refresh(team.cfg, {"leader": pid}, now=100.0)
    doc = index.load(team.cfg)
    assert doc is not None and doc["members"]["leader"]["records"][0]["path"] == str(main)
    before = snapshot_tree(team.root / ".omp")
    row = leader_row(index.snapshot(team.cfg, {}))
    assert row.tokens == fx.EXPECTED["copilot"] and row.records == (str(main),)
    assert snapshot_tree(team.root / ".omp") == before
