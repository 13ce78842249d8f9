"""A scripted omp worker: plays the role purely from the conversation the agent CLI sends.

It knows omp only as a model would: from the text. It follows the trigger line (`Read <inbox> and
follow it.`), reads the inbox with the CLI's own shell tool, and runs the commands the inbox
prints, one tool call per turn, filling the placeholders (`<claimToken>` from the claim's output,
`<text>`, `<one-line summary>`, the result file). A nudge (`You have N new message(s). Read them:
<cmd>`) is answered by running `<cmd>` and replying to each sender with the inbox's send-message
example. Nothing here imports omp: the commands are regex-parsed from the text.

The policy keeps no state between requests: each request replays the conversation (every user
message is a goal; every tool call the CLI reports is a step already taken) to find the next step.
So a CLI that retries a request, or queues a user message between two tool calls, still gets a
consistent worker.
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

# The path is printed as it is (a project path may hold spaces): up to " and follow it."
TRIGGER = re.compile(r"Read (/.*?) and follow it\.")
NUDGE = re.compile(r"You have \d+ new message\(s\)\. Read them: (.+?)\s*$", re.MULTILINE)
# A command line in the inbox: `<omp> team api <op> --input '<json>' --json`, the omp part as
# printed (a bare `omp`, an absolute path, or `python -m omp`).
API_LINE = re.compile(r"^\s*(?P<cmd>\S.*? team api (?P<op>[a-z-]+) --input '(?P<arg>\{.*?\})'.*)$")
RESULT_FILE = re.compile(r"Write your full result to (/.*?)\s*$", re.M)
# A worker in a worktree: where it works, and the line that commits its work there.
WORKTREE = re.compile(r"^You work in (.+?), your own git worktree on branch (\S+) ", re.M)
COMMIT_LINE = re.compile(r'^\s*(\S.*\bgit .*commit -m )"<what you did>"\s*$', re.M)
CLAIMED = '"claimToken":"'  # in claim-task's output (the inbox only names the placeholder)
HANDOVER = "task_handover"  # the intent of omp's mail handing a backlog worker its next task
# Copilot and pi: `bash` {command}; Codex: `exec_command` {cmd}; Gemini: `run_shell_command`
# {command}; Claude Code: `Bash` {command, description}.
SHELL_NAMES = ("bash", "Bash", "shell", "run_shell_command", "shell_command", "exec_command")


class PolicyError(Exception):
    """The conversation does not fit what the policy did: the CLI or omp changed under it."""


@dataclass(frozen=True)
class ApiCommand:
    """One `team api` command line as the inbox printed it."""

    prefix: str  # everything before `--input`
    op: str
    arg: dict[str, Any]
    suffix: str  # everything after the JSON argument

    def with_arg(self, **changes: Any) -> str:
        arg = {**self.arg, **changes}
        raw = json.dumps(arg, ensure_ascii=False, separators=(",", ":"))
        return f"{self.prefix} --input {shlex.quote(raw)}{self.suffix}"


def parse_api_line(line: str) -> ApiCommand | None:
    m = API_LINE.match(line)
    if m is None:
        return None
    prefix = line[m.start("cmd") : m.start("arg") - len(" --input '")]
    suffix = line[m.end("arg") + 1 : m.end("cmd")].rstrip()
    return ApiCommand(prefix, m["op"], json.loads(m["arg"]), suffix)


@dataclass
class Inbox:
    """What the policy learnt from an inbox.md: its commands by operation, and the result file."""

    commands: dict[str, ApiCommand]
    result_file: str | None
    worktree: str | None = None  # its own checkout, when the inbox names one
    commit: str | None = None  # the commit line, its message left to fill

    @classmethod
    def parse(cls, text: str) -> Inbox:
        commands: dict[str, ApiCommand] = {}
        for line in text.splitlines():
            cmd = parse_api_line(line)
            if cmd is not None:
                commands.setdefault(cmd.op, cmd)
        m = RESULT_FILE.search(text)
        wt, commit = WORKTREE.search(text), COMMIT_LINE.search(text)
        return cls(
            commands, m[1] if m else None, wt[1] if wt else None, commit[1] if commit else None
        )


def first_json(text: str) -> Any:
    """The first JSON object in a tool's output (the CLI may add lines around it)."""
    start = text.find("{")
    while start >= 0:
        try:
            return json.JSONDecoder().raw_decode(text, start)[0]
        except ValueError:
            start = text.find("{", start + 1)
    return None


