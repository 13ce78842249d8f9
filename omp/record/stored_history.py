"""A team's history kept in the project's store (`OMP_STORE`, `[store] url`: `omp.store.select`)
instead of `team/<name>/events.jsonl`: the store's `events` log, one record per event.

`omp.record.history` hands over to this module when a store is selected, so every omp process of
the project (the leader, the monitor, each worker, on any host) appends to one history and
`omp team events` and the board read it back from there: a worker on another host writes into
the same log the leader reads. With no store selected nothing here is imported and the files are
written as they always were (the TypeScript tool's path, the header line, byte offsets).

Each append is one step of the store (a Redis stream entry written by one script: never torn,
ordered by the server); appending stays best-effort as in the files: a history that cannot be
written never fails the change it describes.

Cursors keep the files' shape, `<team>:<log>:<position>`: `<position>` is the store's own cursor
(a byte offset in the file store, a stream id `<ms>-<seq>` in Redis; `0` the beginning) and
`<log>` a fingerprint of the log's first record and its position, which differs for a team
deleted and made again (its log starts anew), so a cursor of the old log is refused rather than
let skip events without a word.
"""

from __future__ import annotations

import json
import zlib

from omp import clock
from omp.errors import OmpError
from omp.store import select

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from omp.store.backend import Store
    from omp.store.layout import ProjectFiles, TeamFiles
    from omp.store.paths import StatePaths, TeamPaths

    Team = TeamPaths | TeamFiles

LOG = "events"
NO_LOG = "-"  # `omp.record.history.NO_LOG`: a log with nothing in it yet
PAGE = 1000  # records a read takes at a time: memory follows the page, not the history


def store_of(project: StatePaths | ProjectFiles) -> Store:
    store = select.current(project)
    assert store is not None  # only reached when a store is selected
    return store


def append(team: Team, events: tuple[dict[str, Any], ...]) -> None:
    """`omp.record.history.record` where a store is selected: one append, best-effort."""
    try:
        team.files.verify()  # a team deleted (or made again) since its config was loaded
        write(store_of(team.files.project), team.name, events)
    except (OSError, OmpError):
        pass


def write(store: Store, team: str, events: tuple[dict[str, Any], ...]) -> None:
    """Append events to the team's log in `store` as one step, each stamped `at` (now) unless
    it says when. A team the store does not know gets nothing (`unknown_team`)."""
    at = clock.iso()
    store.append(team, LOG, [{**e, "at": e.get("at") or at} for e in events])


# ---- reading (never writes) ------------------------------------------------------------------


def fingerprint(store: Store, team: str) -> str:
    """The fingerprint of the team's log as it is now (`NO_LOG` while it holds nothing)."""
    first = store.read(team, LOG, "", limit=1)
    if not first.records:
        return NO_LOG
    at = first.cursors[0] if first.cursors else first.cursor
    text = at + "\n" + json.dumps(first.records[0], sort_keys=True, ensure_ascii=False)
    return f"{zlib.crc32(text.encode()):08x}"


def make_cursor(team: str, log: str, position: str) -> str:
    return f"{team}:{log}:{position or '0'}"


def parse_cursor(text: str | None, team: str) -> tuple[str | None, str]:
    """(log fingerprint or None, the store's position, "" for the start) of a cursor that
    `omp team events TEAM` printed for this team; `invalid_cursor` for anything else."""
    if text is None or text == "0":
        return None, ""

    def stream_id(position: str) -> bool:
        ms, dash, seq = position.partition("-")
        good_seq = not dash or (seq.isascii() and seq.isdigit() and len(seq) <= 18)
        return ms.isascii() and ms.isdigit() and len(ms) <= 18 and good_seq

    log, position = split_cursor(text, team, "1712345678901-0", stream_id)
    return log, ("" if position == "0" else position)


def split_cursor(
    text: str, team: str, example: str, position_ok: Callable[[str], bool]
) -> tuple[str | None, str]:
    """(log fingerprint or None, position) of `TEAM:LOG:POSITION`, the cursor shape of both the
    files' history (a byte offset) and a store's (a stream id): `invalid_cursor` for a cursor of
    another shape (`position_ok` judges the position; `example` is one, said in the error) or
    of another team."""
    name, sep, rest = text.partition(":")
    log, sep2, position = rest.partition(":")
    bad_log = log != NO_LOG and (len(log) != 8 or any(c not in "0123456789abcdef" for c in log))
    if (
        not sep
        or not sep2
        or not position_ok(position)
        or bad_log
        or (log == NO_LOG and position != "0")
    ):
        raise OmpError(
            "invalid_cursor",
            f"--since takes the cursor an earlier `omp team events {team}` printed (like "
            f"{team}:1a2b3c4d:{example}), got {text!r}",
            cursor=text,
        )
    if name != team:
        raise OmpError(
            "invalid_cursor",
            f"cursor {text!r} belongs to team {name}, not {team}; read {team} without --since "
            "first",
            cursor=text,
        )
    return (None if log == NO_LOG else log), position


def iter_since(
    store: Store, team: str, position: str, *, log: str | None = None, page: int = PAGE
) -> Iterator[tuple[list[dict[str, Any]], str, str]]:
    """(events, the position after them, the log's fingerprint) a page at a time, from
    `position`; each event carries its `cursor`, as `omp.record.history.iter_since` gives them.
    `log`: the fingerprint the cursor named; another log is refused. Read-only."""
    lid = fingerprint(store, team)
    if log is not None and lid != log:
        raise _replaced(team)
    if lid == NO_LOG and position:
        raise _replaced(team)  # a position in a log that is no longer there
    while True:
        try:
            batch = store.read(team, LOG, position, limit=page)
        except OmpError as err:
            if err.code == "invalid_cursor":
                raise _replaced(team) from None
            raise
        if batch.reset:
            raise _replaced(team)
        if lid == NO_LOG and batch.records:  # its first record was written since we looked
            lid = fingerprint(store, team)
        evs = []
        for rec, at in zip(batch.records, batch.cursors, strict=True):
            rec["cursor"] = make_cursor(team, lid, at)
            evs.append(rec)
        if not evs and batch.cursor == position:
            return
        position = batch.cursor
        yield evs, position, lid
        if len(batch.records) < page:
            return


def _replaced(team: str) -> OmpError:
    return OmpError(
        "invalid_cursor",
        f"the cursor was read from another event log of team {team} (the team was deleted "
        "and made again since, or the project's store changed): its events would be skipped "
        "without a word; read from the start without --since",
        team=team,
    )
