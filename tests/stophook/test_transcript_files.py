"""Issue 21, class 4: the stop hook reads only what it should, within its budget.

The transcript path comes from the hook's stdin, so it may name anything. Every special kind of
file is given to the one reader (`transcript.read_tail`) and to the hook end to end, for Copilot
(which polls its transcript) and for an older Claude Code (which reads it once):

- a device that never ends (`/dev/zero`, `/dev/urandom`), a FIFO with and without a writer, a
  directory, a socket, a missing path, a file nobody may read: refused at once, never opened to
  read, the loop goes on (a block) and the log says why;
- a symlink to each (and to a plain transcript): never followed;
- a sparse file of a terabyte: only its last `TAIL_BYTES` are read.

Every read of a special file runs in a child whose address space is capped at 1 GiB (never in
the test process: a reader without a bound would take the machine's memory). There a reader that
reads without a bound hits MemoryError within a second: the hook then fails open (an allow),
which these tests tell from a block. A hook whose stdin never ends is stopped by its budget
(SIGALRM), not by the CLI's timeout.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.stophook import transcript
from omp.stophook.transcript import TAIL_BYTES, Unreadable, read_tail
from tests.helpers import REPO, child_env, is_root, run_omp

FIX = REPO / "tests" / "fixtures" / "hooks"
STOP_MS = 1796075680748
MEMORY_CAP = 1 << 30


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    (p / ".git").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    return p


def _env(proj: Path, **extra: str) -> dict[str, str]:
    env = child_env(proj.parent / "home", OMP_NO_MONITOR="1", OMP_HOOK_TRANSCRIPT_WAIT_MS="300")
    for k in ("COPILOT_CLI", "CODEX_HOME", "GEMINI_PROJECT_DIR", "GEMINI_SESSION_ID"):
        env.pop(k, None)
    env.update(extra)
    return env


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _hook(proj: Path, stdin: dict[str, Any], timeout: float = 60) -> tuple[int, str, str]:
    """`omp hook stop` with its memory capped; (rc, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "omp", "hook", "stop"],
        input=json.dumps(stdin),
        cwd=proj,
        env=_env(proj),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_cap_memory,
    )
    return proc.returncode, proc.stdout, proc.stderr


def _log(proj: Path) -> list[dict[str, Any]]:
    path = proj / ".omp" / "state" / "hooks" / "hook.log"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _start_loop(proj: Path) -> None:
    r = run_omp("ralph", "start", "x", "--max-iterations", "50", cwd=proj, env=_env(proj))
    assert r.rc == 0, r.stderr


def _copilot(proj: Path, path: str, session: str) -> dict[str, Any]:
    p = json.loads((FIX / "copilot-agentStop.json").read_text())
    p.update(cwd=str(proj), transcriptPath=path, sessionId=session, timestamp=STOP_MS)
    assert isinstance(p, dict)
    return p


def _claude(proj: Path, path: str, session: str) -> dict[str, Any]:
    p = json.loads((FIX / "claude-Stop.json").read_text())
    del p["last_assistant_message"]  # an older Claude Code: the hook reads the transcript
    p.update(cwd=str(proj), transcript_path=path, session_id=session)
    assert isinstance(p, dict)
    return p


# ---- the special files ------------------------------------------------------------------------

# Writes into its FIFO until killed; dies with the test process even if that is killed (Linux).
WRITER = """
import ctypes, os, sys
try:
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
except Exception:
    pass
parent = os.getppid()
while os.getppid() == parent:
    sys.stdout.buffer.write(b"x" * 65536)
"""

# `read_tail` on each path, in a child capped at MEMORY_CAP: what came of it, as JSON.
READER = """
import json, sys
from omp.stophook.transcript import Unreadable, read_tail
out = {}
for name, path in json.loads(sys.argv[1]).items():
    try:
        data = read_tail(path, int(sys.argv[2]))
    except Unreadable as exc:
        out[name] = "unreadable: " + str(exc)
    except FileNotFoundError:
        out[name] = "missing"
    except BaseException as exc:
        out[name] = "raised " + type(exc).__name__
    else:
        out[name] = f"read {len(data)} bytes" + (" of zeros" if data and set(data) == {0} else "")
print(json.dumps(out))
"""


