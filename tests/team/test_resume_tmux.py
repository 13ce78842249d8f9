"""`omp team resume` on real tmux (private servers), with demo workers in the middle of their
tasks: a killed tmux server, a simulated reboot, one dead pane of a live team."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.cli import replies as reply_types
from omp.record import config as team_config
from omp.store.paths import StatePaths, TeamPaths
from omp.tmux import Tmux
from tests.helpers import (
    assert_reply,
    child_env,
    isolate,
    make_project,
    poll,
    records,
    run_omp,
)

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

WORK = "4"  # seconds of demo work: long enough to kill a server under it


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    return make_project(tmp_path / "proj")


def env_for(tmux: Tmux, home: Path, **extra: str) -> dict[str, str]:
    return child_env(
        home,
        OMP_TMUX_SOCKET=str(tmux.socket_name),
        OMP_DEMO_WORK_SECONDS=WORK,
        SHELL="/bin/sh",
        **extra,
    )


def omp(project: Path, env: dict[str, str], *args: str) -> Any:
    r = run_omp(*args, cwd=project, env=env, timeout=120)
    return r


def status(project: Path, env: dict[str, str], team: str = "t") -> dict[str, Any]:
    r = omp(project, env, "team", "status", team, "--json")
    assert r.rc == 0, r
    return dict(r.json["teams"][0])


def team_of(project: Path, name: str = "t") -> TeamPaths:
    return StatePaths(project).team(name)


def all_working(project: Path, env: dict[str, str], n: int) -> bool:
    tasks = status(project, env)["tasks"]
    return len(tasks) == n and all(t["status"] == "in_progress" for t in tasks)


def claims(team: TeamPaths) -> dict[str, str]:
    """task id -> claim token, from the task files."""
    out = {}
    for path in sorted(team.tasks_dir.glob("*.json")):
        task = json.loads(path.read_text())
        out[task["id"]] = task.get("claimToken")
    return out


def claimed_count(team: TeamPaths) -> dict[str, int]:
    """How many times each task was claimed (pending -> in_progress), from the team's history."""
    out: dict[str, int] = {}
    for ev in records(team.events):
        if ev.get("type") == "task" and ev.get("from") == "pending":
            out[ev["taskId"]] = out.get(ev["taskId"], 0) + 1
    return out


def ask(project: Path, env: dict[str, str], worker: str) -> str:
    msg = {"team_name": "t", "from": "leader", "to": worker, "body": f"status? {worker}"}
    r = omp(project, env, "team", "api", "send-message", "--input", json.dumps(msg), "--json")
    assert r.rc == 0, r
    return str(r.json["messageId"])


def receipts(team: TeamPaths, worker: str, mid: str) -> int:
    lines = records(team.mailbox(worker))
    return sum(1 for r in lines if r.get("type") == "delivery-receipt" and r["messageId"] == mid)


def replies(team: TeamPaths, mid: str) -> list[dict[str, Any]]:
    return [m for m in records(team.mailbox("leader")) if m.get("ref_message_id") == mid]


def as_pane(project: Path, env: dict[str, str], worker: str, token: str) -> Any:
    """An API call from a pane that carries `worker`'s identity with `token`."""
    pane_env = {**env, "OMP_TEAM": "t", "OMP_WORKER": worker, "OMP_LAUNCH_TOKEN": token}
    msg = {"team_name": "t", "from": worker, "to": "leader", "body": "still here"}
    return omp(project, pane_env, "team", "api", "send-message", "--input", json.dumps(msg),
               "--json")  # fmt: skip


