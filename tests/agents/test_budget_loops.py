"""A token budget crossed in the middle of a real loop (issue 22: "A budget crossed mid-loop ends
the loop at the next stop, and the leader is told once"), with real agent CLIs on the scripted
model: a leader (Copilot CLI, Claude Code or pi) in a pane of the team's tmux server runs a ralph
loop (Copilot an ultrawork loop too) through omp's stop hook, and one worker of the same CLI,
launched by the real `omp team launch --budget-tokens`, spends the team's tokens.

How it goes: the worker claims its task and keeps it (the team has work), spending 3 model calls
before the loop starts, under the budget. The leader's model starts the loop; at each step it
runs `omp team wait`, then stops. While the loop is active the monitor types idle prompts into
the idle worker, each one model call (20 tokens), until the budget is crossed: the monitor's
usage index sees it, records the crossing and mails the leader, `wait` returns `attention`, the
leader stops, and the stop hook ends the loop (`endReason: budget`) instead of the next step.

Checked: the leader's model got no step after that stop and no request at all once it ended;
no idle prompt was sent after the crossing; the leader has exactly one message, the budget's;
the person's notify command (`launch --notify`) ran once, for the budget; `omp team wait` says
`attention`; nothing was killed (the worker's pane, the leader's pane, the agents' processes);
and, as in every agent test, no process of the team is left after shutdown.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from omp.agents import BUILTIN_PROFILES, classify_screen
from omp.monitor.policy import IDLE_PROMPT
from tests.agents.clis import AgentTeam, omp_argv, poll
from tests.agents.leader_policy import is_worker, steps_of
from tests.agents.scripted_model import Chat, Exchange, Reply, ScriptedModel, ToolCall, message_text
from tests.agents.test_copilot_loop import Leader as CopilotLeader
from tests.agents.test_copilot_loop import hook_log
from tests.agents.test_pi_claude_loop import Leader as TuiLeader
from tests.agents.test_usage_team import row_tokens
from tests.agents.worker_policy import TRIGGER, Inbox, shell_tool

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

Factory = Callable[..., AgentTeam]
KICKOFF = "BUDGET-LOOP: start a loop and drive team t1 until it is done."
STEP = re.compile(r"\[omp (?:ralph|ultrawork) step (\d+)/(\d+)\]")
PER_CALL = 20  # tokens the scripted model reports per call: 10 input, 10 output
BEFORE = 3  # the worker's calls before the loop: read the inbox, claim, say it works
BUDGET = PER_CALL * (BEFORE + 2)  # crossed by the second idle prompt's answer
CAP = 10
MONITOR = {
    "OMP_MONITOR_SCAN_SECONDS": "0.5",
    "OMP_MONITOR_IDLE_SECONDS": "1",
    "OMP_MONITOR_UNREAD_REPEAT_SECONDS": "3",
}


def _shell(chat: Chat, command: str) -> Reply:
    name, param, required = shell_tool(chat)
    args: dict[str, Any] = {param: command}
    if "description" in required:
        args["description"] = "run " + command.split()[1 if command.startswith("/") else 0][:40]
    return Reply(tool_call=ToolCall(name, args))


@dataclass
class KeepingWorker:
    """Reads its inbox, claims its task and keeps it (never completes it): the team still has
    work, so a loop's idle prompts go to it. Anything said to it later is one call, in words."""

    answered: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reply(self, chat: Chat) -> Reply:
        if not chat.tools:
            return Reply(text="omp worker")
        users = [message_text(m) for m in chat.messages if m.get("role") == "user"]
        inbox = next(m[1] for u in users if (m := TRIGGER.search(u)))
        done = steps_of(chat)
        if not done:
            return _shell(chat, f"cat {shlex.quote(inbox)}")
        if len(done) == 1:
            claim = Inbox.parse(done[0].output).commands["claim-task"]
            return _shell(chat, claim.with_arg())
        if not TRIGGER.search(users[-1]):  # a later message (an idle prompt), not its task
            with self._lock:
                self.answered.append(users[-1])
        return Reply(text="Working on the haiku; the draft is not finished yet.")


