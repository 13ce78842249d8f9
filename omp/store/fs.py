"""Private, fail-closed file access.

Directories are 0700 and files 0600.
A symlinked or foreign-owned path under the state tree is refused with `unsafe_path` and never
followed or repaired: omp state may sit in a shared checkout, and a planted symlink must not turn
an append into a write somewhere else.

Permissions are checked on every access, not only at creation. Inside a `.omp/state` tree (the
`state` directory included) a directory or file that other users may write is refused: omp
creates 0700/0600, so a write bit for others means someone widened it, and another user could
then edit mail or plant entries behind the reader's back. A group write bit is judged like
OpenSSH's StrictModes: safe when the group has no member but the owner (a user-private group, the
default with umask 002, under which the TypeScript tool creates `mailbox/` 0775), else refused
with the entry and the `chmod` that fixes it. Nothing is chmod-repaired.
Read bits alone are accepted: the TypeScript tool writes the same files 0644/0755, and both tools
must read each other's state. Outside the state tree (`.omp` itself, `.omp/config.toml`, files of
callers elsewhere) a person or git made the entry, often group-writable under umask 002: only
symlinks, foreign owners and the wrong kind of entry are refused there.
"""

from __future__ import annotations

import errno
import json
import os
import stat

from omp.errors import OmpError
from omp.store import strictjson
from omp.store.tree import GITIGNORE, OMP_DIR, STATE_DIR, below, in_state_tree

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from omp.store.tree import StrPath

    P = TypeVar("P", bound=StrPath)

DIR_MODE = 0o700
FILE_MODE = 0o600
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# A FIFO planted where a file belongs would block a read-only open until a writer came; with
# O_NONBLOCK the open returns and the fstat check refuses it. No effect on regular files.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def _unsafe(path: StrPath, why: str) -> OmpError:
    return OmpError("unsafe_path", f"refusing {path}: {why}", path=str(path))


def storage_error(path: StrPath, exc: OSError) -> OmpError:
    reason = exc.strerror or str(exc)
    return OmpError("storage_error", f"cannot write {path}: {reason}", path=str(path))


def _check_stat(path: StrPath, st: os.stat_result, *, want_dir: bool) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise _unsafe(path, "it is a symlink")
    if st.st_uid != os.geteuid():
        raise _unsafe(path, f"it is owned by uid {st.st_uid}, not by you")
    if want_dir and not stat.S_ISDIR(st.st_mode):
        raise _unsafe(path, "it is not a directory")
    if not want_dir and not stat.S_ISREG(st.st_mode):
        raise _unsafe(path, "it is not a regular file")
    if (
        st.st_mode & _WRITABLE_BY_OTHERS
        and in_state_tree(path)
        and (st.st_mode & stat.S_IWOTH or not private_group(st.st_gid, st.st_uid))
    ):
        raise _unsafe(path, _widened(path, st))


def _widened(path: StrPath, st: os.stat_result) -> str:
    """Why a widened entry is refused, naming who could write it and the chmod that fixes it."""
    import shlex

    group_bad = bool(st.st_mode & stat.S_IWGRP) and not private_group(st.st_gid, st.st_uid)
    fix = ",".join(f for f, bad in (("g-w", group_bad), ("o-w", st.st_mode & stat.S_IWOTH)) if bad)
    who = (
        "every user"
        if st.st_mode & stat.S_IWOTH
        else f"the other members of group {_group_name(st.st_gid)}"
    )
    return (
        f"its mode {stat.S_IMODE(st.st_mode):04o} lets {who} write it, so someone else could "
        "edit omp's state behind your back; omp never repairs modes: if that is not meant, run: "
        f"chmod {fix} {shlex.quote(str(path))}"
    )


def _group_name(gid: int) -> str:
    try:
        import grp

        return f"{grp.getgrgid(gid).gr_name} ({gid})"
    except (ImportError, KeyError):
        return str(gid)


_PRIVATE_GROUPS: dict[tuple[int, int], bool] = {}


def private_group(gid: int, uid: int) -> bool:
    """Does group `gid` have no member but user `uid`? OpenSSH's StrictModes rule (as Debian
    applies it to a user-private group): the group must exist and have exactly one member, the
    owner, whether by primary group (passwd) or by the group's member list. A group-writable
    entry of such a group (the usual default under umask 002, as the TypeScript tool creates
    `mailbox/`) is as private as a 0700 one. Looked up once per process."""
    key = (gid, uid)
    if key not in _PRIVATE_GROUPS:
        _PRIVATE_GROUPS[key] = _lookup_private(gid, uid)
    return _PRIVATE_GROUPS[key]


def _lookup_private(gid: int, uid: int) -> bool:
    try:
        import grp
        import pwd

        group = grp.getgrgid(gid)
        owner = pwd.getpwuid(uid)
        members = 0
        for user in pwd.getpwall():
            if user.pw_gid == gid:
                if user.pw_uid != uid:
                    return False
                members += 1
        extra = [m for m in group.gr_mem]
        if extra:
            if extra != [owner.pw_name]:
                return False
            members += 1
        return members > 0
    except (ImportError, KeyError, OSError):
        return False  # cannot tell: fail closed


