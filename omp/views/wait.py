"""`omp team wait TEAM`: block until something a leader must act on happens, then say what.

It returns when a worker needs a person (`attention`: at once if one already does; see
`omp.monitor.attention`) or a token budget of the team was crossed and the leader has not read
the message that said so (`attention` too: `omp.monitor.budget`), when the leader has unread mail
(at once if it already has), when a task's status differs from what the leader last saw, when
every task is terminal, when the team is shut down, or at the timeout. Only a team that is gone
exits non-zero by default: an agent's shell tool shows a non-zero exit as a failed call (Copilot
marks it ✗), and mail, a task move, "all done" or a worker that needs you is no failure. The
JSON's `event` tells them apart; `--exit-codes` gives each its own exit code (below) for a
script that branches without parsing.

What the leader last saw is a cursor the leader carries, not state omp keeps: every wait returns
`cursor`, the status of every task as that wait saw them, named with the team and its run
(`docs:1a2b3c4d:1=c,2=i`: one letter per known status), and `--since CURSOR` compares with it
instead of with the moment the wait began. A cursor of another team or of an earlier run (a
relaunch, a team deleted and made again) is refused (`invalid_cursor`): its snapshot would hide
the new run's moves. So a task that moved between two waits is reported by the second, once; a
leader that polls with several shells gets consistent answers from each; and wait stays
read-only. (Task statuses move forward, pending -> in_progress -> terminal, so a snapshot is
enough; the two ways back, a failed check of a completion, verifying -> in_progress, and a merge
conflict, completed -> in_progress, are the worker's to act on, not the leader's.) The snapshot
may end in `,@N`, the number of the last "needs you" episode reported (episodes are numbered per
run, like the tasks): an episode still open is reported once, not by every wait after it.

Cheap and read-only: every `poll` seconds (0.2 s) it `lstat`s five things (the leader's mailbox,
the tasks directory, `shutdown.json`, the config, `attention.json`) and reads mail and tasks only
when one of them changed (or changed so recently that a coarse mtime could hide a second
change). It writes nothing: no cursor, no index, no receipt.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omp.errors import OmpError
from omp.invocation import team_command
from omp.mail.mailbox import Mailbox
from omp.mail.nudge import read_command
from omp.record.config import TeamConfig
from omp.store.names import LEADER
from omp.tasks import tasks

EXIT_EVENT = 0  # unread mail for the leader, or a task changed status
EXIT_ALL_DONE = 10  # every task is completed, failed or interrupted (or, in a backlog, waits
# only for ones that failed or were cancelled: nothing more can run)
EXIT_TIMEOUT = 11  # nothing happened within --timeout
EXIT_SHUTDOWN = 12  # the team was shut down
EXIT_GONE = 13  # the team's tmux server or every worker pane is gone: nothing more will happen
EXIT_ATTENTION = 14  # a worker needs a person (a permission prompt, a sign-in, stuck, ...), or
# a token budget was crossed
# The exit codes `--exit-codes` gives each event (and `eventCode` in the JSON, always).
EXIT_CODES = {
    "mail": EXIT_EVENT,
    "tasks": EXIT_EVENT,
    "all_done": EXIT_ALL_DONE,
    "timeout": EXIT_TIMEOUT,
    "shutdown": EXIT_SHUTDOWN,
    "gone": EXIT_GONE,
    "attention": EXIT_ATTENTION,
}
GONE_EVERY = 2.0  # seconds between looks at tmux (one server query and one list-panes)
DEFAULT_TIMEOUT = 600.0
POLL_SECONDS = 0.2
_RACY = 1.5  # seconds: an mtime this recent may hide a second change in the same tick
# One letter per known status in a cursor; an unknown status (another tool's) is spelled out.
_CODES = {
    "pending": "p",
    "in_progress": "i",
    "verifying": "v",
    "completed": "c",
    "failed": "f",
    "interrupted": "x",
    "cancelled": "n",
}
_STATUS = {v: k for k, v in _CODES.items()}
EMPTY_CURSOR = "-"  # a team with no tasks

Key = tuple[tuple[int, int, int], ...]


def _key(paths: list[Path]) -> tuple[Key, float]:
    """(ino, size, mtime_ns) of each path ((0,0,0) if missing), and the newest mtime."""
    out: list[tuple[int, int, int]] = []
    newest = 0.0
    for p in paths:
        try:
            st = os.lstat(p)
        except OSError:
            out.append((0, 0, 0))
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        newest = max(newest, st.st_mtime)
    return tuple(out), newest


def _tasks(cfg: TeamConfig) -> dict[str, dict[str, Any]]:
    return {str(t["id"]): t for t in tasks.list_all(cfg.paths)}


def _all_done(found: dict[str, dict[str, Any]]) -> bool:
    return bool(found) and all(t.get("status") in tasks.TERMINAL for t in found.values())


def run_id(cfg: TeamConfig) -> str:
    """A fingerprint of this run of the team: its launch (or create) time and launch token, and
    its directory. A relaunch, or a team deleted and made again under the name, is another run:
    its tasks start over, so a snapshot of the last run's statuses would hide their moves."""
    import zlib

    ino = cfg.paths.ident[1] if cfg.paths.ident else 0
    key = f"{cfg.raw.get('createdAt')}|{cfg.raw.get('launchToken')}|{ino}"
    return f"{zlib.crc32(key.encode()):08x}"