def test_a_killed_server_mid_task_then_resume(
    omp_tmux: Tmux, tmux_env: Path, project: Path
) -> None:
    env = env_for(omp_tmux, tmux_env)
    r = omp(project, env, "team", "launch", "3:demo", "count to 3", "--name", "t", "--json")
    assert r.rc == 0, r
    team = team_of(project)
    cfg = team_config.load(team)
    entry = cfg.worker("worker-1") or {}
    assert entry["agent"] == "demo" and entry["command"][-1] == "demo-agent"
    assert "OMP_DEMO_WORK_SECONDS" in entry["forwardedEnv"]
    poll(lambda: all_working(project, env, 3), timeout=60, what="every task in progress")
    before = claims(team)
    old_token = str(cfg.raw["launchToken"])
    omp_tmux.kill_server()
    st = status(project, env)
    assert st["resume"]["workers"] == ["worker-1", "worker-2", "worker-3"]
    # mail sent while nothing runs: kept, typed to nobody
    asked = {w: ask(project, env, w) for w in ("worker-1", "worker-2", "worker-3")}
    r = omp(project, env, "team", "resume", "t", "--json")
    assert r.rc == 0, r
    assert [w["name"] for w in r.json["resumed"]] == ["worker-1", "worker-2", "worker-3"]
    assert r.json["place"] == "new session" and r.json["skipped"] == []
    assert_reply(r.json, reply_types.ResumeReply)
    for w in r.json["resumed"]:
        assert_reply(w, reply_types.ResumedWorker)
    assert all(w["conversation"] == "new" for w in r.json["resumed"])  # the demo has no session
    done = poll(lambda: status(project, env)["allDone"] and status(project, env), timeout=90)
    # every task completed, by its first claimant, under its first claim: claimed once
    assert [(t["status"], t["owner"]) for t in done["tasks"]] == [
        ("completed", f"worker-{i}") for i in (1, 2, 3)
    ]
    assert claims(team) == before
    assert claimed_count(team) == {"1": 1, "2": 1, "3": 1}
    # each message delivered once, answered once
    for w, mid in asked.items():
        poll(lambda mid=mid: replies(team, mid), timeout=30, what=f"{w}'s answer")  # type: ignore[misc]
        assert receipts(team, w, mid) == 1
        assert len(replies(team, mid)) == 1
    # a pane of the earlier generation is fenced off; the new one acts
    fenced = as_pane(project, env, "worker-1", old_token)
    assert fenced.rc == 1 and fenced.json["error"] == "stale_generation", fenced
    cfg = team_config.load(team)
    entry = cfg.worker("worker-1") or {}
    assert entry["launchToken"] != old_token and entry["resumes"] == 1
    assert as_pane(project, env, "worker-1", entry["launchToken"]).rc == 0
    assert "resume" not in status(project, env) or status(project, env)["resume"] is None
    assert omp(project, env, "team", "shutdown", "t").rc == 0


def test_one_dead_pane_of_a_live_team_is_resumed_and_the_others_are_left_alone(
    omp_tmux: Tmux, tmux_env: Path, project: Path
) -> None:
    env = env_for(omp_tmux, tmux_env)
    r = omp(project, env, "team", "launch", "3:demo", "count to 3", "--name", "t", "--json")
    assert r.rc == 0, r
    team = team_of(project)
    poll(lambda: all_working(project, env, 3), timeout=60, what="every task in progress")
    before = claims(team)
    cfg = team_config.load(team)
    panes = {w: cfg.pane_of(w) or "" for w in cfg.worker_names}
    states = omp_tmux.pane_states(list(panes.values()))
    pids = {w: st.pid for w, p in panes.items() if (st := states[p]) is not None}
    omp_tmux.send_key(panes["worker-2"], "C-c")  # its agent exits; the pane stays, dead

    def worker_2_dead() -> bool:
        views = {w["name"]: w["pane"] for w in status(project, env)["workers"]}
        return bool(views["worker-2"] == "dead")

    poll(worker_2_dead, timeout=30, what="worker-2's pane dead")
    # resumed without the variable it was launched with: named, not guessed
    env2 = {k: v for k, v in env.items() if k != "OMP_DEMO_WORK_SECONDS"}
    r = omp(project, env2, "team", "resume", "t", "--json")
    assert r.rc == 0, r
    assert [w["name"] for w in r.json["resumed"]] == ["worker-2"]
    assert r.json["resumed"][0]["missingEnv"] == ["OMP_DEMO_WORK_SECONDS"]
    assert {w["name"] for w in r.json["skipped"]} == {"worker-1", "worker-3"}
    assert r.json["place"] == "in place"
    assert_reply(r.json, reply_types.ResumeReply)
    new = r.json["resumed"][0]["paneId"]
    after = omp_tmux.pane_states([*panes.values(), new])
    for w in ("worker-1", "worker-3"):  # untouched: the same panes, the same processes
        st = after[panes[w]]
        assert st is not None and not st.dead and st.pid == pids[w]
    assert after[panes["worker-2"]] is None  # the dead pane was closed
    st = after[new]
    assert st is not None and st.window_id == cfg.raw["tmuxIdentity"]["windowId"]
    cfg2 = team_config.load(team)
    assert cfg2.raw["tmuxIdentity"] == cfg.raw["tmuxIdentity"]
    assert (cfg2.worker("worker-1") or {}).get("launchToken") is None  # still the launch's
    done = poll(lambda: status(project, env)["allDone"] and status(project, env), timeout=90)
    assert [(t["status"], t["owner"]) for t in done["tasks"]] == [
        ("completed", f"worker-{i}") for i in (1, 2, 3)
    ]
    assert claims(team) == before and claimed_count(team) == {"1": 1, "2": 1, "3": 1}
    again = omp(project, env, "team", "resume", "t", "--json")
    assert again.rc == 0 and again.json["resumed"] == [], again  # every pane alive: nothing
    assert_reply(again.json, reply_types.ResumeReply)
    assert omp(project, env, "team", "shutdown", "t").rc == 0


