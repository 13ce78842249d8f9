"""`omp demo-agent`: a model-free terminal program that behaves like an agent CLI in a tmux pane.

It reacts to the lines typed into its pane the way a well-behaved LLM agent would, and does so by
running the `omp team api ...` commands its inbox and nudges print, through a shell, as an agent's
shell tool does (`omp.demo_shell`), so a whole team can be exercised with no model: it claims the
task named in its inbox.md, reports start and completion to the leader, writes a result file, and
answers teammates' messages exactly once.

Screen contract (the tmux adapter's idle/busy classifier depends on it):
- the last line is always the prompt `❯ ` (stdin is read in cooked mode with echo on, so typed
  text appears after it);
- a submitted line is answered at once with output, then a fresh prompt;
- while working, a busy line containing `working ... (esc to interrupt)` sits directly above the
  prompt and is redrawn in place about every 0.5 s; when the work ends it is erased, so no stale
  busy text is left on screen to make an idle pane look busy.

No typer import here: the command wrapper is registered by `register(app)`.
"""

from __future__ import annotations

import json
import os
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock, textsafe
from omp.demo_shell import ShellApi
from omp.errors import OmpError
from omp.store import fs
from omp.store.names import LEADER
from omp.store.paths import INBOX, RESUME_INBOX, StatePaths, find_root, worker_of_inbox

if TYPE_CHECKING:
    from typer import Typer

Result = dict[str, Any]
ApiRunner = Callable[[str, Result], Result]
Lines = queue.Queue[str | None]  # None = end of input

PROMPT = "❯ "
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK_SECONDS = 0.5
DEFAULT_WORK_SECONDS = 3.0
IDLE_PROMPT = "Continue working on your assigned task"

_TASK_ID_RE = re.compile(r"Task ID:\s*[`*]*([A-Za-z0-9_-]+)")
# omp's inbox for a worker in a worktree: "You work in <path>, your own git worktree on branch
# <branch> (your shell starts there)".
_WORKTREE_RE = re.compile(r"^You work in (.+?), your own git worktree on branch (\S+) ", re.M)
DEMO_NAME, DEMO_EMAIL = "omp-demo", "demo@omp.invalid"
# The task text sits under `## Task` (omp's inbox) or `## Description` (the TS tool's).
_DESCRIPTION_RE = re.compile(r"^##\s*(?:Task|Description)\s*$(.*?)(?=^#+\s|\Z)", re.M | re.S)
_JSON_OBJECT_RE = re.compile(r"\{[^{}]*\}")
# What `omp team resume` writes in resume.md (omp.mail.bootstrap.resume_markdown).
_STATUS_LINE_RE = re.compile(r"^Status:\s*([a-z_]+)", re.M)
_CLAIM_TOKEN_RE = re.compile(r"^Claim token:\s*(\S+)", re.M)
_UNREAD_RE = re.compile(r"^Unread messages:\s*(\d+)", re.M)
_STATUS_RE = re.compile(r"\bstatus\b", re.I)


# ---- the API client -----------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, sub: str, result: Result) -> None:
        code = result.get("error") or result.get("reason") or "failed"
        message = result.get("message") or result.get("reason") or "no message"
        super().__init__(f"{sub}: {message} [{code}]")


# ---- the screen ---------------------------------------------------------------------------


