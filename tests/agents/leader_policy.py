"""A scripted omp leader: plays a leader agent from the conversation the agent CLI sends.

It learns omp as a model does, from the text: the installed `team` skill (loaded with the CLI's
`skill` tool when it offers one, else read with the shell: `cat .github/skills/team/SKILL.md`),
the output of every command it runs, and the lines typed into its pane. From the skill it takes
the omp command (as the skill prints it: an absolute path once installed), the launch line, the
`wait --timeout N` pattern and the collect and shutdown commands; from `wait`'s output the
`read them:` and `wait again:` lines and the `all ... done; results: <collect>` line. Nothing
here imports omp.

One user request runs a whole team: launch `workers` `agent` workers with `--nudge-leader`,
follow with `wait` (running each `read them` line, then the `wait again` line) until all is
done, collect, shut down (unless `keep_team`), and answer with a summary. Later user messages:
a nudge (`You have N new message(s). Read them: <cmd>`) is answered by running `<cmd>`; a
message asking to shut the team down runs the skill's shutdown command.

Stateless between requests, like `WorkerPolicy`: each request replays the conversation (every
user message is a goal, every tool call the CLI reports is a step taken) to find the next step.
A command the CLI moved to the background (its output says so) counts as a lost step: the
policy waits again, as a model told not to touch that command would.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.agents.scripted_model import Chat, Reply, ToolCall, message_text
from tests.agents.worker_policy import (
    NUDGE,
    TRIGGER,
    PolicyError,
    WorkerPolicy,
    first_json,
    shell_tool,
)

SKILL_PATH = ".github/skills/team/SKILL.md"
LAUNCH_LINE = re.compile(r"^(?P<omp>\S.*?) team launch \d+ ", re.MULTILINE)
WAIT_LINE = re.compile(r"^(?P<omp>\S.*?) team wait (?P<team>\S+) --timeout (?P<t>\d+)\s*$", re.M)
COLLECT_LINE = re.compile(r"^(?P<omp>\S.*?) team collect (?P<team>\S+)\s*$", re.MULTILINE)
SHUTDOWN_LINE = re.compile(r"^(?P<omp>\S.*?) team shutdown (?P<team>\S+)\s*$", re.MULTILINE)
READ_THEM = re.compile(r"^\s*read them: (?P<cmd>.+?)\s*$", re.MULTILINE)
WAIT_AGAIN = re.compile(r"^\s*wait again: (?P<cmd>.+?)\s*$", re.MULTILINE)
ALL_DONE = re.compile(r"^all \d+ task\(s\) done; results: (?P<cmd>.+?)\s*$", re.MULTILINE)
BACKGROUNDED = "moved to background"  # Copilot 1.0.102's tool result for a pushed-aside command
SKILL_CONTEXT = "<skill-context"  # how Copilot hands a loaded skill's text to the model
SHUT_DOWN_ASKED = re.compile(r"(?i)\bshut (?:the team |it )?down\b")
MAX_WAITS = 60


@dataclass(frozen=True)
class Skill:
    """What the leader learnt from the skill text."""

    omp: str
    wait_timeout: int
    text: str

    @classmethod
    def parse(cls, text: str) -> Skill:
        launch, wait = LAUNCH_LINE.search(text), WAIT_LINE.search(text)
        if launch is None or wait is None:
            raise PolicyError(f"the skill shows no launch or wait line: {text[:300]!r}")
        for needed in ("--nudge-leader", "--agent", COLLECT_LINE, SHUTDOWN_LINE):
            found = needed.search(text) if isinstance(needed, re.Pattern) else needed in text
            if not found:
                raise PolicyError(f"the skill does not mention {needed!r}")
        return cls(launch["omp"], int(wait["t"]), text)

    def command(self, sub: str, team: str) -> str:
        """The skill's own `collect`/`shutdown`/`wait` line, for this team."""
        pat = {"collect": COLLECT_LINE, "shutdown": SHUTDOWN_LINE, "wait": WAIT_LINE}[sub]
        m = pat.search(self.text)
        if m is None:
            raise PolicyError(f"the skill has no {sub} line")
        tail = f" --timeout {self.wait_timeout}" if sub == "wait" else ""
        return f"{m['omp']} team {sub} {team}{tail}"


