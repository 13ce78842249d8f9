"""`omp hook stop`: read the hook's JSON on stdin, print the CLI's answer, never fail closed.

The entry point beside the other commands, above every layer it uses (`omp.stophook` for the
payloads, the decision and its memory; `omp.modes` for the loops). A fast path (see
omp/cli/__init__.py) on the per-call layer (CONTRIBUTING.md): no typer, no `pathlib`, one small
JSON file per loop mode read on every stop of every agent; what a loop needs (the transcript,
the decision, its memory, the budgets) is imported only while one is active. Order of work:

1. a worker pane of a team (`OMP_TEAM_WORKER` / `OMP_WORKER` set) is never held by the leader's
   loop: allow; the only thing written is the worker's agent session (`omp.stophook.sessions`:
   `workers/<w>/session.json`, for `omp team resume`), when it is a current member;
2. a team's leader pane (tmux's `$TMUX_PANE` and `$TMUX` name a team's recorded leader pane):
   record the leader's agent session in that team (`workers/leader/session.json`, for
   `omp team usage`), then go on as any stop does; outside tmux nothing is looked at;
3. no active loop: allow, write nothing more;
4. Copilot: find the current reply in its transcript (bounded wait, outside the lock);
   a token budget a team crossed since the loop started ends the loop at this stop
   (`omp.record.budget`: each team's `budget.json`, read only while a loop is active);
5. under the project's hook lock: a second fire for a stop already answered (same session and
   stop identity) replays that answer and counts nothing; otherwise decide, remember the answer,
   then write the loop's new state;
6. print the answer in the CLI's shape.

Any error at all (bad stdin, stdin nested too deeply, an unsafe state tree, a full disk, a bug)
allows the stop and is logged to `.omp/state/hooks/hook.log` when it can be, else to stderr.

Time: every CLI omp installs the hook for kills it after 30 s (`install.TIMEOUT_S`) and holds the
agent meanwhile. So the hook runs under a budget of its own, `BUDGET_S`, enforced by SIGALRM: a
read that blocks (a stdin never closed, a slow disk) is interrupted and the stop allowed. The
alarm is disarmed once the decision is being written (step 5), so a block counted in the loop's
state is never printed as an allow; that step waits at most `memory.LOCK_WAIT_S` for its lock.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from omp.stophook import payloads, replies

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import FrameType, TracebackType
    from typing import Any

    from omp.store.layout import ProjectFiles

MAX_INPUT = 4 << 20
USAGE = "usage: omp hook stop  (reads the agent CLI's stop-hook JSON on stdin)"
EXACT_WINDOW_MS = 600_000  # a timestamp identity is unique per stop: replay for 10 minutes
DEFAULT_DEDUPE_MS = 1000  # a digest identity: only duplicates fired close together
BUDGET_S = 20.0  # the hook's time until the decision (+ LOCK_WAIT_S for it): under the CLIs' 30 s


class OutOfTime(Exception):
    """The hook's budget ran out before it decided: the stop is allowed."""


