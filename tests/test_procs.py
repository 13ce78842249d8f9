"""`omp.procs` over psutil: process trees, a team's processes found by their environment, identity
by start time, SIGTERM then SIGKILL, the caller spared; and psutil kept off the per-call path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from omp import procs
from tests.helpers import REPO, child_env, make_project, make_team, poll

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
# Ignores SIGTERM: only SIGKILL ends it. Says so on stdout once the handler is in place.
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)",
]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts: whatever is left of them is killed and reaped afterwards."""
    out: list[subprocess.Popen[bytes]] = []
    yield out
    for p in out:
        try:
            for child in psutil.Process(p.pid).children(recursive=True):
                child.kill()
        except psutil.Error:
            pass
        p.kill()
        p.wait()


def _team_env(
    root: Path, team: str = "t1", worker: str = "worker-1", **more: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    return {**env, "OMP_TEAM": team, "OMP_WORKER": worker, "OMP_ROOT": str(root), **more}


def test_a_tree_is_collected_and_ended(started: list[subprocess.Popen[bytes]]) -> None:
    shell = subprocess.Popen(["/bin/sh", "-c", f"{' '.join(SLEEP[:2])} '{SLEEP[2]}' & wait"])
    started.append(shell)
    kids = poll(lambda: psutil.Process(shell.pid).children(), what="the child")
    found = procs.collect([shell.pid, None, 999_999_999])  # None and a missing pid: ignored
    assert [p.pid for p in found] == sorted([shell.pid, *(k.pid for k in kids)])
    ended = procs.terminate(found, grace=5)
    assert ended.found == 2 and ended.killed == 0 and ended.left == []
    assert not any(procs.pid_alive(p.pid) for p in found)


def test_a_stubborn_process_gets_sigkill(started: list[subprocess.Popen[bytes]]) -> None:
    p = subprocess.Popen(STUBBORN, stdout=subprocess.PIPE)
    started.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    ended = procs.terminate(procs.collect([p.pid]), grace=0.2)
    assert (ended.found, ended.terminated, ended.killed, ended.left) == (1, 0, 1, [])
    assert p.wait(timeout=10) in (-signal.SIGKILL, 0)  # 0: psutil reaped it first


def test_a_team_process_is_found_by_its_environment_even_after_setsid(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    ours = subprocess.Popen(SLEEP, env=_team_env(tmp_path), start_new_session=True)
    other_team = subprocess.Popen(SLEEP, env=_team_env(tmp_path, team="t2"))
    other_root = subprocess.Popen(SLEEP, env=_team_env(tmp_path / "elsewhere"))
    leader = subprocess.Popen(SLEEP, env=_team_env(tmp_path, worker=""))
    token = subprocess.Popen(SLEEP, env=_team_env(tmp_path, OMP_LAUNCH_TOKEN="tok-2"))
    started += [ours, other_team, other_root, leader, token]
    poll(lambda: procs.environ(ours.pid) is not None, what="the environment readable")
    found = {p.pid for p in procs.collect([], procs.EnvMatch("t1", str(tmp_path)))}
    assert found == {ours.pid, token.pid}
    any_team = {p.pid for p in procs.collect([], procs.EnvMatch(None, str(tmp_path)))}
    assert any_team == {ours.pid, token.pid, other_team.pid}
    by_token = procs.collect([], procs.EnvMatch("t1", str(tmp_path), tokens={"tok-2"}))
    assert [p.pid for p in by_token] == [token.pid]
    by_worker = procs.collect([], procs.EnvMatch("t1", str(tmp_path), workers={"worker-9"}))
    assert by_worker == []


def test_an_unreadable_environment_is_skipped(
    tmp_path: Path, started: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's process (AccessDenied) is not ours to end, and no error either."""
    p = subprocess.Popen(SLEEP, env=_team_env(tmp_path))
    started.append(p)
    poll(lambda: procs.environ(p.pid) is not None, what="the environment readable")

    def denied(self: psutil.Process) -> dict[str, str]:
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "environ", denied)
    assert procs.environ(p.pid) is None
    assert procs.collect([], procs.EnvMatch("t1", str(tmp_path))) == []
    assert not procs.environ_readable()


def test_this_process_and_its_ancestors_are_never_collected() -> None:
    found = {p.pid for p in procs.collect([os.getpid(), os.getppid()])}
    assert os.getpid() not in found and os.getppid() not in found


def test_an_ended_process_is_not_signalled_again(started: list[subprocess.Popen[bytes]]) -> None:
    p = subprocess.Popen(SLEEP)
    started.append(p)
    [proc] = procs.collect([p.pid])
    assert procs.alive(proc)
    p.kill()
    p.wait()
    assert not procs.alive(proc) and not procs.pid_alive(p.pid)
    assert procs.terminate([proc]) == procs.Ended(0, 0, 0, [])


def test_a_zombie_counts_as_gone(started: list[subprocess.Popen[bytes]]) -> None:
    p = subprocess.Popen(SLEEP)
    started.append(p)
    os.kill(p.pid, signal.SIGKILL)  # not reaped: a zombie until p.wait()
    poll(lambda: psutil.Process(p.pid).status() == psutil.STATUS_ZOMBIE, what="a zombie")
    assert not procs.pid_alive(p.pid) and procs.collect([p.pid]) == []


def test_running_tells_a_recycled_pid_by_its_start(started: list[subprocess.Popen[bytes]]) -> None:
    p = subprocess.Popen(SLEEP)
    started.append(p)
    start = procs.start_of(p.pid)
    assert start is not None and procs.running(p.pid, start) and procs.running(p.pid)
    assert procs.running(p.pid, start + procs.START_SLACK)  # the boot time moved a little
    assert not procs.running(p.pid, start + 60 * 100)  # another process with this pid
    assert procs.running(p.pid, 123456)  # an older omp's start (clock ticks): the pid decides
    assert procs.start_of(-1) is None and not procs.running(-1) and not procs.pid_alive(0)


def test_lineage_is_this_process_then_its_parents() -> None:
    got = procs.lineage()
    assert got[0] == psutil.Process().cmdline()
    assert got[1] == psutil.Process().parent().cmdline()  # type: ignore[union-attr]
    assert len(procs.lineage(depth=1)) == 1 and procs.lineage(999_999_999) == []


def test_end_after_ends_what_was_collected_even_when_the_close_fails(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    p = subprocess.Popen(SLEEP, env=_team_env(tmp_path))
    started.append(p)
    poll(lambda: procs.environ(p.pid) is not None, what="the environment readable")

    def close() -> None:
        raise RuntimeError("the pane would not close")

    with pytest.raises(RuntimeError):
        procs.end_after(close, [], procs.EnvMatch("t1", str(tmp_path)), grace=5)
    assert p.wait(timeout=10) is not None


# ---- no /proc, and psutil only where processes end --------------------------------------------

# Where omp still reads /proc itself, and why (each is read-only and falls back without it).
PROC_READERS = {
    # the monitor's liveness check runs on every send's epilogue: psutil's import would cost
    # more than the check; without /proc it trusts kill(0)
    "omp/monitor/alive.py",
    # the usage readers' process views (issue 28 reworks omp/usage/*)
    "omp/usage/process.py",
}


def test_no_module_but_the_listed_reads_proc() -> None:
    readers = {
        str(p.relative_to(REPO))
        for p in (REPO / "omp").rglob("*.py")
        if '"/proc' in p.read_text(encoding="utf-8") or 'Path("/proc")' in p.read_text("utf-8")
    }
    assert readers <= PROC_READERS, readers - PROC_READERS


# Runs commands in one process, one after the other, and says after each whether psutil was
# loaded. The hook reads the child's stdin ({}): it goes first.
CHILD = """
import json, sys
from omp.cli import main
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code
    sys.stderr.write("LOADED " + json.dumps([argv[:3], code, "psutil" in sys.modules]) + "\\n")
"""


def _loaded(root: Path, commands: list[list[str]]) -> list[tuple[list[str], object, bool]]:
    p = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(commands)],
        cwd=root,
        env=child_env(root.parent / "home"),
        input="{}",
        capture_output=True,
        text=True,
        timeout=120,
    )
    rows = [json.loads(x[7:]) for x in p.stderr.splitlines() if x.startswith("LOADED ")]
    assert len(rows) == len(commands), p.stderr
    return [(r[0], r[1], r[2]) for r in rows]


def _api(sub: str, **payload: object) -> list[str]:
    return ["team", "api", sub, "--input", json.dumps({"team_name": "t", **payload}), "--json"]


def test_per_call_commands_never_import_psutil_and_shutdown_does(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 2, task="do it", no_limits=True)
    per_call = [
        ["hook", "stop"],
        _api("send-message", **{"from": "leader", "to": "worker-1", "body": "hi"}),
        _api("broadcast", **{"from": "leader", "body": "all"}),
        _api("mailbox-list", worker="worker-1"),
        _api("mailbox-read", worker="worker-1"),
        _api("claim-task", task_id="1", worker="worker-1"),
        _api("list-tasks"),
        ["team", "status", "t", "--json"],
        ["team", "events", "t", "--json"],
    ]
    rows = _loaded(root, [*per_call, ["team", "shutdown", "t", "--json"]])
    assert [(argv, code, loaded) for argv, code, loaded in rows[:-1]] == [
        (argv[:3], 0, False) for argv in per_call
    ]
    assert rows[-1][1:] == (0, True)  # the control: shutdown ends processes, through psutil
