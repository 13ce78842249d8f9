"""Locks: the one helper for every exclusive flock and every exclusive create.

A flock is taken with a `wait`: `True` waits as long as it takes, `False` tries once, a number
of seconds tries until then (polling, so a timeout needs no signal or thread). It dies with the
process, so a crashed holder never leaves it taken; closing the descriptor releases it.

An exclusive create puts a file where nothing is (`O_EXCL`), or tells that something was there.
With `whole=True` the file is written beside its place first and hard-linked into it, so nobody
ever reads it half-written.

Standard library only, and cheap to import: it is on the `omp team api` path.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time

from omp.store import fs

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from omp.store.tree import StrPath

_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
POLL = 0.005


def acquire(fd: int, wait: bool | float = True, *, poll: float = POLL) -> bool:
    """Take the exclusive flock on `fd`; whether it was taken (always, when `wait` is True)."""
    if wait is True:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + (0.0 if wait is False else float(wait))
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in _BUSY:
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)


def release(fd: int) -> None:
    """Drop the flock on a descriptor that stays open."""
    fcntl.flock(fd, fcntl.LOCK_UN)


# The context managers below are classes, not `contextlib.contextmanager` generators: the
# `omp team api` path takes locks on every call, and importing `contextlib` costs ~2 ms.


class holding:
    """The flock on an open descriptor for the block (released after, the descriptor kept);
    gives whether it was taken."""

    __slots__ = ("_fd", "_poll", "_taken", "_wait")

    def __init__(self, fd: int, wait: bool | float = True, *, poll: float = POLL) -> None:
        self._fd, self._wait, self._poll, self._taken = fd, wait, poll, False

    def __enter__(self) -> bool:
        self._taken = acquire(self._fd, self._wait, poll=self._poll)
        return self._taken

    def __exit__(self, *exc: object) -> None:
        if self._taken:
            release(self._fd)


class flocked:
    """The flock on a private lock file (created if missing) for the block; gives whether it
    was taken (always, when `wait` is True)."""

    __slots__ = ("_fd", "_path", "_poll", "_wait")

    def __init__(self, path: StrPath, wait: bool | float = True, *, poll: float = POLL) -> None:
        self._path, self._wait, self._poll, self._fd = path, wait, poll, -1

    def __enter__(self) -> bool:
        self._fd = fs.open_file(self._path, os.O_RDWR, create=True)
        try:
            return acquire(self._fd, self._wait, poll=self._poll)
        except BaseException:
            os.close(self._fd)
            raise

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # closing the last descriptor releases the flock


def create_exclusive(path: StrPath, data: bytes, *, whole: bool = False) -> bool:
    """Create `path` holding `data` only if nothing is there: False if something was.

    `whole`: write a complete file beside it and hard-link it into place, so no reader ever
    sees it half-written. A failed write leaves nothing behind (`storage_error`).
    """
    where, name = os.path.split(os.fspath(path))
    target = os.path.join(where, f".{name}.{os.urandom(6).hex()}.new") if whole else path
    try:
        fd = fs.open_file(target, os.O_WRONLY | os.O_EXCL, create=True)
    except FileExistsError:
        if whole:
            raise
        return False
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as exc:
        _unlink_quietly(target)
        raise fs.storage_error(path, exc) from exc
    if not whole:
        return True
    try:
        os.link(target, path)  # fails if `path` exists: exclusive, and never half-written
        return True
    except FileExistsError:
        return False
    finally:
        _unlink_quietly(target)


def _unlink_quietly(path: StrPath) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
