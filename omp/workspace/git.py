"""The one door to git: a clean environment, one checked and time-bounded runner, `-z` parsing.

Every git call of the package goes through `git()`. It never parses human output: callers ask
for `-z`, `--porcelain` or `rev-parse` forms and split them with `nul_fields`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from omp.errors import OmpError

GIT_TIMEOUT = 60.0  # seconds; a checkout of a big tree or a hook can be slow, a hang is a bug

# What survives of the caller's GIT_* variables (pre-commit's `no_git_env`, its issue #300):
# a hook or a stop hook can run omp with GIT_DIR, GIT_WORK_TREE or GIT_INDEX_FILE set, which
# would point our calls at another repository or index; GIT_CONFIG_PARAMETERS and
# GIT_CONFIG_COUNT/KEY_n/VALUE_n can set core.hooksPath and run a program on our next commit.
# Kept: how git reaches remotes, which config *files* the user chose (GIT_CONFIG_GLOBAL /
# _SYSTEM / _NOSYSTEM, how tests isolate git), and the identity and dates of commits.
KEEP_GIT_VARS = frozenset(
    {
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSL_CAINFO",
        "GIT_SSL_NO_VERIFY",
        "GIT_ASKPASS",
        "GIT_HTTP_PROXY_AUTHMETHOD",
        "GIT_ALLOW_PROTOCOL",
        "GIT_CEILING_DIRECTORIES",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
    }
)


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default `os.environ`) without the GIT_* variables that redirect or reconfigure
    git (all but `KEEP_GIT_VARS`), never prompting, and taking no optional locks: a `git
    status` for a read-only view must not rewrite the index of the checkout it looks at."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if not k.startswith("GIT_") or k in KEEP_GIT_VARS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    return env


class GitResult(NamedTuple):
    rc: int
    out: bytes
    err: bytes

    @property
    def text(self) -> str:
        """stdout as text, the trailing newline removed (for one-line answers)."""
        return os.fsdecode(self.out).rstrip("\n")


def _tail(err: bytes, limit: int = 400) -> str:
    text = err.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def git(
    cwd: str | os.PathLike[str] | None,
    *args: str,
    ok: Sequence[int] = (0,),
    timeout: float = GIT_TIMEOUT,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> GitResult:
    """Run `git ARGS` in `cwd` with `git_env()`; an exit code outside `ok` is `git_failed`.

    `env` adds variables (a reflog message, a test's identity) on top of the clean environment.
    A missing git is `git_not_found`; a call running past `timeout` is killed and is `git_failed`.
    """
    full_env = git_env()
    if env:
        full_env.update(env)
    argv = ["git", *args]
    shown = " ".join(args[:3])
    try:
        # Its own process group: a time limit stops git and whatever it started (a hook, an
        # editor), not git alone.
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            process_group=0,
        )
    except FileNotFoundError as exc:
        if cwd is not None and not os.path.isdir(cwd):
            raise OmpError(
                "git_failed", f"git {shown}: {cwd} is not a directory", command=list(args)
            ) from exc
        raise OmpError("git_not_found", "git is not installed (not on PATH)") from exc
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill(proc)
        raise OmpError(
            "git_failed",
            f"git {shown} did not finish within {timeout:g}s in {cwd}",
            command=list(args),
            timedOut=True,
        ) from exc
    except BaseException:
        _kill(proc)
        raise
    if proc.returncode not in ok:
        why = _tail(err) or f"exit {proc.returncode}"
        raise OmpError(
            "git_failed",
            f"git {shown} failed in {cwd}: {why}",
            command=list(args),
            exit=proc.returncode,
        )
    return GitResult(proc.returncode, out, err)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def nul_fields(data: bytes) -> list[str]:
    """A `-z` listing as paths (file-system decoding: any byte survives), the empty tail dropped."""
    parts = data.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return [os.fsdecode(p) for p in parts]


def version(cwd: str | os.PathLike[str] | None = None) -> tuple[int, ...]:
    """git's version as numbers, e.g. (2, 39, 5). `git --version` is one stable line
    ("git version 2.39.5", vendors append words: ".windows.1", " (Apple Git-143)")."""
    words = git(cwd, "--version").text.split()
    raw = words[2] if len(words) >= 3 else ""
    nums: list[int] = []
    for piece in raw.split("."):
        if not piece.isdigit():
            break
        nums.append(int(piece))
    if not nums:
        raise OmpError("git_failed", f"cannot read git's version from {' '.join(words)!r}")
    return tuple(nums)


MERGE_TREE_MIN = (2, 38)  # `git merge-tree --write-tree`: a merge computed in the object store


def check_version(cwd: str | os.PathLike[str] | None = None) -> tuple[int, ...]:
    """git's version, or `git_too_old` when it lacks `merge-tree --write-tree` (doctor, merge)."""
    found = version(cwd)
    if found < MERGE_TREE_MIN:
        need = ".".join(map(str, MERGE_TREE_MIN))
        have = ".".join(map(str, found))
        raise OmpError(
            "git_too_old",
            f"git {have} is too old: merging workers' branches needs git >= {need}",
            version=have,
            required=need,
        )
    return found


def abspath(cwd: Path, text: str) -> Path:
    """A path git printed, made absolute against `cwd` (git prints some relative to it)."""
    p = Path(text)
    return p if p.is_absolute() else (cwd / p)