def encode_cursor(cfg: TeamConfig, statuses: dict[str, Any], attention: int = 0) -> str:
    """`{"1": "completed", "2": "pending"}` -> `<team>:<run>:1=c,2=p` (task id order as the store
    lists): the cursor names the team and the run whose statuses it holds; then `,@N` when "needs
    you" episodes up to number N were reported."""
    parts = [f"{tid}={_CODES.get(str(st), str(st))}" for tid, st in statuses.items()]
    snapshot = ",".join(parts) or EMPTY_CURSOR
    if attention:
        snapshot = f"{snapshot},@{attention}"
    return f"{cfg.name}:{run_id(cfg)}:{snapshot}"


def decode_cursor(cfg: TeamConfig, cursor: str) -> dict[str, Any]:
    """The task statuses a cursor records; `invalid_cursor` for anything a wait on this run of
    this team did not print (another team's, an earlier run's, an older omp's)."""
    return _decode(cfg, cursor)[0]


def _decode(cfg: TeamConfig, cursor: str) -> tuple[dict[str, Any], int]:
    """(the task statuses, the last "needs you" episode reported) of a cursor."""
    from omp.store.names import is_task_id

    example = f"{cfg.name}:{run_id(cfg)}:1=c,2=i"
    team, sep, rest = cursor.partition(":")
    run, sep2, snapshot = rest.partition(":")
    if not sep or not sep2:
        raise OmpError(
            "invalid_cursor",
            f"--since takes the cursor a previous `omp team wait {cfg.name}` printed (like "
            f"{example}), got {cursor!r}"
            + (
                "; a cursor without the team (printed by an older omp) could hide the moves "
                "of another team: wait once without --since and use the cursor it prints"
                if "=" in cursor or cursor == EMPTY_CURSOR
                else ""
            ),
            cursor=cursor,
        )
    if team != cfg.name:
        raise OmpError(
            "invalid_cursor",
            f"cursor {cursor!r} belongs to team {team}, not {cfg.name}; wait once without "
            "--since and use the cursor it prints",
            cursor=cursor,
        )
    if run != run_id(cfg):
        raise OmpError(
            "invalid_cursor",
            f"cursor {cursor!r} was printed for an earlier run of team {cfg.name} (it was "
            "launched again, or deleted and made again, since): its tasks start over; wait once "
            "without --since and use the cursor it prints",
            cursor=cursor,
        )
    parts = snapshot.split(",")
    seen = 0
    last = parts[-1]
    # `@N`: ASCII digits only, and short; anything else there is refused below like any part
    # that is not `id=status`.
    number = last[1:]
    ascii_number = number.isascii() and number.isdigit()  # str.isdigit alone takes "٣"
    if len(parts) > 1 and last[:1] == "@" and len(number) < 12 and ascii_number:
        seen = int(parts.pop()[1:])
    if parts == [EMPTY_CURSOR]:
        return {}, seen
    out: dict[str, Any] = {}
    for part in parts:
        tid, eq, code = part.partition("=")
        if not eq or not is_task_id(tid) or not code.replace("_", "").isalpha():
            raise OmpError(
                "invalid_cursor",
                f"--since takes the cursor a previous wait printed (like {example}), got "
                f"{cursor!r}",
                cursor=cursor,
            )
        out[tid] = _STATUS.get(code, code)
    return out, seen