@dataclass
class Step:
    name: str  # the tool
    key: str  # the command, or the skill's name
    output: str = ""


def steps_of(chat: Chat) -> list[Step]:
    """The model's own tool calls in the conversation, with their outputs. Calls the CLI makes
    by itself (Copilot's `read_bash` after a backgrounded command) have no `command`/`skill`."""
    outputs = {
        str(m.get("tool_call_id")): message_text(m)
        for m in chat.messages
        if m.get("role") == "tool"
    }
    out: list[Step] = []
    for m in chat.messages:
        if m.get("role") != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            try:
                args = json.loads(call["function"]["arguments"] or "{}")
            except (ValueError, KeyError, TypeError):
                continue
            if not isinstance(args, dict):
                continue
            name = str(call["function"].get("name"))
            cmd = args.get("command", args.get("cmd"))
            key = (
                cmd if cmd is not None else (f"skill:{args['skill']}" if "skill" in args else None)
            )
            if key is None:
                continue
            out.append(Step(name, str(key), outputs.get(str(call.get("id")), "")))
    return out


class _Replay:
    def __init__(self, chat: Chat) -> None:
        self.done = steps_of(chat)
        self.pos = 0

    def take(self, key: str) -> Step | None:
        """The step if it was taken already; None if it is the next one to take."""
        if self.pos >= len(self.done):
            return None
        step = self.done[self.pos]
        if step.key != key:
            raise PolicyError(f"step {self.pos}: expected {key!r}, ran {step.key!r}")
        self.pos += 1
        return step


