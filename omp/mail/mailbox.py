"""Per-recipient mailboxes: append-only JSONL, compatible both ways with the TypeScript tool.

A message line is `{"type":"message","id","from","to","body","timestamp", ...}`; delivery appends
`{"type":"delivery-receipt","messageId","deliveredAt"}` and never rewrites the message line.

Reading new mail must cost O(unread), not O(history): a mailbox of 100,000 old messages is read as
fast as one of ten. Writers keep a small index beside the mailbox (`.<recipient>.index.json`): the
byte offset it covers and where the undelivered messages sit. It is only a cache. Every reader
takes the index as a starting point and reads the tail past its offset, so lines some other program
appended (the TypeScript tool, an older omp) are always seen; a missing, stale or foreign index is
simply rebuilt from the file. Read-only calls (`mailbox-list`, `status`, `collect`, `wait`) never
write it back; `mailbox-read` and the monitor keep an index they had to rebuild (`keep=True`).

History without an index (a mailbox the TypeScript tool wrote, omp's first write to one) is read
without parsing what cannot matter: a line in the shape both writers produce (keys in their
order, with or without spaces after `:` and `,` as other JSON writers put them) is classified
from its bytes (`_line_re`), a receipt entirely so (its shape proves it is valid JSON), a message
by its type and id only; the JSON of a message is parsed only if no receipt follows it, i.e. for
the few that stay unread. Any other line (other key orders, other types, damage) is parsed as
before. A message line that a receipt covers is counted without being parsed: such a line was
read whole by whoever wrote the receipt. A block in which every line has that shape is read with
one `findall` (no match objects); 100,000 messages: ~0.1 s instead of ~0.9 s parsed, compact or
spaced. A small tail (what a writer reads past its index) is simply parsed. A caller that needs
only the unread count (`status`) counts such a history without rebuilding it: `omp.mail.unread`.
"""

from __future__ import annotations

import json
import os
from itertools import accumulate

from omp import clock, ids
from omp.errors import OmpError
from omp.store import fs, jsonl, locks, project_config
from omp.store.names import LEADER

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Iterator
    from typing import Any

    from omp.mail.stored import StoredMailbox

    # re-exported: what a send's check is and sees (omp.mail.limits, events, monitor budget)
    from omp.store.backend import Check as Check
    from omp.store.backend import View as View
    from omp.store.layout import TeamFiles
    from omp.store.paths import TeamPaths

INDEX_VERSION = 1
_PROBE = 32  # bytes before the index offset that must still match: catches a replaced file
KEEP_AFTER = 64 * 1024  # a read that parsed more than this past the index keeps what it learned

SMALL = 16 * 1024  # a tail this short is parsed: no pattern to compile (the per-call paths)


def _shape(*, blanks: bool = True, after_newline: bool = False) -> bytes:
    """One whole line as omp and the TypeScript tool write it (or, with `blanks`, another JSON
    writer, with blanks between the tokens): a message (group 1: its id) or a receipt (group 2:
    the message id). Ids and times of a plain alphabet, so what the bytes say is what the JSON
    says; the receipt's whole line is matched, so it is valid JSON too.

    `after_newline`: the line with the newline before it and without its own, for `findall`
    over a block with a newline put in front: the pattern then starts with a plain character,
    which the engine searches for much faster than a line start."""
    w = rb"[ \t]*" if blanks else b""

    def key(name: bytes) -> bytes:
        return rb'"' + name + rb'"' + w + rb":" + w

    ident = rb'"([0-9A-Za-z_-]{1,128})"'
    start = rb"\n\{" if after_newline else rb"(?m)^\{"
    return (
        start + w + key(b"type") + rb'"(?:message"' + w + rb"," + w + key(b"id") + ident
        + rb"[^\n]*\}|delivery-receipt\"" + w + rb"," + w + key(b"messageId") + ident + w
        + rb"," + w + key(b"deliveredAt") + rb'"[0-9A-Za-z:.+-]{0,64}"' + w + rb"\})[ \t\r]*"
        + (rb"(?=\n)" if after_newline else rb"\n")
    )  # fmt: skip


