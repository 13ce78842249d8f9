"""Per-recipient mailboxes: append-only JSONL, compatible both ways with the TypeScript tool.

A message line is `{"type":"message","id","from","to","body","timestamp", ...}`; delivery appends
`{"type":"delivery-receipt","messageId","deliveredAt"}` and never rewrites the message line.

Reading new mail must cost O(unread), not O(history): a mailbox of 100,000 old messages is read as
fast as one of ten. Writers keep a small index beside the mailbox (`.<recipient>.index.json`): the
byte offset it covers and where the undelivered messages sit. It is only a cache. Every reader
takes the index as a starting point and reads the tail past its offset, so lines some other program
appended (the TypeScript tool, an older omp) are always seen; a missing, stale or foreign index is
simply rebuilt from the file. Read-only calls never write it back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omp import clock, ids
from omp.errors import OmpError
from omp.store import fs, jsonl
from omp.store.paths import TeamPaths
from omp.team import history

INDEX_VERSION = 1
Check = Callable[[int, "MailState"], None]
_PROBE = 32  # bytes before the index offset that must still match: catches a replaced file


class MailState:
    """What the mailbox holds up to `offset`: counts and the undelivered messages' places."""

    __slots__ = ("bad", "ino", "messages", "offset", "probe", "undelivered")

    def __init__(
        self,
        offset: int = 0,
        ino: int = 0,
        probe: str = "",
        messages: int = 0,
        bad: int = 0,
        undelivered: dict[str, tuple[int, int]] | None = None,
    ) -> None:
        self.offset = offset
        self.ino = ino
        self.probe = probe
        self.messages = messages
        self.bad = bad
        self.undelivered = undelivered if undelivered is not None else {}  # id -> (offset, len)

    def apply(self, chunk: jsonl.Chunk) -> list[dict[str, Any]]:
        """Fold a chunk into the state; return the message records it held."""
        if chunk.reset:  # the file shrank under us: what we knew describes another file
            self.messages = self.bad = 0
            self.undelivered.clear()
        self.bad += chunk.bad
        found: list[dict[str, Any]] = []
        for off, length, rec in chunk.records:
            kind = rec.get("type")
            if kind == "message" and isinstance(rec.get("id"), str):
                self.messages += 1
                self.undelivered[rec["id"]] = (off, length)
                found.append(rec)
            elif kind == "delivery-receipt":
                mid = rec.get("messageId")
                if isinstance(mid, str):
                    self.undelivered.pop(mid, None)
        self.offset = chunk.end
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "v": INDEX_VERSION,
            "offset": self.offset,
            "ino": self.ino,
            "probe": self.probe,
            "messages": self.messages,
            "bad": self.bad,
            "undelivered": [[k, o, n] for k, (o, n) in self.undelivered.items()],
        }

    @classmethod
    def from_json(cls, obj: Any) -> MailState | None:
        try:
            if obj.get("v") != INDEX_VERSION:
                return None
            und = {str(k): (int(o), int(n)) for k, o, n in obj["undelivered"]}
            return cls(
                offset=int(obj["offset"]),
                ino=int(obj["ino"]),
                probe=str(obj["probe"]),
                messages=int(obj["messages"]),
                bad=int(obj["bad"]),
                undelivered=und,
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


class Mailbox:
    """One recipient's mailbox file and its index."""

    def __init__(self, team: TeamPaths, recipient: str) -> None:
        self.team = team
        self.recipient = recipient
        self.path = team.mailbox(recipient)
        self.index_path = team.mailbox_index(recipient)

    # ---- reading (no writes) -------------------------------------------------------------

    def _exists(self) -> bool:
        return self.team.project.check(self.team.mailbox_dir) and fs.check_entry(
            self.path, want_dir=False
        )

    def _fd_state(self, fd: int) -> MailState:
        """The index if it still describes this file, else an empty state (full rescan)."""
        st = os.fstat(fd)
        state = MailState.from_json(fs.read_json(self.index_path)) if self._index_ok() else None
        if (
            state is None
            or state.ino != st.st_ino
            or state.offset > st.st_size
            or _probe(fd, state.offset) != state.probe
        ):
            state = MailState()
        state.ino = st.st_ino
        return state

    def _index_ok(self) -> bool:
        try:
            return fs.check_entry(self.index_path, want_dir=False)
        except OmpError:
            return False  # an unsafe index is ignored (and replaced by the next writer)

    def _current(self, fd: int) -> MailState:
        """State caught up to the end of the file (the tail past the index, streamed)."""
        state = self._fd_state(fd)
        for chunk in _chunks(fd, state.offset):
            state.apply(chunk)
        state.probe = _probe(fd, state.offset)
        return state

    def undelivered(self) -> tuple[list[dict[str, Any]], int]:
        """Undelivered messages, oldest first, and the count of lines that did not parse."""
        if not self._exists():
            return [], 0
        fd = fs.open_file(self.path, os.O_RDONLY)
        try:
            state = self._current(fd)
            msgs = _read_at(fd, sorted(state.undelivered.values()))
        finally:
            os.close(fd)
        return msgs, state.bad

    def unread_count(self) -> int:
        if not self._exists():
            return 0
        fd = fs.open_file(self.path, os.O_RDONLY)
        try:
            state = self._current(fd)
        finally:
            os.close(fd)
        return len(state.undelivered)

    def listing(
        self, *, undelivered_only: bool, limit: int
    ) -> tuple[list[dict[str, Any]], int, int]:
        """(the newest `limit` messages oldest first, how many were left out, bad line count)."""
        if not self._exists():
            return [], 0, 0
        fd = fs.open_file(self.path, os.O_RDONLY)
        try:
            state = self._current(fd)
            if undelivered_only:
                places = sorted(state.undelivered.values())
                shown = places[-limit:] if limit else []
                return _read_at(fd, shown), len(places) - len(shown), state.bad
            msgs = _newest(fd, state.offset, limit)
        finally:
            os.close(fd)
        for m in msgs:
            if m["id"] in state.undelivered:
                m.pop("deliveredAt", None)
        return msgs, max(0, state.messages - len(msgs)), state.bad

    # ---- writing (under the mailbox's flock) ---------------------------------------------

    def append_messages(self, records: list[dict[str, Any]], check: Check | None = None) -> int:
        """Append message records; returns the recipient's undelivered count afterwards.

        `check` runs under the mailbox's lock with the current state, so limits that count what
        is already there (duplicates, rate, a full mailbox) hold against concurrent senders.
        """
        self.team.project.ensure(self.team.mailbox_dir)
        with self._writing(create=True) as fd:
            state = self._current(fd)
            if check is not None:
                check(fd, state)
            data = b"".join(jsonl.encode(r) for r in records)
            self._append(fd, state, data)
            unread = len(state.undelivered)
        history.messages(self.team, records)  # the leader's side of it, for `omp team events`
        return unread

    def mark(self, message_ids: list[str]) -> dict[str, str | None]:
        """Append receipts for those ids still undelivered.

        Returns id -> deliveredAt for each id handled now, or None for an id that was already
        delivered. An id the mailbox never held raises `message_not_found` and writes nothing.
        """
        if not self._exists():
            raise _not_found(message_ids[0], self.recipient)
        with self._writing(create=False) as fd:
            state = self._current(fd)
            todo = [m for m in message_ids if m in state.undelivered]
            missing = [m for m in message_ids if m not in state.undelivered]
            if missing:
                known = _ids_in(fd, set(missing))
                for m in missing:
                    if m not in known:
                        raise _not_found(m, self.recipient)
            out: dict[str, str | None] = dict.fromkeys(missing)
            if todo:
                at = clock.iso()
                receipts = [
                    {"type": "delivery-receipt", "messageId": m, "deliveredAt": at} for m in todo
                ]
                self._append(fd, state, b"".join(jsonl.encode(r) for r in receipts))
                out.update(dict.fromkeys(todo, at))
            else:
                self._save(fd, state)
            return out

    def _append(self, fd: int, state: MailState, data: bytes) -> None:
        """Append under the held lock, then fold in everything from the old end.

        Read back rather than parse only `data`: a line a dead writer left without its newline
        becomes complete with the repair newline, and must be counted too.
        """
        jsonl.append_locked(fd, data, self.path)
        for chunk in _chunks(fd, state.offset):
            state.apply(chunk)
        self._save(fd, state)

    @contextmanager
    def _writing(self, *, create: bool) -> Iterator[int]:
        """The mailbox's lock, refused (nothing written) if its index was tampered with: a
        symlinked or widened index is left exactly as it is found, like any unsafe path."""
        fs.check_entry(self.index_path, want_dir=False)
        with jsonl.locked(self.path, create=create) as fd:
            fs.check_entry(self.index_path, want_dir=False)  # again, now that we hold the lock
            yield fd

    def _save(self, fd: int, state: MailState) -> None:
        state.probe = _probe(fd, state.offset)
        try:
            fs.write_json_atomic(self.index_path, state.to_json(), pretty=False)
        except (OSError, OmpError):
            pass  # the index is a cache: the next reader rescans; the message itself is safe


def new_message(
    sender: str, to: str, body: str, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "type": "message",
        "id": ids.new_id(),
        "from": sender,
        "to": to,
        "body": body,
        "timestamp": clock.iso(),
    }
    if extra:
        for k, v in extra.items():
            rec.setdefault(k, v)
    return rec


def _not_found(message_id: str, recipient: str) -> OmpError:
    return OmpError(
        "message_not_found",
        f"no message {message_id!r} in the mailbox of {recipient}",
        message_id=message_id,
    )


def _probe(fd: int, offset: int) -> str:
    start = max(0, offset - _PROBE)
    return os.pread(fd, offset - start, start).hex() if offset else ""


def _read_at(fd: int, places: list[tuple[int, int]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for off, length in places:
        raw = os.pread(fd, length, off)
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _scan_back(fd: int, end: int, want: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """Records before `end`, newest first, until `want` returns False for one (not included).

    Reads backwards in 64 KiB blocks, so the cost follows what is wanted, not the file's size.
    """
    block = 64 * 1024
    pos = end
    buf = b""
    out: list[dict[str, Any]] = []
    while pos > 0:
        start = max(0, pos - block)
        buf = os.pread(fd, pos - start, start) + buf
        pos = start
        lines = buf.split(b"\n")
        # the first piece may be a partial line unless we reached the start of the file
        buf = lines.pop(0) if pos > 0 else b""
        for raw in reversed(lines):
            rec = _loads(raw)
            if rec is None:
                continue
            if not want(rec):
                return out
            out.append(rec)
    return out


def _newest(fd: int, end: int, limit: int) -> list[dict[str, Any]]:
    """The last `limit` messages before `end`, oldest first, with receipts merged.

    A receipt always comes after its message, so reading back to the oldest message returned
    sees every receipt that concerns the ones returned. O(limit), not O(history).
    """
    if limit <= 0:
        return []
    count = 0

    def want(rec: dict[str, Any]) -> bool:
        nonlocal count
        if _is_message(rec):
            count += 1
        return count <= limit

    recs = _scan_back(fd, end, want)
    delivered: dict[str, str] = {}
    msgs: list[dict[str, Any]] = []
    for rec in recs:
        if rec.get("type") == "delivery-receipt" and isinstance(rec.get("messageId"), str):
            delivered.setdefault(rec["messageId"], str(rec.get("deliveredAt", "")))
        elif _is_message(rec):
            msgs.append(rec)
    msgs.reverse()
    return [merge_receipt(m, delivered) for m in msgs]


def _is_message(rec: dict[str, Any]) -> bool:
    return rec.get("type") == "message" and isinstance(rec.get("id"), str)


def recent_messages(fd: int, end: int, since: float) -> list[dict[str, Any]]:
    """Messages stamped at or after `since` (POSIX seconds), newest first."""

    def want(rec: dict[str, Any]) -> bool:
        if not _is_message(rec):
            return True
        ts = clock.parse_iso(str(rec.get("timestamp", "")))
        return ts is None or ts >= since

    return [r for r in _scan_back(fd, end, want) if _is_message(r)]


def _loads(raw: bytes) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def merge_receipt(msg: dict[str, Any], delivered: dict[str, str]) -> dict[str, Any]:
    at = delivered.get(msg["id"])
    if at:
        msg = {**msg, "deliveredAt": at}
    return msg


SCAN_BLOCK = 1 << 20


def _chunks(fd: int, offset: int) -> Iterator[jsonl.Chunk]:
    """Complete lines from `offset` to the end, a block at a time: memory stays bounded even
    when a mailbox with no usable index (one the TypeScript tool wrote) is read in full."""
    size = os.fstat(fd).st_size
    block = SCAN_BLOCK
    while offset < size:
        data = os.pread(fd, min(block, size - offset), offset)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if offset + len(data) >= size:
                return  # a partial last line: it waits for its newline
            block *= 2  # one line longer than a block
            continue
        chunk = jsonl.Chunk(start=offset)
        jsonl.parse_lines(data[:cut], offset, chunk)
        offset = chunk.end
        block = SCAN_BLOCK
        yield chunk


def _ids_in(fd: int, wanted: set[str]) -> set[str]:
    """Which of `wanted` appear as message ids anywhere in the file (a full scan: rare path)."""
    found: set[str] = set()
    for chunk in _chunks(fd, 0):
        for _, _, rec in chunk.records:
            if rec.get("type") == "message" and rec.get("id") in wanted:
                found.add(rec["id"])
    return found


def mailbox_path(team: TeamPaths, recipient: str) -> Path:
    return team.mailbox(recipient)
