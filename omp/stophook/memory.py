"""What the stop hook keeps between calls, under `.omp/state/hooks/`.

- `decisions-<session>.json`: the last stops this session's hook answered (stop id, when, what
  it printed), so a second fire for the same stop replays the first answer instead of counting
  again. Only for a real session id. `clear` (a loop's start or cancel) removes these files: a
  remembered allow must not swallow a new loop's first stop, nor a remembered block revive a
  cancelled one.
- `session-<session>.json`: the last Gemini `prompt_response` seen, to take only its newest
  part, and how many stops in a row omp has blocked (Copilot CLI and Claude Code ignore the 9th
  block in a row). Kept across start and cancel: an old completion word still in a growing
  response must not end the next loop, and the CLI's count of blocks does not restart with it.
- Both kinds of file expire: one not written for `MAX_AGE_S` (a week) belongs to a session that
  is over, and is removed by `sweep`, run by a hook process's first write of either kind. A
  session id is a new file name: without it the directory would grow by two files a session.
- `lock`: one flock around read-decide-write, so concurrent fires (two registrations run at
  once) are serialised and the second one finds the first's answer.
- `hook.log`: one JSON line per decision and per error; rotated to `hook.log.1` past 1 MiB.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omp.store import fs, jsonl, locks
from omp.store.paths import StatePaths, is_hook_file

LOG_MAX_BYTES = 1 << 20
KEEP_STOPS = 16
LOCK_WAIT_S = 5.0
MAX_AGE_S = 7 * 86400
EXPIRING = ("decisions", "session")


def hooks_dir(paths: StatePaths) -> Path:
    return paths.hooks


def _safe(session: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", session)[:64].strip(".") or "_"
    if name != session:  # different ids must not share a file after cleaning
        name += "-" + hashlib.sha256(session.encode("utf-8", "replace")).hexdigest()[:12]
    return name


def _file(paths: StatePaths, kind: str, session: str) -> Path:
    return paths.hook_file(kind, _safe(session))


def _read(path: Path) -> dict[str, Any]:
    try:
        obj = fs.read_json(path)
    except Exception:  # unsafe or unreadable: as if nothing was remembered
        return {}
    return obj if isinstance(obj, dict) else {}


_SWEPT: set[Path] = set()  # one hook process answers one stop: one sweep of a directory is enough


def _write(paths: StatePaths, path: Path, obj: dict[str, Any]) -> None:
    paths.ensure(path.parent)
    if path.parent not in _SWEPT:
        _SWEPT.add(path.parent)
        sweep(paths)
    fs.write_json_atomic(path, obj, pretty=False)


def sweep(paths: StatePaths, *, now: float | None = None, max_age_s: float = MAX_AGE_S) -> int:
    """Remove the memory files (`EXPIRING` kinds) not written for `max_age_s`; how many went.

    Best effort, and never through a link: an entry is judged by `lstat` and unlinked as itself
    (a symlink planted here goes, what it points at stays). Nothing else in the directory (the
    lock, the log, a file omp did not name) is touched."""
    d = hooks_dir(paths)
    cutoff = (time.time() if now is None else now) - max_age_s
    removed = 0
    try:
        if not paths.check(d):
            return 0
        with os.scandir(d) as entries:
            for entry in entries:
                if not any(is_hook_file(entry.name, kind) for kind in EXPIRING):
                    continue
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode) or st.st_mtime >= cutoff:
                        continue
                    os.unlink(entry.path)
                    removed += 1
    except Exception:
        pass
    return removed


# ---- decisions ----------------------------------------------------------------------------


def recall(
    paths: StatePaths, session: str, stop_id: str, *, now_ms: int, window_ms: int
) -> dict[str, Any] | None:
    """The answer already given to this stop within `window_ms`, or None."""
    stops = _read(_file(paths, "decisions", session)).get("stops")
    for s in stops if isinstance(stops, list) else []:
        if not isinstance(s, dict) or s.get("id") != stop_id:
            continue
        at = s.get("at")
        if isinstance(at, int) and 0 <= now_ms - at < window_ms and isinstance(s.get("out"), dict):
            return dict(s["out"])
    return None


def remember(
    paths: StatePaths, session: str, stop_id: str, out: dict[str, Any], *, now_ms: int
) -> None:
    path = _file(paths, "decisions", session)
    stops = _read(path).get("stops")
    kept = [s for s in (stops if isinstance(stops, list) else []) if isinstance(s, dict)]
    kept = [s for s in kept if s.get("id") != stop_id][-(KEEP_STOPS - 1) :]
    kept.append({"id": stop_id, "at": now_ms, "out": out})
    _write(paths, path, {"stops": kept})


def clear(paths: StatePaths) -> int:
    """Forget every remembered decision (a loop started or was cancelled). Best effort."""
    d = hooks_dir(paths)
    removed = 0
    try:
        if not paths.check(d):
            return 0
        names = os.listdir(d)
    except Exception:
        return 0
    for name in names:
        if is_hook_file(name, "decisions"):
            with contextlib.suppress(OSError):
                os.unlink(d / name)
                removed += 1
    return removed


# ---- per session: Gemini's growing response, blocks in a row ---------------------------------


def session_info(paths: StatePaths, session: str) -> dict[str, Any]:
    return _read(_file(paths, "session", session))


def save_session_info(paths: StatePaths, session: str, **fields: Any) -> None:
    path = _file(paths, "session", session)
    info = _read(path)
    info.update(fields)
    _write(paths, path, info)


# ---- lock and log -------------------------------------------------------------------------


@contextlib.contextmanager
def locked(paths: StatePaths, *, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """The project's hook lock; TimeoutError after `wait_s` (the caller then fails open)."""
    paths.ensure(hooks_dir(paths))
    with locks.flocked(paths.hook_lock, wait_s) as taken:
        if not taken:
            raise TimeoutError("the stop hook's lock is held by another hook")
        yield


def log(paths: StatePaths, record: dict[str, Any]) -> None:
    """Append one line to `hook.log`; rotate past LOG_MAX_BYTES. Raises on an unsafe tree."""
    paths.ensure(hooks_dir(paths))
    path = paths.hook_log
    with contextlib.suppress(OSError):
        if os.lstat(path).st_size > LOG_MAX_BYTES:
            os.replace(path, paths.hook_log_rotated)
    jsonl.append(path, record)