_LINE: list[re.Pattern[bytes]] = []  # compiled on first use: the per-call paths never need them


def _line_re() -> re.Pattern[bytes]:
    """Any line of the usual shape, from its start to its newline (`finditer`)."""
    _compile()
    return _LINE[0]


def _block_res() -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """(compact lines, lines with blanks) after a newline: `findall` over a whole block."""
    _compile()
    return _LINE[1], _LINE[2]


def _compile() -> None:
    if not _LINE:
        import re  # compiled here: a send never reads a whole block, and needs none of them

        _LINE.append(re.compile(_shape()))
        _LINE.append(re.compile(_shape(blanks=False, after_newline=True)))
        _LINE.append(re.compile(_shape(after_newline=True)))


class MailState:
    """What the mailbox holds up to `offset`: counts and the undelivered messages' places."""

    __slots__ = (
        "_fed",
        "_known",
        "_receipts",
        "_superseded",
        "bad",
        "ino",
        "messages",
        "offset",
        "probe",
        "undelivered",
    )

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
        # What a catch-up (`feed`) found, not yet folded in: message id -> (offset, length) of
        # the lines it saw (read from their bytes or parsed), and receipts for messages it did
        # not see (they came before it: in the index). `settle` folds both into `undelivered`.
        self._fed: dict[bytes, tuple[int, int]] = {}
        self._receipts: list[bytes] = []
        self._superseded: list[tuple[int, int]] = []  # lines whose id came again: still counted
        self._known: set[bytes] | None = None  # ids of `undelivered` as the catch-up began

    def apply(self, chunk: jsonl.Chunk) -> None:
        """Fold parsed lines into the catch-up (`settle` folds it into the state)."""
        self.bad += chunk.bad
        fed = self._fed
        known = self._known_ids()
        for off, length, rec in chunk.records:
            kind = rec.get("type")
            if kind == "message" and isinstance(rec.get("id"), str):
                self.messages += 1
                old = fed.get(key := _key(rec["id"]))
                if old is not None:
                    self._superseded.append(old)
                elif key in known:  # the id came again: this line is where it now is
                    known.discard(key)
                    del self.undelivered[rec["id"]]
                fed[key] = (off, length)
            elif kind == "delivery-receipt":
                mid = rec.get("messageId")
                if isinstance(mid, str) and fed.pop(_key(mid), None) is None:
                    self._receipts.append(_key(mid))
        self.offset = chunk.end

    def feed(self, data: bytes, base: int) -> None:
        """Fold complete lines (`data` starts at file offset `base`), parsing only what matters:
        lines of the usual shape are read from their bytes (see the module docstring); the lines
        between them go through the JSON parser. Call `settle` before using the state."""
        if len(data) < SMALL:
            self._parse(data, base)
            return
        lines = data.count(b"\n")
        for pattern in _block_res():  # compact lines, the usual; else spaced ones
            found: list[tuple[bytes, bytes]] = pattern.findall(b"\n" + data)
            if len(found) == lines:  # every line has that shape
                self._feed_lines(data, base, found)
                break
        else:
            self._feed_mixed(data, base, _line_re())
        self.offset = base + len(data)

    def _feed_lines(self, data: bytes, base: int, found: list[tuple[bytes, bytes]]) -> None:
        """`feed` for a block whose lines all have the usual shape: `found[i]` is line `i`'s
        (message id, receipt id). Places are kept as line numbers until a message stays."""
        fed = self._fed
        receipts = self._receipts
        known = self._known_ids()
        here: dict[bytes, int] = {}  # message id -> its line, for lines of this block
        superseded: list[int] = []
        count = 0
        for line, (mid, rid) in enumerate(found):
            if mid:
                count += 1
                if mid in here:
                    superseded.append(here[mid])
                elif fed and mid in fed:  # seen in an earlier block
                    self._superseded.append(fed.pop(mid))
                elif known and mid in known:
                    known.discard(mid)
                    del self.undelivered[mid.decode()]
                here[mid] = line
            elif here.pop(rid, None) is None and (not fed or fed.pop(rid, None) is None):
                receipts.append(rid)
        self.messages += count
        if here or superseded:
            place = _places(data, base, len(found), min([*here.values(), *superseded]))
            self._superseded += [place(n) for n in superseded]
            fed.update((mid, place(n)) for mid, n in here.items())

    def _feed_mixed(self, data: bytes, base: int, pattern: re.Pattern[bytes]) -> None:
        """`feed` for a block with lines of other shapes: those go through the JSON parser."""
        fed = self._fed
        receipts = self._receipts
        known = self._known_ids()
        pos = 0
        count = 0
        for m in pattern.finditer(data):
            start, end = m.span()
            if start > pos:
                self._parse(data[pos:start], base + pos)
            mid, rid = m.group(1, 2)
            if mid is not None:
                old = fed.get(mid)
                if old is not None:
                    self._superseded.append(old)
                elif mid in known:
                    known.discard(mid)
                    del self.undelivered[mid.decode()]
                fed[mid] = (base + start, end - start)
                count += 1
            elif fed.pop(rid, None) is None:
                receipts.append(rid)
            pos = end
        if pos < len(data):
            self._parse(data[pos:], base + pos)
        self.messages += count

    def _known_ids(self) -> set[bytes]:
        if self._known is None:
            self._known = {_key(k) for k in self.undelivered}
        return self._known

    def _parse(self, data: bytes, base: int) -> None:
        chunk = jsonl.Chunk(start=base)
        jsonl.parse_lines(data, base, chunk)
        self.apply(chunk)

    def settle(self, fd: int) -> None:
        """Fold in what `feed` read from bytes, parsing the messages that stay undelivered: a line
        that is not the JSON message its bytes promised is counted as what it is."""
        for rid in self._receipts:
            self.undelivered.pop(rid.decode("utf-8", "surrogatepass"), None)
        self._receipts = []
        for off, length in self._superseded:  # counted as messages, never looked at again
            rec = _loads(os.pread(fd, length, off))
            if rec is None:
                self.bad += 1
            if rec is None or not _is_message(rec):
                self.messages -= 1
        self._superseded = []
        self._known = None
        fed = sorted(self._fed.values())
        self._fed = {}
        for off, length in fed:
            rec = _loads(os.pread(fd, length, off))
            if rec is None:
                self.messages -= 1
                self.bad += 1
            elif not _is_message(rec):
                self.messages -= 1
            else:
                self.undelivered[rec["id"]] = (off, length)

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
            und = {str(k): (_count(o), _count(n)) for k, o, n in obj["undelivered"]}
            probe = obj["probe"]
            if not isinstance(probe, str):
                return None
            return cls(
                offset=_count(obj["offset"]),
                ino=_count(obj["ino"]),
                probe=probe,
                messages=_count(obj["messages"]),
                bad=_count(obj["bad"]),
                undelivered=und,
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None  # a damaged index: rebuilt from the mailbox, which is the truth


def _count(value: Any) -> int:
    """A non-negative integer of the index, else ValueError (the index is then rebuilt)."""
    if type(value) is not int or value < 0:
        raise ValueError(value)
    return value


class Mailbox:
    """One recipient's mailbox file and its index (paths as strings: the per-call layer)."""

    def __init__(self, team: TeamPaths | TeamFiles, recipient: str) -> None:
        self.team = team.files
        self.recipient = recipient
        self.path = self.team.mailbox(recipient)
        self.index_path = self.team.mailbox_index(recipient)
        # A project whose mail is in a store (`omp.store.select`): every public method below
        # hands over to it; the files are the default and then nothing more is imported.
        self.stored: StoredMailbox | None = None
        if project_config.store_selected(self.team.project):
            from omp.mail.stored import StoredMailbox

            self.stored = StoredMailbox(self.team, recipient)

    # ---- reading (no writes) -------------------------------------------------------------

    def _exists(self) -> bool:
        return self.team.project.check(self.team.mailbox_dir) and fs.check_entry(
            self.path, want_dir=False
        )

    def _fd_state(self, fd: int) -> MailState:
        """The index if it still describes this file, else an empty state (full rescan)."""
        st = os.fstat(fd)
        state = MailState.from_json(self._read_index()) if self._index_ok() else None
        if (
            state is None
            or state.ino != st.st_ino
            or state.offset > st.st_size
            or _probe(fd, state.offset) != state.probe
        ):
            state = MailState()
        state.ino = st.st_ino
        return state

    def _read_index(self) -> Any:
        """The index as stored; None when it is damaged: it is a cache of the mailbox (the
        truth), rebuilt by a full scan, so a damaged one costs time, never a refusal."""
        try:
            return fs.read_json(self.index_path)
        except OmpError as exc:
            if exc.code != "corrupt_state":
                raise
            return None

    def _index_ok(self) -> bool:
        try:
            return fs.check_entry(self.index_path, want_dir=False)
        except OmpError:
            return False  # an unsafe index is ignored (and replaced by the next writer)

    def _current(self, fd: int) -> MailState:
        """State caught up to the end of the file (the tail past the index, streamed)."""
        state = self._fd_state(fd)
        _catch_up(fd, state)
        return state

    def undelivered(self, *, keep: bool = False) -> tuple[list[dict[str, Any]], int]:
        """Undelivered messages, oldest first, and the count of lines that did not parse.

        `keep`: a caller that is not a promised read-only command lets a read that had to parse
        much of the file (no index, or one far behind) save the index it rebuilt.
        """
        if self.stored is not None:
            return self.stored.undelivered()
        if not self._exists():
            return [], 0
        fd = fs.open_file(self.path, os.O_RDONLY)
        try:
            state = self._fd_state(fd)
            start = state.offset
            _catch_up(fd, state)
            if keep and state.offset - start > KEEP_AFTER:
                self._keep(fd, state)
            msgs = _read_at(fd, sorted(state.undelivered.values()))
        finally:
            os.close(fd)
        return msgs, state.bad

    def _keep(self, fd: int, state: MailState) -> None:
        """Save a rebuilt index if the mailbox's lock is free right now (a writer holding it
        saves its own); never waits, and leaves a tampered index exactly as it is."""
        try:
            if not locks.acquire(fd, False):
                return
        except OSError:
            return
        try:
            if self._index_ok() or not os.path.lexists(self.index_path):
                _catch_up(fd, state)  # what a writer appended before we took the lock
                self._save(fd, state)
        finally:
            locks.release(fd)

    def keep_index(self) -> bool:
        """For a writer that runs anyway (the monitor's scan): catch the index up if the file
        holds more than `KEEP_AFTER` bytes past it, and save it when the lock is free (never
        waits). True if it read that much."""
        if self.stored is not None:
            return False  # a store keeps its own index
        if not self._exists():
            return False
        fd = fs.open_file(self.path, os.O_RDONLY)
        try:
            state = self._fd_state(fd)
            if os.fstat(fd).st_size - state.offset <= KEEP_AFTER:
                return False
            _catch_up(fd, state)
            self._keep(fd, state)
            return True
        finally:
            os.close(fd)

    def unread_count(self) -> int:
        """How many messages are unread. With no usable index, a long history is counted from
        its bytes (`omp.mail.unread`: exact, or not sure and then rebuilt as usual); read-only
        either way."""
        if self.stored is not None:
            return self.stored.unread_count()
        if not self._exists():
            return 0
        fd = fs.open_file(self.path, os.O_RDONLY)
        try:
            state = self._fd_state(fd)
            if state.offset == 0 and os.fstat(fd).st_size > SMALL:
                from omp.mail import unread

                counted = unread.count(fd)
                if counted is not None:
                    return counted
            _catch_up(fd, state)
        finally:
            os.close(fd)
        return len(state.undelivered)

    def listing(
        self, *, undelivered_only: bool, limit: int
    ) -> tuple[list[dict[str, Any]], int, int]:
        """(the newest `limit` messages oldest first, how many were left out, bad line count)."""
        if self.stored is not None:
            return self.stored.listing(undelivered_only=undelivered_only, limit=limit)
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
        if self.stored is not None:
            unread = self.stored.append_messages(records, check)
        else:
            self.team.ensure_in(self.team.mailbox_dir)
            with self._writing(create=True) as fd:
                state = self._current(fd)
                if check is not None:
                    check(FileView(fd, state))
                data = b"".join(jsonl.encode(r) for r in records)
                self._append(fd, state, data)
                unread = len(state.undelivered)
        if any(LEADER in (r.get("from"), r.get("to")) for r in records):
            from omp.record import history  # the leader's side of it, for `omp team events`

            history.messages(self.team, records)
        return unread

    def mark(self, message_ids: list[str]) -> dict[str, str | None]:
        """Append receipts for those ids still undelivered.

        Returns id -> deliveredAt for each id handled now, or None for an id that was already
        delivered. An id the mailbox never held raises `message_not_found` and writes nothing.
        """
        if self.stored is not None:
            return self.stored.mark(message_ids)
        self.team.verify()  # a team deleted meanwhile is no "message not found"
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
        _catch_up(fd, state)
        self._save(fd, state)

    def _writing(self, *, create: bool) -> _Writing:
        """The mailbox's lock, held on the file that is this team's mailbox right now.

        Refused (nothing written) if its index was tampered with: a symlinked or widened index is
        left exactly as it is found, like any unsafe path. Refused with `unknown_team` if the team
        was deleted (or deleted and made again) since this call loaded it: `omp team delete`
        renames the team away and then takes every mailbox's lock before it counts what is lost,
        so a writer that checks here, under the lock, either lands before that count (and is
        counted) or finds the team gone. Never "sent" into a directory nobody will read.
        """
        fs.check_entry(self.index_path, want_dir=False)
        return _Writing(self, create)

    def _in_place(self, fd: int) -> bool:
        """Is `fd` still the file at this mailbox's path, in the team this call loaded?"""
        self.team.verify()
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)

    def _save(self, fd: int, state: MailState) -> None:
        state.probe = _probe(fd, state.offset)
        try:
            fs.write_json_atomic(self.index_path, state.to_json(), pretty=False)
        except (OSError, OmpError):
            pass  # the index is a cache: the next reader rescans; the message itself is safe


