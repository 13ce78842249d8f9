"""One worker on another host (`omp.team.remote`), end to end on the real parts: an sshd on
127.0.0.1 with a second user as the host, a Redis store with a password, the demo agent in a
tmux pane there. It claims its task, reports to the leader and completes through the store,
commits in its checkout there; its branch comes back to the leader's repository and merges.
Its identity is fenced there as here, and the store's password is never on its screen."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from omp.record import config as team_config
from omp.store import select
from omp.store.paths import StatePaths
from omp.team import remote
from omp.team.setup import create_team
from omp.tmux import ssh
from omp.tmux.remote import RemoteTmux
from tests.helpers import poll
from tests.remote_parts import MARKS, PASSWORD, redis, sshd
from tests.store.redis_server import RedisServer
from tests.tmux.sshd_server import SshServer
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = MARKS
__all__ = ["redis", "sshd"]  # the shared fixtures

PROJECT = "p" + secrets.token_hex(4)  # the host is shared by every checkout's tests


def test_a_worker_on_another_host_works_through_the_store_and_its_branch_comes_back(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_DEMO_WORK_SECONDS", "0.2")
    url = f"{redis.url}?ns=r{secrets.token_hex(4)}"
    monkeypatch.setenv("OMP_STORE", url)
    repo = make_repo(tmp_path / "proj")
    create_team(repo, "t", 1, task="write one line")
    team = StatePaths(repo).team("t")
    token = secrets.token_hex(8)
    cfg = team_config.load(team)
    raw = dict(cfg.raw, launchToken=token)
    team_config.write(team, raw)
    host = sshd.host(dir=f".omp-remote-{secrets.token_hex(3)}")
    start = g(repo, "rev-parse", "HEAD")
    placed = remote.place(
        host,
        leader_repo=repo,
        project=PROJECT,
        team="t",
        worker="worker-1",
        task_id="1",
        description="write one line",
        teammates=[],
        config=raw,
        token=token,
        start=start,
        store_url=url,
        agent_command=[host.settings.omp, "demo-agent"],
    )
    tmux = RemoteTmux(host, placed.socket)
    try:
        poll(lambda: any(ln.startswith("❯") for ln in tmux.capture(placed.pane)), what="ready")
        remote.trigger(host, placed, "t", "worker-1")
        store = select.current(StatePaths(repo))
        assert store is not None

        def completed() -> bool:
            task = store.doc("t", "tasks", "1")
            return bool(task) and task["status"] == "completed"  # type: ignore[index]

        try:
            poll(completed, timeout=60, what="the remote worker's completion")
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; its screen:\n" + "\n".join(tmux.capture(placed.pane, 80))
            ) from None
        task = store.doc("t", "tasks", "1")
        assert task is not None and task["owner"] == "worker-1"
        leader_mail = [m["from"] for m in store.undelivered("t", "leader")]
        assert leader_mail and set(leader_mail) == {"worker-1"}
        screen = "\n".join(tmux.capture(placed.pane, lines=200))
        assert PASSWORD not in screen and redis.url not in screen
        # the identity fence holds there: a process with this worker's identity but a wrong
        # token, or naming another sender, is refused by the omp on that host
        fields = {"team_name": "t", "from": "leader", "to": "worker-1", "body": "x"}
        base_env = {
            "OMP_ROOT": placed.root,
            "OMP_STORE_FILE": placed.root.rsplit("/", 1)[0] + "/store-url",
            "OMP_TEAM": "t",
            "OMP_WORKER": "worker-1",
            "OMP_TEAM_WORKER": "1",
        }
        for token_given, code in ((token, "sender_mismatch"), ("forged", "stale_generation")):
            env = [f"{k}={v}" for k, v in {**base_env, "OMP_LAUNCH_TOKEN": token_given}.items()]
            out = ssh.run(
                host,
                ["env", *env, host.settings.omp, "team", "api", "send-message", "--input",
                 json.dumps(fields), "--json"],
                check=False,
            )  # fmt: skip
            assert json.loads(out.out)["error"] == code, out
        # its branch comes back and merges into the leader's main
        head = remote.bring_back(host, repo, PROJECT, placed)
        assert head != start
        g(repo, "merge", "--no-edit", "-q", placed.branch)
        changed = g(repo, "diff", "--name-only", start, "HEAD").split()
        assert changed, "the remote worker's commit did not come back"
    finally:
        tmux.kill_server()
        remote.remove(host, PROJECT, "t", "worker-1", placed)
        ssh.stop_master(host)
