"""The file backend of the store interface (`omp.store.backend`): today's `.omp/state/` tree,
byte for byte, so the TypeScript tool and omp's own readers see what they always saw.

    events                 team/<t>/events.jsonl (first line names the log, as
                           `omp.record.history` writes it)
    mailbox/<r>            team/<t>/mailbox/<r>.jsonl (messages and delivery receipts)
    outbox/<w>             team/<t>/workers/<w>/outbox.jsonl
    tasks/<id>             team/<t>/tasks/<id>.json, claimed through tasks/<id>.lock (O_EXCL),
                           every change under the flock of tasks/.guard (as `omp.tasks.tasks`)
    records/<name>         team/<t>/<name>.json, changed under team/<t>/.<name>.lock
                           (config: .members.lock, as membership changes take it)
    conversations/<id>     team/<t>/conversations/<id>.json (the envelope
                           `omp.conversations.record` writes), under conversations/.<id>.lock
    heartbeats             team/<t>/workers/<w>/heartbeat.json
    locks                  .omp/state/locks/<name>.json, changed under .<name>.flock

Appends are one write under the file's flock (`omp.store.jsonl`); a cursor is a byte offset.
The same locks as the code that writes these files today are taken, so a FileStore and
`omp.mail.mailbox` / `omp.tasks.tasks` can write one tree side by side.

Mailbox reads here scan the file (O(history)); `omp.mail.mailbox` keeps its index beside it for
O(unread) reads, and a FileStore's appends leave that index valid (it catches up the tail).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from omp import clock
from omp.errors import OmpError
from omp.store import backend, fs, jsonl, locks
from omp.store.backend import Batch, Lease, MailView, Store, doc_key, lock_name, log_name
from omp.store.names import TERMINAL, team_name
from omp.store.paths import StatePaths, TeamPaths, task_id_of_record

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from omp.store.backend import Change, Check, Doc, Note

LOG_HEADER = "log"  # `omp.record.history.LOG_HEADER`: the first line of a team's events log


class FileStore(Store):
    def __init__(self, root: Path) -> None:
        self.paths = StatePaths(root)
        self.url = "file:" + str(self.paths.state)

    # ---- teams -------------------------------------------------------------------------
    def _team(self, name: str) -> TeamPaths:
        team = self.paths.team(team_name(name))
        try:
            return team.pinned()
        except FileNotFoundError:
            raise OmpError(
                "unknown_team", f"no team {name} in {self.paths.teams}", team=name
            ) from None

    def ensure_team(self, team: str) -> None:
        self.paths.ensure(self.paths.team(team_name(team)).dir)

    def has_team(self, team: str) -> bool:
        return os.path.isdir(self.paths.team(team_name(team)).dir)

    def archive_run(self, team: str, label: str, recipients: list[str]) -> None:
        """As `omp.team.setup.archive_previous_run` lays a run out: `runs/<label>/`."""
        tp = self._team(team)
        run = tp.run(label)
        moves = [
            (src, dst)
            for src, dst in (
                (tp.tasks_dir, run.tasks_dir),
                (tp.conversations_dir, run.conversations_dir),
            )
            if os.path.isdir(src)
        ]
        for r in recipients:
            for src in (tp.mailbox(r), tp.mailbox_index(r)):
                if fs.check_entry(src, want_dir=False):
                    moves.append((src, run.mailbox_dir / src.name))
        for src, dst in moves:
            self.paths.ensure(dst.parent)
            os.rename(src, dst)

    def drop_team(self, team: str) -> None:
        import shutil

        tp = self.paths.team(team_name(team))
        if os.path.isdir(tp.dir) and not os.path.islink(tp.dir):
            shutil.rmtree(tp.dir)

    # ---- logs ----------------------------------------------------------------------------
    def _log(self, team: TeamPaths, log: str, *, make: bool) -> Path:
        kind, who = log_name(log)
        if kind == "events":
            return team.events
        if kind == "mailbox":
            if make:
                team.ensure_in(team.mailbox_dir)
            return team.mailbox(who)
        if make:
            team.ensure_in(team.worker_dir(who))
        return team.outbox(who)

    def append(
        self, team: str, log: str, records: list[Doc], *, fence: Lease | None = None
    ) -> list[str]:
        tp = self._team(team)
        path = self._log(tp, log, make=True)
        with _Fenced(self, fence):
            return self._append(tp, path, log == "events", records)

    def _append(self, tp: TeamPaths, path: Path, header: bool, records: list[Doc]) -> list[str]:
        encoded = [jsonl.encode(r) for r in records]
        with jsonl.locked(path) as fd:
            tp.verify()  # under the lock: never into a team deleted (or made again) meanwhile
            head = b""
            if header and os.fstat(fd).st_size == 0:
                head = jsonl.encode(
                    {"type": LOG_HEADER, "log": os.urandom(8).hex(), "at": clock.iso()}
                )
            start = jsonl.append_locked(fd, head + b"".join(encoded), path) + len(head)
        out = []
        for data in encoded:
            start += len(data)
            out.append(str(start))
        return out

    def read(self, team: str, log: str, cursor: str = "", *, limit: int = 0) -> Batch:
        path = self._log(self.paths.team(team_name(team)), log, make=False)
        chunk = jsonl.read_from(path, _offset(cursor))
        records: list[Doc] = []
        cursors: list[str] = []
        end = chunk.end
        for off, length, rec in chunk.records:
            if rec.get("type") == LOG_HEADER and log == "events":
                continue
            if limit and len(records) == limit:
                end = off
                break
            records.append(rec)
            cursors.append(str(off + length))
        return Batch(records, str(end), chunk.bad, chunk.reset, cursors)

    # ---- mailboxes ---------------------------------------------------------------------------
    def send(
        self, team: str, recipient: str, messages: list[Doc], *, check: Check | None = None
    ) -> list[str]:
        for m in messages:
            if not isinstance(m.get("id"), str):
                raise OmpError("invalid_input", "every message needs a string id")
        if check is None:
            return self.append(team, f"mailbox/{recipient}", messages)
        tp = self._team(team)
        path = self._log(tp, f"mailbox/{recipient}", make=True)
        encoded = [jsonl.encode(r) for r in messages]
        with jsonl.locked(path) as fd:
            tp.verify()
            chunk = jsonl.read_fd(fd, 0)
            pending, known = _fold(chunk)
            check(MailView(len(pending), lambda since: _recent(chunk, since), known.__contains__))
            start = jsonl.append_locked(fd, b"".join(encoded), path)
        out = []
        for data in encoded:
            start += len(data)
            out.append(str(start))
        return out

    def unread(self, team: str, recipient: str) -> int:
        path = self._log(self.paths.team(team_name(team)), f"mailbox/{recipient}", make=False)
        return len(_fold(jsonl.read_from(path, 0))[0])

    def newest(self, team: str, recipient: str, limit: int) -> tuple[list[Doc], int]:
        path = self._log(self.paths.team(team_name(team)), f"mailbox/{recipient}", make=False)
        msgs: dict[str, Doc] = {}
        delivered: dict[str, str] = {}
        for _, _, rec in jsonl.read_from(path, 0).records:
            kind = rec.get("type")
            if kind == "message" and isinstance(mid := rec.get("id"), str):
                msgs.pop(mid, None)
                msgs[mid] = rec
            elif kind == "delivery-receipt" and isinstance(mid := rec.get("messageId"), str):
                delivered.setdefault(mid, str(rec.get("deliveredAt", "")))
        shown = list(msgs.values())[-limit:] if limit > 0 else []
        out = [
            {**m, "deliveredAt": delivered[m["id"]]} if m["id"] in delivered else m for m in shown
        ]
        return out, len(msgs)

    def undelivered(self, team: str, recipient: str) -> list[Doc]:
        path = self._log(self.paths.team(team_name(team)), f"mailbox/{recipient}", make=False)
        return list(_fold(jsonl.read_from(path, 0))[0].values())

    def mark_delivered(self, team: str, recipient: str, ids: list[str]) -> dict[str, str | None]:
        tp = self._team(team)
        path = self._log(tp, f"mailbox/{recipient}", make=False)
        if not ids:
            return {}
        if not fs.check_entry(path, want_dir=False):
            raise _not_found(ids[0], recipient)
        with jsonl.locked(path, create=False) as fd:
            tp.verify()
            pending, known = _fold(jsonl.read_fd(fd, 0))
            for m in ids:
                if m not in known:
                    raise _not_found(m, recipient)
            at = clock.iso()
            todo = [m for m in dict.fromkeys(ids) if m in pending]
            if todo:
                data = b"".join(
                    jsonl.encode({"type": "delivery-receipt", "messageId": m, "deliveredAt": at})
                    for m in todo
                )
                jsonl.append_locked(fd, data, path)
        return {m: (at if m in todo else None) for m in ids}

    # ---- docs ----------------------------------------------------------------------------
    def _doc_path(self, tp: TeamPaths, collection: str, key: str) -> Path:
        key = doc_key(collection, key)
        if collection == "conversations":
            return tp.conversation(key)
        return tp.task(key) if collection == "tasks" else tp.dir / f"{key}.json"

    def _guard(self, tp: TeamPaths, collection: str, key: str) -> Path:
        if collection == "tasks":
            tp.ensure_in(tp.tasks_dir)
            return tp.tasks_guard
        if collection == "conversations":
            return tp.ensure_in(tp.conversations_dir) / f".{key}.lock"
        return tp.members_lock if key == "config" else tp.dir / f".{key}.lock"

    def doc(self, team: str, collection: str, key: str) -> Doc | None:
        obj = fs.read_json(self._doc_path(self.paths.team(team_name(team)), collection, key))
        return obj if isinstance(obj, dict) else None

    def docs(self, team: str, collection: str) -> list[Doc]:
        tp = self.paths.team(team_name(team))
        folder = {"tasks": tp.tasks_dir, "conversations": tp.conversations_dir}.get(collection)
        folder = tp.dir if folder is None else folder
        doc_key(collection, "config" if collection == "records" else "1")  # the collection exists
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return []
        keys = sorted(k for n in names if (k := task_id_of_record(n)) is not None)
        if collection == "tasks":
            keys.sort(key=backend.task_sort_key)
        out = []
        for k in keys:
            obj = fs.read_json(folder / f"{k}.json")
            if isinstance(obj, dict):
                out.append(obj)
        return out

    def delete(self, team: str, collection: str, key: str) -> bool:
        tp = self._team(team)
        path = self._doc_path(tp, collection, key)
        with locks.flocked(self._guard(tp, collection, key)):
            try:
                os.unlink(path)
            except FileNotFoundError:
                return False
            if collection == "tasks":
                _unlink(tp.task_lock(key))
        return True

    def create(self, team: str, collection: str, key: str, doc: Doc) -> bool:
        done = self.update(team, collection, key, lambda cur: doc if cur is None else None)
        return done is not None

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
        tp = self._team(team)
        path = self._doc_path(tp, collection, key)
        with _Fenced(self, fence), locks.flocked(self._guard(tp, collection, key)):
            tp.verify()
            before = fs.read_json(path)
            if before is not None and not isinstance(before, dict):
                raise fs.corrupt(path, "is not a JSON object")
            after = change(None if before is None else dict(before))
            if after is None:
                return None
            if collection == "tasks":
                self._task_lock(tp, key, before, after)
            fs.write_json_atomic(path, after)
            if note is not None and (events := note(before, after)):
                at = clock.iso()
                self._append(tp, tp.events, True, [{**e, "at": e.get("at") or at} for e in events])
            if collection == "tasks" and after.get("status") in TERMINAL:
                _unlink(tp.task_lock(key))
        return after

    def _task_lock(self, tp: TeamPaths, tid: str, before: Doc | None, after: Doc) -> None:
        """The TypeScript tool's record of who holds a task, made before the task says so
        (`omp.tasks.tasks.claim`): a lock left on a pending task by a claimer that died is
        replaced (we hold the guard, so nobody is mid-claim now)."""
        if after.get("status") != "in_progress" or (before or {}).get("status") == "in_progress":
            return
        lock = tp.task_lock(tid)
        body = jsonl.encode(
            {"owner": after.get("owner"), "pid": os.getpid(), "claimedAt": clock.iso()}
        )
        if not locks.create_exclusive(lock, body):
            fs.check_entry(lock, want_dir=False)
            os.unlink(lock)
            if not locks.create_exclusive(lock, body):
                raise OmpError("claim_race", f"task {tid}: could not take its lock")

    # ---- heartbeats ------------------------------------------------------------------------
    def beat(self, team: str, worker: str, record: Doc) -> None:
        tp = self._team(team)
        tp.ensure_in(tp.worker_dir(worker))
        fs.write_json_atomic(tp.heartbeat(worker), record, pretty=False)

    def heartbeats(self, team: str) -> dict[str, Doc]:
        tp = self.paths.team(team_name(team))
        try:
            names = sorted(os.listdir(tp.workers_dir))
        except FileNotFoundError:
            return {}
        out: dict[str, Doc] = {}
        for name in names:
            try:
                obj = fs.read_json(tp.heartbeat(name))
            except OmpError:
                continue  # a damaged heartbeat is no sign of life
            if isinstance(obj, dict):
                out[name] = obj
        return out

    # ---- locks ---------------------------------------------------------------------------
    def _lock_files(self, name: str) -> tuple[Path, Path]:
        folder = self.paths.ensure(self.paths.store_locks)
        name = lock_name(name)
        return folder / f"{name}.json", folder / f".{name}.flock"

    def _lock_state(self, path: Path) -> Doc:
        obj = fs.read_json(path)
        return obj if isinstance(obj, dict) else {"token": 0, "owner": None, "expires": 0}

    def lock(self, name: str, owner: str, ttl: float) -> Lease | None:
        path, guard = self._lock_files(name)
        with locks.flocked(guard):
            st = self._lock_state(path)
            now = time.time()
            if st.get("owner") is not None and float(st.get("expires", 0)) > now:
                return None
            token = int(st.get("token", 0)) + 1
            expires = now + ttl
            fs.write_json_atomic(path, {"owner": owner, "token": token, "expires": expires})
        return Lease(name, owner, token, expires)

    def renew(self, lease: Lease, ttl: float) -> bool:
        path, guard = self._lock_files(lease.name)
        with locks.flocked(guard):
            st = self._lock_state(path)
            if st.get("token") != lease.token or st.get("owner") is None:
                return False
            lease.expires = time.time() + ttl
            fs.write_json_atomic(path, {**st, "expires": lease.expires})
        return True

    def unlock(self, lease: Lease) -> bool:
        path, guard = self._lock_files(lease.name)
        with locks.flocked(guard):
            st = self._lock_state(path)
            if st.get("token") != lease.token or st.get("owner") is None:
                return False
            fs.write_json_atomic(path, {**st, "owner": None, "expires": 0})
        return True

    def fence_ok(self, lease: Lease) -> bool:
        path, guard = self._lock_files(lease.name)
        with locks.flocked(guard):
            st = self._lock_state(path)
        return st.get("token") == lease.token and st.get("owner") is not None


class _Fenced:
    """The fence's lock held for a write: its flock taken (so no new token is issued while the
    write lands) and its token checked; no fence, nothing."""

    __slots__ = ("_fence", "_held", "_store")

    def __init__(self, store: FileStore, fence: Lease | None) -> None:
        self._store, self._fence = store, fence
        self._held: locks.flocked | None = None

    def __enter__(self) -> None:
        if self._fence is None:
            return
        path, guard = self._store._lock_files(self._fence.name)
        held = locks.flocked(guard)
        held.__enter__()
        st = self._store._lock_state(path)
        if st.get("token") != self._fence.token or st.get("owner") is None:
            held.__exit__()
            raise backend.stale_fence(self._fence, st.get("token"))
        self._held = held

    def __exit__(self, *exc: object) -> None:
        if self._held is not None:
            self._held.__exit__()


def _offset(cursor: str) -> int:
    if cursor == "":
        return 0
    if cursor.isdigit() and cursor.isascii():
        return int(cursor)
    raise OmpError("invalid_cursor", f"cursor {cursor!r} is not a position in a file store log")


def _fold(chunk: jsonl.Chunk) -> tuple[dict[str, Doc], set[str]]:
    """(undelivered messages by id, in file order; every message id) of a mailbox's lines. A
    message id that comes again is where its last line is (`omp.mail.mailbox.MailState`)."""
    pending: dict[str, Doc] = {}
    known: set[str] = set()
    for _, _, rec in chunk.records:
        kind = rec.get("type")
        if kind == "message" and isinstance(mid := rec.get("id"), str):
            known.add(mid)
            pending.pop(mid, None)
            pending[mid] = rec
        elif kind == "delivery-receipt" and isinstance(mid := rec.get("messageId"), str):
            pending.pop(mid, None)
    return pending, known


def _recent(chunk: jsonl.Chunk, since: float) -> list[Doc]:
    """Messages of the chunk stamped at or after `since`, newest first."""
    out = []
    for _, _, rec in reversed(chunk.records):
        if rec.get("type") != "message":
            continue
        at = clock.parse_iso(str(rec.get("timestamp", "")))
        if at is not None and at >= since:
            out.append(rec)
    return out


def _not_found(message_id: str, recipient: str) -> OmpError:
    return OmpError(
        "message_not_found",
        f"no message {message_id!r} in the mailbox of {recipient}",
        message_id=message_id,
    )


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
