"""The monitor watching a worker on another host, on the real parts: an sshd on 127.0.0.1 with a
second user as the host, a Redis store, the demo agent in a tmux pane there (placed by
`omp.team.remote.place`, recorded in the leader's config as `omp.record.placement` says).

Unread mail is nudged into the remote pane and the agent there reads it; the host dropping off
(the sshd stopped) is reported at once and never read as the pane gone; past the grace its worker
counts as gone (its claimed task interrupted, its mail kept); the host back is reported back and
its pane watched again."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from omp.mail.mailbox import Mailbox, new_message
from omp.monitor.loop import Monitor
from omp.monitor.policy import Intervals
from omp.record import config as team_config
from omp.record.placement import hosts_json
from omp.store.paths import StatePaths
from omp.tasks import presence, tasks
from omp.team import remote
from omp.team.setup import create_team
from omp.tmux import ssh
from omp.tmux.remote import RemoteTmux
from tests.helpers import poll
from tests.monitor.test_monitor_policy import TOKEN, own_lock
from tests.remote_parts import MARKS, redis, sshd
from tests.store.redis_server import RedisServer
from tests.tmux.sshd_server import SshServer
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = MARKS
__all__ = ["redis", "sshd"]  # the shared fixtures

# short scans and a short grace: the test waits seconds, not minutes
IV = Intervals(scan=0.2, host_grace=1.5, host_backoff=0.4)


def events(paths: StatePaths, kind: str) -> list[dict[str, Any]]:
    path = paths.monitor_events
    rows = [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []
    return [r for r in rows if r["type"] == kind]


def test_the_monitor_nudges_a_remote_pane_and_outlives_its_host_dropping_off(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path)
    url = f"{redis.url}?ns=m{secrets.token_hex(4)}"
    monkeypatch.setenv("OMP_STORE", url)
    repo = make_repo(tmp_path / "proj")
    create_team(repo, "t", 1, task="write one line")
    paths = StatePaths(repo)
    team = paths.team("t")
    token = secrets.token_hex(8)
    raw = dict(team_config.load(team).raw, launchToken=token, agent="demo")
    team_config.write(team, raw)
    host = sshd.host(dir=f".omp-remote-{secrets.token_hex(3)}")
    # the host's user (and its tmux servers, one per project) is shared with other checkouts'
    # tests running at the same time: a project name of this test's own
    project = f"m{secrets.token_hex(3)}"
    placed = remote.place(
        host, leader_repo=repo, project=project, team="t", worker="worker-1", task_id="1",
        description="write one line", teammates=[], config=raw, token=token,
        start=g(repo, "rev-parse", "HEAD"), store_url=url,
        agent_command=[host.settings.omp, "demo-agent"],
    )  # fmt: skip
    # the leader's config, as launch records a worker on another host
    for w in raw["workers"]:
        if w["name"] == "worker-1":
            w.update(paneId=None, remote=placed.to_config())
    raw["hosts"] = hosts_json({host.name: host})
    team_config.write(team, raw)
    tmux = RemoteTmux(host, placed.socket)
    try:
        poll(lambda: any(ln.startswith("❯") for ln in tmux.capture(placed.pane)), what="ready")
        own_lock(paths)
        mon = Monitor(repo, TOKEN, intervals=IV)
        box = Mailbox(team, "worker-1")
        assert box.stored is not None  # the worker's mail is in the store every host reaches
        box.append_messages([new_message("leader", "worker-1", "hello from the leader")])

        def read() -> bool:
            mon.scan()
            return not box.undelivered()[0]

        try:
            poll(read, timeout=60, what="the remote worker reading its nudged mail")
        except AssertionError as exc:
            screen = "\n".join(tmux.capture(placed.pane, 80))
            raise AssertionError(f"{exc}; {mon.last_report}; its screen:\n{screen}") from None
        screen = "\n".join(tmux.capture(placed.pane, 200))
        assert "new message" in screen and "hello from the leader" in screen
        assert mon.nudges_sent >= 1 and mon.last_report.live_teams == 1
        # the worker holds its task; its host drops off
        tasks.claim(team, "1", "worker-1")
        mon.scan()
        box.append_messages([new_message("leader", "worker-1", "kept while away")])
        sshd.stop()
        down = poll(
            lambda: (mon.scan(), events(paths, "host-unreachable"))[1], what="host unreachable"
        )
        assert down[0]["host"] == host.name
        report = mon.last_report
        assert report.live_teams == 1 and report.teams[0]["waitingFor"] == [host.name]
        assert (tasks.read(team, "1") or {})["status"] == "in_progress"  # one failure: not gone
        [row] = mon.reach.status()
        assert row["state"] == "unreachable" and row["since"]

        def gone() -> bool:
            mon.scan()
            return bool((tasks.read(team, "1") or {})["status"] == "interrupted")

        poll(gone, timeout=30, what="its worker gone after the grace")
        assert mon.reach.down[host.name].failures >= 2
        assert events(paths, "host-gone")
        hb = presence.read(team, "worker-1")
        assert hb is not None and hb.state == "offline"
        # nothing lost: the mail waits for it
        assert [m["body"] for m in box.undelivered()[0]] == ["kept while away"]
        # back
        sshd.start()
        poll(lambda: (mon.scan(), events(paths, "host-restored"))[1], timeout=30, what="restored")
        assert mon.reach.status() == [{"host": host.name, "state": "reachable"}]
        hb = presence.read(team, "worker-1")
        assert hb is not None and hb.state == "live"
        assert mon.last_report.teams[0]["remotePanes"] == 1
    finally:
        if sshd.proc is None:
            sshd.start()
        tmux.kill_server()
        remote.remove(host, project, "t", "worker-1", placed)
        ssh.stop_master(host)