@pytest.fixture
def socket_dirs() -> Iterator[tuple[Path, Path]]:
    """Two short TMUX_TMPDIRs (a socket path has ~100 bytes at most): before and after."""
    base = Path(tempfile.mkdtemp(prefix="omp-rs-", dir="/tmp"))
    yield base / "a", base / "b"
    for d in (base / "a", base / "b"):
        for sock in d.glob("tmux-*/*"):
            Tmux(socket_path=str(sock)).kill_server()
    shutil.rmtree(base, ignore_errors=True)


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_resume_after_a_reboot(
    tmux_env: Path, project: Path, socket_dirs: tuple[Path, Path]
) -> None:
    before_dir, after_dir = socket_dirs
    before_dir.mkdir()
    name = f"omp-test-{os.urandom(4).hex()}"
    env = child_env(
        tmux_env, OMP_DEMO_WORK_SECONDS=WORK, SHELL="/bin/sh", TMUX_TMPDIR=str(before_dir),
        OMP_TMUX_SOCKET=name,
    )  # fmt: skip
    r = omp(project, env, "team", "launch", "2:demo", "count to 2", "--name", "t", "--json")
    assert r.rc == 0, r
    team = team_of(project)
    poll(lambda: all_working(project, env, 2), timeout=60, what="every task in progress")
    state = StatePaths(project)
    owner = poll(lambda: json.loads(state.monitor_owner.read_text()).get("pid"), timeout=30)
    # the machine goes down: no tmux server, no monitor, no socket directory, stale pids
    sock = team_config.load(team).raw["tmuxIdentity"]["socketPath"]
    assert sock.startswith(str(before_dir))
    Tmux(socket_path=sock).kill_server()
    os.kill(owner, signal.SIGKILL)
    poll(lambda: not os.path.exists(f"/proc/{owner}") or _zombie(owner), timeout=10)
    shutil.rmtree(before_dir)
    gone = dead_pid()
    lock = json.loads(state.monitor_owner.read_text())
    state.monitor_owner.write_text(json.dumps({**lock, "pid": gone}))
    for w in ("worker-1", "worker-2"):
        hb = json.loads(team.heartbeat(w).read_text())
        team.heartbeat(w).write_text(json.dumps({**hb, "pid": gone}))
    # after the reboot: another socket directory, no --socket: only the team's files to go by
    after_dir.mkdir()
    env2 = {k: v for k, v in env.items() if k != "OMP_TMUX_SOCKET"}
    env2["TMUX_TMPDIR"] = str(after_dir)
    st = status(project, env2)
    assert not st["running"] and st["resume"]["workers"] == ["worker-1", "worker-2"]
    r = omp(project, env2, "team", "resume", "t", "--json")
    assert r.rc == 0, r
    assert [w["name"] for w in r.json["resumed"]] == ["worker-1", "worker-2"]
    ident = team_config.load(team).raw["tmuxIdentity"]
    assert ident["socketPath"] == str(after_dir / f"tmux-{os.geteuid()}" / name)
    done = poll(lambda: status(project, env2)["allDone"] and status(project, env2), timeout=90)
    assert [(t["status"], t["owner"]) for t in done["tasks"]] == [
        ("completed", "worker-1"),
        ("completed", "worker-2"),
    ]
    assert claimed_count(team) == {"1": 1, "2": 1}
    # the monitor came back: a new one, alive
    new_owner = poll(
        lambda: (
            (pid := json.loads(state.monitor_owner.read_text()).get("pid")) not in (None, gone)
            and pid
        ),
        timeout=30,
        what="a new monitor",
    )
    assert os.path.exists(f"/proc/{new_owner}")
    assert omp(project, env2, "team", "shutdown", "t").rc == 0


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    out = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_worker_with_a_worktree_resumes_in_it_and_is_told_where_it_stands(
    omp_tmux: Tmux, tmux_env: Path, project: Path, tmp_path: Path
) -> None:
    (project / ".git").rmdir()
    git(project, "init", "-q", "-b", "main")
    (project / "a.txt").write_text("a\n")
    git(project, "add", "a.txt")
    git(project, "commit", "-qm", "base")
    base = git(project, "rev-parse", "HEAD").strip()
    env = env_for(omp_tmux, tmux_env)
    # A shared team, then worker-1 given a worktree of its own by hand, recorded as launch
    # records one, beside a worker with none (launch's own worktrees: tests/team/test_worktree*)
    r = omp(
        project, env, "team", "launch", "2:demo", "count", "--name", "t", "--workspace", "shared",
        "--json",
    )  # fmt: skip
    assert r.rc == 0, r
    poll(lambda: status(project, env)["allDone"], timeout=60)
    wt = tmp_path / "wt-worker-1"
    git(project, "worktree", "add", "-q", "-b", "omp/t/worker-1", str(wt), base)
    (wt / "b.txt").write_text("b\n")
    git(wt, "add", "b.txt")
    git(wt, "commit", "-qm", "work")
    (wt / "c.txt").write_text("uncommitted\n")
    team = team_of(project)
    raw = json.loads(team.config.read_text())
    raw["workers"][0]["workspace"] = {
        "kind": "worktree", "path": str(wt), "branch": "omp/t/worker-1", "base": base,
    }  # fmt: skip
    team.config.write_text(json.dumps(raw))
    omp_tmux.kill_server()
    r = omp(project, env, "team", "resume", "t", "--json")
    assert r.rc == 0, r
    w1 = r.json["resumed"][0]
    assert w1["cwd"] == str(wt) and w1["worktree"]["ahead"] == 1
    assert w1["worktree"]["uncommitted"] == ["c.txt"]
    assert r.json["resumed"][1]["cwd"] == str(project)  # no workspace: the team's directory
    pane = w1["paneId"]
    path = omp_tmux.cmd("display-message", "-p", "-t", pane, "#{pane_current_path}").strip()
    assert os.path.realpath(path) == os.path.realpath(wt)
    text = team.resume_inbox("worker-1").read_text()
    assert f"Directory: {wt}\nBranch: omp/t/worker-1\nCommits ahead of base: 1\n" in text
    assert "Uncommitted files: 1 (c.txt)" in text
    assert "Status: completed. Nothing is left to do on it." in text
    # its worktree gone: refused, nothing started
    omp_tmux.kill_server()
    shutil.rmtree(wt)
    before = {p: p.read_bytes() for p in team.dir.rglob("*.json")}
    r = omp(project, env, "team", "resume", "t", "--json")
    assert r.rc == 1 and r.json["error"] == "worktree_missing", r
    assert {p: p.read_bytes() for p in team.dir.rglob("*.json")} == before
    assert omp_tmux.server_identity() is None  # no server was started
    # the way on it gives, run as given (git still lists the deleted worktree: a plain
    # `git worktree add` is refused there), then resume works
    restore = re.search(r"\((git -C .+? worktree add .+?)\), then resume", r.json["message"])
    assert restore is not None, r.json["message"]
    done = subprocess.run(restore[1], shell=True, cwd="/", env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert (wt / "b.txt").read_text() == "b\n"  # its branch, committed work and all
    r = omp(project, env, "team", "resume", "t", "--worker", "worker-1", "--json")
    assert r.rc == 0 and [w["name"] for w in r.json["resumed"]] == ["worker-1"], r
    # omp run in the new checkout without OMP_ROOT finds the team (the mark was written anew)
    r = omp(wt, {k: v for k, v in env.items() if k != "OMP_ROOT"}, "team", "status", "t")
    assert r.rc == 0, r


def test_resume_inside_tmux_splits_the_callers_window(
    omp_tmux: Tmux, tmux_env: Path, project: Path
) -> None:
    env = env_for(omp_tmux, tmux_env)
    r = omp(project, env, "team", "launch", "2:demo", "count", "--name", "t", "--json")
    assert r.rc == 0, r
    poll(lambda: all_working(project, env, 2), timeout=60, what="every task in progress")
    omp_tmux.kill_server()
    # the person is back in tmux (a new server on the same socket): resume from their pane
    _, wid, leader = omp_tmux.new_session("mine", cwd=project, command=["sh"])
    info = omp_tmux.server_identity()
    assert info is not None
    inside = {**env, "TMUX": f"{info['socket_path']},{info['server_pid']},0", "TMUX_PANE": leader}
    r = omp(project, inside, "team", "resume", "t", "--json")
    assert r.rc == 0, r
    assert r.json["place"] == "your window"
    states = omp_tmux.pane_states([w["paneId"] for w in r.json["resumed"]])
    assert all(st is not None and st.window_id == wid for st in states.values())
    assert not omp_tmux.has_session("omp-team-t")
    raw = team_config.load(team_of(project)).raw
    assert raw["leaderPaneId"] == leader and raw["createdSession"] is False
    assert raw["tmuxIdentity"]["serverPid"] == info["server_pid"]
    done = poll(lambda: status(project, env)["allDone"] and status(project, env), timeout=90)
    assert [t["owner"] for t in done["tasks"]] == ["worker-1", "worker-2"]
    assert claimed_count(team_of(project)) == {"1": 1, "2": 1}
    assert omp(project, env, "team", "shutdown", "t").rc == 0
    assert omp_tmux.pane_states([leader])[leader] is not None  # the person's pane stays


def test_a_window_of_dead_panes_only_is_resumed_in_place(
    omp_tmux: Tmux, tmux_env: Path, project: Path
) -> None:
    env = env_for(omp_tmux, tmux_env)
    r = omp(project, env, "team", "launch", "1:demo", "count", "--name", "t", "--json")
    assert r.rc == 0, r
    poll(lambda: all_working(project, env, 1), timeout=60, what="the task in progress")
    cfg = team_config.load(team_of(project))
    omp_tmux.kill_pane(str(cfg.raw["leaderPaneId"]))  # nothing alive is left in the window
    pane = cfg.pane_of("worker-1") or ""
    omp_tmux.send_key(pane, "C-c")
    poll(lambda: (st := omp_tmux.pane_states([pane])[pane]) is not None and st.dead, timeout=30)
    r = omp(project, env, "team", "resume", "t", "--json")
    assert r.rc == 0 and r.json["place"] == "in place", r
    new = r.json["resumed"][0]["paneId"]
    st = omp_tmux.pane_states([new, pane])
    assert st[pane] is None  # the dead pane it split is closed
    now = st[new]
    assert now is not None and now.window_id == cfg.raw["tmuxIdentity"]["windowId"]
    done = poll(lambda: status(project, env)["allDone"] and status(project, env), timeout=90)
    assert done["tasks"][0]["owner"] == "worker-1"
    assert omp(project, env, "team", "shutdown", "t").rc == 0
