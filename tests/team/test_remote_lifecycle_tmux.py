"""A worker on another host through the rest of a team's life, on the real parts (an sshd on
127.0.0.1 with a second user as the host, a Redis store, the demo agent in a tmux pane there):
status reads its pane over ssh, merge brings its branch back and into main, shutdown closes its
pane and removes its checkout once its branch is here, resume and remove-worker work on it; a
host that stops answering is `host unreachable` in status (exit 0), and shutdown completes here
saying what it left there."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from omp.mail.panes import pane_views
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.record.placement import Placed, hosts_json, session_of
from omp.store import select
from omp.store.paths import StatePaths
from omp.team import remote
from omp.team.membership import remove_worker
from omp.team.merging import merge_team
from omp.team.resume import resume
from omp.team.setup import create_team
from omp.team.shutdown import shutdown
from omp.tmux import ssh
from omp.tmux.remote import RemoteTmux
from omp.views.status import status
from tests.helpers import child_env, poll, run_omp
from tests.remote_parts import MARKS, redis, sshd
from tests.store.redis_server import RedisServer
from tests.tmux.sshd_server import SshServer
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = MARKS
__all__ = ["redis", "sshd"]  # the shared fixtures


class Team(NamedTuple):
    repo: Path
    host: ssh.Host
    placed: Placed
    url: str
    start: str

    def cfg(self) -> TeamConfig:
        return team_config.load(StatePaths(self.repo).team("t"))


def _placed_team(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Team:
    """Team `t` with worker-1 on host build1, recorded as `omp team launch --host` records it
    (`omp.record.placement`): no local pane, `remote`, `workspace.host`, the team's `hosts`."""
    isolate_git(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_DEMO_WORK_SECONDS", "0.2")
    url = f"{redis.url}?ns=r{secrets.token_hex(4)}"
    monkeypatch.setenv("OMP_STORE", url)
    repo = make_repo(tmp_path / "proj")
    create_team(repo, "t", 1, task="write one line")
    team = StatePaths(repo).team("t")
    token = secrets.token_hex(8)
    raw = dict(team_config.load(team).raw, launchToken=token)
    host = sshd.host(dir=f".omp-remote-{secrets.token_hex(3)}")
    start = g(repo, "rev-parse", "HEAD")
    command = [host.settings.omp, "demo-agent"]
    placed = remote.place(
        host,
        leader_repo=repo,
        project="p1",
        team="t",
        worker="worker-1",
        task_id="1",
        description="write one line",
        teammates=[],
        config=raw,
        token=token,
        start=start,
        store_url=url,
        agent_command=command,
    )
    entry = raw["workers"][0]
    entry.update(
        paneId=None,
        agent="demo",
        command=command,
        remote=placed.to_config(),
        workspace={
            "kind": "worktree",
            "path": placed.worktree,
            "branch": placed.branch,
            "base": start,
            "host": host.name,
        },
    )
    raw["hosts"] = hosts_json({host.name: host})
    raw["workspace"] = {"kind": "worktree", "base": start, "repo": str(repo)}
    team_config.write(team, raw)
    tmux = RemoteTmux(host, placed.socket)
    poll(lambda: any(ln.startswith("❯") for ln in tmux.capture(placed.pane)), what="ready")
    return Team(repo, host, placed, url, start)


def _cleanup(t: Team) -> None:
    """Whatever a failed test left on the host: its tmux server, checkouts, the ssh master."""
    try:
        RemoteTmux(t.host, t.placed.socket).kill_server()
        ssh.run(t.host, ["rm", "-rf", t.host.settings.dir], check=False)
    except Exception:
        pass
    ssh.stop_master(t.host)


def _worker(st: dict[str, Any]) -> dict[str, Any]:
    row = st["teams"][0]["workers"][0]
    assert isinstance(row, dict)
    return row


def _completed(t: Team) -> bool:
    store = select.current(StatePaths(t.repo))
    assert store is not None
    task = store.doc("t", "tasks", "1")
    return bool(task) and task["status"] == "completed"  # type: ignore[index]


def test_status_merge_and_shutdown_of_a_remote_worker(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _placed_team(sshd, redis, tmp_path, monkeypatch)
    try:
        st = status(StatePaths(t.repo), "t")
        w = _worker(st)
        assert (w["host"], w["pane"], w["paneId"]) == ("build1", "alive", None)
        assert "hostUnreachable" not in w
        assert st["teams"][0]["hosts"] == {"build1": {"workers": ["worker-1"], "reachable": True}}
        assert st["teams"][0]["running"] is True
        # its branch has not come back yet: said so, its path (on the host) never opened here
        ws = w["workspace"]
        assert ws["host"] == "build1" and "worktreeExists" not in ws
        assert "has not come back" in ws["error"]
        text = run_omp("team", "status", "t", cwd=t.repo, env=child_env(OMP_STORE=t.url))
        assert text.rc == 0 and "@build1" in text.stdout and "alive" in text.stdout

        remote.trigger(t.host, t.placed, "t", "worker-1")
        poll(lambda: _completed(t), timeout=60, what="the remote worker's completion")
        # merge brings its branch back first, then into main
        report = merge_team(t.cfg())
        assert report["merged"] == ["worker-1"], report
        assert report["results"][0]["host"] == "build1"
        assert g(t.repo, "rev-parse", "main") != t.start
        changed = g(t.repo, "diff", "--name-only", t.start, "main").split()
        assert changed, "the remote worker's commit did not reach main"

        out = shutdown(t.cfg())
        assert not ssh.master_running(t.host)  # its ssh master stopped
        (row,) = out["remote"]
        assert row["closedPane"] is True and row["checkoutRemoved"] is True, row
        assert row["fetched"] == g(t.repo, "rev-parse", t.placed.branch)
        assert "hostsLeft" not in out
        assert out["worktrees"][0]["host"] == "build1"
        # its pane is gone there, its checkout and the team's mirrored state too
        assert pane_views(t.cfg())["worker-1"].state == "gone"
        there = ssh.run(
            t.host,
            ["ls", "-d", t.placed.worktree, remote.state_dir(t.placed.root, "t")],
            check=False,
        )
        assert there.out.strip() == "", there
        # the branch stays at the leader's, merged
        assert g(t.repo, "branch", "--list", t.placed.branch).strip()
    finally:
        _cleanup(t)


def test_a_host_that_stops_answering_is_unreachable_and_shutdown_completes_here(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _placed_team(sshd, redis, tmp_path, monkeypatch)
    try:
        sshd.stop()
        res = run_omp("team", "status", "t", "--json", cwd=t.repo, env=child_env(OMP_STORE=t.url))
        assert res.rc == 0, res
        w = _worker(res.json)
        assert w["pane"] == "unreachable" and w["hostUnreachable"] is True, w
        assert "cannot be reached" in w["hostError"]
        assert res.json["teams"][0]["hosts"]["build1"]["reachable"] is False
        assert res.json["teams"][0]["running"] is True  # not judged gone on the spot
        text = run_omp("team", "status", "t", cwd=t.repo, env=child_env(OMP_STORE=t.url))
        assert text.rc == 0 and "host unreachable" in text.stdout, text
        # a merge reports its branch not fetched; nothing is merged from a stale copy
        res = run_omp("team", "merge", "t", "worker-1", "--json", cwd=t.repo,
                      env=child_env(OMP_STORE=t.url))  # fmt: skip
        assert res.rc != 0 and res.json["error"] == "host_unreachable", res
        assert res.json["results"][0]["status"] == "not_fetched"
        assert g(t.repo, "rev-parse", "main") == t.start

        out = shutdown(t.cfg())
        (row,) = out["remote"]
        assert row["error"] == "host_unreachable" and row["checkoutRemoved"] is False
        (left,) = out["hostsLeft"]
        assert left["host"] == "build1" and any(t.placed.worktree in x for x in left["left"])
        assert os.path.exists(StatePaths(t.repo).team("t").shutdown)
    finally:
        sshd.start()  # the host answers again: what the test left there goes
        _cleanup(t)


def test_resume_and_remove_worker_of_a_remote_worker(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _placed_team(sshd, redis, tmp_path, monkeypatch)
    try:
        tmux = RemoteTmux(t.host, t.placed.socket)
        tmux.kill_session(session_of("t", "worker-1"))
        assert pane_views(t.cfg())["worker-1"].state == "gone"
        before = t.cfg().worker("worker-1")
        assert before is not None
        out = resume(t.cfg(), ready_timeout=60)
        (row,) = out["resumed"]
        assert row["host"] == "build1" and row["why"] == "its pane was gone"
        after = t.cfg().worker("worker-1")
        assert after is not None and after["remote"]["pane"] == row["pane"]
        assert after["launchToken"] != before.get("launchToken")
        assert pane_views(t.cfg())["worker-1"].state == "alive"
        # the new generation reached the host's mirrored config (its fence reads it)
        mirrored = ssh.run(t.host, ["cat", f"{remote.state_dir(t.placed.root, 't')}/config.json"])
        assert after["launchToken"] in mirrored.out
        # alive: resume leaves it alone
        again = resume(t.cfg())
        assert again["resumed"] == [] and again["skipped"][0]["why"] == "its pane is alive"

        gone = remove_worker(t.cfg(), "worker-1", force=True)
        far = gone["remote"]
        assert far["closedPane"] is True and far["checkoutRemoved"] is True, far
        assert g(t.repo, "branch", "--list", t.placed.branch).strip()
        assert gone["worktree"] is None  # never removed here: it was on the host
        assert not tmux.has_session(session_of("t", "worker-1"))
    finally:
        _cleanup(t)
