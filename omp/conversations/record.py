"""Task conversations: one revisioned record per `task_req`, as pi-team keeps its state.

`conversations/<task_id>.json` holds an envelope `{schemaVersion, revision, contentHash, payload}`;
the payload says who asked whom, where the conversation stands and which messages belong to it.
The mailboxes stay the truth about what was said; a record is the index that lets omp answer for
an agent (busy or not, which task a reply belongs to, who may send what) without reading mail.

Writers publish under one team-level flock (on the team directory) with a compare-and-swap on the
revision: a writer that decided from a lock-free read (the sweep) passes the revision it saw and
is refused with `stale_revision` if anything moved since, then re-reads and decides again. Every
publication replaces the file (temp file + `os.replace`), so lock-free readers see the whole old
record or the whole new one. A record whose hash does not match is never repaired or erased: it is
reported (`corrupt_record`) and left for a person.

`conversations/.open.json` is a small summary of the open conversations (acknowledged, not yet
settled), rewritten with each publication, so that "is this worker busy" and "does any task need
sweeping" cost one small read rather than a scan of every record. It is only an index: entries are
checked against their records, a missing or unreadable summary is rebuilt from the records, and a
record always wins.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omp import clock
from omp.errors import OmpError
from omp.store import fs, locks, project_config, strictjson
from omp.store.names import is_task_id
from omp.store.paths import TeamPaths, task_id_of_record

SCHEMA = 1
SUMMARY_VERSION = 1
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
MAX_EVENTS = 500  # per record; older entries are dropped and counted
EXCERPT = 300

OPEN_STATES = frozenset({"active", "cancelling"})


def conv_dir(team: TeamPaths) -> Path:
    return team.conversations_dir


def record_path(team: TeamPaths, task_id: str) -> Path:
    return team.conversation(task_id)


def summary_path(team: TeamPaths) -> Path:
    return team.open_conversations


def _ts(value: Any) -> float | None:
    return clock.parse_iso(value) if isinstance(value, str) else None


def _iso(value: float | None) -> str | None:
    return clock.iso(value) if value is not None else None


@dataclass
class Conversation:
    """One task conversation. Times are POSIX seconds; on disk they are ISO strings."""

    task_id: str
    requester: str
    worker: str
    state: str = "active"
    intent: str | None = None
    excerpt: str = ""
    detail: str | None = None
    created_at: float = 0.0
    acked_at: float | None = None
    last_worker_event_at: float | None = None
    clarify_open: str | None = None  # id of a task_clarify still waiting for its answer
    clarify_answered_at: float | None = None
    cancel: dict[str, Any] | None = None  # {"messageId", "sentAt", "intent", "auto"}
    closed_at: float | None = None
    reason: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    events_omitted: int = 0
    revision: int = 0  # as read from disk; 0 for a record not yet published

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def cancel_sent_at(self) -> float | None:
        return _ts(self.cancel.get("sentAt")) if self.cancel else None

    def message_ids(self) -> set[str]:
        return {str(e.get("id")) for e in self.events}

    def event(self, message_id: str) -> dict[str, Any] | None:
        for e in self.events:
            if e.get("id") == message_id:
                return e
        return None

    def add_event(self, msg: dict[str, Any], at: float) -> None:
        entry: dict[str, Any] = {
            "id": msg["id"],
            "event": msg.get("event"),
            "from": msg["from"],
            "to": msg["to"],
            "ref": msg.get("ref_message_id"),
            "at": clock.iso(at),
        }
        if msg.get("auto"):
            entry["auto"] = True
        self.events.append(entry)
        if len(self.events) > MAX_EVENTS:
            drop = len(self.events) - MAX_EVENTS
            # keep the task_req itself: every later message refers to it
            self.events = self.events[:1] + self.events[1 + drop :]
            self.events_omitted += drop

    def open_refs(self) -> dict[str, str]:
        """Message ids still waiting for an answer -> who owes it."""
        if not self.is_open:
            return {}
        out = {self.task_id: self.worker}
        if self.clarify_open:
            out[self.clarify_open] = self.requester
        if self.cancel and isinstance(self.cancel.get("messageId"), str):
            out[self.cancel["messageId"]] = self.worker
        return out

    def timer_base(self) -> float:
        """When the worker's silence started counting (any worker event resets it)."""
        times = [self.acked_at, self.last_worker_event_at, self.clarify_answered_at]
        return max([t for t in times if t is not None] or [self.created_at])

    def payload(self) -> dict[str, Any]:
        return {
            "taskId": self.task_id,
            "requester": self.requester,
            "worker": self.worker,
            "state": self.state,
            "intent": self.intent,
            "excerpt": self.excerpt,
            "detail": self.detail,
            "createdAt": clock.iso(self.created_at),
            "ackedAt": _iso(self.acked_at),
            "lastWorkerEventAt": _iso(self.last_worker_event_at),
            "clarifyOpen": self.clarify_open,
            "clarifyAnsweredAt": _iso(self.clarify_answered_at),
            "cancel": self.cancel,
            "closedAt": _iso(self.closed_at),
            "reason": self.reason,
            "events": self.events,
            "eventsOmitted": self.events_omitted,
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any], revision: int) -> Conversation:
        try:
            events = [e for e in p.get("events", []) if isinstance(e, dict)]
            cancel = p.get("cancel")
            return cls(
                task_id=str(p["taskId"]),
                requester=str(p["requester"]),
                worker=str(p["worker"]),
                state=str(p["state"]),
                intent=p.get("intent") if isinstance(p.get("intent"), str) else None,
                excerpt=str(p.get("excerpt", "")),
                detail=p.get("detail") if isinstance(p.get("detail"), str) else None,
                created_at=_ts(p.get("createdAt")) or 0.0,
                acked_at=_ts(p.get("ackedAt")),
                last_worker_event_at=_ts(p.get("lastWorkerEventAt")),
                clarify_open=p.get("clarifyOpen")
                if isinstance(p.get("clarifyOpen"), str)
                else None,
                clarify_answered_at=_ts(p.get("clarifyAnsweredAt")),
                cancel=cancel if isinstance(cancel, dict) else None,
                closed_at=_ts(p.get("closedAt")),
                reason=p.get("reason") if isinstance(p.get("reason"), str) else None,
                events=events,
                events_omitted=int(p.get("eventsOmitted", 0)),
                revision=revision,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise OmpError(
                "corrupt_record", f"task conversation record is malformed: {exc}"
            ) from None

    def summary(self) -> dict[str, Any]:
        return {
            "requester": self.requester,
            "worker": self.worker,
            "state": self.state,
            "revision": self.revision,
            "timerBase": clock.iso(self.timer_base()),
            "clarifyOpen": self.clarify_open,
            "cancelSentAt": self.cancel.get("sentAt") if self.cancel else None,
            "open": self.open_refs(),
        }


def _hash(payload: dict[str, Any]) -> str:
    import hashlib  # here: OpenSSL's start (~3 ms) is no cost of the read-only callers (status)

    canon = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def _decode(path: Path, data: bytes) -> Conversation:
    try:
        env = strictjson.loads(data)  # as strictly as every state file
    except strictjson.Damaged as exc:
        raise OmpError(
            "corrupt_record", f"{path} {exc.why}; it was left as it is", path=str(path)
        ) from None
    return from_envelope(str(path), env)


def from_envelope(path: str, env: Any) -> Conversation:
    """The conversation an envelope holds (`path`: where it was read, for the error);
    `corrupt_record` unless it is one whose content hash matches."""
    if (
        not isinstance(env, dict)
        or env.get("schemaVersion") != SCHEMA
        or not isinstance(env.get("payload"), dict)
        or not isinstance(env.get("revision"), int)
    ):
        raise OmpError(
            "corrupt_record",
            f"{path} is not a task conversation record; it was left as it is",
            path=str(path),
        )
    if env.get("contentHash") != _hash(env["payload"]):
        raise OmpError(
            "corrupt_record",
            f"{path} does not match its content hash; it was left as it is for recovery",
            path=str(path),
        )
    return Conversation.from_payload(env["payload"], env["revision"])


# ---- reading (lock-free, no writes) ---------------------------------------------------------


def _dir_ok(team: TeamPaths) -> bool:
    return team.project.check(conv_dir(team))


def _stored(team: TeamPaths) -> bool:
    """Are the project's conversations in a store (`omp.conversations.stored`)?"""
    return project_config.store_selected(team.project)


def load(team: TeamPaths, task_id: str) -> Conversation | None:
    """The record of `task_id`, or None if there is none. `corrupt_record` if it is damaged."""
    if not is_task_id(task_id):
        return None
    if _stored(team):
        from omp.conversations import stored

        env = stored.envelope(team, task_id)
        return None if env is None else from_envelope(f"conversation {task_id}", env)
    if not _dir_ok(team):
        return None
    path = record_path(team, task_id)
    data = fs.read_bytes(path)
    return None if data is None else _decode(path, data)


def _read_summary(team: TeamPaths) -> dict[str, dict[str, Any]] | None:
    """The open conversations' summary; None when missing or damaged (it is rebuilt from the
    records, which are the truth)."""
    try:
        obj = fs.read_json(summary_path(team))
    except OmpError as exc:
        if exc.code != "corrupt_state":
            raise
        return None
    if not isinstance(obj, dict) or obj.get("v") != SUMMARY_VERSION:
        return None
    entries = obj.get("open")
    if not isinstance(entries, dict):
        return None
    return {str(k): v for k, v in entries.items() if isinstance(v, dict)}


def _rebuild(team: TeamPaths) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    try:
        names = os.listdir(conv_dir(team))
    except OSError:
        return out
    for n in names:
        tid = task_id_of_record(n)
        if tid is None:
            continue
        try:
            conv = load(team, tid)
        except OmpError:
            continue
        if conv is not None and conv.is_open:
            out[conv.task_id] = conv.summary()
    return out


_SUMMARY_CACHE: dict[str, tuple[tuple[int, int, int], dict[str, dict[str, Any]]]] = {}


def open_summary(team: TeamPaths) -> dict[str, dict[str, Any]]:
    """task_id -> summary entry of every open conversation (lock-free; may be a moment stale).

    A long-lived reader (the monitor) re-parses only when the file changed: every publication
    replaces it, so (inode, size, mtime) moves with every write.
    """
    if _stored(team):
        from omp.conversations import stored

        out: dict[str, dict[str, Any]] = {}
        try:
            envs = stored.envelopes(team)
        except OmpError:
            return out  # as an unreadable summary: nothing open is known
        for env in envs:
            try:
                conv = from_envelope("a conversation", env)
            except OmpError:
                continue  # a damaged record is reported where it is loaded, as with the files
            if conv.is_open:
                out[conv.task_id] = conv.summary()
        return out
    try:
        if not _dir_ok(team):
            return {}
        st = os.lstat(summary_path(team))
    except FileNotFoundError:
        return _rebuild(team)
    except (OSError, OmpError):
        return {}
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _SUMMARY_CACHE.get(str(team.dir))
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        entries = _read_summary(team)
    except (OSError, OmpError):
        entries = None
    if entries is None:
        return _rebuild(team)
    _SUMMARY_CACHE[str(team.dir)] = (key, entries)
    return entries


def open_conversations(team: TeamPaths, worker: str | None = None) -> list[Conversation]:
    """Open conversations (optionally of one worker), each checked against its record."""
    out: list[Conversation] = []
    for tid, entry in open_summary(team).items():
        if worker is not None and entry.get("worker") != worker:
            continue
        try:
            conv = load(team, tid)
        except OmpError:
            continue
        if conv is not None and conv.is_open:
            out.append(conv)
    return out


def open_refs(team: TeamPaths) -> dict[str, str]:
    """Every message id still waiting for an answer -> who owes it (from the summary)."""
    out: dict[str, str] = {}
    for entry in open_summary(team).values():
        refs = entry.get("open")
        if isinstance(refs, dict):
            out.update({str(k): str(v) for k, v in refs.items()})
    return out


# ---- writing (under the team's conversation lock) -------------------------------------------


@contextmanager
def locked(team: TeamPaths) -> Iterator[None]:
    """The team-level flock every publication holds. Take it before any mailbox lock.

    It is a flock on the team directory itself, so taking it creates nothing: a call refused
    after taking it (a full mailbox, an unknown task) leaves the tree exactly as it was.
    With a store selected it is a lease on the store's lock (`omp.conversations.stored`).
    """
    if _stored(team):
        from omp.conversations import stored

        with stored.lease(team):
            yield
        return
    if not team.project.check(team.dir):
        raise team.gone()
    try:
        fd = os.open(team.dir, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except FileNotFoundError:
        raise team.gone() from None
    except OSError as exc:
        raise fs.storage_error(team.dir, exc) from exc
    try:
        locks.acquire(fd)
        team.verify()  # the directory locked is still the team the caller loaded
        yield
    finally:
        os.close(fd)


def _current_revision(team: TeamPaths, task_id: str) -> int:
    path = record_path(team, task_id)
    data = fs.read_bytes(path)
    return 0 if data is None else _decode(path, data).revision


def publish(team: TeamPaths, conv: Conversation, *, expected: int) -> Conversation:
    """Write `conv` as revision `expected + 1` if the record is still at `expected`.

    The caller holds `locked(team)`. On a mismatch nothing is written: `stale_revision`.
    """
    if _stored(team):
        return _publish_stored(team, conv, expected)
    team.ensure_in(conv_dir(team))
    current = _current_revision(team, conv.task_id)
    if current != expected:
        raise OmpError(
            "stale_revision",
            f"task {conv.task_id} changed meanwhile (revision {current}, expected {expected}); "
            "read it again and retry",
            task_id=conv.task_id,
            revision=current,
        )
    conv.revision = expected + 1
    env = _envelope(conv)
    opening = conv.is_open
    if opening:  # an open entry goes into the summary before its record exists...
        _update_summary(team, conv)
    fs.write_json_atomic(record_path(team, conv.task_id), env)
    if not opening:  # ...and leaves it only after the record says it is closed
        _update_summary(team, conv)
    return conv


def _envelope(conv: Conversation) -> dict[str, Any]:
    """The record written of `conv`: its payload, hashed, at its revision."""
    payload = conv.payload()
    return {
        "schemaVersion": SCHEMA,
        "revision": conv.revision,
        "contentHash": _hash(payload),
        "payload": payload,
    }


def _publish_stored(team: TeamPaths, conv: Conversation, expected: int) -> Conversation:
    from omp.conversations import stored

    revision = conv.revision
    conv.revision = expected + 1
    env = _envelope(conv)
    try:
        stored.publish(team, conv.task_id, env, expected, lambda e: from_envelope(conv.task_id, e))
    except BaseException:
        conv.revision = revision  # nothing written: the caller's conversation is as it was
        raise
    return conv


def _update_summary(team: TeamPaths, conv: Conversation) -> None:
    try:
        entries = _read_summary(team)
    except OmpError:
        entries = None
    if entries is None:
        entries = _rebuild(team)
    if conv.is_open:
        entries[conv.task_id] = conv.summary()
    else:
        entries.pop(conv.task_id, None)
    _write_summary(team, entries)


def _write_summary(team: TeamPaths, entries: dict[str, dict[str, Any]]) -> None:
    path = summary_path(team)
    if os.path.lexists(path):
        fs.check_entry(path, want_dir=False)
    fs.write_json_atomic(path, {"v": SUMMARY_VERSION, "open": entries}, pretty=False)


def drop_stale_entry(team: TeamPaths, task_id: str) -> bool:
    """Remove a summary entry whose record is missing or closed (under the lock). True if fixed."""
    if _stored(team):
        return False  # a store's summary is its records: never stale
    try:
        conv = load(team, task_id)
    except OmpError:
        return False
    if conv is not None and conv.is_open:
        return False
    entries = _read_summary(team)
    if entries is None or task_id not in entries:
        return False
    del entries[task_id]
    _write_summary(team, entries)
    return True


def remove_unpublished(team: TeamPaths, task_id: str) -> None:
    """Undo the publication of a brand-new record whose message could not be appended."""
    if _stored(team):
        from omp.conversations import stored

        stored.remove(team, task_id)
        return
    try:
        os.unlink(record_path(team, task_id))
    except FileNotFoundError:
        pass
    entries = _read_summary(team)
    if entries is not None and task_id in entries:
        del entries[task_id]
        _write_summary(team, entries)


def new(
    task_id: str,
    requester: str,
    worker: str,
    *,
    now: float,
    intent: str | None,
    body: str,
    detail: str | None,
) -> Conversation:
    from omp.textsafe import one_line

    return Conversation(
        task_id=task_id,
        requester=requester,
        worker=worker,
        intent=intent,
        excerpt=one_line(body, EXCERPT),
        detail=detail,
        created_at=now,
    )
