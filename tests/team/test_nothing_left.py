"""Nothing of a team is left running after a command closes its panes (issue 20, section 3).

The agent is `tests/fixtures/agents/stray_agent.py`: like Gemini CLI 0.61's node, it relaunches
itself with a larger heap in a new session, orphaned from its pane's tree, deaf to SIGHUP (and,
stubborn, to SIGTERM). Closing its pane alone leaves that copy running; shutdown, remove-worker,
delete, a launch's rollback and a resume's (its own new agents), and a resume (the earlier agent's
copy) must each end it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from omp import procs
from omp.errors import OmpError
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.team.launch import LaunchRequest, launch
from omp.team.membership import remove_worker
from omp.team.removal import delete
from omp.team.resume import resume
from omp.team.shutdown import shutdown
from omp.tmux import Tmux
from tests.helpers import FIXTURES, poll

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

STRAY = FIXTURES / "agents" / "stray_agent.py"
HEAP = "--max-old-space-size=8192"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    if not procs.environ_readable():
        pytest.skip("process environments cannot be read here")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", "/bin/sh")
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("STRAY_PIDS", str(pids))
    monkeypatch.setenv("STRAY_STUBBORN", "1")
    for var in ("TMUX", "TMUX_PANE", "OMP_ROOT", "OMP_TEAM", "OMP_WORKER", "OMP_LAUNCH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    tmux = Tmux(socket_name=f"omp-test-{secrets.token_hex(4)}", config_file="/dev/null")
    yield tmux
    tmux.kill_server()
    # Whatever a failing test left behind goes too, so one failure does not leak processes.
    procs.terminate(procs.collect([], procs.EnvMatch("t1", str(tmp_path / "proj"))), grace=0.5)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    (root / ".omp").mkdir()
    (root / ".omp" / "agents.toml").write_text(
        "[agents.stray]\n"
        f'command = ["{sys.executable}", "{STRAY}"]\n'
        'env_prefixes = ["STRAY_"]\n'
        "prompt_pattern = '^❯'\n"
        "ready_patterns = ['^❯']\n"
        "busy_patterns = ['esc to interrupt']\n"
        "line_oriented = true\n"
        "bottom_lines = 3\n"
        "startup_timeout = 20\n"
        "[[agents.stray.dialogs]]\n"
        'name = "sign-in"\n'
        "pattern = 'Sign in to continue'\n"
        "keys = []\n"
    )
    monkeypatch.chdir(root)
    return root


def _launch(server: Tmux, root: Path, n: int = 2) -> dict[str, Any]:
    assert server.socket_name is not None
    req = LaunchRequest(
        workers=n, task="", agent="stray", name="t1", socket=server.socket_name, cwd=root
    )
    return launch(req)


def _team_procs(root: Path, worker: str | None = None) -> list[procs.Proc]:
    """Every live process carrying team t1's environment (the test's own are spared)."""
    return procs.collect([], procs.EnvMatch("t1", str(root), [worker] if worker else None))


def _relaunched(root: Path, worker: str | None = None) -> list[int]:
    """The pids of the orphaned, relaunched copies (the Gemini-like stragglers)."""
    out = []
    for p in _team_procs(root, worker):
        try:
            argv = psutil.Process(p.pid).cmdline()
        except psutil.Error:
            continue
        if HEAP in argv:
            out.append(p.pid)
    return out


def _orphans_up(root: Path, count: int) -> list[int]:
    return poll(lambda: len(got := _relaunched(root)) >= count and got, what="relaunched copies")


def _parent(pid: int) -> int:
    return psutil.Process(pid).ppid()


def _pane_pid(server: Tmux, pane: str) -> int | None:
    st = server.pane_states([pane])[pane]
    return None if st is None else st.pid


def test_the_stray_agent_outlives_a_closed_pane(server: Tmux, project: Path) -> None:
    """The fixture proves the problem: closing the pane alone leaves its relaunched copy."""
    pane = _launch(server, project, n=1)["workers"][0]["paneId"]
    (orphan,) = _orphans_up(project, 1)
    assert _parent(orphan) != _pane_pid(server, pane)  # re-parented away from the pane's tree
    server.kill_pane(pane)
    poll(lambda: _pane_pid(server, pane) is None, what="pane closed")
    assert procs.pid_alive(orphan)  # still running: the bug omp must clean up after
    procs.terminate(_team_procs(project), grace=0.5)


def test_shutdown_leaves_no_process_of_the_team(server: Tmux, project: Path) -> None:
    _launch(server, project, n=2)
    orphans = _orphans_up(project, 2)
    cfg = team_config.load(StatePaths(project).team("t1"))
    res = shutdown(cfg)
    assert len(res["killedPanes"]) == 2
    assert res["endedProcesses"] >= 4  # two panes' agents and their two relaunched copies
    assert "processesLeft" not in res
    assert _team_procs(project) == []
    assert not any(procs.pid_alive(p) for p in orphans)


def test_shutdown_after_the_tmux_server_died_still_ends_the_stragglers(
    server: Tmux, project: Path
) -> None:
    _launch(server, project, n=1)
    (orphan,) = _orphans_up(project, 1)
    server.kill_server()  # what the issue saw: the server gone, node still running
    assert procs.pid_alive(orphan)
    res = shutdown(team_config.load(StatePaths(project).team("t1")))
    assert res["killedPanes"] == []
    assert res["endedProcesses"] >= 1
    assert _team_procs(project) == []


def test_remove_worker_ends_that_workers_processes_only(server: Tmux, project: Path) -> None:
    _launch(server, project, n=2)
    _orphans_up(project, 2)
    cfg = team_config.load(StatePaths(project).team("t1"))
    res = remove_worker(cfg, "worker-1", force=True)
    assert res["killedPane"] is not None
    assert res["endedProcesses"] >= 2
    assert _team_procs(project, "worker-1") == []
    assert len(_relaunched(project, "worker-2")) == 1  # the other worker runs on
    shutdown(team_config.load(StatePaths(project).team("t1")))
    assert _team_procs(project) == []


def test_delete_ends_what_outlived_the_panes(server: Tmux, project: Path) -> None:
    pane = _launch(server, project, n=1)["workers"][0]["paneId"]
    (orphan,) = _orphans_up(project, 1)
    server.kill_pane(pane)  # closed behind omp's back: only the straggler is left
    poll(lambda: _pane_pid(server, pane) is None, what="pane closed")
    assert procs.pid_alive(orphan)
    out = delete(StatePaths(project), "t1", force=True)
    assert out["ok"] and out["endedProcesses"] >= 1
    assert _team_procs(project) == []
    assert not (project / ".omp/state/team/t1").exists()


def test_a_rolled_back_launch_leaves_no_process(
    server: Tmux, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's second case: an agent at its sign-in screen, refused as launch_blocked."""
    monkeypatch.setenv("STRAY_SIGN_IN", "1")
    with pytest.raises(OmpError) as err:
        _launch(server, project, n=2)
    assert err.value.code == "launch_blocked"
    assert not server.has_session("omp-team-t1")
    assert _team_procs(project) == []
    assert list(Path(os.environ["STRAY_PIDS"]).iterdir())  # the copies had started


