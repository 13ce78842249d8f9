"""Verify runs: a shell command run in a directory with a time limit, its output in a log.

Two ways to run one:

- in the background (`start`, `poll`): a completion must not wait for the check inside the
  agent's tool call (an agent's shell gives up after ~30 s). `start` writes `verify.json` in a
  run directory the caller owns, then starts a supervisor process (`python -m
  omp.workspace.verify RUN_DIR RUN_ID`) in a session of its own, and returns. The supervisor
  starts the command in a process group of its own, waits until the time limit, then stops the
  whole group (TERM, then KILL after a grace period) and writes the outcome. `poll` reads the
  state: `running`, `passed`, `failed`, `timed_out`, or `crashed` when the supervisor is gone
  without an outcome (killed, the machine rebooted) or is far past its limit. A crashed run is
  run again by calling `start` again, which first stops whatever is left of the old one.
- in the foreground (`run`): the merge's check of a merged commit, same rules, no state file.

A check given a `Checkout` (a repository and a commit: a worktree worker's completion) runs in
a scratch checkout of that commit (`omp.workspace.scratch`), made by the supervisor and removed
when the command ends, never in the worker's worktree: what the command leaves behind
(`__pycache__/`, caches, build output) is never taken for the worker's uncommitted work. The
state records the scratch's path while it exists (`scratch`), so a run started again removes
what a killed one left.

`verify.json` is written under `verify.lock` by read-modify-write, so the starter and the
supervisor never lose each other's fields; a pid is stored with its start time (`proc`), so a
recycled pid is never taken for the supervisor or stopped as the command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from omp import procs
from omp.errors import OmpError
from omp.store import fs, locks
from omp.workspace.git import git_env

STATE, LOG, LOCK = "verify.json", "verify.log", "verify.lock"
KILL_GRACE = 5.0  # seconds between TERM and KILL of a timed-out command's process group
OVERDUE = 60.0  # a supervisor this far past its limit is hung: the run counts as crashed
STARTUP = 30.0  # a run whose supervisor never recorded itself within this is crashed
FINAL = ("passed", "failed", "timed_out")
_SHELL = "/bin/sh"


class VerifyStatus(NamedTuple):
    status: str  # running, passed, failed, timed_out, crashed
    command: str
    cwd: str
    timeout: float
    exit: int | None  # the command's exit status (negative: killed by that signal)
    started_at: float
    finished_at: float | None
    attempt: int  # 1 for the first run of this directory, +1 for each `start` after it
    log: Path
    run: str = ""  # this run's id: a caller tells its own run from a later one by it

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "command": self.command,
            "cwd": self.cwd,
            "timeout": self.timeout,
            "exit": self.exit,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "attempt": self.attempt,
            "log": str(self.log),
            "run": self.run,
        }


class Checkout(NamedTuple):
    """Where a background check runs: a scratch checkout of `commit` of the repository at
    `repo`, given the project's `[worktree] copy` and `link`."""

    repo: str
    commit: str
    copy: tuple[str, ...] = ()
    link: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "commit": self.commit, "copy": list(self.copy),
                "link": list(self.link)}  # fmt: skip

    @classmethod
    def from_json(cls, doc: Any) -> Checkout | None:
        if not isinstance(doc, dict):
            return None
        repo, commit = doc.get("repo"), doc.get("commit")
        if not isinstance(repo, str) or not isinstance(commit, str) or not repo or not commit:
            return None
        copy, link = doc.get("copy") or [], doc.get("link") or []
        return cls(repo, commit, tuple(str(c) for c in copy), tuple(str(x) for x in link))


class Outcome(NamedTuple):
    """The end of a foreground run."""

    status: str  # passed, failed, timed_out
    exit: int | None
    log: Path
    seconds: float


def command_env() -> dict[str, str]:
    """The command's environment: the caller's, without git's redirections (a GIT_DIR from a
    hook would send the project's tests to another repository)."""
    env = git_env()
    del env["GIT_OPTIONAL_LOCKS"]  # the command is the user's: its git may refresh indexes
    return env


def _kill_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when it is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def _stop(child: subprocess.Popen[bytes], grace: float) -> int | None:
    """TERM the child's group, KILL it after `grace`; the child's exit status."""
    _kill_group(child.pid, signal.SIGTERM)
    try:
        return child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _kill_group(child.pid, signal.SIGKILL)
        return child.wait()


