"""The crash log of an `internal` error (exit 3): a file a person can attach to a bug report.

An agent that hits a bug sees one line and goes on; a person later has nothing to look at. So
`omp.cli.output.internal` writes what a maintainer needs (omp's, Python's, tmux's, git's and the
system's versions, the working directory, omp's environment variables, the command line and the
traceback) to `crash-<UTC time>-<pid>.log`, in the first place that takes it:

1. the project's `.omp/logs/` (only where `.omp/` already exists: a crash never makes one);
2. `$XDG_STATE_HOME/omp/` (`~/.local/state/omp/`);
3. `omp-<uid>/` in the temporary directory.

Secrets are masked before anything is written (`mask`): the values of options, JSON fields and
environment variables named like a secret (token, key, secret, password, auth, credential,
cookie), every exact value of such a variable of this process (`OMP_LAUNCH_TOKEN`'s, an API
key's) wherever it appears, and strings shaped like well-known tokens. Writing the log never
fails the command: `write` returns None and why not, and the error line says so. Imported only
when a command has crashed.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

MASK = "***"
KEEP = 50  # crash logs kept in a directory: an agent repeating a failing call fills none
SECRET_NAME = re.compile(
    r"token|secret|passw|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credential"
    r"|auth(?!or)|cookie|session[_-]?key|(?:^|[_-])key$",
    re.I,
)
# Tokens recognisable by their shape, wherever they appear.
TOKEN_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{16,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{30,})"
    r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"
)
# `name=value` and `name: value` in free text (a traceback's message, a shell command in argv).
NAMED_VALUE = re.compile(
    r"(?P<name>[A-Za-z0-9_.-]*(?:token|secret|passw|api[_-]?key|apikey|credential)"
    r"[A-Za-z0-9_.-]*)(?P<sep>\s*[=:]\s*)(?P<q>[\"']?)(?P<value>[^\s\"',;&]+)",
    re.I,
)
ENV_SHOWN = ("TMUX", "TMUX_PANE", "SHELL", "TERM", "LANG", "LC_ALL", "VIRTUAL_ENV")


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of this process's variables named like a secret, longest first (so a value
    that contains another is masked whole)."""
    vals = {v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= 4}
    return sorted(vals, key=len, reverse=True)


def mask(text: str, secrets: Sequence[str] = ()) -> str:
    """`text` with every secret it shows replaced by `***`."""
    for value in secrets:
        text = text.replace(value, MASK)
    text = TOKEN_SHAPES.sub(MASK, text)
    return NAMED_VALUE.sub(lambda m: f"{m['name']}{m['sep']}{m['q']}{MASK}", text)


