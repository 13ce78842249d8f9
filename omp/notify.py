"""Notifications: tell a person when something needs them, by a command they chose.

Where the command comes from: `omp team launch --notify CMD` (the team's config, `notify`), else
`[notify] command` in `.omp/config.toml`. `tmux` is a command of its own: the line is shown in
the leader's tmux client (`display-message`) instead of running anything.

    [notify]
    command = "notify-send omp \"$OMP_EVENT_TEXT\""
    timeout = 10        # seconds a run may take; then it is killed

Events (`kind`): `attention` (a worker needs a person), `all_done`, `verify_failed`,
`merge_conflict`, `gone` (the team's panes or tmux server are gone). Anyone may queue one with
`emit(paths, event)`; the project's monitor delivers them (`deliver`, once per scan).

Once per event, across monitor restarts: `emit` appends the event to a durable outbox
(`.omp/state/notify/outbox.jsonl`; with a `key`, only if no event with that key was queued
before), and `deliver` moves a byte cursor (`delivered.json`) past an event *before* running its
command, under a lock only one deliverer holds. A crash between the two costs that notification;
it never runs one twice. The command gets the event as one JSON object on stdin and in
`OMP_EVENT_KIND`, `OMP_EVENT_TEAM`, `OMP_EVENT_WORKER`, `OMP_EVENT_TEXT` and `OMP_EVENT_ID`; it runs
through `/bin/sh -c` in its own process group, which is killed at the time limit. A failure (an
exit code, a time-out, a command that cannot start) is logged in `notify/notify.log` and never
stops the monitor.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from omp import clock
from omp.errors import OmpError
from omp.store import fs, jsonl, locks, project_config
from omp.store.paths import StatePaths

KINDS = ("attention", "all_done", "verify_failed", "merge_conflict", "gone")
TMUX = "tmux"  # the command that shows the line in the leader's tmux client instead
MAX_COMMAND = 4096
LOG_MAX = 256 * 1024  # bytes before notify.log is rotated to notify.log.1
TEXT_MAX = 500


class Settings(NamedTuple):
    command: str = ""
    timeout: float = 10.0


def settings(paths: StatePaths) -> Settings:
    """`[notify]` of `.omp/config.toml` (defaults when absent)."""
    return project_config.load_section(paths, "notify", Settings, "notify setting")


def check_command(command: str) -> str:
    """A `--notify` value, or `invalid_input`."""
    if not command.strip() or "\0" in command or len(command) > MAX_COMMAND:
        raise OmpError(
            "invalid_input",
            f"--notify takes a shell command (1-{MAX_COMMAND} characters) or `tmux`",
        )
    return command


# ---- queueing -------------------------------------------------------------------------------


def emit(paths: StatePaths, event: Mapping[str, Any], *, key: str | None = None) -> bool:
    """Queue `event` (`kind` one of `KINDS`, `team`, and `worker`, `text` or anything else) for
    the monitor to deliver. With `key`, only once: False if an event with that key was queued
    before (by this or any earlier process). Raises `invalid_input` for an unknown kind."""
    kind = event.get("kind")
    if kind not in KINDS:
        raise OmpError("invalid_input", f"unknown notification kind {kind!r}: {', '.join(KINDS)}")
    record: dict[str, Any] = {
        "id": secrets.token_hex(8),
        "at": clock.iso(),
        **{k: v for k, v in event.items() if k not in ("id", "at", "key")},
    }
    if key is not None:
        record["key"] = key
    paths.ensure(paths.notify)
    with jsonl.locked(paths.notify_outbox) as fd:
        if key is not None and _has_key(fd, key):
            return False
        jsonl.append_locked(fd, jsonl.encode(record), paths.notify_outbox)
    return True


def _has_key(fd: int, key: str) -> bool:
    needle = json.dumps(key, ensure_ascii=False).encode()
    if needle not in os.pread(fd, os.fstat(fd).st_size, 0):  # cheap: most keys are new
        return False
    return any(rec.get("key") == key for _, _, rec in jsonl.read_fd(fd).records)


# ---- delivering -----------------------------------------------------------------------------


class Result(NamedTuple):
    id: str
    kind: str
    outcome: str  # ok | failed | timeout | skipped (no command) | shown (tmux)
    detail: str = ""


Runner = Callable[[str, dict[str, Any], float], Result]


def command_for(paths: StatePaths, team: str | None) -> str:
    """The team's `--notify` command, else the project's `[notify] command`, else ''."""
    if team:
        with contextlib.suppress(Exception):
            raw = fs.read_json(paths.team(team).config)
            own = raw.get("notify") if isinstance(raw, dict) else None
            if isinstance(own, str) and own.strip():
                return own
    return settings(paths).command


def deliver(paths: StatePaths, *, runner: Runner | None = None) -> list[Result]:
    """Run the command of every event queued since the last delivery (see the module docstring).

    Returns what happened to each; [] when another process is delivering or nothing is queued.
    Never raises for a command's failure; an unsafe state tree still raises (`unsafe_path`).
    """
    if not paths.check(paths.notify) or not os.path.lexists(paths.notify_outbox):
        return []
    run = runner or run_command
    out: list[Result] = []
    with locks.flocked(paths.notify_lock, False) as mine:
        if not mine:
            return []
        offset = jsonl.read_cursor(paths.notify_delivered)
        chunk = jsonl.read_from(paths.notify_outbox, offset)
        if chunk.reset:  # the outbox was replaced: what is in it now is new
            offset = 0
        limit = settings(paths).timeout
        for start, length, rec in chunk.records:
            # The cursor moves first: a crash now costs this notification, never a second run.
            jsonl.write_cursor(paths.notify_delivered, start + length)
            cmd = command_for(paths, _str(rec.get("team")))
            rid, kind = _str(rec.get("id")), _str(rec.get("kind"))
            if not cmd.strip():
                out.append(Result(rid, kind, "skipped", "no notify command"))
                continue
            try:
                res = _tmux(paths, rec) if cmd.strip() == TMUX else run(cmd, rec, limit)
            except Exception as exc:  # never the monitor's end
                res = Result(rid, kind, "failed", f"{type(exc).__name__}: {exc}")
            if res.outcome not in ("ok", "shown"):
                log(paths, rec, res)
            out.append(res)
        if chunk.end > offset and not chunk.records:
            jsonl.write_cursor(paths.notify_delivered, chunk.end)  # bad lines: step past them
    return out


def pending(paths: StatePaths) -> list[dict[str, Any]]:
    """Events queued and not yet delivered. Read-only."""
    if not paths.check(paths.notify):
        return []
    chunk = jsonl.read_from(paths.notify_outbox, jsonl.read_cursor(paths.notify_delivered))
    return [rec for _, _, rec in chunk.records]


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def event_env(rec: Mapping[str, Any]) -> dict[str, str]:
    from omp.textsafe import inline

    return {
        "OMP_EVENT_KIND": _str(rec.get("kind")),
        "OMP_EVENT_TEAM": _str(rec.get("team")),
        "OMP_EVENT_WORKER": _str(rec.get("worker")),
        "OMP_EVENT_TEXT": inline(_str(rec.get("text")))[:TEXT_MAX],
        "OMP_EVENT_ID": _str(rec.get("id")),
    }


def run_command(command: str, rec: dict[str, Any], limit: float) -> Result:
    """`/bin/sh -c command`, the event on stdin and in `OMP_EVENT_*`; its process group is
    killed after `limit` seconds."""
    rid, kind = _str(rec.get("id")), _str(rec.get("kind"))
    env = {**os.environ, **event_env(rec)}
    data = (json.dumps(rec, ensure_ascii=False) + "\n").encode()
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own group: the time limit ends everything it started
            close_fds=True,
        )
    except OSError as exc:
        return Result(rid, kind, "failed", f"cannot start: {exc.strerror or exc}")
    try:
        _, err = proc.communicate(data, timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return Result(rid, kind, "timeout", f"still running after {limit:g}s: killed")
    except BrokenPipeError:  # it did not read stdin: fine
        err = proc.stderr.read() if proc.stderr else b""
        proc.wait(limit)
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace").strip()[-300:]
        return Result(
            rid, kind, "failed", f"exit {proc.returncode}" + (f": {tail}" if tail else "")
        )
    return Result(rid, kind, "ok")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.communicate(timeout=1.0)
            return
        except subprocess.TimeoutExpired:
            continue


def _tmux(paths: StatePaths, rec: dict[str, Any]) -> Result:
    """Show the event's line in the leader's tmux client (the client attached to the leader's
    pane's session), for a few seconds."""
    from omp.textsafe import inline
    from omp.tmux import Tmux

    rid, kind = _str(rec.get("id")), _str(rec.get("kind"))
    raw = fs.read_json(paths.team(_str(rec.get("team"))).config) if rec.get("team") else None
    ident = raw.get("tmuxIdentity") if isinstance(raw, dict) else None
    leader = raw.get("leaderPaneId") if isinstance(raw, dict) else None
    socket = ident.get("socketPath") if isinstance(ident, dict) else None
    if not isinstance(socket, str) or not isinstance(leader, str):
        return Result(rid, kind, "failed", "the team has no leader pane to show it in")
    text = "omp: " + inline(_str(rec.get("text")) or kind)[:TEXT_MAX]
    # `#` starts a tmux format: doubled, the text is shown as written.
    Tmux(socket_path=socket).cmd(
        "display-message", "-d", "10000", "-t", leader, text.replace("#", "##")
    )
    return Result(rid, kind, "shown")


def log(paths: StatePaths, rec: Mapping[str, Any], res: Result) -> None:
    """One line per failed delivery in `notify/notify.log` (rotated at `LOG_MAX`). Best effort."""
    from omp.textsafe import inline

    line = (
        f"{clock.iso()} {res.outcome} {res.kind} team={_str(rec.get('team')) or '-'} "
        f"id={res.id}: {inline(res.detail)}\n"
    )
    with contextlib.suppress(OSError, OmpError):
        path = paths.notify_log
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(path).st_size > LOG_MAX:
                os.replace(path, path.with_name(path.name + ".1"))
        fd = fs.open_file(path, os.O_WRONLY | os.O_APPEND, create=True)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def read_log(paths: StatePaths) -> str:
    data = fs.read_bytes(paths.notify_log) if paths.check(paths.notify) else None
    return (data or b"").decode("utf-8", "replace")