def _read_in_child(paths: dict[str, str], limit: int = TAIL_BYTES) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", READER, json.dumps(paths), str(limit)],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_cap_memory,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert isinstance(out, dict)
    return out


@pytest.fixture
def files(tmp_path: Path) -> Iterator[dict[str, str]]:
    """name -> a path of that kind; plus `link-to-<name>` for each. Writers are stopped after."""
    d = tmp_path / "files"
    d.mkdir()
    made: dict[str, str] = {"dev-zero": "/dev/zero", "dev-urandom": "/dev/urandom"}
    quiet = d / "fifo-quiet"
    os.mkfifo(quiet)
    made["fifo-no-writer"] = str(quiet)
    busy = d / "fifo-busy"
    os.mkfifo(busy)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER],
        stdout=os.open(busy, os.O_RDWR),  # O_RDWR: opening does not wait for a reader
        stderr=subprocess.DEVNULL,
    )
    made["fifo-with-writer"] = str(busy)
    sparse = d / "sparse.jsonl"
    with open(sparse, "wb") as f:
        f.truncate(1 << 40)  # a terabyte of holes
    made["sparse-1TiB"] = str(sparse)
    made["directory"] = str(d)
    sock_path = d / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    made["socket"] = str(sock_path)
    made["missing"] = str(d / "missing.jsonl")
    plain = d / "plain.jsonl"
    plain.write_text(json.dumps({"type": "assistant.message", "data": {"content": "hi"}}) + "\n")
    made["plain"] = str(plain)
    for name, target in list(made.items()):
        link = d / f"link-to-{name}"
        link.symlink_to(target)
        made[f"link-to-{name}"] = str(link)
    try:
        yield made
    finally:
        writer.kill()
        writer.wait()
        sock.close()


REFUSED = {
    "dev-zero": "a character device",
    "dev-urandom": "a character device",
    "fifo-no-writer": "a FIFO",
    "fifo-with-writer": "a FIFO",
    "directory": "a directory",
    "socket": "a socket",
}
REFUSED.update({f"link-to-{k}": "a symlink" for k in [*REFUSED, "sparse-1TiB", "plain", "missing"]})


def test_the_reader_refuses_every_special_kind_at_once(files: dict[str, str]) -> None:
    got = _read_in_child(files)
    want = {name: f"unreadable: {why}" for name, why in REFUSED.items()}
    want.update(missing="missing", plain="read 57 bytes", **{"sparse-1TiB": "(checked below)"})
    got["sparse-1TiB"] = "(checked below)"
    assert got == want


def test_a_huge_sparse_file_is_read_only_at_its_tail(files: dict[str, str]) -> None:
    sparse = {"sparse": files["sparse-1TiB"]}
    assert _read_in_child(sparse) == {"sparse": f"read {TAIL_BYTES} bytes of zeros"}
    assert _read_in_child(sparse, limit=4096) == {"sparse": "read 4096 bytes of zeros"}


def test_only_the_tail_is_read_and_its_cut_line_dropped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"a" * 5000 + b"\n" + b"last line\n")
    assert read_tail(str(path), limit=100) == b"last line\n"
    assert read_tail(str(path)) == path.read_bytes()