def _dead_pane(server: Tmux, project: Path, worker: str) -> str:
    """Its agent exits (Ctrl-C); the pane stays, dead; its relaunched copy runs on."""
    pane = team_config.load(StatePaths(project).team("t1")).pane_of(worker) or ""
    server.send_key(pane, "C-c")
    poll(lambda: (st := server.pane_states([pane])[pane]) is not None and st.dead, what="dead")
    return pane


def test_a_failed_resume_leaves_no_process_of_its_own(
    server: Tmux, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed agent refused at its sign-in screen: the new panes and their stragglers go."""
    _launch(server, project, n=2)
    _orphans_up(project, 2)
    _dead_pane(server, project, "worker-1")
    before = {p.pid for p in _team_procs(project)}
    monkeypatch.setenv("STRAY_SIGN_IN", "1")  # forwarded (STRAY_*): the new agent signs in
    cfg = team_config.load(StatePaths(project).team("t1"))
    with pytest.raises(OmpError) as err:
        resume(cfg)
    # Refused on the new agent's own screen: it ran, and had forked its copy before drawing it.
    assert err.value.code == "launch_blocked" and err.value.detail["worker"] == "worker-1"
    # Every process of the team is one of before: the resume's agent and its copy ended (the
    # copy maybe before it wrote its pid file: that count proves nothing).
    assert {p.pid for p in _team_procs(project)} <= before
    shutdown(team_config.load(StatePaths(project).team("t1")))
    assert _team_procs(project) == []


def test_a_resume_ends_what_the_dead_pane_left_running(server: Tmux, project: Path) -> None:
    """The earlier agent's relaunched copy must not go on as a second worker-1."""
    _launch(server, project, n=2)
    _orphans_up(project, 2)
    (old,) = _relaunched(project, "worker-1")
    (other,) = _relaunched(project, "worker-2")
    _dead_pane(server, project, "worker-1")
    assert procs.pid_alive(old)
    res = resume(team_config.load(StatePaths(project).team("t1")))
    assert [w["name"] for w in res["resumed"]] == ["worker-1"]
    poll(lambda: not procs.pid_alive(old), what="the earlier copy ended")
    assert procs.pid_alive(other)  # another worker's copy runs on
    new = poll(lambda: [p for p in _relaunched(project, "worker-1") if p != old], what="new copy")
    assert len(new) == 1 and procs.pid_alive(new[0])  # the resumed agent's own: untouched
    shutdown(team_config.load(StatePaths(project).team("t1")))
    assert _team_procs(project) == []
