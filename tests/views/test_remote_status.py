"""A team with a worker on a host that does not answer (a closed port on 127.0.0.1: ssh is
refused at once), without an sshd: status says `unreachable` (never `gone`), writes nothing and
exits 0; merge reports its branch not fetched; shutdown completes here and says what it left
there. And how a host's listing reads as a worker's pane (`omp.mail.remote_panes.view_of`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.mail.remote_panes import view_of
from omp.record import config as team_config
from omp.record.placement import session_of
from omp.store.paths import StatePaths
from omp.team.merging import merge_team
from omp.team.setup import create_team
from omp.team.shutdown import shutdown
from omp.tmux.remote import RemotePane
from omp.views.status import status
from tests.helpers import child_env, run_omp, snapshot_tree
from tests.store.redis_server import free_port
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client")


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """ssh's master sockets in a short private directory (a socket path fits in 108 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="omp-u-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(d))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    isolate_git(monkeypatch, tmp_path)
    repo = make_repo(tmp_path / "proj")
    create_team(repo, "t", 2, task="write one line")
    team = StatePaths(repo).team("t")
    raw = team_config.load(team).raw
    start = g(repo, "rev-parse", "HEAD")
    base = "/home/nobody/.omp-remote/p1"
    entry = raw["workers"][1]
    entry.update(
        paneId=None,
        remote={
            "host": "build1",
            "root": f"{base}/root",
            "worktree": f"{base}/worktrees/t/worker-2",
            "branch": "omp/t/worker-2",
            "socket": "omp-p1",
            "pane": "%0",
        },
        workspace={
            "kind": "worktree",
            "path": f"{base}/worktrees/t/worker-2",
            "branch": "omp/t/worker-2",
            "base": start,
            "host": "build1",
        },
    )
    # a closed port: ssh is refused at once (exit 255), as by a host whose sshd is down
    raw["hosts"] = {"build1": {"address": "nobody@127.0.0.1", "port": free_port()}}
    team_config.write(team, raw)
    return repo, start


def test_status_of_a_team_whose_host_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short_tmp: Path
) -> None:
    repo, _ = _team(tmp_path, monkeypatch)
    state = StatePaths(repo).state
    before = snapshot_tree(state)
    st = status(StatePaths(repo), "t")
    assert snapshot_tree(state) == before  # read-only, a host's answer or not
    t = st["teams"][0]
    local, far = t["workers"]
    assert "host" not in local and local["pane"] == "none"
    assert far["host"] == "build1" and far["pane"] == "unreachable"
    assert far["hostUnreachable"] is True and "cannot be reached" in far["hostError"]
    assert t["hosts"]["build1"]["reachable"] is False
    assert t["hosts"]["build1"]["error"] == "host_unreachable"
    assert far["workspace"]["host"] == "build1" and "worktreeExists" not in far["workspace"]
    assert t["running"] is True  # a host that does not answer is not a team gone
    res = run_omp("team", "status", "t", cwd=repo, env=child_env(TMPDIR=str(short_tmp)))
    assert res.rc == 0, res
    assert "@build1" in res.stdout and "host unreachable" in res.stdout


def test_merge_reports_the_branch_not_fetched_and_merges_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short_tmp: Path
) -> None:
    repo, start = _team(tmp_path, monkeypatch)
    with pytest.raises(OmpError) as err:
        merge_team(team_config.load(StatePaths(repo).team("t")), ["worker-2"])
    assert err.value.code == "host_unreachable"
    detail: dict[str, Any] = err.value.detail
    (row,) = detail["results"]
    assert row["status"] == "not_fetched" and row["host"] == "build1"
    assert g(repo, "rev-parse", "main") == start


def test_shutdown_completes_here_and_says_what_it_left_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short_tmp: Path
) -> None:
    repo, _ = _team(tmp_path, monkeypatch)
    out = shutdown(team_config.load(StatePaths(repo).team("t")))
    (row,) = out["remote"]
    assert row["worker"] == "worker-2" and row["error"] == "host_unreachable"
    assert row["closedPane"] is False and row["checkoutRemoved"] is False
    (left,) = out["hostsLeft"]
    assert left["host"] == "build1"
    assert any("/worktrees/t/worker-2" in x for x in left["left"])
    assert StatePaths(repo).team("t").shutdown.exists()
    res = run_omp("team", "status", "t", cwd=repo, env=child_env(TMPDIR=str(short_tmp)))
    assert res.rc == 0, res


def _row(session: str, dead: bool, dead_status: int | None, pid: int | None) -> RemotePane:
    """One line of a host's pane listing (`RemoteTmux.remote_panes`)."""
    return RemotePane(
        pane_id="%0", dead=dead, in_mode=False, session_id="$0", window_id="@0",
        activity=None, session_name=session, socket_path="/s", server_pid=1,
        server_started_at=1, pid=pid, dead_status=dead_status,
    )  # fmt: skip


def test_a_host_listing_reads_as_the_workers_pane() -> None:
    mine = session_of("t", "worker-1")
    assert view_of(_row(mine, False, None, 42), "t", "worker-1", "b").state == "alive"
    dead = view_of(_row(mine, True, 3, None), "t", "worker-1", "b")
    assert (dead.state, dead.dead_status, dead.host) == ("dead", 3, "b")
    # a pane id a restarted server gave to another session's pane is not the worker's
    assert view_of(_row("someone-else", False, None, 1), "t", "worker-1", "b").state == "gone"
    assert view_of(None, "t", "worker-1", "b").state == "gone"
