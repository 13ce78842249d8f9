"""`omp team add-worker TEAM --host build1`: a worker joins a running team on another host (a real
sshd on 127.0.0.1 with a second user as the host, the team's mail and tasks in a real Redis),
recorded as launch records one, its work checked here and merged; a local newcomer after it is
known on the host too (the config mirrored there again); a newcomer that fails to start leaves
nothing on the host or in the team."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from omp.record import config as team_config
from omp.record.placement import placed_of, session_of
from omp.store import select
from omp.store.paths import StatePaths
from omp.team.remote import project_key, state_dir
from omp.tmux import Tmux, ssh
from omp.tmux.remote import RemoteTmux
from tests.helpers import poll, run_omp
from tests.remote_parts import MARKS, local_tmux, redis, sshd
from tests.store.redis_server import RedisServer
from tests.team.test_launch_hosts_tmux import _env, _project
from tests.tmux.sshd_server import SshServer
from tests.workspace.gitrepo import g

pytestmark = MARKS
__all__ = ["local_tmux", "redis", "sshd"]  # the shared fixtures


def _mirrored(host: ssh.Host, root: str) -> dict[str, Any]:
    """The team's config as the host keeps it."""
    out = ssh.run(host, ["cat", f"{state_dir(root, 't')}/config.json"]).out
    return dict(json.loads(out))


def _names(raw: dict[str, Any]) -> list[str]:
    return [w["name"] for w in raw["workers"]]


def test_a_worker_added_on_another_host_runs_to_merged_work_and_every_host_hears_of_growth(
    sshd: SshServer, redis: RedisServer, local_tmux: Tmux, tmp_path: Path
) -> None:
    repo, host = _project(tmp_path, sshd)
    (repo / ".omp" / "agents.toml").write_text(
        '[agents.mute]\ncommand = ["sh", "-c", "sleep 60"]\nready_patterns = ["^NEVER$"]\n'
    )
    url = f"{redis.url}?ns=g{secrets.token_hex(4)}"
    env = _env(tmp_path, OMP_STORE=url)
    assert local_tmux.socket_name is not None
    remote_tmux = RemoteTmux(host, f"omp-{project_key(repo)}")
    team = StatePaths(repo).team("t")
    try:
        out = run_omp(
            "team", "launch", "1", "write one line", "--agent", "demo", "--name", "t",
            "--socket", local_tmux.socket_name, "--json", cwd=repo, env=env, timeout=120,
        )  # fmt: skip
        assert out.rc == 0, out.stdout + out.stderr
        assert "hosts" not in team_config.load(team).raw

        added = run_omp(
            "team", "add-worker", "t", "write another line", "--host", "build1", "--json",
            cwd=repo, env=env, timeout=180,
        )  # fmt: skip
        assert added.rc == 0, added.stdout + added.stderr
        r = added.json
        assert r["workers"] == [
            {"name": "worker-2", "paneId": None, "taskId": "2", "host": "build1"}
        ], r
        assert r["hosts"] == ["build1"] and "attach" in r["remoteAttach"][0]
        assert r["members"] == ["worker-1", "worker-2"]
        # recorded as launch records a remote worker (omp.record.placement)
        cfg = team_config.load(team)
        entry = cfg.worker("worker-2")
        placed = placed_of(entry)
        assert entry is not None and placed is not None and entry["paneId"] is None
        assert placed.host == "build1" and placed.branch == "omp/t/worker-2"
        assert entry["workspace"]["host"] == "build1"
        assert entry["workspace"]["path"] == placed.worktree
        assert entry["command"] and entry["agent"] == "demo"
        assert cfg.raw["hosts"]["build1"]["port"] == sshd.port
        # its pane is in its own session there, and the host's omp knows the whole team
        assert remote_tmux.has_session(session_of("t", "worker-2"))
        assert _names(_mirrored(host, placed.root)) == ["worker-1", "worker-2"]
        inbox = ssh.run(host, ["cat", f"{state_dir(placed.root, 't')}/workers/worker-2/inbox.md"])
        assert "worker-1" in inbox.out and placed.worktree in inbox.out

        # a local newcomer: the host's mirror lists it too (it may be written to from there)
        local = run_omp(
            "team", "add-worker", "t", "--json", cwd=repo, env=env, timeout=120
        )  # fmt: skip
        assert local.rc == 0, local.stdout + local.stderr
        assert local.json["workers"][0]["name"] == "worker-3"
        assert local.json["workers"][0]["paneId"] and "host" not in local.json["workers"][0]
        assert "hostsNotUpdated" not in local.json
        assert _names(_mirrored(host, placed.root)) == ["worker-1", "worker-2", "worker-3"]

        # the remote newcomer's work comes back, is checked here, and merges
        os.environ["OMP_STORE"] = url
        try:
            store = select.current(StatePaths(repo))
            assert store is not None

            def done() -> bool:
                docs = {t["id"]: t for t in store.docs("t", "tasks")}
                return all(docs.get(i, {}).get("status") == "completed" for i in ("1", "2"))

            poll(done, timeout=90, what="both tasks verified")
            tasks = {t["id"]: t for t in store.docs("t", "tasks")}
        finally:
            del os.environ["OMP_STORE"]
        assert tasks["2"]["verify"]["status"] == "passed", tasks["2"]
        assert g(repo, "rev-parse", "omp/t/worker-2") == tasks["2"]["work"]["commit"]
        merged = run_omp("team", "merge", "t", "--json", cwd=repo, env=env, timeout=120)
        assert merged.rc == 0, merged.stdout + merged.stderr
        assert sorted(merged.json["merged"]) == ["worker-1", "worker-2"]

        # a newcomer that never gets ready: undone here and on the host
        before = team.config.read_bytes()
        failed = run_omp(
            "team", "add-worker", "t", "--host", "build1", "--agent", "mute",
            "--ready-timeout", "3", "--json", cwd=repo, env=env, timeout=180,
        )  # fmt: skip
        assert failed.rc != 0
        assert failed.json["error"] == "launch_timeout", failed.json
        assert "the team is as before" in failed.json["message"]
        after = team_config.load(team).raw
        assert _names(after) == ["worker-1", "worker-2", "worker-3"]
        assert after["hosts"] == json.loads(before)["hosts"]
        assert not remote_tmux.has_session(session_of("t", "worker-4"))
        base = str(Path(placed.root).parent)
        left = ssh.run(
            host,
            ["sh", "-c", f"ls {base}/worktrees/t; git -C {base}/repo.git branch --list 'omp/*'; "
             f"ls {state_dir(placed.root, 't')}/workers"],
        ).out  # fmt: skip
        assert "worker-4" not in left, left
        assert "worker-2" in left  # the team's own worker there is untouched
        assert _names(_mirrored(host, placed.root)) == ["worker-1", "worker-2", "worker-3"]

        # a local worker taken off the team: the host's omp hears of it too
        gone = run_omp(
            "team", "remove-worker", "t", "worker-3", "--force", "--json",
            cwd=repo, env=env, timeout=120,
        )  # fmt: skip
        assert gone.rc == 0, gone.stdout + gone.stderr
        assert "hostsNotUpdated" not in gone.json and "remote" not in gone.json
        assert _names(_mirrored(host, placed.root)) == ["worker-1", "worker-2"]
    finally:
        remote_tmux.kill_server()
        ssh.stop_master(host)


