"""The store interface: where a team's mail, tasks, events, heartbeats, locks and records live.

Two backends implement it, and one conformance suite (`tests/store/conformance/`) runs against
both: `omp.store.filestore`, the default, which is today's files under `.omp/state/` byte for
byte (the TypeScript tool reads and writes them too), and `omp.store.redisstore`, Redis or Valkey
through redis-py (the `omp[redis]` extra), for a team whose hosts share no disk. Which one a
project uses is `omp.store.select`'s business (`OMP_STORE`, `[store] url`).

The vocabulary, small on purpose:

- A **log** is an append-only sequence of JSON records read from a cursor: `events`,
  `mailbox/<recipient>`, `outbox/<worker>`. A cursor is an opaque string, `""` the beginning (a
  byte offset for files, a stream id for Redis); a read hands back the cursor past what it read,
  and a reader that must not lose lines saves it only after it handled them (at-least-once).
- A **mailbox** is a log whose message records carry ids. A delivery receipt is one more record
  of the same log, never a rewrite; a message is undelivered until its receipt is there.
- A **doc** is a JSON object by (collection, key): `tasks/<id>`, `records/<name>` (the team's
  own: `config`, `shutdown`, `budget`...), `conversations/<task id>` (a task conversation's
  revisioned record, `omp.conversations.record`). `update` is compare-and-set: `change(current)`
  gives the new object (or None: leave it), and the new one is written only if nobody wrote in
  between (Redis: WATCH/MULTI, run again on a conflict; files: under the collection's flock).
  `change` may raise `OmpError`: nothing is written. Events a move explains are appended in
  the same step.
- A **lock** is leased for a time and carries a fencing token that grows every time the lock
  changes hands: a write given a `fence` is refused (`stale_fence`) once a newer token exists,
  so a holder that stalled past its lease never overwrites its successor's work.
- A **heartbeat** is a worker's last sign of life: overwritten, never logged.

Task rules (claim, owner-only moves) are written once here, over `update`, and hold alike on
both backends. Standard library only: this module is imported by whatever opens a store.
"""

from __future__ import annotations

import os
import time

from omp.errors import OmpError
from omp.store.names import (
    NAME_CHARS,
    TERMINAL,
    check_claimant,
    check_move,
    check_statuses,
    is_valid_name,
    is_word,
    recipient_name,
    task_id,
    worker_name,
)

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Doc = dict[str, Any]
    Change = Callable[[Doc | None], Doc | None]
    Note = Callable[[Doc | None, Doc], list[Doc]]
    from typing import Protocol

    class View(Protocol):
        """A mailbox as a send's check sees it: `MailView`, or the file mailbox's own view
        (`omp.mail.mailbox.FileView`) under its flock."""

        @property
        def unread(self) -> int: ...
        def recent(self, since: float) -> list[Doc]: ...
        def holds(self, message_id: str) -> bool: ...

    Check = Callable[[View], None]

COLLECTIONS = ("tasks", "records", "conversations")


class Batch:
    """What one read of a log from a cursor produced: the records (in order), the cursor past
    them, how many lines were damaged (skipped, counted), and whether the log was found shorter
    than the cursor (replaced or truncated: read again from its start). `cursors`: the cursor
    just past each record (a reader that shows each record's own position: `omp team events`)."""

    __slots__ = ("bad", "cursor", "cursors", "records", "reset")

    def __init__(
        self,
        records: list[Doc],
        cursor: str,
        bad: int = 0,
        reset: bool = False,
        cursors: list[str] | None = None,
    ) -> None:
        self.records, self.cursor, self.bad, self.reset = records, cursor, bad, reset
        self.cursors = cursors if cursors is not None else []


class MailView:
    """A mailbox as a send's `check` sees it: the undelivered count, the messages stamped
    (`timestamp`) at or after a time (newest first), and whether it holds a message id."""

    __slots__ = ("_holds", "_recent", "unread")

    def __init__(
        self, unread: int, recent: Callable[[float], list[Doc]], holds: Callable[[str], bool]
    ) -> None:
        self.unread, self._recent, self._holds = unread, recent, holds

    def recent(self, since: float) -> list[Doc]:
        return self._recent(since)

    def holds(self, message_id: str) -> bool:
        return self._holds(message_id)