def _execute(
    cwd: Path,
    command: str,
    deadline: float,
    log_fd: int,
    *,
    grace: float = KILL_GRACE,
    on_spawn: Callable[[int], None] | None = None,
) -> tuple[str, int | None]:
    """Run `command` under `/bin/sh -c` in its own process group until `deadline`
    (`time.time()`); (status, exit)."""
    child = subprocess.Popen(
        [_SHELL, "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=log_fd,
        stderr=subprocess.STDOUT,
        env=command_env(),
        start_new_session=True,  # its own group: a timeout stops the command and its children
    )
    if on_spawn is not None:
        on_spawn(child.pid)
    try:
        rc: int | None = child.wait(timeout=max(0.0, deadline - time.time()))
        status = "passed" if rc == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.write(log_fd, b"\nomp: time limit reached; stopping the command\n")
        rc = _stop(child, grace)
        status = "timed_out"
    except BaseException:
        _stop(child, grace)
        raise
    _kill_group(child.pid, signal.SIGKILL)  # what it left running in the background
    return status, rc


def run(
    cwd: Path, command: str, timeout: float, log: Path, *, grace: float = KILL_GRACE
) -> Outcome:
    """Run `command` in `cwd` now and wait for it (at most `timeout` seconds plus the grace);
    the output goes to `log` (replaced)."""
    t0 = time.time()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    try:
        status, rc = _execute(cwd, command, t0 + timeout, fd, grace=grace)
    finally:
        os.close(fd)
    return Outcome(status, rc, log, time.time() - t0)


# ---- background runs --------------------------------------------------------------------------


def _read(run_dir: Path) -> dict[str, Any] | None:
    data = fs.read_json(run_dir / STATE)
    return data if isinstance(data, dict) else None


def _update(run_dir: Path, run_id: str | None, **fields: Any) -> dict[str, Any] | None:
    """Merge `fields` into the state (only while it is run `run_id`'s, when given)."""
    with locks.flocked(run_dir / LOCK):
        state = _read(run_dir) or {}
        if run_id is not None and state.get("run") != run_id:
            return None
        state.update(fields)
        fs.write_json_atomic(run_dir / STATE, state)
        return state


def _status_of(run_dir: Path, state: dict[str, Any], status: str) -> VerifyStatus:
    return VerifyStatus(
        status=status,
        command=str(state.get("command", "")),
        cwd=str(state.get("cwd", "")),
        timeout=float(state.get("timeout", 0)),
        exit=state.get("exit"),
        started_at=float(state.get("startedAt", 0)),
        finished_at=state.get("finishedAt"),
        attempt=int(state.get("attempt", 1)),
        log=run_dir / LOG,
        run=str(state.get("run", "")),
    )


def _judge(state: dict[str, Any], now: float) -> str:
    status = str(state.get("status", ""))
    if status in FINAL:
        return status
    started = float(state.get("startedAt", 0))
    pid = state.get("supervisorPid")
    if not isinstance(pid, int):
        return "running" if now - started < STARTUP else "crashed"
    if not procs.running(pid, state.get("supervisorStart")):
        return "crashed"
    if now > started + float(state.get("timeout", 0)) + KILL_GRACE + OVERDUE:
        return "crashed"
    return "running"


def poll(run_dir: Path, *, now: float | None = None) -> VerifyStatus | None:
    """The run's state, or None when `run_dir` never held one. Reads only."""
    state = _read(run_dir)
    if state is None:
        return None
    return _status_of(run_dir, state, _judge(state, time.time() if now is None else now))


def _stop_leftovers(state: dict[str, Any]) -> None:
    """Stop the supervisor and the command of an earlier run, if still there (checked by start
    time: a recycled pid is left alone), and remove the scratch checkout it left."""
    for key in ("supervisor", "child"):
        pid = state.get(f"{key}Pid")
        if isinstance(pid, int) and procs.running(pid, state.get(f"{key}Start")):
            if key == "child":
                _kill_group(pid, signal.SIGKILL)
            else:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    _remove_scratch(state)


def _remove_scratch(state: dict[str, Any]) -> None:
    where, co = state.get("scratch"), Checkout.from_json(state.get("checkout"))
    if not isinstance(where, str) or not where or co is None:
        return
    from omp.workspace import create, scratch

    scratch.remove(create.Worktree(Path(co.repo), Path(where), "", co.commit))


def start(
    run_dir: Path,
    cwd: Path,
    command: str,
    timeout: float,
    *,
    restart: bool = False,
    grace: float = KILL_GRACE,
    then: Sequence[str] = (),
    then_env: Mapping[str, str] | None = None,
    checkout: Checkout | None = None,
) -> VerifyStatus:
    """Start `command` in `cwd` in the background; its state and log live in `run_dir`
    (created). With `checkout`, in a scratch checkout of that commit instead (see the module
    docstring; `cwd` is then only what the state names until the scratch exists). A run still
    going is returned as it is unless `restart`; an earlier run's leftovers are stopped first.
    Returns at once (the supervisor starts on its own).

    `then` (an argv, with `then_env` added to its environment) is run by the supervisor once
    the outcome is written, so whoever waits for the verdict hears of it at once instead of at
    its next poll; it is best-effort (bounded in time, its failure changes no outcome)."""
    base = run_dir.parent
    while not base.is_dir():
        base = base.parent
    fs.ensure_dir(run_dir, base=base)
    run_id = os.urandom(8).hex()
    with locks.flocked(run_dir / LOCK):
        old = _read(run_dir) or {}
        if old and not restart and _judge(old, time.time()) == "running":
            return _status_of(run_dir, old, "running")
        _stop_leftovers(old)
        state: dict[str, Any] = {
            "run": run_id,
            "status": "running",
            "command": command,
            "cwd": str(cwd),
            "timeout": timeout,
            "grace": grace,
            "startedAt": time.time(),
            "finishedAt": None,
            "exit": None,
            "attempt": int(old.get("attempt", 0)) + 1,
        }
        if then:
            state["then"] = list(then)
            state["thenEnv"] = dict(then_env or {})
        if checkout is not None:
            state["checkout"] = checkout.to_json()
        fs.write_json_atomic(run_dir / STATE, state)
        fd = fs.open_file(run_dir / LOG, os.O_WRONLY | os.O_TRUNC | os.O_APPEND, create=True)
    try:
        sup = subprocess.Popen(
            [sys.executable, "-m", "omp.workspace.verify", str(run_dir), run_id],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,  # outlives the caller (an `omp team api` call)
            close_fds=True,
        )
    finally:
        os.close(fd)
    recorded = _update(
        run_dir, run_id, supervisorPid=sup.pid, supervisorStart=procs.start_of(sup.pid)
    )
    return _status_of(run_dir, recorded or state, "running")


def _supervise(run_dir: Path, run_id: str) -> int:
    state = _update(
        run_dir, run_id, supervisorPid=os.getpid(), supervisorStart=procs.start_of(os.getpid())
    )
    if state is None:
        return 0  # a newer run took the directory over
    child_pid: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        for pid in child_pid:
            _kill_group(pid, signal.SIGKILL)
        os._exit(128 + signum)  # no outcome written: `poll` says crashed, `start` runs it again

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)

    def spawned(pid: int) -> None:
        child_pid.append(pid)
        _update(run_dir, run_id, childPid=pid, childStart=procs.start_of(pid))

    deadline = float(state["startedAt"]) + float(state["timeout"])
    fd = fs.open_file(run_dir / LOG, os.O_WRONLY | os.O_APPEND, create=True)
    made: Any = None
    try:
        cwd = Path(state["cwd"])
        co = Checkout.from_json(state.get("checkout"))
        if co is not None:
            made = _scratch(run_dir, run_id, co, fd, max(1.0, deadline - time.time()))
            cwd = made.path
        status, rc = _execute(
            cwd,
            str(state["command"]),
            deadline,
            fd,
            grace=float(state.get("grace", KILL_GRACE)),
            on_spawn=spawned,
        )
    except (OSError, OmpError) as exc:  # no checkout, directory gone, /bin/sh missing: failed
        why = exc.message if isinstance(exc, OmpError) else str(exc)
        os.write(fd, f"omp: cannot run the command: {why}\n".encode())
        late = isinstance(exc, OmpError) and exc.detail.get("timedOut")  # the checkout, a hook
        status, rc = ("timed_out" if late else "failed"), None
    finally:
        os.close(fd)
        if made is not None:
            from omp.workspace import scratch

            scratch.remove(made)
    done = _update(run_dir, run_id, status=status, exit=rc, finishedAt=time.time())
    _then(done)
    return 0