@dataclass
class LoopLeader:
    """The leader's model: starts a loop (`mode`), and at each step runs `omp team wait` and says
    what it returned, then stops (the stop hook decides whether it goes on)."""

    team: str
    mode: str  # ralph | ultrawork
    wait: int  # the `--timeout` of each step's wait
    steps: list[int] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _omp(self, *args: str) -> str:
        return shlex.join([*omp_argv(), *args])

    def reply(self, chat: Chat) -> Reply:
        users = [message_text(m) for m in chat.messages if m.get("role") == "user"]
        if not any(KICKOFF in u for u in users):
            return Reply(text="ok")  # a request of the CLI's own
        if chat.messages[-1].get("role") == "tool":
            last = steps_of(chat)[-1]
            if f" {self.mode} start " in last.key:
                return Reply(text="The loop is started; the team works on the haiku.")
            doc = _first_json(last.output)
            event = str(doc.get("event")) if isinstance(doc, dict) else "?"
            with self._lock:
                self.events.append(event)
            return Reply(text=f"The team's news: {event}. The haiku is not done yet.")
        said = [u for u in users if not u.lstrip().startswith("<system_notification>")]
        found = STEP.search(said[-1]) if said else None
        if found is None:
            if KICKOFF in said[-1]:
                goal = f"drive team {self.team} to the end"
                start = self._omp(self.mode, "start", goal, "--max-iterations", str(CAP))
                return _shell(chat, start)
            return Reply(text="Noted.")
        with self._lock:
            self.steps.append(int(found[1]))
        return _shell(
            chat, self._omp("team", "wait", self.team, "--timeout", str(self.wait), "--json")
        )


def _first_json(text: str) -> Any:
    start = text.find("{")
    while start >= 0:
        try:
            return json.JSONDecoder().raw_decode(text, start)[0]
        except ValueError:
            start = text.find("{", start + 1)
    return None


@dataclass
class Router:
    leader: LoopLeader
    worker: KeepingWorker

    def reply(self, chat: Chat) -> Reply:
        return self.worker.reply(chat) if is_worker(chat) else self.leader.reply(chat)


# Every CLI with a stop-hook loop omp drives in a TUI, in a ralph loop whose leader waits for the
# team's news at each step (the crossing's `attention` ends its turn); ultrawork once; and once
# a leader whose 2 s waits end before anything happens, so the loop goes on step after step
# until the stop after the crossing.
@pytest.fixture(
    params=[
        ("copilot", "ralph", 25),
        ("claude", "ralph", 25),
        ("pi", "ralph", 25),
        ("copilot", "ultrawork", 25),
        ("copilot", "ralph", 2),
    ],
    ids=lambda p: f"{p[0]}-{p[1]}-wait{p[2]}",
)
def agent_team(request: pytest.FixtureRequest) -> tuple[Factory, str, int]:
    agent, mode, wait = request.param
    factory: Factory = request.getfixturevalue(f"{agent}_team")
    return factory, mode, wait


# ---- what happened ----------------------------------------------------------------------------


def leader_requests(model: ScriptedModel) -> list[Exchange]:
    return [
        x
        for x in list(model.requests)
        if not is_worker(x.chat)
        and any(KICKOFF in message_text(m) for m in x.chat.messages if m.get("role") == "user")
    ]


def monitor_events(team: AgentTeam, kind: str) -> list[dict[str, Any]]:
    path = team.root / ".omp" / "state" / "team-monitor" / "events.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [r for r in rows if r.get("type") == kind]


def budget_doc(team: AgentTeam) -> dict[str, Any]:
    path = team.root / ".omp" / "state" / "team" / team.name / "budget.json"
    doc: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"crossings": []}
    return doc


def worker_usage(team: AgentTeam) -> dict[str, Any]:
    got = team.omp("team", "usage", team.name, "--json")
    row: dict[str, Any] = next(m for m in got["members"] if m["name"] == "worker-1")
    return row


def iso_epoch(text: str) -> float:
    from omp import clock

    at = clock.parse_iso(text)
    assert at is not None, text
    return at