class Lease:
    """A lock held: its name, holder, fencing token and when the lease runs out (POSIX s)."""

    __slots__ = ("expires", "name", "owner", "token")

    def __init__(self, name: str, owner: str, token: int, expires: float) -> None:
        self.name, self.owner, self.token, self.expires = name, owner, token, expires

    def __repr__(self) -> str:
        return f"Lease({self.name!r}, {self.owner!r}, token={self.token})"


LEASE_TTL = 15.0  # seconds a team's lease is held: far longer than any change under it
LEASE_WAIT = 30.0  # seconds a writer waits for the lease before `claim_race`

# The leases this process holds, by lock name (a write under one fences with it).
_HELD: dict[str, Lease] = {}


class held:
    """The store's lock `name` leased for a block, re-entrant within one process (a block
    nested under a lease this process holds goes on under it); `claim_race`, saying that `what`
    stayed locked, if it is not had within `LEASE_WAIT` seconds. What a team's guard of its
    tasks (`omp.tasks.stored`) and of its conversations (`omp.conversations.stored`) is over a
    store."""

    __slots__ = ("_lease", "_name", "_store", "_team", "_what")

    def __init__(self, store: Store, name: str, *, team: str, what: str) -> None:
        self._store, self._name, self._team, self._what = store, name, team, what
        self._lease: Lease | None = None

    def __enter__(self) -> None:
        if self._name in _HELD:
            return  # nested under a lease this process holds already
        import socket

        owner = f"{socket.gethostname()}:{os.getpid()}"
        deadline = time.monotonic() + LEASE_WAIT
        pause = 0.005
        while (lease := self._store.lock(self._name, owner, LEASE_TTL)) is None:
            if time.monotonic() >= deadline:
                raise OmpError(
                    "claim_race",
                    f"{self._what} stayed locked for {LEASE_WAIT:g} s in the store",
                    team=self._team,
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
        self._lease = _HELD[self._name] = lease

    def __exit__(self, *exc: object) -> None:
        if self._lease is not None:
            _HELD.pop(self._name, None)
            self._store.unlock(self._lease)
            self._lease = None


def held_lease(name: str, what: str) -> Lease:
    """The lease of `name` this process holds, which a write under it fences with; `internal`
    when there is none (`what`: the write, said)."""
    lease = _HELD.get(name)
    if lease is None:
        raise OmpError("internal", f"{what} outside its team's lock")
    return lease


def log_name(log: str) -> tuple[str, str]:
    """("events", "") | ("mailbox", recipient) | ("outbox", worker), checked."""
    kind, _, who = log.partition("/")
    if kind == "events" and not who:
        return kind, ""
    if kind == "mailbox":
        return kind, recipient_name(who)
    if kind == "outbox":
        return kind, worker_name(who)
    raise OmpError(
        "invalid_input", f"unknown log {log!r}: events, mailbox/<recipient> or outbox/<worker>"
    )


def doc_key(collection: str, key: str) -> str:
    if collection in ("tasks", "conversations"):
        return task_id(key)
    if collection == "records" and is_valid_name(key):
        return key
    raise OmpError(
        "invalid_input",
        f"unknown document {collection}/{key!r}: tasks/<id>, records/<name> or "
        "conversations/<task id>",
    )


def lock_name(name: str) -> str:
    # a name's characters, longer than a name: `tasks.<team>` holds a team name of up to 64
    if not is_word(name, NAME_CHARS, 128):
        raise OmpError("invalid_input", f"invalid lock name {name!r}")
    return name


def stale_fence(lease: Lease, current: int | None) -> OmpError:
    return OmpError(
        "stale_fence",
        f"lock {lease.name}: fencing token {lease.token} is no longer the holder's"
        + (f" (now {current})" if current else "")
        + "; nothing was written",
        lock=lease.name,
        token=lease.token,
    )


class Store:
    """The interface. Backends override every method that raises here; the task rules below
    are shared. Every name is checked before anything is touched (bad input changes nothing)."""

    url = ""  # where it is, never with a password (shown in status and errors)

    # ---- teams -------------------------------------------------------------------------
    def ensure_team(self, team: str) -> None:
        raise NotImplementedError

    def has_team(self, team: str) -> bool:
        raise NotImplementedError

    def archive_run(self, team: str, label: str, recipients: list[str]) -> None:
        """A relaunch: the team's tasks, its task conversations and the named mailboxes leave
        the live team for an archive of the run `label` (never deleted); the team starts with
        none. Its history stays (it goes on across runs, as `events.jsonl` does)."""
        raise NotImplementedError

    def drop_team(self, team: str) -> None:
        """`omp team delete`: everything the store holds of the team goes."""
        raise NotImplementedError

    # ---- logs ----------------------------------------------------------------------------
    def append(
        self, team: str, log: str, records: list[Doc], *, fence: Lease | None = None
    ) -> list[str]:
        """Append records as one step; the cursor just past each. Acknowledged means durable
        as the backend is configured (see docs/remote.md), and all or nothing."""
        raise NotImplementedError

    def read(self, team: str, log: str, cursor: str = "", *, limit: int = 0) -> Batch:
        """Records after `cursor` (at most `limit`, 0: all), in order. Read-only."""
        raise NotImplementedError

    # ---- mailboxes (a log with receipts) -----------------------------------------------
    def send(
        self, team: str, recipient: str, messages: list[Doc], *, check: Check | None = None
    ) -> list[str]:
        """Append message records (each with a string `id`) to `mailbox/<r>`. `check` sees the
        mailbox as it is (`MailView`) and may refuse (raise `OmpError`) before anything is
        written; it runs where no other send to that mailbox can slip in between (the file's
        flock; WATCH on Redis, run again if another send landed), so limits that count what is
        there (`omp.mail.limits`) hold against any number of concurrent senders."""
        raise NotImplementedError

    def unread(self, team: str, recipient: str) -> int:
        """How many messages are undelivered. Read-only."""
        raise NotImplementedError

    def newest(self, team: str, recipient: str, limit: int) -> tuple[list[Doc], int]:
        """The newest `limit` messages, oldest first, each with `deliveredAt` when a receipt
        holds it; and how many messages the mailbox holds. Read-only."""
        raise NotImplementedError

    def undelivered(self, team: str, recipient: str) -> list[Doc]:
        """Messages without a receipt, oldest first. Read-only."""
        raise NotImplementedError

    def mark_delivered(self, team: str, recipient: str, ids: list[str]) -> dict[str, str | None]:
        """Receipts for those of `ids` still undelivered: id -> deliveredAt written now, or None
        for one delivered before. An id the mailbox never held is `message_not_found`, and then
        nothing is written."""
        raise NotImplementedError

    # ---- docs ----------------------------------------------------------------------------
    def doc(self, team: str, collection: str, key: str) -> Doc | None:
        raise NotImplementedError

    def docs(self, team: str, collection: str) -> list[Doc]:
        """Every doc of the collection, tasks ordered by id (numeric ids numerically)."""
        raise NotImplementedError

    def delete(self, team: str, collection: str, key: str) -> bool:
        """Remove a doc (a rollback of what one step wrote); whether there was one."""
        raise NotImplementedError

    def create(self, team: str, collection: str, key: str, doc: Doc) -> bool:
        """Write `doc` only if there is none under `key`: whether it was written."""
        raise NotImplementedError

    def update(
        self,
        team: str,
        collection: str,
        key: str,
        change: Change,
        *,
        fence: Lease | None = None,
        note: Note | None = None,
    ) -> Doc | None:
        """Compare-and-set (see the module docstring); the doc written, or None."""
        raise NotImplementedError

    # ---- heartbeats ------------------------------------------------------------------------
    def beat(self, team: str, worker: str, record: Doc) -> None:
        raise NotImplementedError

    def heartbeats(self, team: str) -> dict[str, Doc]:
        raise NotImplementedError

    # ---- locks ---------------------------------------------------------------------------
    def lock(self, name: str, owner: str, ttl: float) -> Lease | None:
        """Take the lock for `ttl` seconds if it is free or its lease ran out; None if held."""
        raise NotImplementedError

    def renew(self, lease: Lease, ttl: float) -> bool:
        """Extend the lease; False (and nothing changed) if the lock changed hands."""
        raise NotImplementedError

    def unlock(self, lease: Lease) -> bool:
        """Let the lock go; False if it was no longer this lease's."""
        raise NotImplementedError

    def fence_ok(self, lease: Lease) -> bool:
        """Is `lease.token` still the newest token of its lock, and not let go?"""
        raise NotImplementedError

    def close(self) -> None:
        pass

    # ---- task rules, shared by every backend ---------------------------------------------
    def create_task(self, team: str, tid: str, description: str, **fields: Any) -> Doc:
        from omp import clock

        task = {
            **fields,
            "id": task_id(tid),
            "description": description,
            "status": "pending",
            "createdAt": clock.iso(),
        }
        if not self.create(team, "tasks", tid, task):
            raise OmpError("task_exists", f"task {tid} exists already", task_id=tid)
        return task

    def claim_task(self, team: str, tid: str, worker: str) -> tuple[Doc, str]:
        """pending -> in_progress for `worker`, with a new claim token (a capability only the
        claimant holds): exactly one of any number of concurrent claimers gets it."""
        from omp import clock

        worker_name(worker)
        token = f"{worker}-{int(time.time() * 1000)}-{os.urandom(4).hex()}"

        def change(task: Doc | None) -> Doc:
            task = _required(task, tid)
            if task.get("status") != "pending":
                raise OmpError(
                    "task_not_pending",
                    f"task {tid} is {task.get('status')}"
                    + (f" (owner {task['owner']})" if task.get("owner") else "")
                    + "; only a pending task can be claimed",
                    task_id=tid,
                    status=task.get("status"),
                )
            task.update(status="in_progress", owner=worker, startedAt=clock.iso(), claimToken=token)
            return task

        done = self.update(team, "tasks", task_id(tid), change, note=_task_note)
        assert done is not None
        return done, token

    def move_task(
        self,
        team: str,
        tid: str,
        *,
        worker: str | None,
        token: str | None,
        expect: str,
        to: str,
        result: str | None = None,
        fence: Lease | None = None,
    ) -> Doc:
        """A move its claimant asks for (`worker` None: the leader): only from `expect`, only
        along `MOVES`, only with the claim token. Compare-and-set against the stored task."""
        from omp import clock

        check_statuses(expect, to)
        check_move(expect, to)

        def change(task: Doc | None) -> Doc:
            task = _required(task, tid)
            if task.get("status") != expect:
                raise OmpError(
                    "status_mismatch",
                    f"task {tid} is {task.get('status')}, not {expect}",
                    task_id=tid,
                    status=task.get("status"),
                )
            check_claimant(task, tid, worker, token)
            task["status"] = to
            if result is not None:
                task["result"] = result
            if to in TERMINAL:
                task["finishedAt"] = clock.iso()
            return task

        done = self.update(team, "tasks", task_id(tid), change, fence=fence, note=_task_note)
        assert done is not None
        return done


def _required(task: Doc | None, tid: str) -> Doc:
    if task is None:
        raise OmpError("task_not_found", f"task {tid} not found", task_id=tid)
    return task


def _task_note(before: Doc | None, after: Doc) -> list[Doc]:
    """The history line of a task move (`omp.record.history`'s `task` event)."""
    ev: Doc = {
        "type": "task",
        "taskId": after.get("id"),
        "from": before.get("status") if before else None,
        "to": after.get("status"),
    }
    if after.get("owner"):
        ev["owner"] = after["owner"]
    if after.get("result") is not None and after.get("status") != ev["from"]:
        ev["result"] = after["result"]
    return [ev]


def task_sort_key(tid: str) -> tuple[int, int, str]:
    return (0, int(tid), "") if tid.isdigit() else (1, 0, tid)
