"""The current reply from Copilot's `events.jsonl`, which lags behind its stop hook.

Copilot's stop payload carries no reply text, and when the hook starts the transcript may still
end at the previous stop (seen live on 1.0.102 in `-p` mode; on time in the TUI once). Every hook
fired for a stop is recorded there as a `hook.start` line whose `data.input` repeats the hook's
stdin, `timestamp` included. So: poll the file (bounded) until the `hook.start` of *this* stop
appears; the last `assistant.message` before it is the current reply. Anything unexpected (no
file, no such line in time, bad lines) gives None, never an error.

The path comes from stdin, so it may name anything: a device that never ends (`/dev/zero`), a
FIFO, a file of a terabyte, a link to one of them. `read_tail` is the one reader: it reads a
regular file only (checked by `lstat` before the open and by `fstat` on the descriptor, opened
with `O_NOFOLLOW | O_NONBLOCK`, so neither a link nor a FIFO is ever followed or waited on), and
only its last `TAIL_BYTES` as they were when it was opened. The wait is capped by `MAX_WAIT_MS`,
inside the hook's own time budget (omp/cli/hook_stop.py).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Mapping
from typing import Any

from omp.stophook.payloads import epoch_ms
from omp.store.strictjson import nests_deeper

TAIL_BYTES = 1 << 20
DEFAULT_WAIT_MS = 2000
MAX_WAIT_MS = 15_000  # below the hook's budget (run.BUDGET_S), itself below the CLIs' 30 s


class Unreadable(Exception):
    """The transcript is there but will never be read: not a regular file, or not ours to read."""


def wait_ms(env: Mapping[str, str]) -> int:
    raw = env.get("OMP_HOOK_TRANSCRIPT_WAIT_MS", "").strip()
    if not (raw.isascii() and raw.isdigit()):
        return DEFAULT_WAIT_MS
    return min(int(raw[:9]), MAX_WAIT_MS)


_KINDS = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_tail(path: str, limit: int = TAIL_BYTES) -> bytes:
    """The last `limit` bytes of the regular file at `path`, as it was when opened.

    FileNotFoundError when there is no such file (it may still appear); `Unreadable` when there
    is one that must not be read (anything but a regular file, a link included) or cannot be.
    Never blocks on a FIFO, never follows a link, never reads more than `limit` bytes.
    """
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise Unreadable(f"cannot look at it: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(before.st_mode):
        raise Unreadable(_kind(before.st_mode))
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Unreadable(f"cannot open it: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise Unreadable("it was replaced while being opened")
        start = max(0, st.st_size - limit)
        want = st.st_size - start
        chunks: list[bytes] = []
        got = 0
        while got < want:
            chunk = os.pread(fd, min(want - got, 1 << 20), start + got)
            if not chunk:  # truncated meanwhile
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if start > 0:  # the first line is probably cut
        data = data[data.find(b"\n") + 1 :]
    return data


def _full(path: str, cwd: str | None) -> str:
    full = os.path.expanduser(path)
    return os.path.join(cwd, full) if not os.path.isabs(full) and cwd else full


def _event(line: bytes) -> dict[str, Any] | None:
    if nests_deeper(line):  # never handed to the parser, which recurses per level
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _text(event: dict[str, Any]) -> str:
    data = event.get("data")
    content = data.get("content") if isinstance(data, dict) else None
    return content if isinstance(content, str) else ""


def reply_before_stop(data: bytes, stop_ms: int) -> str | None:
    """The reply before this stop's `hook.start` in `data` (JSONL), or None if it is not there."""
    lines = data.split(b"\n")
    at = None
    for i in range(len(lines) - 1, -1, -1):
        if b'"hook.start"' not in lines[i]:
            continue
        ev = _event(lines[i])
        if not ev or ev.get("type") != "hook.start":
            continue
        d = ev.get("data")
        inp = d.get("input") if isinstance(d, dict) else None
        if isinstance(inp, dict) and epoch_ms(inp.get("timestamp")) == stop_ms:
            at = i  # keep looking back: the first hook.start of this stop (two entries fire)
        elif at is not None:
            break
    if at is None:
        return None
    for j in range(at - 1, -1, -1):
        if b'"assistant.message"' not in lines[j]:
            continue
        ev = _event(lines[j])
        if not ev or ev.get("type") != "assistant.message":
            continue
        return _joined(lines[:j], ev)
    return ""  # this stop is recorded, with no reply before it


def _joined(before: list[bytes], last: dict[str, Any]) -> str:
    """A reply split into chunks (`chunkIndex`/`chunkCount`), put back together."""
    d = last.get("data")
    if not isinstance(d, dict) or not isinstance(d.get("chunkCount"), int) or d["chunkCount"] < 2:
        return _text(last)
    mid = d.get("messageId")
    parts = {d.get("chunkIndex"): _text(last)}
    for line in reversed(before[-4 * d["chunkCount"] :]):
        if b'"assistant.message"' not in line:
            continue
        ev = _event(line)
        ed = ev.get("data") if ev else None
        if isinstance(ed, dict) and ed.get("messageId") == mid:
            parts.setdefault(ed.get("chunkIndex"), _text(ev or {}))
    keys = sorted(k for k in parts if isinstance(k, int))
    return "".join(parts[k] for k in keys) if keys else _text(last)


def copilot_reply(
    path: str | None,
    stop_ms: int | None,
    *,
    cwd: str | None = None,
    wait: int = DEFAULT_WAIT_MS,
    sleep: Any = time.sleep,
    monotonic: Any = time.monotonic,
    why: list[str] | None = None,
) -> str | None:
    """Poll the transcript up to `wait` ms for this stop; its reply, or None if never seen.

    A transcript that can never be read ends the wait at once; why is appended to `why`."""
    if not path or stop_ms is None:
        return None
    full = _full(path, cwd)
    deadline = monotonic() + min(wait, MAX_WAIT_MS) / 1000
    pause = 0.005
    while True:
        try:
            found = reply_before_stop(read_tail(full), stop_ms)
        except FileNotFoundError:
            found = None
        except Unreadable as exc:
            if why is not None:
                why.append(f"{full}: {exc}")
            return None
        if found is not None:
            return found
        if monotonic() >= deadline:
            return None
        sleep(pause)
        pause = min(pause * 2, 0.05)


def claude_reply(
    path: str | None, *, cwd: str | None = None, why: list[str] | None = None
) -> str | None:
    """The last assistant text in a Claude Code transcript (JSONL), for a Claude Code older than
    2.1.47, whose payload has no `last_assistant_message`. That transcript can lag one turn: a
    stale reply only makes the loop go one more step, never end early (it had no word)."""
    if not path:
        return None
    full = _full(path, cwd)
    try:
        data = read_tail(full)
    except FileNotFoundError:
        return None
    except Unreadable as exc:
        if why is not None:
            why.append(f"{full}: {exc}")
        return None
    for line in reversed(data.split(b"\n")):
        if b'"assistant"' not in line:
            continue
        ev = _event(line)
        msg = ev.get("message") if ev and ev.get("type") == "assistant" else None
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [
                str(p.get("text"))
                for p in content
                if isinstance(p, dict)
                and p.get("type") == "text"
                and isinstance(p.get("text"), str)
            ]
            if texts:
                return "\n".join(texts)
    return None