def wait(
    cfg: TeamConfig,
    *,
    since: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    poll: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    unreachable: Callable[[TeamConfig], str | None] | None = None,
    exit_codes: bool = False,
) -> dict[str, Any]:
    """Wait as described in the module docstring; `timeout` None or 0 waits without limit.

    `unreachable` (default `omp.mail.panes.why_unreachable`) says why the team's panes can no
    longer be reached; asked every `GONE_EVERY` seconds, it ends the wait with event `gone`.
    `exit_codes`: `exitCode` is the event's own code (`EXIT_CODES`), else 0 but for `gone`."""
    gone = unreachable or _why_unreachable
    if timeout is not None and (timeout < 0 or timeout != timeout):
        raise OmpError("invalid_input", f"--timeout must be >= 0 seconds, got {timeout}")
    if poll <= 0:
        raise OmpError("invalid_input", "poll interval must be > 0")
    team = cfg.paths
    box = Mailbox(team, LEADER)
    watched = [Path(box.path), team.tasks_dir, team.shutdown, team.config, team.attention]
    start = clock()
    seen: int | None = None  # without --since, any worker that needs a person now is news
    if since is not None:
        before, seen = _decode(cfg, since)
    else:
        before = {tid: t.get("status") for tid, t in _tasks(cfg).items()}
    last: Key | None = None
    looked_gone: float | None = None
    while True:
        key, newest = _key(watched)
        # mail and tasks in a store (`omp.store.select`) change no file: look every poll
        if key != last or wall() - newest < _RACY or box.stored is not None:
            last = key
            result = _look(cfg, box, before, seen)
            if result is not None:
                return _finish(cfg, result, clock() - start, exit_codes)
        if looked_gone is None or clock() - looked_gone >= GONE_EVERY:
            looked_gone = clock()
            why = gone(cfg)
            if why is not None:
                out = _look(cfg, box, before, seen) or {
                    "event": "gone",
                    **_empty(),
                    "cursor": encode_cursor(cfg, before, seen or 0),
                }
                resume = f"{team_command(cfg.raw)} team resume {cfg.name}"
                return _finish(
                    cfg,
                    {**out, "event": "gone", "why": why, "resume": resume},
                    clock() - start,
                    exit_codes,
                )
        waited = clock() - start
        if timeout and waited >= timeout:
            # Nothing moved since `before` at the last look: it is still what was reported.
            cursor = encode_cursor(cfg, before, seen or 0)
            result = {"event": "timeout", **_empty(), "cursor": cursor}
            return _finish(cfg, result, waited, exit_codes)
        sleep(poll if not timeout else min(poll, max(0.0, timeout - waited)))


def _why_unreachable(cfg: TeamConfig) -> str | None:
    from omp.mail.panes import why_unreachable  # tmux, only for a team that has panes

    return why_unreachable(cfg)


def _empty() -> dict[str, Any]:
    return {"messages": {"count": 0, "senders": []}, "moved": []}


def _with_read_command(cfg: TeamConfig, result: dict[str, Any]) -> dict[str, Any]:
    """Unread mail comes with the exact line that reads it (an agent leader runs it as is)."""
    msgs = result.get("messages") or {}
    if msgs.get("count"):
        cmd = read_command(team_command(cfg.raw), cfg.name, LEADER)
        result = {**result, "messages": {**msgs, "readCommand": cmd}}
    return result


