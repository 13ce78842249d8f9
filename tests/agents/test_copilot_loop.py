"""A leader running the real Copilot CLI 1.0.102 (TUI, in a tmux pane) kept working by omp's stop
hook while a Ralph loop is active (issue 11, section 4).

The leader's model is scripted: asked to start, it runs `<omp> ralph start ... --max-iterations 3`
with Copilot's shell tool and ends its turn; from then on every stop runs `omp hook stop` (installed
with `omp hooks install --agent copilot` into `.github/hooks/omp.json`), which blocks and hands it
the next prompt, until the model prints RALPH_COMPLETE on a line by itself, the cap ends the loop,
or the model cancels the loop itself. Its in-between replies mention RALPH_COMPLETE inside a
sentence, which must not count. Each test is one Copilot process on a private tmux server (the
prompt-mode test: one `copilot -p` run). Covered: the word on the second continuation (counter 2),
never the word (the cap), a cancel mid-loop, `-p` mode where the transcript lags the hook, the hook
registered twice (`.github/hooks` and `.claude/settings.json`), and Copilot's own limit of 8
blocks in a row.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from omp import modes
from omp.store.paths import StatePaths
from tests.agents.clis import AgentTeam, omp_argv, poll
from tests.agents.scripted_model import Chat, Reply, ToolCall, message_text
from tests.agents.worker_policy import shell_tool

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

KICKOFF = "LOOP-E2E: start the ralph loop for the haiku."
STEP = re.compile(r"\[omp ralph step (\d+)/(\d+)\]")


@dataclass
class LoopPolicy:
    """The leader's model. `word_at`: the continuation whose reply is RALPH_COMPLETE on its own
    line (None: never); `cancel_at`: the continuation at which it runs `omp ralph cancel`."""

    root: Path
    word_at: int | None = None
    cap: int = 3
    cancel_at: int | None = None
    seen_steps: list[tuple[int, int]] = field(default_factory=list)
    loop_active_at_step: list[bool] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _omp(self, *args: str) -> str:
        return shlex.join([*omp_argv(), *args])

    def _shell(self, chat: Chat, command: str) -> Reply:
        name, param, required = shell_tool(chat)
        args: dict[str, Any] = {param: command}
        if "description" in required:
            args["description"] = "omp"
        return Reply(tool_call=ToolCall(name, args))

    def reply(self, chat: Chat) -> Reply:
        users = [message_text(m) for m in chat.messages if m.get("role") == "user"]
        if not any(KICKOFF in u for u in users):
            return Reply(text="ok")  # a request of Copilot's own, not the leader's conversation
        last = chat.messages[-1]
        if last.get("role") == "tool":
            return Reply(text="Done with that command; the first draft of the haiku is written.")
        found = STEP.search(users[-1])
        if found is None:
            if KICKOFF in users[-1]:
                return self._shell(
                    chat,
                    self._omp(
                        "ralph", "start", "write the haiku", "--max-iterations", str(self.cap)
                    ),
                )
            return Reply(text="Continuing with the haiku.")  # a person's message mid-loop
        step = (int(found[1]), int(found[2]))
        with self._lock:
            self.seen_steps.append(step)
            # The monitor's idle prompts are gated on the same state file the hook drives.
            self.loop_active_at_step.append(modes.is_loop_active(StatePaths(self.root)))
        n = step[0]
        if self.cancel_at == n:
            return self._shell(chat, self._omp("ralph", "cancel"))
        if self.word_at == n:
            return Reply(text="The haiku is finished and checked.\nRALPH_COMPLETE")
        return Reply(text=f"Draft {n + 1} written; RALPH_COMPLETE comes once it is checked.")


class Leader:
    """Copilot CLI in a pane of the team's private tmux server, in the team's project."""

    def __init__(self, team: AgentTeam) -> None:
        self.team = team
        self.target = "lead:0.0"

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.team.socket, *args],
            capture_output=True,
            text=True,
            env=self.team.env,
            check=True,
            timeout=30,
        ).stdout

    def start(self) -> None:
        self.tmux(
            "new-session", "-d", "-s", "lead", "-x", "200", "-y", "50", "-c", str(self.team.root),
            "copilot", "--allow-all-tools", "--allow-all-paths",
        )  # fmt: skip
        poll(lambda: "Interactive" in self.screen(), "copilot ready", timeout=90)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.target)

    def say(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.target, "-l", text)
        poll(lambda: text[:30] in self.screen(), "prompt typed", timeout=30)
        self.tmux("send-keys", "-t", self.target, "Enter")


def hook_ends(home: Path) -> list[dict[str, Any]]:
    """The `hook.end` events of every Copilot session under this HOME: what the hook answered."""
    out = []
    for path in sorted((home / ".copilot" / "session-state").glob("*/events.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("type") == "hook.end":
                out.append(ev)
    return out


def state(team: AgentTeam) -> dict[str, Any]:
    data = json.loads((team.root / ".omp" / "state" / "ralph.json").read_text())
    assert isinstance(data, dict)
    return data


def hook_log(team: AgentTeam) -> list[dict[str, Any]]:
    path = team.root / ".omp" / "state" / "hooks" / "hook.log"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def run_loop(team: AgentTeam, policy: LoopPolicy, stops: int) -> Leader:
    """Install the hook, start the leader, kick it off, and wait for `stops` hook answers."""
    installed = team.omp("hooks", "install", "--agent", "copilot", "--json")
    assert installed["hooks"][0]["action"] == "created", installed
    team.model.policy = policy
    leader = Leader(team)
    leader.start()
    leader.say(KICKOFF)
    try:
        poll(lambda: len(hook_ends(team.home)) >= stops, f"{stops} stop-hook answers", 120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{team.model.dump()}\n{leader.screen()}") from None
    return leader


def test_the_loop_ends_when_the_model_prints_the_word_on_its_second_continuation(
    copilot_team: Any,
) -> None:
    team = copilot_team()
    policy = LoopPolicy(team.root, word_at=2)
    run_loop(team, policy, stops=3)
    s = state(team)
    assert s["active"] is False and s["endReason"] == "complete", s
    assert s["iteration"] == 2 and s["maxIterations"] == 3
    assert policy.seen_steps == [(1, 3), (2, 3)]
    assert policy.loop_active_at_step == [True, True]
    assert not modes.is_loop_active(StatePaths(team.root))
    log = hook_log(team)
    assert [x["why"] for x in log] == ["continue", "continue", "complete"]
    # Each reply was found in Copilot's transcript (None would mean "not found in time").
    assert all(isinstance(x["reply"], int) for x in log), log
    assert all(x["cli"] == "copilot" for x in hook_log(team))
    outputs = [(e.get("data") or {}).get("output") or {} for e in hook_ends(team.home)]
    assert [o.get("decision") for o in outputs] == ["block", "block", None]


def test_a_model_that_never_prints_the_word_stops_at_the_cap(copilot_team: Any) -> None:
    team = copilot_team()
    policy = LoopPolicy(team.root, word_at=None)
    run_loop(team, policy, stops=4)
    s = state(team)
    assert s["active"] is False and s["endReason"] == "cap", s
    assert s["iteration"] == 3
    assert policy.seen_steps == [(1, 3), (2, 3), (3, 3)]
    assert [x["why"] for x in hook_log(team)] == ["continue"] * 3 + ["cap"]


def test_a_cancel_mid_loop_lets_the_next_stop_through(copilot_team: Any) -> None:
    team = copilot_team()
    policy = LoopPolicy(team.root, cancel_at=1)
    run_loop(team, policy, stops=2)
    s = state(team)
    assert s["active"] is False and "cancelledAt" in s and "endReason" not in s, s
    assert s["iteration"] == 1
    assert policy.seen_steps == [(1, 3)]
    assert [x["why"] for x in hook_log(team)] == ["continue"]  # the last stop found no loop
    outputs = [(e.get("data") or {}).get("output") or {} for e in hook_ends(team.home)]
    assert [o.get("decision") for o in outputs] == ["block", None]


def test_prompt_mode_where_the_transcript_lags_behind_the_hook(copilot_team: Any) -> None:
    """`copilot -p`: at a stop the transcript may not yet hold the reply (seen live on 1.0.102);
    the hook waits for this stop's `hook.start` line, so the word is still seen on time."""
    team = copilot_team()
    team.omp("hooks", "install", "--agent", "copilot", "--json")
    policy = LoopPolicy(team.root, word_at=2)
    team.model.policy = policy
    proc = subprocess.run(
        ["copilot", "-p", KICKOFF, "--allow-all-tools", "--allow-all-paths"],
        cwd=team.root,
        env=team.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr + team.model.dump()
    s = state(team)
    assert s["active"] is False and s["endReason"] == "complete", (s, team.model.dump())
    assert s["iteration"] == 2 and policy.seen_steps == [(1, 3), (2, 3)]
    log = hook_log(team)
    assert [x["why"] for x in log] == ["continue", "continue", "complete"]
    assert all(isinstance(x["reply"], int) for x in log), log


def test_registered_twice_copilot_runs_both_and_the_loop_counts_each_stop_once(
    copilot_team: Any,
) -> None:
    """Copilot also runs a Claude `Stop` hook from `.claude/settings.json` (snake_case payload,
    ISO timestamp): two fires per stop, one answer, one advance. (Only the `agentStop` entry's
    runs are recorded as hook events in the transcript.)"""
    team = copilot_team()
    team.omp("hooks", "install", "--agent", "claude", "--json")
    policy = LoopPolicy(team.root, word_at=2)
    run_loop(team, policy, stops=3)
    poll(lambda: len(hook_log(team)) >= 5, "both entries answered the first two stops", 30)
    s = state(team)
    assert s["active"] is False and s["endReason"] == "complete", s
    assert s["iteration"] == 2 and policy.seen_steps == [(1, 3), (2, 3)]
    log = hook_log(team)
    assert [x["why"] for x in log if not x.get("replayed")] == ["continue", "continue", "complete"]
    replayed = [x for x in log if x.get("replayed")]
    assert len(replayed) >= 2 and {x["why"] for x in replayed} <= {"continue", "complete"}
    assert len({x["stop"] for x in log}) == 3  # three stops, whichever entry answered


def test_copilots_8_blocks_in_a_row_pause_the_loop_until_the_next_turn(
    copilot_team: Any,
) -> None:
    """Copilot ends a turn after 8 blocks in a row whatever the hook says: omp lets that 9th stop
    through uncounted, the loop stays active, and the next turn (a person's message) goes on
    until the cap: 10 continuations in all, as --max-iterations 10 says."""
    team = copilot_team()
    policy = LoopPolicy(team.root, word_at=None, cap=10)
    leader = run_loop(team, policy, stops=9)
    s = state(team)
    assert s["active"] is True and s["iteration"] == 8, s
    assert s["lastDecision"]["why"] == "cli_limit"
    assert policy.seen_steps == [(n, 10) for n in range(1, 9)]
    leader.say("Please continue.")
    poll(lambda: len(hook_ends(team.home)) >= 12, "three more stops", 120)
    s = state(team)
    assert s["active"] is False and s["endReason"] == "cap" and s["iteration"] == 10, s
    assert policy.seen_steps == [(n, 10) for n in range(1, 11)]
    whys = [x["why"] for x in hook_log(team)]
    assert whys == ["continue"] * 8 + ["cli_limit"] + ["continue"] * 2 + ["cap"]