class FileView:
    """The mailbox file as a send's check sees it under the lock (see `Mailbox.append_messages`)."""

    __slots__ = ("_fd", "_state")

    def __init__(self, fd: int, state: MailState) -> None:
        self._fd, self._state = fd, state

    @property
    def unread(self) -> int:
        return len(self._state.undelivered)

    def recent(self, since: float) -> list[dict[str, Any]]:
        return recent_messages(self._fd, self._state.offset, since)

    def holds(self, message_id: str) -> bool:
        return message_id in self._state.undelivered or bool(_ids_in(self._fd, {message_id}))


class _Writing:
    """`Mailbox._writing`'s lock: the mailbox open O_APPEND under its exclusive flock, checked
    once held (the index untouched, the file still the team's mailbox). (A class rather than a
    `contextlib` generator: see `omp.store.locks`.)"""

    __slots__ = ("_box", "_create", "_fd")

    def __init__(self, box: Mailbox, create: bool) -> None:
        self._box, self._create, self._fd = box, create, -1

    def __enter__(self) -> int:
        box = self._box
        for _ in range(3):
            box.team.verify()  # before the open, which may create the file: not in a new team
            try:
                fd = fs.open_file(box.path, os.O_RDWR | os.O_APPEND, create=self._create)
            except OSError as exc:
                box.team.verify()  # a team deleted meanwhile says so, not a storage error
                raise fs.storage_error(box.path, exc) from exc
            try:
                locks.acquire(fd)
                fs.check_entry(box.index_path, want_dir=False)  # again, now that we hold it
                if box._in_place(fd):
                    self._fd = fd
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # releases the flock
            # the file was moved away (a relaunch archives the leader's mail): open it again
        raise OmpError("storage_error", f"{box.path} kept being replaced; nothing was written")

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # closing the last descriptor releases the flock


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