def _as_nobody(fn: Callable[[], str]) -> str:
    """`fn()` in a forked child running as uid/gid 65534 (root reads any file as itself)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            out = fn()
        except BaseException as exc:
            out = f"raised {type(exc).__name__}: {exc}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out


def test_a_file_nobody_may_read_is_refused() -> None:
    # Under a directory everyone may enter (pytest's tmp_path is private to its owner).
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o711)
        path = Path(d) / "secret.jsonl"
        path.write_text('{"type": "assistant"}\n')
        os.chmod(path, 0)

        def attempt() -> str:
            try:
                read_tail(str(path))
            except Unreadable as exc:
                return f"unreadable: {exc}"
            return "read"

        out = _as_nobody(attempt) if is_root() else attempt()
    assert out.startswith("unreadable: cannot open it"), out


def test_the_wait_is_capped_whatever_the_environment_says() -> None:
    def wait(raw: str) -> int:
        return transcript.wait_ms({"OMP_HOOK_TRANSCRIPT_WAIT_MS": raw})

    assert wait("999999999999") == transcript.MAX_WAIT_MS and wait("40") == 40
    for odd in ("²", "١٢", "-5", "1e9", "nan", ""):
        assert wait(odd) == transcript.DEFAULT_WAIT_MS


# ---- the hook end to end ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("cli", ["copilot", "claude"])
def test_the_hook_reads_no_special_file_and_keeps_the_loop_going(
    proj: Path, files: dict[str, str], cli: str
) -> None:
    _start_loop(proj)
    make = _copilot if cli == "copilot" else _claude
    for i, name in enumerate(sorted(files)):
        rc, out, err = _hook(proj, make(proj, files[name], session=f"s{i}"))
        assert rc == 0 and err == "", (name, err)
        # A block: the hook decided (no reply found), it did not fail open on MemoryError.
        assert json.loads(out)["decision"] == "block", (name, out, _log(proj)[-1:])
        last = _log(proj)[-1]
        assert "error" not in last, (name, last)
        if name in REFUSED:
            assert last["transcriptSkipped"] == f"{files[name]}: {REFUSED[name]}", name
        else:
            assert "transcriptSkipped" not in last, (name, last)
    assert json.loads((proj / ".omp" / "state" / "ralph.json").read_text())["iteration"] == len(
        files
    )


@pytest.mark.slow
def test_a_stdin_that_never_ends_is_cut_by_the_hooks_budget(proj: Path) -> None:
    _start_loop(proj)
    proc = subprocess.Popen(
        [sys.executable, "-m", "omp", "hook", "stop"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=proj,
        env=_env(proj, OMP_HOOK_BUDGET_MS="500"),
    )
    try:
        assert proc.wait(timeout=30) == 0  # stdin still open: only the budget ends it
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        if proc.poll() is None:  # pragma: no cover - only when the budget failed
            proc.send_signal(signal.SIGKILL)
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    assert json.loads(out) == {} and err == b""
    assert _log(proj)[-1]["error"] == "OutOfTime: the stop hook ran out of its 0.5 s budget"


def test_the_budget_never_exceeds_the_default() -> None:
    from omp.cli.hook_stop import BUDGET_S, budget_s

    assert budget_s({}) == BUDGET_S
    assert budget_s({"OMP_HOOK_BUDGET_MS": "99999999999"}) == BUDGET_S
    assert budget_s({"OMP_HOOK_BUDGET_MS": "250"}) == 0.25
    for odd in ("0", "-1", "²", "inf", ""):
        assert budget_s({"OMP_HOOK_BUDGET_MS": odd}) == BUDGET_S


# ---- issue 21, class 10: stdin nested too deeply is logged like any other bad input ----------


@pytest.mark.parametrize("deep", ["[" * 100_000, '{"a":' * 100_000, '{"cwd": ' + "[" * 100_000])
def test_stdin_nested_too_deeply_is_allowed_and_logged(proj: Path, deep: str) -> None:
    _start_loop(proj)
    r = run_omp("hook", "stop", input=deep, cwd=proj, env=_env(proj))
    assert r.rc == 0 and json.loads(r.stdout) == {} and r.stderr == ""
    assert _log(proj)[-1]["error"] == "ValueError: stdin JSON is nested too deeply"


def test_stat_kinds_are_named() -> None:
    assert transcript._kind(stat.S_IFBLK) == "a block device"