def _look(
    cfg: TeamConfig, box: Mailbox, before: dict[str, Any], seen: int | None
) -> dict[str, Any] | None:
    """The event to report now, or None to keep waiting."""
    from omp.monitor import attention

    att = attention.read(cfg)
    found = tasks.read_all(cfg.paths)
    now_tasks = {str(t["id"]): t for t in found}
    moved = [
        {
            "id": tid,
            "from": before.get(tid),
            "to": t.get("status"),
            "owner": t.get("owner"),
            "result": t.get("result"),
            **_check(t),
        }
        for tid, t in now_tasks.items()
        if t.get("status") != before.get(tid)
    ]
    msgs, _ = box.undelivered()
    senders = Counter(str(m.get("from", "?")) for m in msgs)
    out: dict[str, Any] = {
        "messages": {
            "count": len(msgs),
            "senders": [{"from": s, "count": n} for s, n in sorted(senders.items())],
        },
        "moved": moved,
    }
    counts = Counter(str(t.get("status")) for t in now_tasks.values())
    out["tasks"] = dict(sorted(counts.items()))
    # Every open episode newer than `seen` is in this answer (attention is reported first).
    done_seq = max(int(att["seq"]), seen or 0)
    statuses = {tid: t.get("status") for tid, t in now_tasks.items()}
    out["cursor"] = encode_cursor(cfg, statuses, done_seq)
    needs = [
        {"worker": w, **e}
        for w, e in sorted(att["workers"].items())
        if seen is None or int(e.get("seq") or 0) > seen
    ]
    if found.broken:  # shown, and never "all done" while a task file cannot be read
        out["brokenTasks"] = found.broken
    # A token budget crossed (`omp.monitor.budget`) needs the person while the leader has not
    # read the one message that told it: the message is the record, so no cursor is needed.
    # What needs a person comes first, before "all done" too: a team can finish over budget.
    needs += [_budget_attention(m) for m in msgs if m.get("intent") == "budget"]
    if needs:
        return {"event": "attention", **out, "attention": needs}
    if _all_done(now_tasks) and not found.broken:
        return {"event": "all_done", **out}
    if not found.broken and any(t.get("backlog") is True for t in found):
        from omp.tasks.graph import Graph

        g = Graph(found)
        if g.finished():  # a backlog where nothing more can run: the rest waits for failures
            return {"event": "all_done", **out, "stuck": {k: v for k, v in g.stuck_by.items()}}
    if os.path.lexists(cfg.paths.shutdown):
        return {"event": "shutdown", **out}
    if msgs:
        return {"event": "mail", **out}
    if moved:
        return {"event": "tasks", **out}
    return None


def _budget_attention(msg: dict[str, Any]) -> dict[str, Any]:
    """A crossed token budget as an `attention` entry (`{worker?, what, since, ...}`, as a
    worker's "needs you" episode; no worker for the team's budget), `kind` "budget"."""
    got = msg.get("budget")
    crossing: dict[str, Any] = got if isinstance(got, dict) else {}
    used, budget = crossing.get("used"), crossing.get("budget")
    amount = (
        f"{used:,} of {budget:,} tokens"
        if isinstance(used, int) and isinstance(budget, int)
        else "?"
    )
    entry: dict[str, Any] = {"kind": "budget"}
    if crossing.get("scope") == "worker" and crossing.get("worker"):
        entry.update(worker=crossing["worker"], what=f"its token budget is crossed ({amount})")
    else:
        entry["what"] = f"the team's token budget is crossed ({amount})"
    return {**entry, "since": crossing.get("at"), "budget": crossing, "messageId": msg.get("id")}


def _check(t: dict[str, Any]) -> dict[str, Any]:
    """A moved task's check (`verify`: status, exit, log) and merge conflict, when it has one."""
    out: dict[str, Any] = {}
    v = t.get("verify")
    if isinstance(v, dict):
        out["verify"] = {k: v.get(k) for k in ("status", "exit", "log")}
    if isinstance(t.get("mergeConflict"), dict) and t.get("status") == "in_progress":
        out["mergeConflict"] = t["mergeConflict"]
    return out


def _finish(
    cfg: TeamConfig, result: dict[str, Any], waited: float, exit_codes: bool = False
) -> dict[str, Any]:
    event = result["event"]
    if "brokenTasks" not in result and (broken := tasks.read_all(cfg.paths).broken):
        result = {**result, "brokenTasks": broken}
    cursor = result["cursor"]
    result = _with_read_command(cfg, result)
    return {
        "ok": True,
        "team": cfg.name,
        **result,
        "allDone": event == "all_done",
        "exitCode": EXIT_CODES[event] if exit_codes or event == "gone" else 0,
        "eventCode": EXIT_CODES[event],
        "waitedSeconds": round(waited, 3),
        "next": f"{team_command(cfg.raw)} team wait {cfg.name} --since {cursor}",
    }