def check_entry(path: StrPath, *, want_dir: bool) -> bool:
    """True if `path` exists as a safe entry of the wanted kind, False if it does not exist."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    _check_stat(path, st, want_dir=want_dir)
    return True


def ensure_dir(path: P, *, base: StrPath) -> P:
    """Create `path` (and its parents up to `base`) 0700, refusing symlinks and foreign owners.

    `base` itself (the project root) is trusted as given; every component below it is checked.
    """
    top = os.fspath(base)
    cur = top
    for part in below(path, top):
        parent, cur = cur, os.path.join(cur, part)
        if not check_entry(cur, want_dir=True):
            try:
                os.mkdir(cur, DIR_MODE)
            except FileExistsError:
                pass  # a concurrent creator won the race; the check below judges what it made
            except OSError as exc:
                raise storage_error(cur, exc) from exc
            else:
                # `.omp/.gitignore`, written when omp creates `.omp/` (`*`) or, when the user
                # made `.omp/` first (a `config.toml` written before the first launch, as the
                # docs do), `.omp/state/` (`/state/`: the user's settings there stay visible to
                # git): nothing of omp's then shows in `git status` or is swept into an agent's
                # `git add -A`, and the project's own `.gitignore` is never touched. Swallowed on
                # failure: this runs on every caller's path (an agent's send may be the one that
                # makes the tree), state works without it, and raising would not bring it back
                # (the directory exists now, so no later call writes it); that call's own writes
                # report a full disk themselves.
                if parent == top and part == OMP_DIR:
                    write_gitignore(cur, IGNORE_ALL)
                elif part == STATE_DIR and parent == os.path.join(top, OMP_DIR):  # the user's
                    write_gitignore(parent, IGNORE_STATE)
            check_entry(cur, want_dir=True)
    return path


IGNORE_ALL = b"# omp's state, worktrees and logs: never committed\n*\n"
IGNORE_STATE = b"# omp's state: never committed (the settings beside it are yours)\n/state/\n"


def write_gitignore(directory: StrPath, body: bytes, *, required: bool = False) -> bool:
    """Give `directory` a `.gitignore` holding `body` unless it has one; True when written.

    The one writer of omp's `.gitignore` files: `.omp/.gitignore` (see `ensure_dir`) and that of
    `.omp/worktrees/` (`omp.workspace.create.ensure_worktrees_dir`). Whatever is there already
    (the user's own file, a directory, a symlink) is never touched, never followed. A write that
    fails leaves no file behind, so the next writer starts afresh. The error policy is the
    caller's: by default a failure is swallowed (False), with `required` it is `storage_error`.
    """
    path = os.path.join(directory, GITIGNORE)
    try:  # (no `contextlib.suppress`: contextlib is kept off the per-call path)
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE
        )  # git reads it as the user that runs git: private like all
    except FileExistsError:
        return False
    except OSError as exc:
        if required:
            raise storage_error(path, exc) from exc
        return False
    try:
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as exc:
        try:  # ours (O_EXCL): a partial file would pass for the whole one forever
            os.unlink(path)
        except OSError:
            pass
        if required:
            raise storage_error(path, exc) from exc
        return False
    return True


def open_file(path: StrPath, flags: int, *, create: bool = False) -> int:
    """Open a regular file without following a symlink; refuse foreign owners and open modes.

    The checks run on the opened descriptor (`fstat`), so what is checked is what is used.
    """
    mode = flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, mode, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _unsafe(path, "it is a symlink") from exc
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing with no reader
            raise _unsafe(path, "it is not a regular file") from exc
        raise
    try:
        _check_stat(path, os.fstat(fd), want_dir=False)
        if _NONBLOCK and not flags & _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: StrPath) -> bytes | None:
    """The whole file, or None if it does not exist."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: StrPath) -> Any | None:
    """Parsed JSON, or None if the file is missing. A file that is not JSON omp could have
    written (truncated, not UTF-8, `NaN`, `Infinity`, `1e999`, nested too deeply: see
    `omp.store.strictjson`) is `corrupt_state` naming it: the one door every state file is read
    through, so no reader meets such a value. Readers that fail open (the monitor, the stop
    hook, a cache rebuilt from its log) catch it; the others let it reach the person."""
    data = read_bytes(path)
    if data is None:
        return None
    try:
        return strictjson.loads(data)
    except strictjson.Damaged as exc:
        raise corrupt(path, exc.why) from None


def corrupt(path: StrPath, why: str) -> OmpError:
    """The error for a state file omp cannot trust: names the file and what is wrong. Nothing
    is changed on disk by the refusal; the way out is the person's (fix or remove the file)."""
    return OmpError(
        "corrupt_state",
        f"{path} {why}; omp changed nothing: fix it or move it away",
        file=str(path),
    )


def write_atomic(path: StrPath, data: bytes) -> None:
    """Write via a temp file in the same directory and `os.replace`: readers see old or new."""
    check_entry(path, want_dir=False)
    fd, tmp = _temp_beside(path)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, FILE_MODE)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        _unlink_quietly(tmp)
        raise storage_error(path, exc) from exc


def _temp_beside(path: StrPath) -> tuple[int, str]:
    """A new private temp file next to `path` (what `tempfile.mkstemp` does, without its
    ~8 ms of imports on every `omp team api` call)."""
    for _ in range(16):
        where, name = os.path.split(os.fspath(path))
        tmp = os.path.join(where, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
            return os.open(tmp, flags, FILE_MODE), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise storage_error(path, exc) from exc
    raise storage_error(path, FileExistsError(17, "no free temporary name"))


def write_json_atomic(path: StrPath, obj: Any, *, pretty: bool = True) -> None:
    text = json.dumps(obj, indent=2 if pretty else None, ensure_ascii=False)
    write_atomic(path, (text + "\n").encode())


def _unlink_quietly(path: StrPath) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