@dataclass
class LeaderPolicy:
    """Knobs: the team to run (`team`, `workers`, `agent`, `task`); `think` is every answer's
    delay (the model thinking: the CLI stays busy); `keep_team` leaves the team up after the
    collect, for a later "shut it down"."""

    team: str = "lt"
    workers: int = 2
    agent: str = "demo"
    task: str = "write a haiku"
    think: float = 0.3
    keep_team: bool = False
    skill_path: str = SKILL_PATH  # where the skill is read with the shell (Claude Code's:
    # .claude/skills/team/SKILL.md)
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reply(self, chat: Chat) -> Reply:
        with self._lock:
            self.calls += 1
        replay = _Replay(chat)
        tools = {str((t.get("function") or {}).get("name")) for t in chat.tools}
        loaded = [
            message_text(m)
            for m in chat.messages
            if m.get("role") == "user" and SKILL_CONTEXT in message_text(m)
        ]
        state: dict[str, Any] = {"tools": tools, "loaded": loaded}
        for goal in self.goals(chat):
            for call in goal(replay, state):
                return self._call(chat, call)
        return Reply(text=state.get("answer", "Done."), delay=self.think)

    def goals(self, chat: Chat) -> Iterator[Any]:
        first = True
        for msg in chat.messages:
            if msg.get("role") != "user":
                continue
            text = message_text(msg)
            if text.lstrip().startswith("<system_notification>") or SKILL_CONTEXT in text:
                continue  # the CLI's own notices (a command completed), a loaded skill
            nudges = list(NUDGE.finditer(text))
            for m in nudges:
                yield self._mail_goal(m[1])
            if nudges:
                continue
            if first:
                first = False
                yield self._team_goal()
            elif SHUT_DOWN_ASKED.search(text):
                yield self._shutdown_goal()

    def _call(self, chat: Chat, key: str) -> Reply:
        if key.startswith("skill:"):
            return Reply(tool_call=ToolCall("skill", {"skill": key[6:]}), delay=self.think)
        name, param, required = shell_tool(chat)
        args: dict[str, Any] = {param: key}
        if "description" in required:
            args["description"] = " ".join(key.split()[1:3])[:60] or key[:60]
        return Reply(tool_call=ToolCall(name, args), delay=self.think)

    # ---- goals: generators of the next call; steps already in the conversation are taken ------

    def _load_skill(self, replay: _Replay, state: dict[str, Any], tools: set[str]) -> Iterator[str]:
        if "skill" in tools:
            step = replay.take("skill:team")
            if step is None:
                yield "skill:team"
                return
            # Copilot answers the call briefly and adds the skill as a `<skill-context>` message
            for text in [step.output, *state["loaded"]]:
                if LAUNCH_LINE.search(text):
                    state["skill"] = Skill.parse(text)
                    return
        cat = f"cat {self.skill_path}"
        step = replay.take(cat)
        if step is None:
            yield cat
            return
        state["skill"] = Skill.parse(step.output)

    def _team_goal(self) -> Any:
        def goal(replay: _Replay, state: dict[str, Any]) -> Iterator[str]:
            yield from self._load_skill(replay, state, state.get("tools", set()))
            if "skill" not in state:
                return
            skill: Skill = state["skill"]
            launch = (
                f"{skill.omp} team launch {self.workers} {shlex.quote(self.task)} "
                f"--name {self.team} --agent {self.agent} --nudge-leader"
            )
            step = replay.take(launch)
            if step is None:
                yield launch
                return
            if f"team {self.team} launched" not in step.output:
                state["answer"] = f"The launch failed: {step.output.strip()[:300]}"
                return
            cmd, collect = skill.command("wait", self.team), None
            for _ in range(MAX_WAITS):
                step = replay.take(cmd)
                if step is None:
                    yield cmd
                    return
                out = step.output
                if (read := READ_THEM.search(out)) is not None:
                    got = replay.take(read["cmd"])
                    if got is None:
                        yield read["cmd"]
                        return
                if (done := ALL_DONE.search(out)) is not None:
                    collect = done["cmd"]
                    break
                again = WAIT_AGAIN.search(out)
                # a backgrounded or failed wait: wait afresh, as the skill says
                cmd = again["cmd"] if again else skill.command("wait", self.team)
            if collect is None:
                state["answer"] = f"Gave up after {MAX_WAITS} waits."
                return
            step = replay.take(collect)
            if step is None:
                yield collect
                return
            col = first_json(step.output) or {}
            summary = _summary(step.output, col)
            if self.keep_team:
                state["answer"] = f"Team {self.team}: {summary} The team is still up."
                return
            shutdown = skill.command("shutdown", self.team)
            if replay.take(shutdown) is None:
                yield shutdown
                return
            state["answer"] = f"Team {self.team}: {summary} The team is shut down."

        return goal

    def _mail_goal(self, read_cmd: str) -> Any:
        def goal(replay: _Replay, state: dict[str, Any]) -> Iterator[str]:
            step = replay.take(read_cmd)
            if step is None:
                yield read_cmd
                return
            mail = (first_json(step.output) or {}).get("messages") or []
            state["answer"] = f"Read {len(mail)} message(s)."

        return goal

    def _shutdown_goal(self) -> Any:
        def goal(replay: _Replay, state: dict[str, Any]) -> Iterator[str]:
            skill: Skill | None = state.get("skill")
            if skill is None:
                raise PolicyError("asked to shut down before the skill was read")
            shutdown = skill.command("shutdown", self.team)
            step = replay.take(shutdown)
            if step is None:
                yield shutdown
                return
            state["answer"] = f"Team {self.team} is shut down."

        return goal


def _summary(output: str, col: dict[str, Any]) -> str:
    """What the collect said, in a sentence (the human form's first line when not JSON)."""
    if col.get("workers"):
        done = sum(1 for w in col["workers"] if w.get("outcome") == "done" or w.get("done"))
        return f"{done} of {len(col['workers'])} worker(s) done."
    first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")
    return f"collected: {first[:200]}."


def is_worker(chat: Chat) -> bool:
    """A worker's conversation: it began with the trigger line launch types."""
    return any(m.get("role") == "user" and TRIGGER.search(message_text(m)) for m in chat.messages)


@dataclass
class Router:
    """One server for a leader and its agent workers: a worker's conversation (it holds the
    trigger line) goes to `worker`, any other to `leader`."""

    leader: LeaderPolicy
    worker: WorkerPolicy = field(default_factory=WorkerPolicy)

    def reply(self, chat: Chat) -> Reply:
        return self.worker.reply(chat) if is_worker(chat) else self.leader.reply(chat)
