"""Shared helpers for the foundation tests: real files, real processes, no sleeps.

Test modules import this as `tests.helpers`. It must not read anything outside the repository
(CI runs on a clean clone): the TypeScript fixtures live in `tests/fixtures/ts-omp/`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TS_FIXTURES = FIXTURES / "ts-omp"

# ISO-8601 UTC with milliseconds, as both the TypeScript tool and omp write it.
ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
MESSAGE_KEYS = ["type", "id", "from", "to", "body", "timestamp"]
RECEIPT_KEYS = ["type", "messageId", "deliveredAt"]

# Limits high enough that tests which send many messages through the API are never refused by
# the loop breakers (duplicate / rate_limited / mailbox_full); tests about those set their own.
NO_LIMITS_TOML = (
    "[limits]\n"
    "duplicate_window_seconds = 0\n"
    "rate_window_seconds = 0\n"
    "rate_max_messages = 1000000\n"
    "mailbox_max_unread = 1000000\n"
)


# ---- environment ------------------------------------------------------------------------------


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Pin HOME to a fresh directory and drop any OMP_* setting inherited from the caller."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith("OMP_"):
            monkeypatch.delenv(key, raising=False)
    return home


def _pycache_dir() -> str:
    # Bytecode for child processes goes outside the checkout (and survives between runs), so a
    # PYTHONDONTWRITEBYTECODE environment does not make every child recompile omp.
    return str(Path(tempfile.gettempdir()) / f"omp-tests-pycache-{os.getuid()}")


def child_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of an `omp` child process: no inherited OMP_*, HOME pinned."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = _pycache_dir()
    env.pop("OMP_DEBUG", None)
    if home is not None:
        env["HOME"] = str(home)
    env.update(extra)
    return env


# ---- running omp ------------------------------------------------------------------------------


class OmpRun(NamedTuple):
    rc: int
    stdout: str
    stderr: str
    json: Any  # stdout parsed, when it is exactly one JSON value; else None


def _parse_one(stdout: str) -> Any:
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def run_omp(
    *args: str,
    input: str | None = None,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> OmpRun:
    """`python -m omp <args>` in a child process; returns (rc, stdout, stderr, parsed json)."""
    proc = subprocess.run(
        [sys.executable, "-m", "omp", *args],
        input=input,
        cwd=str(cwd) if cwd is not None else None,
        env=env if env is not None else child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return OmpRun(proc.returncode, proc.stdout, proc.stderr, _parse_one(proc.stdout))


def run_cli(
    *args: str,
    input: str | None = None,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
) -> OmpRun:
    """`run_omp` in this process: `omp.cli.main(args)` with that environment, working
    directory and stdin, stdout and stderr captured. Every command's own code runs as in a
    child (the fast paths, typer, the one error path); what only a real process shows (the
    interpreter's start, its imports, signals, a console's encoding) needs `run_omp`. About a
    tenth of a child's cost: the quick loop's CLI tests use it."""
    from omp.cli import main

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved = (sys.stdin, sys.stdout, sys.stderr)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    stdin = io.TextIOWrapper(io.BytesIO((input or "").encode("utf-8", "surrogateescape")))
    code: Any = 0
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = stdin, out, err
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(saved_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_env)
    rc = code if isinstance(code, int) else (0 if code is None else 1)
    texts = []
    for stream in (out, err):
        stream.flush()
        raw = stream.buffer.getvalue()
        texts.append(raw.decode("utf-8", "replace"))
    return OmpRun(rc, texts[0], texts[1], _parse_one(texts[0]))


def api_argv(sub: str, payload: Any, *, as_json: bool = True) -> list[str]:
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    return [sub, "--input", raw, *(["--json"] if as_json else [])]


def run_api(
    sub: str,
    payload: Any,
    *,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    as_json: bool = True,
) -> OmpRun:
    """`omp team api <sub> --input <payload> [--json]` in a child process."""
    return run_omp("team", "api", *api_argv(sub, payload, as_json=as_json), cwd=cwd, env=env)


def call_api(
    capsys: pytest.CaptureFixture[str],
    sub: str | None,
    payload: Any = None,
    *,
    as_json: bool = True,
    argv: list[str] | None = None,
    stdin: str | None = None,
) -> OmpRun:
    """The same dispatcher in this process (fast): `omp.cli.api.main` with captured output.

    Tests pass `cwd` in the payload or set OMP_ROOT; the process's own cwd is never used.
    """
    from omp.cli import api as cli_api

    if argv is None:
        argv = api_argv(sub, payload, as_json=as_json) if sub is not None else []
    capsys.readouterr()  # drop anything printed before
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        try:
            cli_api.main(list(argv))
        except SystemExit as exc:
            code = exc.code
        else:  # pragma: no cover - main always exits
            code = 0
    finally:
        sys.stdin = old_stdin
    out, err = capsys.readouterr()
    rc = code if isinstance(code, int) else (0 if code is None else 1)
    return OmpRun(rc, out, err, _parse_one(out))


def assert_reply(obj: Mapping[str, Any], td: Any, where: str = "") -> None:
    """`obj` has every required key of the TypedDict `td` and no key it does not name."""
    required: frozenset[str] = td.__required_keys__
    optional: frozenset[str] = td.__optional_keys__
    keys = set(obj)
    assert required <= keys, f"{where or td.__name__}: missing {sorted(required - keys)}"
    extra = sorted(keys - required - optional)
    assert not extra, f"{where or td.__name__}: undocumented {extra}"


# ---- projects and teams -----------------------------------------------------------------------


def make_project(path: Path) -> Path:
    """A project root: a directory holding `.git` (so root discovery stops here)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / ".git").mkdir(exist_ok=True)
    return path


