"""`omp team usage`: each worker's agent session found (the stop hook's `session.json`, or the
pane's process), its record read incrementally through the monitor's index, prices, rows that
cannot be read, and nothing written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from omp.cli import replies
from omp.monitor import usage as index
from omp.usage.read import read_usage
from omp.usage.totals import Tokens, UsageTotals
from omp.views.usage import usage
from tests.helpers import assert_reply, child_env, isolate, run_cli, snapshot_tree
from tests.usage import fixtures as fx
from tests.usage.team import (
    Team,
    agent_process,
    hook_record,
    move_cwd,
    new_team,
    touch_now,
    worker_home,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

# One worker per CLI; the subagent variants sum their subagents' records too.
HOOKED = ["copilot", "claude-subagent", "codex", "gemini"]


def tokens(row: dict[str, Any]) -> Tokens:
    return Tokens(row["calls"], row["input"], row["output"], row["cacheRead"], row["cacheWrite"])


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in result["members"]}


def hooked_team(tmp_path: Path, names: list[str]) -> tuple[Team, dict[str, Path]]:
    """worker-i runs the recorded session `names[i-1]`, recorded by its stop hook."""
    team = new_team(tmp_path, len(names))
    mains = {}
    for i, name in enumerate(names, start=1):
        w = f"worker-{i}"
        _home, main, stop = worker_home(name, tmp_path / f"home-{w}")
        team.set_agent(w, fx.kind(name))
        team.session_json(w, hook_record(name, stop))
        mains[w] = main
    return team, mains


def test_each_workers_usage_is_what_its_record_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team, _ = hooked_team(tmp_path, HOOKED)
    got = by_name(usage(team.cfg))
    for i, name in enumerate(HOOKED, start=1):
        row = got[f"worker-{i}"]
        assert tokens(row) == fx.EXPECTED[name], (name, row)
        assert row["agent"] == fx.kind(name)
        assert row["how"].startswith("the stop hook's record"), row
        assert row["lastCall"] is not None
    result = usage(team.cfg)
    total = Tokens()
    for name in HOOKED:
        total = total.plus(fx.EXPECTED[name])
    assert tokens(result["totals"]) == total
    assert result["totals"]["total"] == total.total
    assert result["totals"]["notCounted"] == ["leader"]
    leader = got["leader"]
    assert leader["unreadable"] == "unknown" and "calls" not in leader
    assert "leader's session" in leader["why"]


def test_the_leaders_session_recorded_by_its_hook_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team, _ = hooked_team(tmp_path, ["copilot"])
    _home, _, stop = worker_home("claude", tmp_path / "leader-home")
    team.paths.team("t").worker_dir("leader").mkdir(parents=True)
    team.session_json("leader", hook_record("claude", stop))
    result = usage(team.cfg)
    assert tokens(by_name(result)["leader"]) == fx.EXPECTED["claude"]
    assert tokens(result["totals"]) == fx.EXPECTED["copilot"].plus(fx.EXPECTED["claude"])
    # the team's budget counts the workers only: the leader's session is the person's
    team.update(budgetTokens=10**6)
    assert usage(team.cfg)["budget"]["used"] == fx.EXPECTED["copilot"].total


# ---- the pane's process: the same answer ------------------------------------------------------


@pytest.mark.parametrize("name", ["copilot", "codex", "claude", "gemini", "pi"])
def test_the_panes_process_and_the_hooks_record_give_the_same_answer(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    kind = fx.kind(name)
    team.set_agent("worker-1", kind)
    home, main, stop = worker_home(name, tmp_path / "home-w1")
    cwd = tmp_path / "work"
    held: list[Path] = []
    if kind == "copilot":
        held = [main.parent / "inuse.4242.hold"]  # the lock Copilot holds while it runs
        held[0].write_text("")
    elif kind == "codex":
        held = [main]
    else:
        main = move_cwd(name, home, main, cwd, str(team.inbox("worker-1")))
    with agent_process(home, cwd, held) as pid:
        touch_now(main)
        by_process = index.snapshot(team.cfg, {"worker-1": pid})[0]
        assert by_process.how.startswith("the pane's process"), by_process
        assert by_process.records == (str(main),)
        assert by_process.tokens == fx.EXPECTED[name]
        if stop:  # pi has no stop hook
            stop = {**stop, "transcriptPath": str(main)} if kind != "codex" else stop
            team.session_json("worker-1", hook_record(name, stop))
            by_hook = index.snapshot(team.cfg, {"worker-1": pid})[0]
            assert by_hook.how.startswith("the stop hook's record"), by_hook
            assert (by_hook.records, by_hook.totals) == (by_process.records, by_process.totals)


def test_a_pi_workers_hook_record_leads_to_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pi's session.json has the id and the cwd only (omp's pi extension): enough, with no
    process to look at. Live, a worker whose hook recorded first was `unknown` before."""
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    team.set_agent("worker-1", "pi")
    home, main, _ = worker_home("pi", tmp_path / "home-w1")
    sid = json.loads(main.read_text().splitlines()[0])["id"]
    team.session_json("worker-1", {"agent": "pi", "sessionId": sid, "cwd": f"{fx.FAKE_HOME}/proj"})
    monkeypatch.setenv("HOME", str(home))
    [row, _leader] = index.snapshot(team.cfg, {})
    assert row.how == "the stop hook's record (the session id and cwd)", row
    assert row.records == (str(main),) and row.tokens == fx.EXPECTED["pi"]


