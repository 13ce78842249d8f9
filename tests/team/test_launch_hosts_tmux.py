"""`omp team launch 4 --host build1:2`: two demo workers here and two on another host (a real
sshd on 127.0.0.1 with a second user as the host), the team's mail and tasks in a real Redis
with a password. Each worker claims, commits in its own checkout and completes; the remote
workers' completions are checked here once the monitor has brought their branches back, and
every branch merges into the leader's main. A launch that cannot place its remote workers
refuses before it touches anything."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from omp.record import config as team_config
from omp.record.placement import placed_of
from omp.store import select
from omp.store.paths import StatePaths
from omp.team.remote import project_key
from omp.tmux import Tmux, ssh
from omp.tmux.remote import RemoteTmux
from tests.helpers import child_env, poll, run_omp
from tests.remote_parts import MARKS, PASSWORD, local_tmux, redis, sshd
from tests.store.redis_server import RedisServer
from tests.tmux.sshd_server import SshServer
from tests.workspace.gitrepo import IDENTITY, g, make_repo

pytestmark = MARKS
__all__ = ["local_tmux", "redis", "sshd"]  # the shared fixtures


def _host_toml(host: ssh.Host) -> str:
    s = host.settings
    return (
        "[hosts.build1]\n"
        f'address = "{s.address}"\nport = {s.port}\nidentity_file = "{s.identity_file}"\n'
        f'known_hosts = "{s.known_hosts}"\nomp = "{s.omp}"\ndir = "{s.dir}"\n'
    )


def _project(tmp_path: Path, sshd: SshServer, verify: str = "ls work/*.md") -> tuple[Path, Any]:
    repo = make_repo(tmp_path / "proj")
    host = sshd.host(dir=f".omp-remote-{secrets.token_hex(3)}")
    (repo / ".omp").mkdir(exist_ok=True)
    (repo / ".omp" / "config.toml").write_text(
        _host_toml(host) + f'\n[team]\nverify = "{verify}"\n', encoding="utf-8"
    )
    return repo, host


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {
        "TMPDIR": os.environ["TMPDIR"],  # the ssh masters' short private directory
        "OMP_DEMO_WORK_SECONDS": "0.2",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "SHELL": "/bin/sh",
        **IDENTITY,
    }
    env = child_env(home, **{**base, **extra})
    for key in list(env):
        if key.startswith("TMUX"):
            del env[key]
    return env


def test_two_local_and_two_remote_demo_workers_run_to_merged_verified_work(
    sshd: SshServer, redis: RedisServer, local_tmux: Tmux, tmp_path: Path
) -> None:
    repo, host = _project(tmp_path, sshd)
    url = f"{redis.url}?ns=h{secrets.token_hex(4)}"
    env = _env(tmp_path, OMP_STORE=url)
    assert local_tmux.socket_name is not None
    remote_tmux = RemoteTmux(host, f"omp-{project_key(repo)}")
    try:
        out = run_omp(
            "team", "launch", "4", "write one line each", "--agent", "demo", "--name", "t",
            "--host", "build1:2", "--socket", local_tmux.socket_name, "--json",
            cwd=repo, env=env, timeout=180,
        )  # fmt: skip
        assert out.rc == 0, out.stdout + out.stderr
        r = out.json
        workers = {w["name"]: w for w in r["workers"]}
        assert [w.get("host") for w in r["workers"]] == [None, None, "build1", "build1"]
        assert workers["worker-3"]["paneId"] is None and workers["worker-1"]["paneId"]
        assert r["hosts"] == ["build1"] and len(r["remoteAttach"]) == 2
        cfg = team_config.load(StatePaths(repo).team("t"))
        placed = placed_of(cfg.worker("worker-3"))
        assert placed is not None and placed.host == "build1"
        assert cfg.raw["hosts"]["build1"]["port"] == sshd.port
        # the store's password is in no file of the team's and on no remote screen
        assert PASSWORD not in StatePaths(repo).team("t").config.read_text(encoding="utf-8")
        os.environ["OMP_STORE"] = url
        try:
            store = select.current(StatePaths(repo))
            assert store is not None

            def all_done() -> bool:
                docs = store.docs("t", "tasks")
                return len(docs) == 4 and all(t["status"] == "completed" for t in docs)

            try:
                poll(all_done, timeout=60, what="four verified completions")
            except AssertionError as exc:
                shown = [t for t in store.docs("t", "tasks") if t["id"] in ("3", "4")]
                screens = {
                    w: "\n".join(remote_tmux.capture(p.pane, 30))
                    for w in ("worker-3", "worker-4")
                    if (p := placed_of(cfg.worker(w))) is not None
                }
                raise AssertionError(f"{exc}: {shown}\n{screens}") from None
            tasks = {t["id"]: t for t in store.docs("t", "tasks")}
        finally:
            del os.environ["OMP_STORE"]
        for tid in ("1", "2", "3", "4"):
            assert tasks[tid]["verify"]["status"] == "passed", tasks[tid]
        # the remote workers' checks ran here, on their branches brought back
        for w in ("worker-3", "worker-4"):
            head = g(repo, "rev-parse", f"omp/t/{w}")
            assert head == tasks[w[-1]]["work"]["commit"]
        for p in (placed_of(cfg.worker("worker-3")), placed_of(cfg.worker("worker-4"))):
            assert p is not None
            screen = "\n".join(remote_tmux.capture(p.pane, 200))
            assert PASSWORD not in screen
            # omp's own knobs reach a remote agent (OMP_DEMO_WORK_SECONDS), credentials never
            assert "work takes 0.2 s" in screen, screen
            state = f"{p.root}/.omp/state/team/t"
            seen = ssh.run(host, ["sh", "-c", f"cat {state}/config.json {state}/workers/*/*.md"])
            assert "worker-3" in seen.out and PASSWORD not in seen.out
            assert redis.url.split("@")[-1] not in seen.out  # not even the store's address
        merged = run_omp("team", "merge", "t", "--json", cwd=repo, env=env, timeout=120)
        assert merged.rc == 0, merged.stdout + merged.stderr
        assert sorted(merged.json["merged"]) == [f"worker-{i}" for i in (1, 2, 3, 4)]
        files = sorted(p.name for p in (repo / "work").glob("*.md"))
        assert len(files) == 4, files
    finally:
        remote_tmux.kill_server()
        ssh.stop_master(host)


def test_a_launch_whose_host_cannot_be_reached_refuses_and_leaves_nothing(
    sshd: SshServer, redis: RedisServer, local_tmux: Tmux, tmp_path: Path
) -> None:
    repo, _ = _project(tmp_path, sshd)
    env = _env(tmp_path, OMP_STORE=f"{redis.url}?ns=x{secrets.token_hex(4)}")
    sshd.stop()  # the host is down
    assert local_tmux.socket_name is not None
    before = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if ".git" not in p.parts)
    out = run_omp(
        "team", "launch", "2", "x", "--agent", "demo", "--name", "t", "--host", "build1:1",
        "--socket", local_tmux.socket_name, "--json", cwd=repo, env=env, timeout=120,
    )  # fmt: skip
    assert out.rc != 0
    assert out.json["error"] == "host_unreachable", out.json
    assert "build1" in out.json["message"]
    after = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if ".git" not in p.parts)
    assert after == before
    assert not local_tmux.has_session("omp-team-t")


def test_remote_workers_need_a_store_every_host_reaches(
    sshd: SshServer, local_tmux: Tmux, tmp_path: Path
) -> None:
    repo, _ = _project(tmp_path, sshd)
    env = _env(tmp_path)
    assert local_tmux.socket_name is not None
    out = run_omp(
        "team", "launch", "2", "x", "--agent", "demo", "--name", "t", "--host", "build1:1",
        "--socket", local_tmux.socket_name, "--json", cwd=repo, env=env, timeout=60,
    )  # fmt: skip
    assert out.json["error"] == "store_required", out.json
    assert not StatePaths(repo).team("t").dir.exists()
    too_many = run_omp(
        "team", "launch", "2", "x", "--agent", "demo", "--host", "build1:3", "--json",
        cwd=repo, env=_env(tmp_path, OMP_STORE="redis://127.0.0.1:1/0"), timeout=60,
    )  # fmt: skip
    assert too_many.json["error"] == "invalid_input"
    assert "3 worker(s)" in too_many.json["message"]
    bad = run_omp("team", "launch", "2", "x", "--host", "build1:zero", "--json", cwd=repo, env=env)
    assert bad.json["error"] == "invalid_input" and "--host" in bad.json["message"]
    assert json.loads(bad.stdout)["ok"] is False


def test_the_team_runs_to_merged_work_through_a_dropped_ssh_link_and_a_killed_store(
    sshd: SshServer, redis: RedisServer, local_tmux: Tmux, tmp_path: Path
) -> None:
    """The link to the host drops while its workers work, and the store is SIGKILLed and
    started again: the remote completions wait (queued, never interrupted) until the host
    answers again, then are checked and merge with the others; no task is lost."""
    repo, host = _project(tmp_path, sshd)
    url = f"{redis.url}?ns=c{secrets.token_hex(4)}"
    env = _env(tmp_path, OMP_STORE=url, OMP_DEMO_WORK_SECONDS="2")
    assert local_tmux.socket_name is not None
    remote_tmux = RemoteTmux(host, f"omp-{project_key(repo)}")
    try:
        out = run_omp(
            "team", "launch", "4", "write one line each", "--agent", "demo", "--name", "t",
            "--host", "build1:2", "--socket", local_tmux.socket_name, "--json",
            cwd=repo, env=env, timeout=180,
        )  # fmt: skip
        assert out.rc == 0, out.stdout + out.stderr
        sshd.stop()  # the link drops: the master and every connection with it
        redis.kill()  # and the store dies (its append-only file fsynced on every write)
        redis.start()
        os.environ["OMP_STORE"] = url
        try:
            store = select.current(StatePaths(repo))
            assert store is not None

            def status_of(tid: str) -> str:
                doc = store.doc("t", "tasks", tid)
                return str(doc["status"]) if doc else "missing"

            # the remote workers finish while the leader cannot reach their host: their
            # checks wait for the link, and nothing calls them gone
            poll(
                lambda: all(status_of(t) == "verifying" for t in ("3", "4")),
                timeout=90,
                what="the remote completions queued",
            )
            poll(
                lambda: all(status_of(t) == "completed" for t in ("1", "2")),
                timeout=90,
                what="the local workers' verified completions",
            )
            assert {status_of(t) for t in ("3", "4")} == {"verifying"}
            sshd.start()  # the host answers again
            poll(
                lambda: all(status_of(t) == "completed" for t in ("1", "2", "3", "4")),
                timeout=120,
                what="all four verified",
            )
            docs = store.docs("t", "tasks")
        finally:
            del os.environ["OMP_STORE"]
        assert len(docs) == 4 and all(t["verify"]["status"] == "passed" for t in docs)
        merged = run_omp("team", "merge", "t", "--json", cwd=repo, env=env, timeout=120)
        assert merged.rc == 0, merged.stdout + merged.stderr
        assert sorted(merged.json["merged"]) == [f"worker-{i}" for i in (1, 2, 3, 4)]
    finally:
        with contextlib.suppress(Exception):
            if sshd.proc is None:
                sshd.start()
            remote_tmux.kill_server()
        ssh.stop_master(host)


def test_a_launch_that_fails_on_the_host_midway_leaves_nothing_here_or_there(
    sshd: SshServer, redis: RedisServer, local_tmux: Tmux, tmp_path: Path
) -> None:
    """The host answers and has everything, but its worker's checkout cannot be made (a `dir`
    the host's user may not write): the launch fails as a whole, the local workers' panes and
    worktrees go, the team is not recorded, and the worker already placed on the host goes."""
    repo = make_repo(tmp_path / "proj")
    ok_dir = f".omp-remote-{secrets.token_hex(3)}"
    good = sshd.host(dir=ok_dir)
    (repo / ".omp").mkdir(exist_ok=True)
    (repo / ".omp" / "config.toml").write_text(
        _host_toml(good)
        + _host_toml(sshd.host(dir="/proc/no-such-place")).replace("build1", "build2"),
        encoding="utf-8",
    )
    env = _env(tmp_path, OMP_STORE=f"{redis.url}?ns=f{secrets.token_hex(4)}")
    assert local_tmux.socket_name is not None
    out = run_omp(
        "team", "launch", "3", "x", "--agent", "demo", "--name", "t", "--host", "build1:1",
        "--host", "build2:1", "--socket", local_tmux.socket_name, "--json",
        cwd=repo, env=env, timeout=180,
    )  # fmt: skip
    assert out.rc != 0 and out.json["error"] == "launch_failed", out.json
    assert "build2" in out.json["message"]
    assert not StatePaths(repo).team("t").dir.exists()
    assert not local_tmux.has_session("omp-team-t")
    assert g(repo, "branch", "--list", "omp/t/*") == ""
    remote = RemoteTmux(good, f"omp-{project_key(repo)}")
    try:
        assert remote.server_identity() is None or not remote.has_session("omp-t-worker-2")
        left = ssh.run(good, ["sh", "-c", f"ls {ok_dir}/*/worktrees/t 2>/dev/null || true"])
        assert left.out.strip() == "", left
        # nor its branch there: a later launch of a team of that name starts afresh
        branches = ssh.run(good, ["sh", "-c", f"git -C {ok_dir}/*/repo.git branch --list"])
        assert "omp/t/" not in branches.out, branches
    finally:
        remote.kill_server()
        ssh.stop_master(good)


def test_a_remote_agent_that_exits_at_once_leaves_nothing_on_its_host(
    sshd: SshServer, redis: RedisServer, local_tmux: Tmux, tmp_path: Path
) -> None:
    """Every worker on the host, its agent gone as soon as it starts: whether its pane was
    already gone when omp set it up or died before it was ready, the launch fails and neither
    its checkout nor its branch stays there."""
    repo, host = _project(tmp_path, sshd)
    (repo / ".omp" / "agents.toml").write_text('[agents.quit]\ncommand = ["true"]\n')
    env = _env(tmp_path, OMP_STORE=f"{redis.url}?ns=q{secrets.token_hex(4)}")
    assert local_tmux.socket_name is not None
    remote = RemoteTmux(host, f"omp-{project_key(repo)}")
    try:
        out = run_omp(
            "team", "launch", "2", "x", "--agent", "quit", "--name", "t", "--host", "build1:2",
            "--socket", local_tmux.socket_name, "--ready-timeout", "20", "--json",
            cwd=repo, env=env, timeout=180,
        )  # fmt: skip
        assert out.rc != 0, out.stdout
        assert out.json["error"] in ("launch_failed", "launch_worker_exited"), out.json
        assert not StatePaths(repo).team("t").dir.exists()
        base = f"{host.settings.dir}/{project_key(repo)}"
        left = ssh.run(
            host,
            ["sh", "-c", f"ls {base}/worktrees/t 2>/dev/null; "
             f"git -C {base}/repo.git branch --list 'omp/*' 2>/dev/null; true"],
        ).out  # fmt: skip
        assert left.strip() == "", left
    finally:
        remote.kill_server()
        ssh.stop_master(host)