def make_team(
    root: Path, name: str = "demo", workers: int = 3, *, task: str = "", no_limits: bool = False
) -> Any:
    """Create a headless team with omp's own setup code; returns its TeamPaths."""
    from omp.store.paths import StatePaths
    from omp.team.setup import create_team

    create_team(root, name, workers, task=task)
    project = StatePaths(root)
    if no_limits:
        (project.omp_dir / "config.toml").write_text(NO_LIMITS_TOML)
        os.chmod(project.omp_dir / "config.toml", 0o600)
    return project.team(name)


def mailbox_file(root: Path, recipient: str, team: str = "demo") -> Path:
    return root / ".omp" / "state" / "team" / team / "mailbox" / f"{recipient}.jsonl"


# ---- files ------------------------------------------------------------------------------------


Snapshot = dict[str, tuple[int, bytes, int]]


def snapshot_tree(path: Path) -> Snapshot:
    """relpath -> (st_mode, content, st_mtime_ns) for `path` and everything under it.

    Content is the bytes of a regular file, the target of a symlink, b"" for a directory.
    Symlinks are recorded, never followed. An absent path gives {}.
    """
    out: Snapshot = {}
    if not os.path.lexists(path):
        return out

    def add(p: Path) -> None:
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            content = os.readlink(p).encode()
        elif stat.S_ISREG(st.st_mode):
            content = p.read_bytes()
        else:
            content = b""
        out[str(p.relative_to(path))] = (st.st_mode, content, st.st_mtime_ns)

    add(path)
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for n in sorted(dirnames) + sorted(filenames):
            add(Path(dirpath) / n)
    return out


def tree_modes(path: Path) -> dict[str, int]:
    """relpath -> permission bits of every entry under `path` (not `path` itself)."""
    return {k: stat.S_IMODE(mode) for k, (mode, _, _) in snapshot_tree(path).items() if k != "."}


