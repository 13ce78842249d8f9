"""`omp team usage` of real agent CLI workers equals, per worker, what the scripted model reported
to that worker (issue 22: "Real Copilot workers on the scripted model ... `omp team usage` equals
the sum the model reported, per worker. The same for each other CLI that runs in the tests").

Every CLI the tests run is here: Copilot, Codex, Gemini, Claude Code and pi, each as two TUI
workers launched by the real `omp team launch`, with the monitor running, so the command reads
from the monitor's usage index (`omp.monitor.usage`) what the monitor read of each worker's own
session record; each record read whole, as without a monitor, gives the same. The scripted
model reports 10 input and 10 output tokens per call on every wire (chat completions,
Responses, Gemini, Anthropic Messages), no cache. Calls a CLI makes beside
its agent loop and leaves out of its record are pinned (`UNRECORDED`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from omp.monitor import usage as index
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.usage.totals import Tokens
from tests.agents.clis import AgentTeam, poll
from tests.agents.scenario import launch_done
from tests.agents.scripted_model import ScriptedModel, message_text
from tests.agents.test_usage_records import pane_pid

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

Factory = Callable[..., AgentTeam]
PER_CALL = Tokens(1, 10, 10, 0, 0)
AGENTS = ["copilot", "codex", "gemini", "claude", "pi"]
# Calls beside the agent loop (no tools offered, or answered outside the policy: a title, a
# classifier) the CLI's record leaves out, per worker. Codex 0.171 asks for a thread title once
# per session and does not record it (tests/agents/test_usage_records.py).
UNRECORDED = {"copilot": 0, "codex": 1, "gemini": 0, "claude": 0, "pi": 0}
# Workers that get omp's hook by a CLI option (`omp.stophook.workers`) are found by its record;
# Codex and Gemini workers, with no hook installed, by their pane's process.
HOOKED = {"copilot", "claude", "pi"}
MODEL = {"gemini": "gemini-2.5-flash"}  # the others record the name the server answers with
FAST_MONITOR = {"OMP_MONITOR_SCAN_SECONDS": "0.5"}


@pytest.fixture(params=AGENTS)
def any_team(request: pytest.FixtureRequest) -> Factory:
    factory: Factory = request.getfixturevalue(f"{request.param}_team")
    return factory


def served(model: ScriptedModel, marker: str) -> tuple[Tokens, Tokens]:
    """What the model reported to the conversation holding `marker` (a worker's inbox path):
    to its agent loop, and to side requests (no tools offered, or a side request the server
    answered by itself, such as Claude Code's title)."""
    loop = side = Tokens()
    for ex in list(model.requests):
        users = [message_text(m) for m in ex.chat.messages if m.get("role") == "user"]
        if ex.reply is not None and ex.reply.status == 200 and any(marker in u for u in users):
            if ex.chat.tools:
                loop = loop.plus(PER_CALL)
            else:
                side = side.plus(PER_CALL)
    for body, _ in list(model.side):
        if marker in json.dumps(body):
            side = side.plus(PER_CALL)
    return loop, side


def row_tokens(row: dict[str, Any]) -> Tokens:
    return Tokens(
        row.get("calls", -1),
        row.get("input", -1),
        row.get("output", -1),
        row.get("cacheRead", -1),
        row.get("cacheWrite", -1),
    )


def test_omp_team_usage_equals_what_the_model_reported_to_each_worker(
    any_team: Factory, scripted_model: ScriptedModel
) -> None:
    team = any_team(monitor=FAST_MONITOR)
    launch_done(team, 2)
    want: dict[str, Tokens] = {}
    for w in ("worker-1", "worker-2"):
        loop, side = served(scripted_model, f"workers/{w}/inbox.md")
        assert loop.calls >= 3, scripted_model.dump()
        assert side.calls == UNRECORDED[team.agent], (w, side, scripted_model.dump())
        want[w] = loop

    def agrees() -> dict[str, Any] | None:
        got: dict[str, Any] = team.omp("team", "usage", team.name, "--json")
        rows = {m["name"]: m for m in got["members"]}
        ok = all(row_tokens(rows[w]) == t for w, t in want.items())
        return got if ok and got.get("indexedAt") else None

    try:  # the last reply's line may land a moment after the screen went idle
        got = poll(agrees, "omp team usage == what the model reported", timeout=45)
    except AssertionError:
        seen = team.omp("team", "usage", team.name, "--json")
        raise AssertionError(f"{seen}\nserved: {want}\n{scripted_model.dump()}") from None
    rows = {m["name"]: m for m in got["members"]}
    model = MODEL.get(team.agent, "scripted-model")
    for w, tokens in want.items():
        assert rows[w]["agent"] == team.agent and rows[w]["total"] == tokens.total, rows[w]
        assert set(rows[w]["models"]) == {model}, rows[w]
        assert len(rows[w]["records"]) == 1, rows[w]
        how = "the stop hook's record" if team.agent in HOOKED else "the pane's process"
        assert rows[w]["how"].startswith(how), rows[w]
    # read whole, without the index (as with no monitor): the same numbers
    cfg = team_config.load(StatePaths(team.root).team(team.name))
    pids = {w: pane_pid(team, w) for w in want}
    whole = {r.member: r for r in index.compute(cfg, None, pids, env=team.env)[0]}
    assert {w: whole[w].tokens for w in want} == want, whole
    total = want["worker-1"].plus(want["worker-2"])
    assert row_tokens(got["totals"]) == total, got["totals"]
    assert got["totals"]["counted"] == ["worker-1", "worker-2"], got["totals"]
    # status and collect say the same
    st = team.status()
    assert {w["name"]: w["usage"]["total"] for w in st["workers"]} == {
        w: t.total for w, t in want.items()
    }
    col = team.omp("team", "collect", team.name, "--json")
    assert col["usage"]["total"] == total.total, col.get("usage")