def _scratch(run_dir: Path, run_id: str, co: Checkout, log_fd: int, limit: float) -> Any:
    """Make the run's scratch checkout (`omp.workspace.scratch`) within what is left of the
    check's time (`limit`), and record where it is."""
    from omp.workspace import create, scratch

    spec = create.Provision(co.copy, co.link)
    made = scratch.make(Path(co.repo), co.commit, spec, timeout=limit)
    _update(run_dir, run_id, scratch=str(made.path), cwd=str(made.path))
    os.write(
        log_fd, f"omp: checking {co.commit[:12]} in a scratch checkout, {made.path}\n".encode()
    )
    return made


THEN_TIMEOUT = 120.0  # seconds the `then` command may take


def _then(state: dict[str, Any] | None) -> None:
    """Run the state's `then` command (see `start`), if it has one and is still this run's."""
    argv = state.get("then") if state else None
    if not state or not isinstance(argv, list) or not argv:
        return
    env = dict(os.environ)
    extra = state.get("thenEnv")
    if isinstance(extra, dict):
        env.update({str(k): str(v) for k, v in extra.items()})
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # the log holds the command's output, nothing else
            stderr=subprocess.DEVNULL,
            env=env,
            timeout=THEN_TIMEOUT,
            check=False,
        )


def tail(log: Path, lines: int = 40, *, max_bytes: int = 64 * 1024) -> str:
    """The last `lines` lines of a log (read from its end: a log may be large)."""
    try:
        fd = fs.open_file(log, os.O_RDONLY)
    except FileNotFoundError:
        return ""
    try:
        size = os.fstat(fd).st_size
        start_at = max(0, size - max_bytes)
        os.lseek(fd, start_at, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if start_at > 0:
        data = data.split(b"\n", 1)[-1]  # drop the partial first line
    text = data.decode("utf-8", "replace")
    kept = text.splitlines()[-lines:] if lines > 0 else []
    return "\n".join(kept)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m omp.workspace.verify RUN_DIR RUN_ID", file=sys.stderr)
        return 2
    return _supervise(Path(argv[0]), argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