def shell_tool(chat: Chat) -> tuple[str, str, set[str]]:
    """The CLI's shell tool: its name, its command parameter and its required parameters."""
    for tool in chat.tools:
        fn = tool.get("function") or {}
        props = (fn.get("parameters") or {}).get("properties") or {}
        param = next((p for p in ("command", "cmd") if p in props), None)
        if fn.get("name") in SHELL_NAMES and param:
            return str(fn["name"]), param, set((fn.get("parameters") or {}).get("required") or [])
    names = [(t.get("function") or {}).get("name") for t in chat.tools]
    raise PolicyError(f"no shell tool with a 'command' or 'cmd' parameter among {names}")


@dataclass
class Step:
    command: str
    output: str = ""


# Claude Code drops a leading `cd <dir> &&` when <dir> is its shell's directory already (its
# conversation then holds the command without it): the same step either way.
_CD = re.compile(r"^cd (?:'[^']*'|\S+) && ")


def _without_cd(command: str) -> str:
    return _CD.sub("", command, count=1)


class _Replay:
    """The tool calls the conversation already holds, taken one by one by the goals."""

    def __init__(self, chat: Chat) -> None:
        outputs = {
            str(m.get("tool_call_id")): message_text(m)
            for m in chat.messages
            if m.get("role") == "tool"
        }
        self.done: list[Step] = []
        for m in chat.messages:
            for call in m.get("tool_calls") or [] if m.get("role") == "assistant" else []:
                try:
                    args = json.loads(call["function"]["arguments"] or "{}")
                except (ValueError, KeyError, TypeError):
                    args = {}
                cmd = args.get("command", args.get("cmd")) if isinstance(args, dict) else None
                if not isinstance(cmd, str):
                    continue  # not a shell call (Copilot itself calls read_bash on a notice)
                self.done.append(Step(cmd, outputs.get(str(call.get("id")), "")))
        self.pos = 0

    def take(self, command: str) -> Step | None:
        """The step if it was taken already (its output filled); None if it is the next one."""
        if self.pos >= len(self.done):
            return None
        step = self.done[self.pos]
        if _without_cd(step.command) != _without_cd(command):
            raise PolicyError(f"step {self.pos}: expected {command!r}, ran {step.command!r}")
        self.pos += 1
        return step