def _places(data: bytes, base: int, lines: int, first: int) -> Callable[[int], tuple[int, int]]:
    """(offset, length) of line `n` of `data` (`lines` complete lines), for lines `first` and on:
    counted back from the end when they are the last few (a message whose receipt is in the
    next block, the usual case), else from every line's length."""
    if lines - first <= 64:
        starts = [len(data)]
        for _ in range(lines - first):
            starts.append(data.rfind(b"\n", 0, starts[-1] - 1) + 1)
        starts.reverse()  # starts[k]: where line first + k starts; the last, the end

        def back(n: int) -> tuple[int, int]:
            k = n - first
            return base + starts[k], starts[k + 1] - starts[k]

        return back
    ends = list(accumulate(map(len, data.split(b"\n"))))

    def forth(n: int) -> tuple[int, int]:
        start = (ends[n - 1] if n else 0) + n  # the n lines before it, and their newlines
        return base + start, ends[n] - start + n + 1

    return forth


def _key(message_id: str) -> bytes:
    """A message id as `MailState.feed` keys it (the bytes of a plain id as written)."""
    return message_id.encode("utf-8", "surrogatepass")


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
        rec = _loads(raw)
        if rec is not None:
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
        return clock.at_or_after(rec.get("timestamp", ""), since) is not False

    return [r for r in _scan_back(fd, end, want) if _is_message(r)]