def test_add_worker_on_a_host_refuses_before_touching_anything(
    sshd: SshServer, local_tmux: Tmux, tmp_path: Path
) -> None:
    """No store every host reaches, more hosts' workers than newcomers, a host that does not
    answer: refused, the team as it was, nothing placed."""
    repo, _ = _project(tmp_path, sshd)
    env = _env(tmp_path)
    assert local_tmux.socket_name is not None
    out = run_omp(
        "team", "launch", "1", "--agent", "demo", "--name", "t",
        "--socket", local_tmux.socket_name, "--json", cwd=repo, env=env, timeout=120,
    )  # fmt: skip
    assert out.rc == 0, out.stdout + out.stderr
    team = StatePaths(repo).team("t")
    before = team.config.read_bytes()
    no_store = run_omp("team", "add-worker", "t", "--host", "build1", "--json", cwd=repo, env=env)
    assert no_store.json["error"] == "store_required", no_store.json
    stored = _env(tmp_path, OMP_STORE="redis://127.0.0.1:1/0")
    too_many = run_omp(
        "team", "add-worker", "t", "1", "--host", "build1:2", "--json", cwd=repo, env=stored
    )  # fmt: skip
    assert too_many.json["error"] == "invalid_input", too_many.json
    assert "only 1 added" in too_many.json["message"]
    bad = run_omp("team", "add-worker", "t", "--host", "build1:x", "--json", cwd=repo, env=stored)
    assert bad.json["error"] == "invalid_input" and "--host" in bad.json["message"]
    sshd.stop()
    down = run_omp(
        "team", "add-worker", "t", "--host", "build1", "--json", cwd=repo, env=stored, timeout=120
    )  # fmt: skip
    assert down.json["error"] == "host_unreachable", down.json
    assert team.config.read_bytes() == before
    assert len(local_tmux.cmd("list-panes", "-a", "-F", "#{pane_id}").split()) == 2
