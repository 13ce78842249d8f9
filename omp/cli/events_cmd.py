"""`omp team events`: print a team's history from a cursor, once or following. Read-only."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, NoReturn

from omp.cli import output
from omp.errors import OmpError
from omp.textsafe import inline

if TYPE_CHECKING:
    from omp.record.config import TeamConfig
    from omp.store.paths import StatePaths

POLL_SECONDS = 0.2


def events_loop(
    project: StatePaths,
    team: str,
    *,
    since: str | None,
    follow: bool,
    as_json: bool,
    poll: float = POLL_SECONDS,
) -> NoReturn:
    from omp.record import config as team_config
    from omp.record import history
    from omp.store import project_config

    printed = 0
    try:
        cfg = team_config.load(project.team(team))
        if project_config.store_selected(project):
            _stored_loop(project, cfg, since=since, follow=follow, as_json=as_json, poll=poll)
        log, offset = history.parse_cursor(since, cfg.name)
        seen = log  # the log read: named by the cursor, or by the events it gave
        if as_json:  # the parse path's bytes, most lines passed through (`events_json`)
            from omp.cli import events_json

            shapes = events_json.new_shapes()
            for data, start, lid in history.iter_blocks(cfg.paths, offset, log=log):
                prefix = history.make_cursor(cfg.name, lid, 0)[:-1]
                blob, shown = events_json.render(data, start, prefix, shapes)
                if blob:
                    output.write_bytes(blob)
                printed += shown
                offset = start + len(data)
                if shown:
                    seen = lid
        for evs, end in history.iter_since(cfg.paths, offset, log=log):  # (all of it, for people)
            _print(evs, as_json)
            printed += len(evs)
            offset = end
            if evs:
                seen = str(evs[-1]["cursor"]).split(":")[1]
        cursor = (
            history.make_cursor(cfg.name, seen, offset)
            if seen is not None
            else history.cursor_at(cfg.paths, offset)  # nothing read: from the start is safe
        )
    except OmpError as err:
        output.fail(err, as_json)
    if not follow:
        _done(cfg, cursor, printed, as_json)
    path = history.path(cfg.paths)
    log, _ = history.parse_cursor(cursor, cfg.name)
    last = None
    try:
        while True:
            key = _stat(path)
            if key != last:
                last = key
                try:
                    evs, offset = history.read_since(cfg.paths, offset, log=log)
                    if log is None and evs:
                        log, _ = history.parse_cursor(str(evs[0]["cursor"]), cfg.name)
                except OmpError as err:  # the log was replaced under us (team deleted)
                    output.fail(err, as_json)
                _print(evs, as_json)
            time.sleep(poll)
    except KeyboardInterrupt:
        output.interrupted()


def _stored_loop(
    project: StatePaths,
    cfg: TeamConfig,
    *,
    since: str | None,
    follow: bool,
    as_json: bool,
    poll: float,
) -> NoReturn:
    """`events_loop` where the project keeps its history in its store
    (`omp.record.stored_history`): the same events, lines and cursor shape, read from there."""
    from omp.record import stored_history

    printed = 0
    try:
        store = stored_history.store_of(project)
        log, position = stored_history.parse_cursor(since, cfg.name)
        for evs, end, lid in stored_history.iter_since(store, cfg.name, position, log=log):
            position = end
            _print(evs, as_json)
            printed += len(evs)
            log = lid if lid != stored_history.NO_LOG else log
        cursor = stored_history.make_cursor(cfg.name, log or stored_history.NO_LOG, position)
        if log is None and position:  # events were there but none new: name the log read
            cursor = stored_history.make_cursor(
                cfg.name, stored_history.fingerprint(store, cfg.name), position
            )
    except OmpError as err:
        output.fail(err, as_json)
    if not follow:
        _done(cfg, cursor, printed, as_json)
    try:
        while True:
            try:
                for evs, end, lid in stored_history.iter_since(store, cfg.name, position, log=log):
                    position = end
                    _print(evs, as_json)
                    if evs:
                        log = lid
            except OmpError as err:  # the log was replaced under us (team deleted)
                output.fail(err, as_json)
            time.sleep(poll)
    except KeyboardInterrupt:
        output.interrupted()


def _stat(path: object) -> tuple[int, int, int] | None:
    import os

    try:
        st = os.stat(str(path))
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _print(evs: list[dict[str, object]], as_json: bool) -> None:
    if not evs:
        return
    if as_json:
        output.write_text("".join(output.dumps(e) + "\n" for e in evs))
    else:
        output.write_text("".join(describe(e) + "\n" for e in evs))


def _verify_text(v: Any) -> str:
    """`; check failed (exit 1), log <path>`: a completion's or a merge's check."""
    if not isinstance(v, dict):
        return ""
    words = {"running": "verifying", "passed": "verified", "restarted": "check restarted"}
    status = str(v.get("status"))
    what = words.get(status, f"check {status.replace('_', ' ')}")
    code = f" (exit {v['exit']})" if v.get("exit") not in (None, 0) else ""
    log = f", log {inline(str(v['log']))}" if v.get("log") else ""
    return f"; {what}{code}{log}"


def _task_extra(ev: dict[str, Any]) -> str:
    out = _verify_text(ev.get("verify"))
    if ev.get("commit"):
        out += f"; commit {inline(str(ev['commit']))[:12]}, {ev.get('commitsAhead', 0)} ahead"
    if ev.get("merge") == "conflict":
        files = ev.get("conflicts") if isinstance(ev.get("conflicts"), list) else []
        out += "; merge conflict in " + ", ".join(inline(str(f)) for f in files or [])
    return out


def describe(ev: dict[str, Any]) -> str:
    """One line for a person. Every value is someone's text (a worker's result, a line of the
    log written behind omp's back): each is made one visible line (`textsafe.inline`), so a
    multi-line result cannot print what looks like the next event."""

    def v(key: str, default: str = "") -> str:
        value = ev.get(key)
        return inline(str(value)) if value not in (None, "") else default

    kind = ev.get("type")
    at = v("at")[11:19]
    if kind == "task":
        owner = f" ({v('owner')})" if ev.get("owner") else ""
        res = f": {v('result')}" if ev.get("result") else ""
        text = f"task {v('taskId')}: {v('from', 'new')} -> {v('to')}{owner}{res}"
        text += _task_extra(ev)
    elif kind == "merge":
        commit = f" -> {inline(str(ev['commit']))[:12]}" if ev.get("commit") else ""
        files = ev.get("conflicts")
        conflicts = (
            f" in {', '.join(inline(str(f)) for f in files)}" if isinstance(files, list) else ""
        )
        task = f" (task {v('taskId')})" if ev.get("taskId") else ""
        text = (
            f"merge {v('branch')} into {v('target')}: {v('status')}{commit}{conflicts}{task}"
            + _verify_text(ev.get("verify"))
        )
    elif kind == "message":
        event = f" [{v('event')}]" if ev.get("event") else ""
        text = f"message {v('id')} {v('from')} -> {v('to')}{event}"
    elif kind == "member":
        why = f" ({v('reason')})" if ev.get("reason") else ""
        text = f"{v('worker')} {v('change')}{why}"
    elif kind == "loop":
        text = f"loop {v('mode')} {v('change')}"
    elif kind == "handover":  # a backlog's task handed to a worker (`omp.backlog.handover`)
        branch = f" on {v('branch')}" if ev.get("branch") else ""
        text = f"task {v('taskId')} handed to {v('worker')}{branch}"
    elif kind == "attention":
        if ev.get("change") == "started":
            text = f"{v('worker')} needs you: {v('what')}"
        else:
            text = f"{v('worker')} no longer needs you ({v('what')})"
    else:
        pairs = (f"{inline(str(k))}={inline(str(x))}" for k, x in ev.items() if k != "type")
        text = f"{v('type', 'None')}: " + ", ".join(pairs)
    return f"{at}  {text}"


def _done(cfg: TeamConfig, cursor: str, printed: int, as_json: bool) -> NoReturn:
    """A read without --follow ends here: the cursor to go on from, said (text only)."""
    from omp.invocation import team_command

    if not as_json:
        nxt = f"{team_command(cfg.raw)} team events {cfg.name} --since {cursor}"
        output.write_text(
            ("" if printed else "no new events\n") + f"cursor {cursor}; next: {nxt}\n"
        )
    raise SystemExit(0)