def records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every line of a JSONL file, parsed (fails on a line that does not parse)."""
    return [json.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]


def raw_lines(path: str | os.PathLike[str]) -> list[bytes]:
    return Path(path).read_bytes().splitlines(keepends=True)


def write_raw(path: str | os.PathLike[str], *items: dict[str, Any] | bytes) -> None:
    """Append lines behind omp's back, like another program would (no lock, no index).

    A new file is created 0600, as omp (and a careful peer) would make it.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with open(fd, "ab") as f:
        for item in items:
            if isinstance(item, bytes):
                f.write(item)
            else:
                f.write(
                    (json.dumps(item, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
                )


def ts_message(
    mid: str, sender: str, to: str, body: str, ts: str = "2026-01-01T00:00:00.000Z"
) -> dict[str, Any]:
    return {"type": "message", "id": mid, "from": sender, "to": to, "body": body, "timestamp": ts}


def receipt(mid: str, at: str = "2026-01-01T00:00:01.000Z") -> dict[str, Any]:
    return {"type": "delivery-receipt", "messageId": mid, "deliveredAt": at}


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def failing_writes(monkeypatch: pytest.MonkeyPatch, *, times: int) -> list[int]:
    """The next `times` `os.write` calls fail as a full disk does (ENOSPC), later ones write;
    the file descriptors of every call, for the test to see the write was tried."""
    import errno

    real = os.write
    calls: list[int] = []

    def write(fd: int, data: Any) -> int:
        calls.append(fd)
        if len(calls) <= times:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return calls


T = TypeVar("T")


def poll(
    probe: Callable[[], T | Literal[False] | None], timeout: float = 20.0, what: str = "condition"
) -> T:
    """`probe()` once it returns something truthy; fails the test after `timeout` seconds.

    The one way tests wait for another process, a pane or a file: short backing-off sleeps
    (5 ms up to 100 ms), a generous deadline, never a fixed sleep followed by an assert.
    """
    end = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.1)


def is_root() -> bool:
    return os.geteuid() == 0


FOREIGN_UID = 4242


def make_foreign(path: Path) -> None:
    """Give `path` to another user (needs root; callers skip otherwise)."""
    os.lchown(path, FOREIGN_UID, FOREIGN_UID)


# ---- multiprocessing targets (module level so any start method can import them) --------------


def append_worker(path: str, writer: int, count: int, pad: int = 200) -> None:
    """Append `count` records through `omp.store.jsonl.append`."""
    from omp import ids
    from omp.store import jsonl

    for seq in range(count):
        jsonl.append(
            Path(path),
            {"type": "message", "id": ids.new_id(), "writer": writer, "seq": seq, "pad": "x" * pad},
        )


def mailbox_worker(root: str, team: str, recipient: str, writer: int, count: int) -> None:
    """Append `count` messages through the full `Mailbox.append_messages` path."""
    from omp.mail.mailbox import Mailbox, new_message
    from omp.store.paths import StatePaths

    box = Mailbox(StatePaths(Path(root)).team(team), recipient)
    for seq in range(count):
        box.append_messages([new_message(f"w{writer}", recipient, f"{writer}:{seq}")])


def run_processes(target: Any, arg_sets: Iterable[tuple[Any, ...]], timeout: float = 120) -> None:
    """Start one process per argument tuple, wait for all, fail if any failed."""
    import multiprocessing

    ctx = (
        multiprocessing.get_context("fork")
        if sys.platform == "linux"
        else multiprocessing.get_context("spawn")
    )
    procs = [ctx.Process(target=target, args=args) for args in arg_sets]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():  # pragma: no cover - only on a hang
            p.kill()
    assert codes == [0] * len(procs), f"worker exit codes {codes}"


def cli_send_worker(root: str, sender: str, to: str, count: int, out: str) -> None:
    """`count` sends through the `omp` console entry point, in this one process.

    Each call parses argv, loads the JSON input and prints one JSON object exactly as the console
    script does; only the interpreter start is shared. The message ids go to `out`.
    """
    import contextlib as _contextlib

    from omp.cli import main as omp_main

    ids: list[str] = []
    for i in range(count):
        buf = io.StringIO()
        payload = {
            "team_name": "demo",
            "cwd": root,
            "from": sender,
            "to": to,
            "body": f"{sender}:{i} " + "y" * 100,
        }
        with _contextlib.redirect_stdout(buf):
            try:
                omp_main(["team", "api", "send-message", "--input", json.dumps(payload), "--json"])
            except SystemExit as exc:
                if exc.code not in (0, None):
                    raise RuntimeError(f"send {i} exited {exc.code}: {buf.getvalue()}") from None
        ids.append(json.loads(buf.getvalue())["messageId"])
    Path(out).write_text(json.dumps(ids))


def finish_task(team: Any, worker: str, tid: str, result_md: str = "# old result\n") -> None:
    """Claim task `tid` as `worker`, write its result.md and complete it (result "old")."""
    from omp.tasks import tasks

    _, token = tasks.claim(team, tid, worker)
    (team.worker_dir(worker) / "result.md").write_text(result_md)
    os.chmod(team.worker_dir(worker) / "result.md", 0o600)
    tasks.transition(
        team, tid, worker=worker, from_status="in_progress", to_status="completed",
        token=token, result="old",
    )  # fmt: skip


def run_benchmark(
    tmp_path: Path, script: str, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`benchmarks/<script> <args>` in a fresh process, cwd `tmp_path`, HOME `tmp_path/home`
    (made here); the benchmark smoke tests check its output's structure, never its timing."""
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *args],
        cwd=tmp_path,
        env=child_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def nudge_went_out(reply: Mapping[str, Any]) -> bool:
    """A `send-message` reply whose recipient was nudged: its send typed the nudge, or found,
    under the pane's lock, one typed for this mail while it waited (a running monitor nudges
    new mail no nudge covers as soon as the pane is idle, and can win the pane from the send:
    `omp.mail.delivery`; either way exactly one nudge is typed)."""
    return reply.get("nudge") == "typed" or (
        reply.get("nudge") == "not_needed"
        and reply.get("nudgeReason") == "a nudge for this mail is still outstanding"
    )