def _loads(raw: bytes) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    try:
        rec = jsonl.loads_line(raw.strip())  # as strictly as every reader of a line
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def merge_receipt(msg: dict[str, Any], delivered: dict[str, str]) -> dict[str, Any]:
    at = delivered.get(msg["id"])
    if at:
        msg = {**msg, "deliveredAt": at}
    return msg


SCAN_BLOCK = 1 << 20


def _blocks(fd: int, offset: int) -> Iterator[tuple[int, bytes]]:
    """(offset, complete lines) from `offset` to the end, a block at a time: memory stays bounded
    even when a mailbox with no usable index (one the TypeScript tool wrote) is read in full."""
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
        yield offset, data[:cut] if cut < len(data) else data
        offset += cut
        block = SCAN_BLOCK


def _catch_up(fd: int, state: MailState) -> None:
    """Fold the lines past `state.offset` into `state`, up to the end of the file."""
    for base, data in _blocks(fd, state.offset):
        state.feed(data, base)
    state.settle(fd)
    state.probe = _probe(fd, state.offset)


def _ids_in(fd: int, wanted: set[str]) -> set[str]:
    """Which of `wanted` appear as message ids anywhere in the file (a full scan: rare path).

    Only lines holding one of the ids, as a JSON string, are parsed: a block that holds none of
    them costs one byte search per id.
    """
    keys = {m: json.dumps(m, ensure_ascii=False).encode() for m in wanted}
    # an id with escapes or beyond ASCII may be spelled otherwise by another writer: parse all
    plain = all(k.isascii() and b"\\" not in k for k in keys.values())
    found: set[str] = set()
    for _, data in _blocks(fd, 0):
        lines: list[bytes] = [] if plain else data.split(b"\n")
        for key in keys.values() if plain else ():
            at = data.find(key)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)  # a block holds complete lines only
                lines.append(data[start:end])
                at = data.find(key, end)
        for raw in lines:
            rec = _loads(raw)
            if rec is not None and _is_message(rec) and rec["id"] in keys:
                found.add(rec["id"])
        if len(found) == len(keys):
            break
    return found