class Screen:
    """Draws output above a prompt that always stays on the last line.

    `fresh` is True after a line was submitted: the terminal echoed the Enter, so the cursor is at
    the start of an empty line below the `❯ <text>` row(s), which are kept as history unless a
    busy line sits above them (then they are redrawn below it as a `queued` note).

    Known limit: a refresh tick redraws the row directly above the cursor, so text typed by hand
    at a busy prompt that wraps past the terminal width gets its first row overdrawn until the
    next submit. The lines omp itself types are submitted at once, so this only touches a person.
    """

    def __init__(
        self, write: Callable[[str], None], *, ansi: bool, columns: Callable[[], int] = lambda: 80
    ) -> None:
        self._write = write
        self._ansi = ansi
        self._columns = columns
        self._busy: str | None = None
        self._fresh = True  # nothing drawn yet: the cursor is at the start of a line
        self._echo_rows = 0  # rows the echoed `❯ <text>` took

    def submitted(self, text: str) -> None:
        cols = max(1, self._columns())
        self._echo_rows = max(1, -(-(len(PROMPT) + len(text)) // cols))
        self._fresh = True

    def say(self, *lines: str) -> None:
        self._render(lines, self._busy)

    def busy(self, text: str) -> None:
        text = _printable(text)
        if self._busy is not None and not self._fresh:
            if self._ansi:
                # Redraw in place: save the cursor (it may sit after typed text), rewrite the row
                # above, restore. Nothing scrolls, so the busy line stays right above the prompt.
                self._write(f"\x1b7\x1b[1A\r\x1b[2K{text}\x1b8")
            # Not a terminal (a pipe, a log): one busy line per stretch of work, not one per tick.
            self._busy = text
            return
        self._render((), text)

    def done(self, *lines: str) -> None:
        """Erase the busy line and print `lines`."""
        self._render(lines, None)

    def close(self) -> None:
        self._write("\r\n" if self._ansi else "\n")

    def _render(self, lines: Sequence[str], busy: str | None) -> None:
        self._clear()
        self._busy = busy
        nl = "\r\n" if self._ansi else "\n"
        out = "".join(_printable(line) + nl for line in lines)
        if busy is not None:
            out += busy + nl
        self._write(out + PROMPT)
        self._fresh = False

    def _clear(self) -> None:
        """Go to the start of the rows to redraw (busy line, prompt, echo) and blank them."""
        if not self._ansi:
            if not self._fresh:
                self._write("\n")  # end the prompt line
            return
        up = 0
        if self._busy is not None:
            up = 1 + (self._echo_rows if self._fresh else 0)
        self._write("\r\x1b[2K" + "\x1b[1A\x1b[2K" * up + "\r")


def _printable(text: str) -> str:
    # Peer text reaches this screen: no escape sequence of theirs may move our cursor.
    return textsafe.clean(text).replace("\n", " ").replace("\t", " ")


def fd_writer(fd: int) -> Callable[[str], None]:
    """Write UTF-8 straight to the descriptor: `❯` must not depend on the locale's encoding."""

    def write(text: str) -> None:
        view = memoryview(text.encode("utf-8", "replace"))
        while view:
            view = view[os.write(fd, view) :]

    return write


def read_lines(fd: int, out: Lines) -> None:
    """Feed complete input lines into `out`, then None at end of input (runs in a thread).

    Reads the raw descriptor rather than sys.stdin: a daemon thread blocked inside sys.stdin's
    buffered reader holds its lock and can abort the interpreter at exit.
    """
    buf = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            if buf:
                out.put(buf.decode("utf-8", "replace"))
            out.put(None)
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            out.put(line.decode("utf-8", "replace").rstrip("\r"))


# ---- parsing what was typed and what the inbox says ---------------------------------------


def find_inbox_path(text: str, cwd: Path | None = None) -> Path | None:
    """The `.../inbox.md` (or a resume's `.../resume.md`) path a line mentions, or None.

    Paths may contain spaces, so every word start before `inbox.md` is tried as the start of the
    path and the first that names an existing file wins; else the last word ending in inbox.md.
    """
    for name in (INBOX, RESUME_INBOX):
        end = text.find(name)
        if end >= 0:
            return _path_ending_at(text, end + len(name), cwd)
    return None


def _path_ending_at(text: str, end: int, cwd: Path | None) -> Path:
    base = cwd or Path.cwd()
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=[\s'\"`(]))\S", text[:end])]
    for start in starts:
        candidate = Path(text[start:end].lstrip("'\"`(")).expanduser()
        path = candidate if candidate.is_absolute() else base / candidate
        if path.is_file():
            return path
    last = text[:end].split()[-1].lstrip("'\"`(")
    path = Path(last).expanduser()
    return path if path.is_absolute() else base / path


def identity_from_inbox_path(path: Path) -> tuple[str | None, str | None]:
    """(team, worker) from `.../team/<team>/workers/<worker>/inbox.md`, where they fit."""
    return worker_of_inbox(path)


def task_description(inbox: str) -> str:
    m = _DESCRIPTION_RE.search(inbox)
    return " ".join(m.group(1).split()) if m else ""


def is_answer(msg: Result) -> bool:
    """A reply must never be answered: that is what stops two agents from ping-ponging."""
    body = msg.get("body")
    has_ref = msg.get("ref_message_id") not in (None, "")
    return has_ref or (isinstance(body, str) and body.lstrip().startswith("Re:"))


def _first_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ---- the agent ----------------------------------------------------------------------------


class DemoAgent:
    def __init__(
        self,
        *,
        team: str | None,
        worker: str | None,
        root: Path | None,
        api: ApiRunner,
        screen: Screen,
        lines: Lines,
        work_seconds: float = DEFAULT_WORK_SECONDS,
        tick: float = TICK_SECONDS,
        learn: Callable[[str], None] | None = None,
    ) -> None:
        self.team = team
        # Shown every text the agent reads (typed lines, its inbox): its shell tool learns the
        # omp commands from them, as a model learns them from its context.
        self.learn = learn or (lambda _text: None)
        self.worker = worker
        self.root = root
        self.api = api
        self.screen = screen
        self.lines = lines
        self.work_seconds = work_seconds
        self.tick = tick
        self.pending: deque[str | None] = deque()  # lines typed while busy, handled after
        self.task_id: str | None = None
        self.task_state: str | None = None  # in_progress | completed | failed
        self.replied: set[str] = set()  # ids of messages answered: never answered twice
        self.answered: list[str] = []  # "<sender>: <reply>" for result.md
        self.worktree: Path | None = None  # where its inbox says it works (a git worktree)
        self.committed: str | None = None  # "<file> (<commit>)" it made in its worktree

    @property
    def me(self) -> str:
        return self.worker or "demo-agent"

    # -- dispatch --

    def handle(self, line: str) -> None:
        text = line.strip()
        self.learn(text)
        try:
            if not text:
                self.screen.say()
            elif (path := find_inbox_path(text)) is not None:
                self.on_inbox(path)
            elif "new message" in text.lower():
                self.on_mail(text)
            elif IDLE_PROMPT in text:
                self.on_idle_prompt()
            else:
                self.screen.say(f"● noted: {text}")
        except Exception as exc:  # a bug here must not kill the pane the team is watching
            self.screen.done(f"✗ internal error: {type(exc).__name__}: {exc}")

    def call(self, sub: str, payload: Result) -> Result:
        result = self.api(sub, payload)
        if result.get("ok") is not True:
            raise ApiError(sub, result)
        return result

    def notify_leader(self, body: str) -> None:
        """Best-effort: a lost status ping is shown, but it does not fail finished work."""
        if self.team is None:
            return
        try:
            self.call(
                "send-message",
                {"team_name": self.team, "from": self.me, "to": LEADER, "body": body},
            )
        except ApiError as exc:
            self.screen.say(f"✗ {exc}")

    # -- 1. the inbox: claim, work, report --

    def on_inbox(self, path: Path) -> None:
        team, worker = identity_from_inbox_path(path)
        self.team = self.team or team
        self.worker = self.worker or worker
        try:
            data = fs.read_bytes(path)
            err = "no such file"
        except (OSError, OmpError) as exc:
            data, err = None, str(exc)
        if data is None:
            self.screen.say(f"✗ cannot read {path}: {err}")
            self.notify_leader(f"{self.me} could not read {path}: {err}")
            return
        inbox = data.decode("utf-8", "replace")
        self.learn(inbox)
        if path.name == RESUME_INBOX:
            self.on_resume(path, inbox)
            return
        m = _TASK_ID_RE.search(inbox)
        if m is None:  # launched without a task: wait for the leader's messages and requests
            self.screen.say("● no task yet; waiting for the leader (mail or a task_req)")
            return
        tid = m.group(1)
        if self.team is None or self.worker is None:
            self.screen.say("✗ unknown team or worker: OMP_TEAM / OMP_WORKER are not set")
            return
        if tid == self.task_id and self.task_state in ("completed", "in_progress", "verifying"):
            self.screen.say(f"● task {tid} is already {self.task_state}; nothing to do")
            return
        wt = _WORKTREE_RE.search(inbox)
        self.worktree = Path(wt.group(1)) if wt else None
        self.screen.say(f"● reading {path}: task {tid}")
        claimed = _CLAIM_TOKEN_RE.search(inbox)  # a backlog's: claimed for it already
        if claimed is not None:
            self.start_claimed(tid, claimed.group(1), task_description(inbox))
            return
        self.run_task(tid, task_description(inbox))

    def start_claimed(self, tid: str, token: str, description: str) -> None:
        """A task omp claimed for this worker (a backlog's): work on it, never claim it."""
        self.task_id, self.task_state = tid, "in_progress"
        start = f"{self.me} started task {tid}"
        self.notify_leader(f"{start}: {description[:80]}" if description else start)
        self.screen.say(f"● {start}")
        self.finish_task(tid, token, description)

    def on_handover(self, msg: Result) -> None:
        """omp's mail handing this worker its next task (a backlog): everything is in it."""
        body = str(msg.get("body") or "")
        tid, token = _TASK_ID_RE.search(body), _CLAIM_TOKEN_RE.search(body)
        if tid is None or token is None:
            return
        if tid.group(1) == self.task_id and self.task_state in ("in_progress", "verifying"):
            return  # the same hand-over read twice
        wt = _WORKTREE_RE.search(body)
        self.worktree = Path(wt.group(1)) if wt else None
        self.committed = None
        self.start_claimed(tid.group(1), token.group(1), task_description(body))

    def on_resume(self, path: Path, text: str) -> None:
        """`omp team resume` restarted this agent (a new session: nothing is remembered). It
        rereads its inbox, reads the mail waiting, and goes on with its task: claimed and in
        progress (its claim token is in the text: never claimed again), pending, or finished."""
        if self.team is None or self.worker is None:
            self.screen.say("✗ unknown team or worker: OMP_TEAM / OMP_WORKER are not set")
            return
        self.screen.say(f"● resumed: reading {path}")
        description = ""
        try:
            first = fs.read_bytes(path.with_name(INBOX))
        except (OSError, OmpError):
            first = None
        if first is not None:
            original = first.decode("utf-8", "replace")
            self.learn(original)
            description = task_description(original)
            # where it works: a resumed worker in a worktree commits there before completing
            wt = _WORKTREE_RE.search(original)
            self.worktree = Path(wt.group(1)) if wt else None
        unread = _UNREAD_RE.search(text)
        if unread is not None and int(unread.group(1)) > 0:
            self.on_mail("")
        m, status = _TASK_ID_RE.search(text), _STATUS_LINE_RE.search(text)
        if m is None or status is None:
            self.screen.say("● no task; waiting for the leader")
            return
        tid, state = m.group(1), status.group(1)
        token = _CLAIM_TOKEN_RE.search(text)
        if state == "in_progress" and token is not None:
            self.task_id, self.task_state = tid, "in_progress"
            self.notify_leader(f"{self.me} resumed task {tid}")
            self.screen.say(f"● resumed task {tid}: still mine")
            self.finish_task(tid, token.group(1), description)
        elif state == "pending":
            self.run_task(tid, description)
        else:
            self.task_id, self.task_state = tid, state
            self.screen.say(f"● task {tid} is {state}; nothing to do")

    def run_task(self, tid: str, description: str) -> None:
        assert self.team is not None
        base = {"team_name": self.team, "task_id": tid, "worker": self.me}
        try:
            claimed = self.call("claim-task", base)
        except ApiError as exc:
            self.screen.say(f"✗ {exc}")
            self.notify_leader(f"{self.me} could not claim task {tid}: {exc}")
            return
        token = claimed.get("claimToken") or claimed.get("claim_token")
        self.task_id, self.task_state = tid, "in_progress"
        if not description and isinstance(claimed.get("task"), dict):
            description = str(claimed["task"].get("description") or "")
        start = f"{self.me} started task {tid}"
        self.notify_leader(f"{start}: {description[:80]}" if description else start)
        self.screen.say(f"● {start}")
        self.finish_task(tid, token, description)

    def finish_task(self, tid: str, token: object, description: str) -> None:
        """Work on a claimed task, write the result file, complete it with the claim token."""
        assert self.team is not None
        base = {"team_name": self.team, "task_id": tid, "worker": self.me}
        self.work(tid)
        try:
            if not isinstance(token, str) or not token:
                raise ApiError("claim-task", {"message": "no claimToken in the reply"})
            if self.worktree is not None:
                self.committed = self.commit_work(tid, description, self.worktree)
                self.screen.say(f"● committed {self.committed} in {self.worktree}")
            result_path = self.write_result(tid, description)
            summary = f"{self.me}: demo task {tid} done (simulated work, no model)"
            if self.committed:
                summary = f"{self.me}: demo task {tid} done, committed {self.committed}"
            done = {"from": "in_progress", "to": "completed", "claim_token": token}
            reply = self.call("transition-task-status", {**base, **done, "result": summary})
        except (ApiError, OmpError, OSError) as exc:
            self.fail(tid, token, str(exc))
            return
        task = reply.get("task") if isinstance(reply.get("task"), dict) else {}
        assert isinstance(task, dict)
        if task.get("status") == "verifying":
            self.task_state = "verifying"
            self.notify_leader(f"{self.me} completed task {tid}; omp is verifying it")
            self.screen.done(f"● handed over task {tid}; omp is verifying it")
            self.expect_next(reply)
            return
        self.task_state = "completed"
        self.notify_leader(f"{self.me} completed task {tid}")
        self.screen.done(f"● completed task {tid}; result in {result_path}")
        self.expect_next(reply)

    def expect_next(self, reply: Result) -> None:
        """A backlog hands the next task at once (`next` in the reply): read the mail now."""
        if isinstance(reply.get("next"), dict):
            self.pending.append("omp: you have 1 new message (your next task)")

    def commit_work(self, tid: str, description: str, worktree: Path) -> str:
        """What a real agent in a worktree does: write its work into a file there and commit
        it (git's environment cleaned; an identity of its own only where none is set).

        Everything uncommitted goes in, as the inbox's `add -A && commit` line says: the
        worktree is the worker's alone, and what launch's `--carry-changes` put there is work
        it was handed. Committing its one file only left those changes behind, and omp then
        refused the completion (`uncommitted_changes`)."""
        from omp.workspace.git import git

        rel = f"work/{self.me}-task-{tid}.md"
        target = worktree / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = (
            f"# Task {tid}: {description or '(no description)'}\n\n"
            f"Done by {self.me} of team {self.team}, the omp demo agent (no model), "
            f"on {clock.iso()}.\n"
        )
        target.write_text(text, encoding="utf-8")
        ident = identity_args(worktree)
        git(worktree, *ident, "add", "-A")
        git(worktree, *ident, "commit", "-q", "-m", f"{self.me}: task {tid}")
        sha = git(worktree, "rev-parse", "--short", "HEAD").text
        return f"{rel} ({sha})"

    def fail(self, tid: str, token: object, reason: str) -> None:
        assert self.team is not None
        self.task_state = "failed"
        lines = [f"✗ {reason}"]
        if isinstance(token, str) and token:
            payload = {"team_name": self.team, "task_id": tid, "worker": self.me}
            payload |= {"from": "in_progress", "to": "failed", "claim_token": token}
            payload["result"] = f"failed: {reason}"[:500]
            try:
                self.call("transition-task-status", payload)
                lines.append(f"● marked task {tid} failed")
            except ApiError as exc:
                lines.append(f"✗ {exc}")
        self.screen.done(*lines)
        self.notify_leader(f"{self.me} failed task {tid}: {reason}"[:500])

    def work(self, tid: str) -> None:
        """Show the busy line for `work_seconds`; lines typed meanwhile are queued, not lost."""
        deadline = time.monotonic() + self.work_seconds
        frame = 0
        while True:
            spin = SPINNER[frame % len(SPINNER)]
            self.screen.busy(f"{spin} {self.me} working on task {tid} (esc to interrupt)")
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.pending and self.pending[-1] is None:
                time.sleep(min(self.tick, left))  # input closed: nothing more can arrive
                frame += 1
                continue
            try:
                item = self.lines.get(timeout=min(self.tick, left))
            except queue.Empty:
                frame += 1
                continue
            self.pending.append(item)
            if item is not None:
                self.screen.submitted(item)
                self.screen.say(f"● queued: {_first_line(item)}")

    def write_result(self, tid: str, description: str) -> Path:
        assert self.team is not None
        root = self.root if self.root is not None else find_root()
        paths = StatePaths(root)
        team = paths.team(self.team)
        team.ensure_in(team.worker_dir(self.me))
        answered = "\n".join(f"- {a}" for a in self.answered) or "- none"
        changed = (
            f"wrote and committed {self.committed} in its worktree {self.worktree}"
            if self.committed
            else "changed no project files"
        )
        text = (
            f"# Result: task {tid}\n\n"
            f"- Worker: {self.me}\n- Team: {self.team}\n- Finished: {clock.iso()}\n"
            f"- Task: {description or '(no description)'}\n\n"
            "## What was done\n\n"
            f"The omp demo agent simulated {self.work_seconds:g} s of work. It has no model and "
            f"{changed}.\n\n"
            f"## Messages answered\n\n{answered}\n"
        )
        path = team.result(self.me)
        fs.write_atomic(path, text.encode("utf-8"))  # created 0600 by the store
        return path

    # -- 2. mail: show all, answer teammates once, never answer an answer --

    def on_mail(self, line: str) -> None:
        self._identity_from_nudge(line)
        if self.team is None or self.worker is None:
            self.screen.say("✗ unknown team or worker: OMP_TEAM / OMP_WORKER are not set")
            return
        try:
            res = self.call("mailbox-read", {"team_name": self.team, "worker": self.worker})
        except ApiError as exc:
            self.screen.say(f"✗ {exc}")
            return
        raw = res.get("messages")
        msgs = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
        if not msgs:
            self.screen.say("● no new messages")
            return
        shown = [f"✉ {m.get('from', '?')}: {_first_line(str(m.get('body', '')))}" for m in msgs]
        self.screen.say(*shown)
        for msg in msgs:
            self.answer(msg)

    def answer(self, msg: Result) -> None:
        mid, sender, body = msg.get("id"), msg.get("from"), msg.get("body")
        if not isinstance(mid, str) or not isinstance(sender, str) or not isinstance(body, str):
            return
        if mid in self.replied or sender == self.me:
            return
        if msg.get("event") == "task_req":
            self.replied.add(mid)
            self.do_request(msg, mid, sender, body)
            return
        if sender == LEADER and msg.get("intent") == "task_handover":
            self.replied.add(mid)
            self.on_handover(msg)
            return
        if is_answer(msg) or msg.get("event") is not None:
            return  # answers and task events are never answered: no loops
        if sender == LEADER:
            if not _STATUS_RE.search(body):
                return  # acknowledged on screen only; the leader did not ask for anything
            state = self.task_state or "not assigned"
            reply = f"Re: {body[:60]} — {self.me}: task {self.task_id or '-'} {state}"
        else:
            reply = f"Re: {body[:60]}"
        self.replied.add(mid)  # before sending: a failed reply is not retried into a loop
        payload = {"team_name": self.team, "from": self.me, "to": sender, "body": reply}
        try:
            self.call("send-message", payload | {"ref_message_id": mid})
        except ApiError as exc:
            self.screen.say(f"✗ {exc}")
            return
        self.answered.append(f"{sender}: {reply}")
        self.screen.say(f"● replied to {sender}")

    def do_request(self, msg: Result, mid: str, sender: str, body: str) -> None:
        """A teammate's task_req (omp already acknowledged it for us): do it, answer task_done."""
        given = msg.get("task_id")
        tid = given if isinstance(given, str) and given else mid
        self.screen.say(f"● {sender} asked: {_first_line(body, 80)}")
        self.work(f"{tid[-6:]} for {sender}")
        reply = {
            "team_name": self.team,
            "from": self.me,
            "to": sender,
            "body": f"done: {_first_line(body, 60)} (demo agent: simulated work)",
            "event": "task_done",
            "task_id": tid,
            "ref_message_id": mid,
        }
        try:
            self.call("send-message", reply)
        except ApiError as exc:
            self.screen.done(f"✗ {exc}")
            return
        self.answered.append(f"{sender}: task_done for {tid}")
        self.screen.done(f"● told {sender} the request is done")

    def _identity_from_nudge(self, line: str) -> None:
        for m in _JSON_OBJECT_RE.finditer(line):
            try:
                obj = json.loads(m.group(0))
            except ValueError:
                continue
            if isinstance(obj, dict):
                team, worker = obj.get("team_name"), obj.get("worker")
                self.team = self.team or (team if isinstance(team, str) else None)
                self.worker = self.worker or (worker if isinstance(worker, str) else None)

    # -- 3. the monitor's idle prompt: report, never send, never loop --

    def on_idle_prompt(self) -> None:
        if self.task_id is None:
            self.screen.say("● no task assigned yet; waiting for the leader")
        elif self.task_state == "in_progress":
            # Not the word "working": only the busy line may carry it (the classifier's cue).
            self.screen.say(f"● task {self.task_id} is still in progress")
        else:
            self.screen.say(f"● task {self.task_id} is {self.task_state}; nothing new to report")


def identity_args(cwd: Path) -> list[str]:
    """`-c user.name=... -c user.email=...` for what git has no identity for (neither its
    config nor GIT_AUTHOR_*/GIT_COMMITTER_*): a commit then works on a machine never set up."""
    from omp.workspace.git import git

    out: list[str] = []
    for key, var, default in (
        ("user.name", "NAME", DEMO_NAME),
        ("user.email", "EMAIL", DEMO_EMAIL),
    ):
        if os.environ.get(f"GIT_AUTHOR_{var}") and os.environ.get(f"GIT_COMMITTER_{var}"):
            continue
        if git(cwd, "config", "--get", key, ok=(0, 1)).rc != 0:
            out += ["-c", f"{key}={default}"]
    return out


# ---- the program --------------------------------------------------------------------------


def run(agent: DemoAgent) -> int:
    """Read and handle lines until end of input or Ctrl-C; both exit 0."""
    try:
        while True:
            if agent.pending:
                line = agent.pending.popleft()
            else:
                line = _next_line(agent.lines)
                if line is not None:
                    agent.screen.submitted(line)
            if line is None:
                break
            agent.handle(line)
        agent.screen.close()
    except KeyboardInterrupt:
        try:
            agent.screen.close()
        except OSError:
            pass
    except OSError:
        pass  # the terminal went away (pane closed): nothing left to talk to
    return 0


def _next_line(lines: Lines) -> str | None:
    # A timeout keeps the main thread responsive to Ctrl-C on every platform.
    while True:
        try:
            return lines.get(timeout=1.0)
        except queue.Empty:
            continue


def _columns(fd: int) -> int:
    try:
        return os.get_terminal_size(fd).columns or 80
    except OSError:
        return 80


def _work_seconds() -> float:
    raw = os.environ.get("OMP_DEMO_WORK_SECONDS", "")
    try:
        value = float(raw) if raw else DEFAULT_WORK_SECONDS
    except ValueError:
        return DEFAULT_WORK_SECONDS
    return value if 0 <= value < 3600 else DEFAULT_WORK_SECONDS


def main(*, runner: ApiRunner | None = None, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    try:
        root: Path | None = find_root()
    except OmpError:
        root = None  # reported when the result file is written, not at startup
    lines: Lines = queue.Queue()
    threading.Thread(target=read_lines, args=(stdin_fd, lines), daemon=True).start()
    screen = Screen(
        fd_writer(stdout_fd), ansi=os.isatty(stdout_fd), columns=lambda: _columns(stdout_fd)
    )
    shell = ShellApi()
    agent = DemoAgent(
        team=os.environ.get("OMP_TEAM") or None,
        worker=os.environ.get("OMP_WORKER") or None,
        root=root,
        api=runner or shell,
        learn=None if runner else shell.learn,
        screen=screen,
        lines=lines,
        work_seconds=_work_seconds(),
    )
    who = f"{agent.me} of team {agent.team}" if agent.team else agent.me
    try:
        screen.say(f"● omp demo agent: {who} (no model; work takes {agent.work_seconds:g} s)")
    except OSError:
        return 0
    return run(agent)


def register(app: Typer) -> None:
    @app.command("demo-agent", hidden=True)
    def demo_agent() -> None:
        """A model-free agent for demos and tests: claims its task, reports, answers mail."""
        raise SystemExit(main())