def start_leader(team: AgentTeam) -> CopilotLeader | TuiLeader:
    installed = team.omp("hooks", "install", "--agent", team.agent, "--json")
    assert installed["hooks"][0]["action"] == "created", installed
    if team.agent == "claude":  # trusted and warned already: the worker's launch answered both
        doc = json.loads((team.home / ".claude-config" / ".claude.json").read_text())
        assert doc["projects"][str(team.root)]["hasTrustDialogAccepted"] is True
    leader: CopilotLeader | TuiLeader = (
        CopilotLeader(team) if team.agent == "copilot" else TuiLeader(team)
    )
    leader.start()
    return leader


def leader_screen(leader: CopilotLeader | TuiLeader) -> str:
    screen = leader.screen()
    return screen if isinstance(screen, str) else "\n".join(screen)


def pane_alive(team: AgentTeam, target: str) -> bool:
    import subprocess

    out = subprocess.run(
        ["tmux", "-L", team.socket, "display-message", "-p", "-t", target,
         "#{pane_dead} #{pane_pid}"],
        capture_output=True, text=True, env=team.env,
    ).stdout.split()  # fmt: skip
    return len(out) == 2 and out[0] == "0" and Path(f"/proc/{out[1]}").exists()


# ---- the test ---------------------------------------------------------------------------------