def _mask_json(obj: Any, secrets: Sequence[str]) -> Any:
    if isinstance(obj, dict):
        hide = {k for k, v in obj.items() if SECRET_NAME.search(str(k)) and v not in (None, "")}
        return {k: MASK if k in hide else _mask_json(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mask_json(v, secrets) for v in obj]
    return mask(obj, secrets) if isinstance(obj, str) else obj


def mask_argv(argv: Sequence[str], secrets: Sequence[str] = ()) -> list[str]:
    """The command line with secrets masked: the value of an option named like a secret
    (`--token X`, `--api-key=X`), secret fields of a JSON argument (`--input '{...}'`), and
    whatever `mask` finds in every word."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        name, eq, _ = word.partition("=")
        if word.startswith("-") and SECRET_NAME.search(name.lstrip("-")):
            if eq:
                out.append(f"{name}={MASK}")
            else:
                out.append(word)
                hide_next = True
            continue
        if word.lstrip().startswith(("{", "[")):
            try:
                parsed = json.loads(word)
            except ValueError:
                pass
            else:
                out.append(json.dumps(_mask_json(parsed, secrets), ensure_ascii=False))
                continue
        out.append(mask(word, secrets))
    return out


def _version_of(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=3, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"
    return (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr) else "unknown"


def _package(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "not installed"


def report_to() -> str | None:
    """Where bugs are reported: the `Issues` (or `Bug Tracker`) URL of omp's package metadata
    (pyproject.toml's `[project.urls]`), None when it names none."""
    try:
        from importlib.metadata import metadata

        urls = metadata("omp").get_all("Project-URL") or []
    except Exception:
        return None
    for entry in urls:
        label, _, url = str(entry).partition(",")
        if label.strip().lower() in ("issues", "bug tracker", "bugs", "tracker") and url.strip():
            return str(url.strip())
    return None


def render(
    exc: BaseException,
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    when: float | None = None,
) -> str:
    """The crash log's text, secrets masked."""
    from omp import __version__

    secrets = secret_values(env)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if when is None else when))
    try:
        cwd = os.getcwd()
    except OSError as err:
        cwd = f"unknown ({err.strerror})"
    shown = {k: v for k, v in sorted(env.items()) if k.startswith("OMP_") or k in ENV_SHOWN}
    env_lines = [
        f"  {k}={MASK if SECRET_NAME.search(k) else mask(v, secrets)}" for k, v in shown.items()
    ]
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    lines = [
        "omp crash log: an internal error (a bug in omp). Secrets are masked (***); read it",
        "before you attach it to a bug report.",
        "",
        f"time:      {stamp}",
        f"omp:       {__version__}",
        f"python:    {platform.python_implementation()} {platform.python_version()}"
        f" ({sys.executable})",
        f"system:    {platform.platform()}",
        f"tmux:      {_version_of(['tmux', '-V'])}",
        f"git:       {_version_of(['git', '--version'])}",
        f"packages:  typer {_package('typer')}, libtmux {_package('libtmux')},"
        f" psutil {_package('psutil')}",
        f"cwd:       {mask(cwd, secrets)}",
        f"command:   {' '.join(shlex.quote(w) for w in mask_argv(argv, secrets))}",
        "environment:",
        *(env_lines or ["  (no OMP_ variables)"]),
        "",
        mask(tb, secrets).rstrip("\n"),
        "",
    ]
    return "\n".join(lines)


def places(env: Mapping[str, str]) -> list[Path]:
    """Where a crash log may go, in order (see the module)."""
    out: list[Path] = []
    try:
        from omp.store.paths import StatePaths, find_root

        project = StatePaths(find_root())
        if project.omp_dir.is_dir():
            out.append(project.crash_logs)
    except Exception:
        pass  # no project here, or OMP_ROOT names none: the other places
    state = env.get("XDG_STATE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local", "state"
    )
    if os.path.isabs(state):
        out.append(Path(state) / "omp")
    out.append(Path(tempfile.gettempdir()) / f"omp-{os.getuid()}")
    return out


def _private_dir(d: Path) -> None:
    """`d` exists, is a real directory (not a link) and is this user's."""
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(f"{d} is not a directory of this user")


def _prune(d: Path) -> None:
    logs = sorted(p for p in d.glob("crash-*.log") if p.is_file())
    for old in logs[:-KEEP]:
        try:
            old.unlink()
        except OSError:
            pass


def _create(d: Path, stem: str, text: bytes) -> Path:
    """A new file `<stem>[-n].log` in `d` holding `text` (one process may crash twice a
    millisecond: a test's, or a program running omp's commands in-process)."""
    for n in range(100):
        path = d / (f"{stem}.log" if n == 0 else f"{stem}-{n}.log")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(text)
        return path
    raise FileExistsError(f"{d}: {stem}.log and 99 more exist")


def write(
    exc: BaseException,
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    when: float | None = None,
) -> tuple[Path | None, str]:
    """Write the crash log of `exc`: (its path, ""), or (None, why no place took it). Never
    raises."""
    try:
        env = os.environ if env is None else env
        argv = ["omp", *sys.argv[1:]] if argv is None else argv
        now = time.time() if when is None else when
        text = render(exc, argv, env, when=now).encode("utf-8", "replace")
        stem = time.strftime("crash-%Y%m%dT%H%M%S", time.gmtime(now))
        stem += f".{int(now * 1000) % 1000:03d}Z-{os.getpid()}"
        why = "no place to write it"
        for d in places(env):
            try:
                _private_dir(d)
                path = _create(d, stem, text)
                _prune(d)
                return path, ""
            except OSError as err:
                why = f"{d}: {err.strerror or err}"
        return None, why
    except Exception as err:  # the log is a courtesy: the crash is reported without it
        return None, f"{type(err).__name__}: {err}"