def test_a_hook_record_that_leads_nowhere_does_not_hide_the_panes_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """session.json names a session omp cannot find (a CLI version that changed its layout):
    the pane's process still shows the record; without a process the row says why."""
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    team.set_agent("worker-1", "claude")
    home, main, _ = worker_home("claude", tmp_path / "home-w1")
    cwd = tmp_path / "work"
    main = move_cwd("claude", home, main, cwd, str(team.inbox("worker-1")))
    team.session_json("worker-1", {"agent": "claude", "sessionId": "0123abcd-none"})
    monkeypatch.setenv("HOME", str(home))
    [row, _] = index.snapshot(team.cfg, {})
    assert row.totals is None and row.problem == "unknown", row
    assert row.how.startswith("session.json: no record found"), row
    with agent_process(home, cwd, []) as pid:
        touch_now(main)
        [row, _] = index.snapshot(team.cfg, {"worker-1": pid})
    assert row.how.startswith("the pane's process"), row
    assert row.records == (str(main),) and row.tokens == fx.EXPECTED["claude"]


def test_a_pane_whose_process_shows_no_session_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 2)
    team.set_agent("worker-1", "copilot")
    with agent_process(tmp_path / "empty-home", tmp_path / "w", []) as pid:
        rows = index.snapshot(team.cfg, {"worker-1": pid})
    assert rows[0].totals is None and rows[0].problem == "unknown"
    assert "not found" in (rows[0].why or ""), rows[0]
    assert rows[1].totals is None and rows[1].problem == "unknown"  # no pane, no session.json