@dataclass
class WorkerPolicy:
    """Knobs: `busy_seconds` makes the worker busy mid-turn right after its claim, by a `sleep N`
    shell call (`busy_how="tool"`) or by the model taking that long to answer (`"model"`);
    `hold_seconds` delays every model answer; `final_text` is the last reply of the task (e.g.
    a loop's completion word); `reply_text` prefixes answers to mail; the first
    `ignore_nudges` nudges are answered with words only (the mail stays unread)."""

    busy_seconds: float = 0.0
    busy_how: str = "tool"
    ignore_nudges: int = 0
    hold_seconds: float = 0.0
    final_text: str = "Task done."
    reply_text: str = "got it"
    progress_text: str = "started"
    summary: str = "done by the scripted worker"
    result_text: str = "The scripted worker's result."
    # written and committed in a worktree; `{worktree}` is the worktree's directory name, so
    # workers of one team can write distinct files
    work_file: str = "scripted-work.txt"
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reply(self, chat: Chat) -> Reply:
        with self._lock:
            self.calls += 1
        if not chat.tools:  # a side request (Codex asks for a session title): words only
            return Reply(text="omp worker")
        replay = _Replay(chat)
        state: dict[str, Any] = {}
        for goal in self.goals(chat):
            for command in goal(replay, state):
                return self._run(chat, command, self._hold(chat))
        return Reply(text=state.get("last_text", self.final_text), delay=self.hold_seconds)

    def goals(self, chat: Chat) -> Iterator[Any]:
        """One goal per instruction found in the user messages, in order."""
        nudges = 0
        for msg in chat.messages:
            if msg.get("role") != "user":
                continue
            text = message_text(msg)
            for m in TRIGGER.finditer(text):
                yield self._task_goal(m[1])
            for m in NUDGE.finditer(text):
                nudges += 1
                yield self._mail_goal(m[1], ignore=nudges <= self.ignore_nudges)

    def _hold(self, chat: Chat) -> float:
        last = chat.messages[-1] if chat.messages else {}
        just_claimed = last.get("role") == "tool" and CLAIMED in message_text(last)
        if self.busy_how == "model" and just_claimed:
            return self.busy_seconds
        return self.hold_seconds

    def _run(self, chat: Chat, command: str, delay: float) -> Reply:
        name, param, required = shell_tool(chat)
        args: dict[str, Any] = {param: command}
        if "description" in required:
            api = API_LINE.match(command)
            args["description"] = f"omp {api['op']}" if api else command.split()[0]
        return Reply(tool_call=ToolCall(name, args), delay=delay)

    # A goal is a generator of commands over the replay: it yields the next command to run, or
    # finishes. Steps already in the conversation are taken from the replay without yielding.

    def _task_goal(self, inbox_path: str) -> Any:
        def goal(replay: _Replay, state: dict[str, Any]) -> Iterator[str]:
            cat = f"cat {shlex.quote(inbox_path)}"
            text = ""
            for _ in range(3):  # an empty read is read again (Gemini CLI 0.61 sometimes returns
                step = replay.take(cat)  # "Output: (empty)" for a session's first command)
                if step is None:
                    yield cat
                    return
                text = step.output
                if "in omp team" in text:
                    break
            inbox = state["inbox"] = Inbox.parse(text)
            claim = inbox.commands.get("claim-task")
            done = inbox.commands.get("transition-task-status")
            given = done.arg.get("claim_token") if done is not None else None
            if claim is None and (not given or given == "<claimToken>"):
                state["last_text"] = "Waiting for the leader."  # no task: wait
                return
            if claim is None:  # a backlog's task, claimed for it: its token is in the line
                token = str(given)
            else:
                plan = [claim.with_arg()]
                for command in self._steps(replay, plan):
                    yield command
                    return
                got = (first_json(replay.done[replay.pos - 1].output) or {}).get("claimToken")
                if not got:
                    raise PolicyError(f"claim-task gave no claimToken: {replay.done[-1].output!r}")
                token = str(got)
            state["token"] = token
            assert done is not None
            for command in self._steps(replay, self._work(inbox, inbox, done, token)):
                yield command
                return
            state["last_text"] = self.final_text

        return goal

    def _work(self, inbox: Inbox, task: Inbox, done: ApiCommand, token: str) -> list[str]:
        """The steps of one task: report, write the result, edit and commit in the worktree,
        complete (`task`: where the task's own lines are, the inbox or omp's hand-over mail)."""
        send = inbox.commands["send-message"]
        plan: list[str] = []
        if self.busy_seconds > 0 and self.busy_how == "tool":
            plan.append(f"sleep {self.busy_seconds:g}")
        plan.append(send.with_arg(body=f"{send.arg.get('from')}: {self.progress_text}"))
        if task.result_file:
            text = shlex.quote(self.result_text)
            plan.append(f"printf '%s\\n' {text} > {shlex.quote(task.result_file)}")
        if task.worktree and task.commit:  # edit a file of its worktree, commit it there
            name = self.work_file.format(worktree=task.worktree.rstrip("/").rsplit("/", 1)[-1])
            work = shlex.quote(f"{task.worktree}/{name}")
            plan.append(f"printf '%s\\n' {shlex.quote(self.result_text)} > {work}")
            plan.append(task.commit + shlex.quote(self.summary))
        plan.append(done.with_arg(claim_token=token, result=self.summary))
        return plan

    def _mail_goal(self, read_cmd: str, *, ignore: bool) -> Any:
        def goal(replay: _Replay, state: dict[str, Any]) -> Iterator[str]:
            if ignore:
                state["last_text"] = "Not now."
                return
            step = replay.take(read_cmd)
            if step is None:
                yield read_cmd
                return
            mail = (first_json(step.output) or {}).get("messages") or []
            inbox: Inbox | None = state.get("inbox")
            send = inbox.commands.get("send-message") if inbox else None
            if send is None or inbox is None:
                raise PolicyError("a nudge came before the inbox was read")
            plan: list[str] = []
            answered = 0
            for m in mail:
                if not (isinstance(m, dict) and m.get("from") and m.get("id")):
                    continue
                if m.get("intent") == HANDOVER:  # a backlog's next task: do it
                    task = Inbox.parse(str(m.get("body") or ""))
                    done = task.commands.get("transition-task-status")
                    if done is not None:
                        state["token"] = str(done.arg["claim_token"])
                        plan += self._work(inbox, task, done, state["token"])
                elif not m.get("auto"):  # omp's own notes (a base that moved) need no answer
                    plan.append(send.with_arg(to=m["from"], body=f"{self.reply_text} ({m['id']})"))
                    answered += 1
            # A mail that gives the task back (a failed check, a merge conflict) ends with the
            # line that completes it again: run it, with the claim token the claim returned.
            again = [
                cmd
                for m in mail
                if isinstance(m, dict) and m.get("intent") != HANDOVER
                for line in str(m.get("body") or "").splitlines()
                if (cmd := parse_api_line(line)) is not None and cmd.op == "transition-task-status"
            ]
            if again and state.get("token"):
                plan.append(again[0].with_arg(claim_token=state["token"], result=self.summary))
            for command in self._steps(replay, plan):
                yield command
                return
            state["last_text"] = f"Answered {answered} message(s)."

        return goal

    @staticmethod
    def _steps(replay: _Replay, plan: list[str]) -> Iterator[str]:
        """The first command of `plan` not yet taken (nothing when all were)."""
        for command in plan:
            if replay.take(command) is None:
                yield command
                return