def test_a_budget_crossed_mid_loop_ends_the_loop_at_the_next_stop_and_tells_the_leader_once(
    agent_team: tuple[Factory, str, int],
    scripted_model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    factory, mode, wait = agent_team
    team = factory(monitor=MONITOR)
    worker = KeepingWorker()
    lead_policy = LoopLeader(team.name, mode, wait)
    scripted_model.policy = Router(lead_policy, worker)
    notified = team.root.parent / "notified.jsonl"  # the person's notify command's log
    notify = f"cat >> {shlex.quote(str(notified))}; echo >> {shlex.quote(str(notified))}"
    launched = team.omp(
        "team", "launch", "1", "write a haiku", "--agent", team.agent, "--name", team.name,
        "--budget-tokens", str(BUDGET), "--notify", notify, "--json",
    )  # fmt: skip
    team.launch_result = launched
    profile = BUILTIN_PROFILES[team.agent]

    def settled() -> dict[str, Any] | None:
        if classify_screen(profile, team.capture("worker-1")) != "ready":
            return None
        row = worker_usage(team)
        return row if row.get("calls") == BEFORE else None

    try:  # before the loop: the task claimed and kept, 3 calls, under the budget
        before = poll(settled, "the worker's first turn recorded", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{worker_usage(team)}\n{team.debug()}") from None
    assert before["total"] == BEFORE * PER_CALL < BUDGET, before
    assert [t["status"] for t in team.status()["tasks"]] == ["in_progress"]
    assert budget_doc(team)["crossings"] == [] and monitor_events(team, "idle-prompt") == []

    leader = start_leader(team)
    t0 = time.monotonic()
    leader.say(KICKOFF)

    def ended() -> dict[str, Any] | None:
        path = team.root / ".omp" / "state" / f"{mode}.json"
        s: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        # the state is written first, the hook's log line right after it
        ending = [x for x in hook_log(team) if x.get("why") != "continue"]
        return s if s.get("active") is False and ending else None

    try:
        s = poll(ended, "the loop ended", timeout=240)
        poll(lambda: classify_screen(profile, team.capture("worker-1")) == "ready", "worker idle")
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\n{hook_log(team)}\n{budget_doc(team)}\n{team.debug()}\n"
            f"--- leader ---\n{leader_screen(leader)}"
        ) from None
    wall = time.monotonic() - t0
    why = f"{hook_log(team)}\n{scripted_model.dump()}"

    # the loop ended because of the budget, at the stop after the crossing
    assert s["endReason"] == "budget", (s, why)
    log = hook_log(team)
    whys = [x["why"] for x in log]
    k = len(lead_policy.steps)
    assert k >= 1 and whys == ["continue"] * k + ["budget"], why
    assert lead_policy.steps == list(range(1, k + 1)), why
    assert s["iteration"] == k and s["lastDecision"]["why"] == "budget", s
    assert "token budget" in (log[-1].get("note") or ""), log[-1]
    if wait == 25:  # the wait of the last step returned the crossing
        assert lead_policy.events[-1] == "attention", (lead_policy.events, why)
    else:  # two idle prompts take over 2 s: the loop went on after a wait that saw nothing
        assert k >= 2 and lead_policy.events[0] == "timeout", (lead_policy.events, why)

    [crossing] = budget_doc(team)["crossings"]
    assert crossing["scope"] == "team" and crossing["budget"] == BUDGET, crossing
    assert crossing["used"] >= BUDGET and crossing["mailed"] is True, crossing
    crossed_at = iso_epoch(crossing["at"])
    assert crossed_at >= iso_epoch(s["startedAt"]), (crossing, s)  # mid-loop
    assert crossed_at <= iso_epoch(s["endedAt"]), (crossing, s)

    # the monitor drove the worker while the loop ran, and not after the crossing
    prompts = [p for p in monitor_events(team, "idle-prompt") if p.get("outcome") == "sent"]
    assert 1 <= len(prompts) <= 2, prompts
    assert all(iso_epoch(p["timestamp"]) <= crossed_at for p in prompts), (prompts, crossing)
    # the worker's usage is what it answered: its first turn, then one call per idle prompt
    row = worker_usage(team)
    assert row["calls"] == BEFORE + len(worker.answered) == BEFORE + len(prompts), (row, prompts)
    assert all(IDLE_PROMPT in said for said in worker.answered), worker.answered
    assert row["total"] == crossing["used"], (row, crossing)
    served = [x for x in list(scripted_model.requests) if is_worker(x.chat)]
    assert row_tokens(row).calls == len(served), row

    # the leader was told once: one message, the budget's; `wait` says attention
    mail = [m for m in team.mailbox("leader") if m.get("type") == "message"]
    assert len(mail) == 1, mail
    assert mail[0]["from"] == "omp" and mail[0]["intent"] == "budget", mail
    assert f"team {team.name} crossed its token budget" in mail[0]["body"], mail

    def told() -> list[dict[str, Any]] | None:  # the monitor runs the command on its scan
        text = notified.read_text() if notified.exists() else ""
        rows = [json.loads(x) for x in text.splitlines() if x.strip()]
        return rows or None

    [event] = poll(told, "the person notified", timeout=30)
    assert event["kind"] == "attention" and event["what"] == "budget", event
    assert event["budget"]["used"] == crossing["used"] and "worker" not in event, event
    res = team.omp("team", "wait", team.name, "--timeout", "5", "--json")
    assert res["event"] == "attention", res
    assert [a["kind"] for a in res["attention"]] == ["budget"], res
    assert res["attention"][0]["messageId"] == mail[0]["id"], res

    # no request of the leader after the stop that ended the loop (nor any step prompt), also
    # after the monitor scanned on: nothing drives it any more
    n_leader = len(leader_requests(scripted_model))
    last = leader_requests(scripted_model)[-1]
    assert last.reply is not None and last.reply.tool_call is None, why
    assert not any(
        STEP.search(message_text(m)) and f"step {k + 1}/" in message_text(m)
        for x in leader_requests(scripted_model)
        for m in x.chat.messages
    ), why
    mon0 = _scans(team)
    poll(lambda: _scans(team) >= mon0 + 8, "8 more monitor scans", timeout=60)
    assert len(leader_requests(scripted_model)) == n_leader, why
    assert len([p for p in monitor_events(team, "idle-prompt") if p.get("outcome") == "sent"]) == (
        len(prompts)
    )
    assert worker_usage(team)["calls"] == row["calls"]
    assert len(told() or []) == 1  # once

    # nothing was killed: the worker's and the leader's panes and agents run on
    st = team.status()
    assert st["workers"][0]["pane"] == "alive" and st["running"] is True, st["workers"][0]
    assert pane_alive(team, team.pane("worker-1")) and pane_alive(team, "lead:0.0")
    assert st["usage"]["budget"]["percent"] >= 100.0, st["usage"]
    with capsys.disabled():
        print(
            f"\n[{team.agent} {mode}, waits of {wait}s] budget crossed at {crossing['used']} "
            f"of {BUDGET} tokens "
            f"after {len(prompts)} idle prompt(s); loop ended at step {k}/{CAP}, "
            f"{wall:.1f}s after the kickoff"
        )


def _scans(team: AgentTeam) -> int:
    path = team.root / ".omp" / "state" / "team-monitor" / "status.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0
    return int(doc.get("scans") or 0)
