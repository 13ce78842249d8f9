"""The current reply from Copilot's `events.jsonl`, which lags behind its stop hook.

Copilot's stop payload carries no reply text, and when the hook starts the transcript may still
end at the previous stop (seen live on 1.0.102 in `-p` mode; on time in the TUI once). Every hook
fired for a stop is recorded there as a `hook.start` line whose `data.input` repeats the hook's
stdin, `timestamp` included. So: poll the file (bounded) until the `hook.start` of *this* stop
appears; the last `assistant.message` before it is the current reply. Only the file's tail is
read. Anything unexpected (no file, no such line in time, bad lines) gives None, never an error.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from omp.stophook.payloads import epoch_ms

TAIL_BYTES = 1 << 20
DEFAULT_WAIT_MS = 2000


def wait_ms(env: Mapping[str, str]) -> int:
    raw = env.get("OMP_HOOK_TRANSCRIPT_WAIT_MS", "")
    return int(raw) if raw.isdigit() else DEFAULT_WAIT_MS


def _tail(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - TAIL_BYTES)
        os.lseek(fd, start, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    if start > 0:  # the first line is probably cut
        data = data[data.find(b"\n") + 1 :]
    return data


def _event(line: bytes) -> dict[str, Any] | None:
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
) -> str | None:
    """Poll the transcript up to `wait` ms for this stop; its reply, or None if never seen."""
    if not path or stop_ms is None:
        return None
    full = os.path.expanduser(path)
    if not os.path.isabs(full) and cwd:
        full = os.path.join(cwd, full)
    deadline = monotonic() + wait / 1000
    pause = 0.005
    while True:
        data = _tail(full)
        if data is not None:
            found = reply_before_stop(data, stop_ms)
            if found is not None:
                return found
        if monotonic() >= deadline:
            return None
        sleep(pause)
        pause = min(pause * 2, 0.05)


def claude_reply(path: str | None, *, cwd: str | None = None) -> str | None:
    """The last assistant text in a Claude Code transcript (JSONL), for a Claude Code older than
    2.1.47, whose payload has no `last_assistant_message`. That transcript can lag one turn: a
    stale reply only makes the loop go one more step, never end early (it had no word)."""
    if not path:
        return None
    full = os.path.expanduser(path)
    if not os.path.isabs(full) and cwd:
        full = os.path.join(cwd, full)
    data = _tail(full)
    if data is None:
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