class Deadline:
    """SIGALRM after `seconds` raises `OutOfTime` wherever the hook is (a blocked read included:
    the handler's exception interrupts the system call). Only in the main thread; elsewhere (the
    hook called from a thread) it does nothing and the reads' own bounds apply."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._old: Any = None
        self._armed = False

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        raise OutOfTime(f"the stop hook ran out of its {self.seconds:g} s budget")

    def __enter__(self) -> Deadline:
        try:
            self._old = signal.signal(signal.SIGALRM, self._fire)
        except (ValueError, AttributeError, OSError):  # not the main thread, or no SIGALRM
            return self
        self._armed = True
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def disarm(self) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._armed:
            self.disarm()
            signal.signal(signal.SIGALRM, self._old)
            self._armed = False


def budget_s(env: Mapping[str, str]) -> float:
    """BUDGET_S, or less with OMP_HOOK_BUDGET_MS (never more: the CLI's timeout does not move)."""
    raw = env.get("OMP_HOOK_BUDGET_MS", "").strip()
    if raw.isascii() and raw.isdigit() and int(raw[:9]) > 0:
        return min(int(raw[:9]) / 1000, BUDGET_S)
    return BUDGET_S


def parse_stdin(raw: bytes) -> dict[str, Any]:
    """The hook's payload: a JSON object, or {} for empty stdin; ValueError for anything else,
    JSON nested too deeply to parse included (it must be logged like any other bad input)."""
    if not raw.strip():
        return {}
    from omp.store.strictjson import nests_deeper

    if nests_deeper(raw):  # refused before the parser, which recurses per level
        raise ValueError("stdin JSON is nested too deeply")
    payload = json.loads(raw)
    if not isinstance(payload, dict):
        raise ValueError("stdin is not a JSON object")
    return payload


def is_worker(env: Mapping[str, str]) -> bool:
    flag = env.get("OMP_TEAM_WORKER", "").strip()
    return (flag not in ("", "0")) or bool(env.get("OMP_WORKER", "").strip())


def cli_block_limit(cli: str, env: Mapping[str, str]) -> int | None:
    """How many blocks in a row the CLI obeys before it ends the turn anyway (None: no limit).

    Copilot CLI (1.0.72+) and Claude Code (2.1.143+): 8; Claude Code's can be changed with
    CLAUDE_CODE_STOP_HOOK_BLOCK_CAP, which its hooks inherit. Codex and Gemini have none.
    """
    if cli == "copilot":
        return 8
    if cli == "claude":
        raw = env.get("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "").strip()
        return int(raw[:9]) if raw.isascii() and raw.isdigit() and int(raw[:9]) > 0 else 8
    return None


def _windows(env: Mapping[str, str]) -> tuple[int, int]:
    """(exact, digest) replay windows in ms; OMP_HOOK_DEDUPE_MS=0 turns replay off."""
    raw = env.get("OMP_HOOK_DEDUPE_MS", "").strip()
    digest = int(raw[:9]) if raw.isascii() and raw.isdigit() else DEFAULT_DEDUPE_MS
    return (0, 0) if digest == 0 else (max(digest, EXACT_WINDOW_MS), digest)


def _root_dir(cwd: str | None) -> str | None:
    return cwd if cwd and os.path.isabs(cwd) and os.path.isdir(cwd) else None


def handle(
    raw: bytes, env: Mapping[str, str], *, disarm: Callable[[], None] = lambda: None
) -> tuple[str, str]:
    """(the CLI, the text to print). Raises on any error; `main` turns that into an allow.
    `disarm` stops the budget's alarm: called once the decision is about to be written."""
    payload = parse_stdin(raw)
    inp = payloads.read(payload, env)
    if is_worker(env):
        disarm()  # a small read and one atomic write follow: never cut short midway
        _record_session(inp, payload, env)
        return inp.cli, replies.allow(inp.cli)

    from omp import modes
    from omp.store.layout import ProjectFiles, find_root

    files = ProjectFiles(find_root(_root_dir(inp.cwd)))
    if env.get("TMUX_PANE"):
        _record_leader(files, inp, payload, env)
    if not any(modes.is_active(modes.read_state(files, m)) for m in modes.MODES):
        return inp.cli, replies.allow(inp.cli)

    from pathlib import Path  # a loop is active: what follows takes the tree as Paths

    from omp.store.paths import StatePaths

    paths = StatePaths(Path(files.root))

    reply = inp.reply
    waited = None
    skipped: list[str] = []  # why a transcript was not read
    if inp.cli == "copilot":
        from omp.stophook import transcript

        t0 = time.monotonic()
        reply = transcript.copilot_reply(
            inp.transcript_path,
            inp.stop_ms,
            cwd=inp.cwd,
            wait=transcript.wait_ms(env),
            why=skipped,
        )
        waited = round((time.monotonic() - t0) * 1000)
    elif inp.cli == "claude" and reply is None:
        from omp.stophook import transcript

        reply = transcript.claude_reply(inp.transcript_path, cwd=inp.cwd, why=skipped)
    disarm()
    extra: dict[str, Any] = {} if waited is None else {"transcriptWaitMs": waited}
    if skipped:
        extra["transcriptSkipped"] = skipped[0]
    return inp.cli, _decide_locked(paths, inp, reply, env, extra)


def _record_session(
    inp: payloads.StopInput, payload: Mapping[str, Any], env: Mapping[str, str]
) -> None:
    """A worker's hook records which agent session it runs; a failure is logged, and the stop
    is allowed all the same."""
    sid = _session_of(inp, payload)
    if not sid:
        return
    try:
        from omp.stophook import sessions

        sessions.record(
            env,
            agent=inp.cli,
            session_id=sid,
            transcript_path=inp.transcript_path,
            cwd=inp.cwd,
        )
    except Exception as exc:
        _say(f"omp hook stop: session not recorded: {type(exc).__name__}: {exc}\n")


def _record_leader(
    files: ProjectFiles,
    inp: payloads.StopInput,
    payload: Mapping[str, Any],
    env: Mapping[str, str],
) -> None:
    """A leader pane's hook records the leader's session in each team it leads
    (`omp.stophook.sessions.record_leader`); a failure is logged and the stop goes on. The
    budget's alarm stays armed: running out of time here still allows the stop."""
    sid = _session_of(inp, payload)
    if not sid:
        return
    try:
        from omp.stophook import sessions

        sessions.record_leader(
            env,
            files,
            agent=inp.cli,
            session_id=sid,
            transcript_path=inp.transcript_path,
            cwd=inp.cwd,
        )
    except OutOfTime:
        raise
    except Exception as exc:
        _say(f"omp hook stop: leader session not recorded: {type(exc).__name__}: {exc}\n")


def _session_of(inp: payloads.StopInput, payload: Mapping[str, Any]) -> str | None:
    """The agent session a stop belongs to: a Copilot subagent's stop carries the subagent's
    `sessionId` and the session's as `parentAgentId`."""
    parent = payload.get("parentAgentId")
    if inp.cli == "copilot" and isinstance(parent, str) and parent:
        return parent
    return inp.session_id


def _decide_locked(
    paths: Any,
    inp: payloads.StopInput,
    reply: str | None,
    env: Mapping[str, str],
    extra: Mapping[str, Any] | None = None,
) -> str:
    from omp import modes
    from omp.stophook import decision, memory

    exact_ms, digest_ms = _windows(env)
    window = exact_ms if inp.exact else digest_ms
    session, stop_id = inp.session_id, inp.stop_id
    stop = {"cli": inp.cli, "session": session, "stop": stop_id}
    with memory.locked(paths):
        # The time is read under the lock: a fire that waited for it must not look older than
        # the answer it waited for (it would then miss that answer and count again).
        now = time.time()
        now_ms = int(now * 1000)
        if session and stop_id and window > 0:
            cached = memory.recall(paths, session, stop_id, now_ms=now_ms, window_ms=window)
            if cached is not None:
                memory.log(paths, {"at": now_ms, **stop, **cached, "replayed": True})
                return replies.render(
                    inp.cli, str(cached.get("action")), cached.get("reason"), cached.get("note")
                )
        states = {m: modes.read_state(paths, m) for m in modes.MODES}
        info = memory.session_info(paths, session) if session else {}
        text = reply
        if inp.cli == "gemini" and session and reply is not None:
            last = info.get("response")
            text = decision.newest_part(last if isinstance(last, str) else None, reply)
        blocks = info.get("blocks")
        in_a_row = blocks if inp.hook_active and isinstance(blocks, int) else 0
        d = decision.decide(
            states,
            text,
            now=now,
            stop=stop,
            in_a_row=in_a_row,
            cli_limit=cli_block_limit(inp.cli, env),
            crossed=_budgets_crossed(paths, states),
        )
        out = {
            "action": d.action,
            "reason": d.reason,
            "mode": d.mode,
            "why": d.why,
            "note": decision.end_note(d),
        }
        if session and stop_id and window > 0:
            memory.remember(paths, session, stop_id, out, now_ms=now_ms)  # before the state
        if d.mode is not None and d.state is not None:
            modes.write_state(paths, d.mode, d.state)
        # The decision stands from here: the state says it. What follows is bookkeeping, and
        # its failure must not turn a counted block into a printed allow.
        try:
            if session:
                fields: dict[str, Any] = {"blocks": in_a_row + 1 if d.action == "block" else 0}
                if inp.cli == "gemini" and reply is not None:
                    fields["response"] = reply
                memory.save_session_info(paths, session, **fields)
            if d.mode is not None:
                memory.log(
                    paths,
                    {
                        "at": now_ms,
                        **stop,
                        **out,
                        "step": d.step,
                        "max": d.cap,
                        "reply": None if text is None else len(text),
                        **(extra or {}),
                    },
                )
        except Exception as exc:
            _say(f"omp hook stop: bookkeeping failed: {type(exc).__name__}: {exc}\n")
    return replies.render(inp.cli, d.action, d.reason, out["note"])


def _budgets_crossed(paths: Any, states: Mapping[str, Any]) -> list[tuple[float, str]]:
    """The token budgets any team of the project crossed since the oldest active loop started
    (`omp.record.budget`): one small file per team, read only while a loop is active. A budget
    file that cannot be read holds nothing back."""
    from omp import clock
    from omp.record import budget

    starts = []
    for state in states.values():
        if isinstance(state, dict) and state.get("active") is True:
            starts.append(clock.parse_iso(str(state.get("startedAt") or "")))
    since = None if not starts or None in starts else min(s for s in starts if s is not None)
    try:
        found = budget.crossed_since(paths, since)
    except Exception:
        return []
    out = []
    for c in found:
        at = clock.parse_iso(str(c.get("at") or ""))
        if at is not None:
            out.append((at, budget.describe(c)))
    return sorted(out)


def _log_error(exc: BaseException, raw: bytes, env: Mapping[str, str]) -> None:
    record = {
        "at": int(time.time() * 1000),
        "action": "allow",
        "error": f"{type(exc).__name__}: {exc}",
    }
    try:
        from omp.stophook import memory
        from omp.store.paths import StatePaths, find_root

        cwd = None
        try:
            cwd = parse_stdin(raw).get("cwd")
        except ValueError:
            pass
        memory.log(StatePaths(find_root(_root_dir(cwd if isinstance(cwd, str) else None))), record)
    except BaseException as again:
        _say(f"omp hook stop: {record['error']} (not logged: {again})\n")


def _say(text: str) -> None:
    """A line for a person on stderr (the CLI may show it), through omp's one sanitiser."""
    from omp.textsafe import visible

    sys.stderr.write(visible(text))


def main(argv: list[str], *, env: Mapping[str, str] | None = None) -> int:
    if any(a in ("-h", "--help") for a in argv):
        sys.stdout.write(USAGE + "\n")
        return 0
    environ = os.environ if env is None else env
    raw = b""
    cli = "claude"
    with Deadline(budget_s(environ)) as deadline:
        try:
            try:
                raw = sys.stdin.buffer.read(MAX_INPUT)
                cli, text = handle(raw, environ, disarm=deadline.disarm)
            finally:  # the alarm fires at most once, and never in the handler below
                deadline.disarm()
        except BaseException as exc:  # fail open on anything, Ctrl-C and bugs included
            try:
                cli = payloads.detect(parse_stdin(raw), environ)
            except Exception:
                pass
            _log_error(exc, raw, environ)
            text = replies.allow(cli)
    if text:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    return 0