# ---- incremental ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["copilot", "claude", "codex", "gemini", "pi"])
def test_reading_on_from_the_index_equals_reading_everything(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record grows line by line, each line written in two halves with a monitor scan in
    between. After every line, a reader's snapshot, from the index as the monitor left it and
    from an index several lines old, equals a fresh full read, and writes nothing."""
    isolate(monkeypatch, tmp_path)
    team = new_team(tmp_path, 1)
    _home, main, _stop = worker_home(name, tmp_path / "home-w1")
    team.set_agent("worker-1", fx.kind(name))
    team.session_json(
        "worker-1", {"agent": fx.kind(name), "sessionId": "s-1", "transcriptPath": str(main)}
    )
    whole = main.read_bytes()
    lines = whole.splitlines(keepends=True)
    main.write_bytes(lines[0])
    idx = team.paths.monitor_usage_index("t")
    old: bytes | None = None
    for i, line in enumerate(lines[1:], start=1):
        cut = len(line) // 2
        with main.open("ab") as f:
            f.write(line[:cut])  # the CLI is writing this line
        index.refresh(team.cfg, {})  # the monitor's scan
        with main.open("ab") as f:
            f.write(line[cut:])
        want, _ = read_usage(fx.kind(name), main)
        assert isinstance(want, UsageTotals)
        before = snapshot_tree(team.paths.state)
        assert index.snapshot(team.cfg, {})[0].totals == want, i
        if old is not None:
            now = idx.read_bytes()
            idx.write_bytes(old)
            assert index.snapshot(team.cfg, {})[0].totals == want, i
            idx.write_bytes(now)
        assert snapshot_tree(team.paths.state).keys() == before.keys()
        if i % 5 == 0:
            old = idx.read_bytes()
    final = index.refresh(team.cfg, {})[0]
    assert final.tokens == fx.EXPECTED[name]
    state = json.loads(idx.read_text())["members"]["worker-1"]["records"][0]["state"]
    assert state["offset"] == len(whole)


def test_a_snapshot_reads_only_past_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's counts and offsets are where a reader starts: an index that says 100 calls
    more than the record is believed (the record is not read again), until it is gone."""
    isolate(monkeypatch, tmp_path)
    team, mains = hooked_team(tmp_path, ["copilot"])
    index.refresh(team.cfg, {})
    idx = team.paths.monitor_usage_index("t")
    doc = json.loads(idx.read_text())
    state = doc["members"]["worker-1"]["records"][0]["state"]
    assert state["offset"] == mains["worker-1"].stat().st_size
    state["models"]["fixture-model"][0] += 100
    idx.write_text(json.dumps(doc))
    assert index.snapshot(team.cfg, {})[0].tokens == fx.EXPECTED["copilot"]._replace(calls=103)
    idx.unlink()  # without the index: the whole file again
    assert index.snapshot(team.cfg, {})[0].tokens == fx.EXPECTED["copilot"]


def test_a_relaunched_team_does_not_count_the_last_launchs_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team, _mains = hooked_team(tmp_path, ["copilot"])
    index.refresh(team.cfg, {})
    os.unlink(team.paths.team("t").session("worker-1"))
    team.update(launchToken="another-launch")
    row = index.snapshot(team.cfg, {})[0]
    assert row.totals is None and row.problem == "unknown"


# ---- rows that cannot be read ------------------------------------------------------------------


def test_unreadable_records_are_rows_that_say_so_never_zeros(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team, mains = hooked_team(tmp_path, ["copilot", "copilot", "copilot", "copilot"])
    team.set_agent("worker-1", "demo")  # a CLI omp has no reader for
    team.session_json("worker-1", {"agent": "demo", "sessionId": "d-1"})
    mains["worker-2"].unlink()  # the record is gone
    mains["worker-3"].write_text('{"type": "user", "sessionId": "x"}\n')  # another CLI's format
    os.unlink(team.paths.team("t").session("worker-4"))  # no hook record, no pane
    got = by_name(usage(team.cfg))
    assert got["worker-1"]["unreadable"] == "unknown_kind"
    assert got["worker-2"]["unreadable"] == "missing"
    assert got["worker-3"]["unreadable"] == "format"
    assert got["worker-4"]["unreadable"] == "unknown"
    for w in ("worker-1", "worker-2", "worker-3", "worker-4"):
        assert "calls" not in got[w] and got[w]["why"], got[w]
        assert_reply(got[w], replies.MemberUsage)
    result = usage(team.cfg)
    assert result["totals"]["calls"] == 0
    assert result["totals"]["notCounted"] == [
        "worker-1",
        "worker-2",
        "worker-3",
        "worker-4",
        "leader",
    ]


def test_a_record_counted_then_deleted_keeps_its_counts_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team, mains = hooked_team(tmp_path, ["copilot"])
    index.refresh(team.cfg, {})
    mains["worker-1"].unlink()
    row = by_name(usage(team.cfg))["worker-1"]
    assert tokens(row) == fx.EXPECTED["copilot"]
    assert row["staleRecords"] == [str(mains["worker-1"])]


# ---- prices -----------------------------------------------------------------------------------


def test_prices_give_an_estimated_cost_and_name_what_they_leave_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    team, _ = hooked_team(tmp_path, ["copilot", "claude"])
    (team.paths.omp_dir / "config.toml").write_text(
        '[prices."fixture-model"]\ninput = 3.0\noutput = 15.0\ncache_read = 0.3\n'
    )
    result = usage(team.cfg)
    got = by_name(result)
    t = fx.EXPECTED["copilot"]
    want = (t.input * 3.0 + t.output * 15.0 + t.cache_read * 0.3 + t.cache_write * 3.0) / 1e6
    assert got["worker-1"]["estimatedCost"] == round(want, 6)
    assert got["worker-1"]["unpricedModels"] == []
    assert got["worker-2"]["estimatedCost"] == 0 and got["worker-2"]["unpricedModels"] == [
        fx.MODELS["claude"]
    ]
    assert result["totals"]["estimatedCost"] == round(want, 6)
    assert result["totals"]["unpricedModels"] == [fx.MODELS["claude"]]
    assert result["prices"] == ["fixture-model"]
    assert "estimatedCost" not in by_name(result)["leader"]  # unknown: no cost either
    assert_reply(result, replies.UsageReply)
    assert_reply(result["totals"], replies.UsageTotalsRow)
    for row in result["members"]:
        assert_reply(row, replies.MemberUsage)


# ---- the command ------------------------------------------------------------------------------


def test_the_command_writes_nothing_and_says_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = isolate(monkeypatch, tmp_path)
    team, mains = hooked_team(tmp_path, ["copilot", "codex"])
    team.update(budgetTokens=10_000, workerBudgetTokens=5_000)
    index.refresh(team.cfg, {})  # the monitor's index, then the records grow past it
    with mains["worker-1"].open("ab") as f:
        f.write(fx.records("copilot")[0].read_bytes().splitlines(keepends=True)[-1])
    env = child_env(home)
    before = snapshot_tree(team.root / ".omp")
    res = run_cli("team", "usage", "t", "--json", cwd=team.root, env=env)
    assert res.rc == 0, res.stderr
    assert_reply(res.json, replies.UsageReply)
    assert_reply(res.json["totals"], replies.UsageTotalsRow)
    assert_reply(res.json["budget"], replies.BudgetUse)
    for row in res.json["members"]:
        assert_reply(row, replies.MemberUsage)
    want = usage(team.cfg)
    assert res.json["members"] == want["members"]
    assert res.json["budget"] == {
        "tokens": 10_000,
        "used": want["totals"]["total"],
        "percent": round(100 * want["totals"]["total"] / 10_000, 1),
    }
    text = run_cli("team", "usage", "t", cwd=team.root, env=env)
    assert text.rc == 0 and "worker-1" in text.stdout and "unknown" in text.stdout
    st = run_cli("team", "status", "t", "--json", cwd=team.root, env=env)
    assert st.rc == 0, st.stderr
    w1 = st.json["teams"][0]["workers"][0]
    assert w1["usage"]["total"] == by_name(want)["worker-1"]["total"]
    assert w1["usage"]["budgetPercent"] == round(100 * w1["usage"]["total"] / 5_000, 1)
    assert_reply(w1["usage"], replies.WorkerSpent)
    assert_reply(st.json["teams"][0]["usage"], replies.TeamSpent)
    assert st.json["teams"][0]["usage"]["budget"]["tokens"] == 10_000
    plain = run_cli("team", "status", "t", cwd=team.root, env=env)
    assert "tokens" in plain.stdout and "% used" in plain.stdout
    col = run_cli("team", "collect", "t", "--json", cwd=team.root, env=env)
    assert col.rc == 0 and col.json["usage"]["total"] == st.json["teams"][0]["usage"]["total"]
    assert_reply(col.json, replies.CollectReply)
    assert snapshot_tree(team.root / ".omp") == before


def test_a_bad_price_table_is_invalid_config_and_nothing_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = isolate(monkeypatch, tmp_path)
    team, _ = hooked_team(tmp_path, ["copilot"])
    (team.paths.omp_dir / "config.toml").write_text('[prices."m"]\ninput = 3.0\n')
    res = run_cli("team", "usage", "t", "--json", cwd=team.root, env=child_env(home))
    assert res.rc == 1 and res.json["error"] == "invalid_config"
    assert "config.toml" in res.json["message"]
    # status does not show costs: a bad price table does not stop it
    st = run_cli("team", "status", "t", "--json", cwd=team.root, env=child_env(home))
    assert st.rc == 0 and st.json["teams"][0]["workers"][0]["usage"]["calls"] == 3


def test_status_text_names_tokens_only_for_agents_with_records() -> None:
    """The demo agent keeps no record: its status row says nothing of tokens (the usage view
    says why); a CLI whose record cannot be read says so; a known total is shown."""
    from omp.cli.team_text import _tokens_cell

    demo = {"unreadable": "unknown_kind", "why": "omp has no reader for 'demo'"}
    assert _tokens_cell(demo) == ""
    assert _tokens_cell({"unreadable": "missing", "why": "gone"}) == " tokens ? (missing)"
    assert _tokens_cell({"total": 12345, "budgetPercent": 40.0}) == (
        " tokens 12,345 (40% of its budget)"
    )
