"""The team on real tmux, on a private server per test (never the user's)."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.invocation import omp_command
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.team.launch import LaunchRequest, launch
from omp.team.shutdown import shutdown
from omp.tmux import Tmux
from omp.views import status as team_status
from tests.helpers import child_env, nudge_went_out, poll, run_api, run_omp, snapshot_tree

pytestmark = [pytest.mark.tmux, pytest.mark.slow]  # real launches


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", "/bin/sh")
    monkeypatch.setenv("OMP_DEMO_WORK_SECONDS", "0.3")
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TMUX_PANE", raising=False)
    monkeypatch.delenv("OMP_ROOT", raising=False)
    for var in ("OMP_TEAM", "OMP_WORKER", "OMP_LAUNCH_TOKEN", "OMP_TEAM_WORKER"):
        monkeypatch.delenv(var, raising=False)
    tmux = Tmux(socket_name=f"omp-test-{secrets.token_hex(4)}", config_file="/dev/null")
    yield tmux
    tmux.kill_server()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    monkeypatch.chdir(root)
    return root


def _launch(server: Tmux, root: Path, n: int = 3, **kw: Any) -> dict[str, Any]:
    return launch(_request(server, root, n, **kw))


def _request(server: Tmux, root: Path, n: int = 3, **kw: Any) -> LaunchRequest:
    assert server.socket_name is not None
    return LaunchRequest(
        workers=n,
        task=kw.pop("task", "write a haiku"),
        agent=kw.pop("agent", "demo"),
        name=kw.pop("name", "t1"),
        socket=kw.pop("socket", server.socket_name),
        cwd=root,
        **kw,
    )


def _status(root: Path, team: str = "t1") -> dict[str, Any]:
    snapshot: dict[str, Any] = team_status.status(StatePaths(root), team)["teams"][0]
    return snapshot


def _settled(root: Path, team: str = "t1") -> bool:
    """All tasks done and every demo worker's closing message to the leader written."""
    from omp.mail.mailbox import Mailbox

    st = _status(root, team)
    box = Mailbox(StatePaths(root).team(team), "leader")
    msgs, _, _ = box.listing(undelivered_only=False, limit=100)
    closing = [m for m in msgs if " completed task " in m["body"]]
    return bool(st["allDone"]) and len(closing) == len(st["workers"])


def test_three_demo_workers_reach_all_done(server: Tmux, project: Path) -> None:
    res = _launch(server, project)
    assert [w["name"] for w in res["workers"]] == ["worker-1", "worker-2", "worker-3"]
    assert server.has_session("omp-team-t1")
    done = poll(lambda: _status(project)["allDone"] and _status(project))
    assert [t["status"] for t in done["tasks"]] == ["completed"] * 3
    assert {t["owner"] for t in done["tasks"]} == {"worker-1", "worker-2", "worker-3"}
    assert all(w["pane"] == "alive" for w in done["workers"])
    cfg = team_config.load(StatePaths(project).team("t1"))
    # identity recorded so later commands talk to the same server and panes
    ident = cfg.raw["tmuxIdentity"]
    assert ident["socketPath"] and ident["serverPid"] and ident["windowId"].startswith("@")
    assert cfg.raw["leaderPaneId"].startswith("%")
    inbox = (project / ".omp/state/team/t1/workers/worker-2/inbox.md").read_text()
    assert "write a haiku (part 2/3)" in inbox


def test_send_message_nudges_the_recipient_pane(server: Tmux, project: Path) -> None:
    _launch(server, project)
    poll(lambda: _status(project)["allDone"])
    res = run_api(
        "send-message",
        {"team_name": "t1", "from": "worker-1", "to": "worker-2", "body": "SECRET body text"},
        cwd=project,
    )
    # the send's nudge, or the monitor's if it won the pane (the send then types none)
    assert res.rc == 0 and nudge_went_out(res.json), res.stderr
    pane = _status(project)["workers"][1]["paneId"]
    screen = poll(lambda: _history(server, pane) if _nudged(server, pane) else "")
    assert f"You have 1 new message(s). Read them: {omp_command()} team api mailbox-read" in screen
    assert '"worker":"worker-2"' in screen
    # the body never reaches the terminal through the nudge: the demo agent prints it itself
    # only after reading its mail, prefixed with the sender
    nudge_line = next(ln for ln in screen.splitlines() if "new message" in ln)
    assert "SECRET" not in nudge_line


def _history(server: Tmux, pane: str) -> str:
    # the scrollback too: the demo agent's reply may push the nudge off a small pane
    return server.cmd("capture-pane", "-p", "-J", "-S", "-500", "-t", pane)


def _nudged(server: Tmux, pane: str) -> bool:
    return "new message(s)" in _history(server, pane)


def test_status_and_collect_are_read_only(server: Tmux, project: Path) -> None:
    _launch(server, project)
    poll(lambda: _settled(project))
    sent = run_api(
        "send-message",
        {"team_name": "t1", "from": "worker-3", "to": "leader", "body": "unread mail"},
        cwd=project,
    )
    assert sent.rc == 0 and sent.json["nudged"] is False  # the leader is not nudged by default
    # The team's tree (the monitor, if one runs, keeps its own files elsewhere).
    state = project / ".omp" / "state" / "team"
    before = snapshot_tree(state)
    cfg = team_config.load(StatePaths(project).team("t1"))
    st = team_status.status(StatePaths(project), "t1")
    col = team_status.collect(cfg)
    team_status.status(StatePaths(project), None)
    assert snapshot_tree(state) == before
    assert st["teams"][0]["allDone"] is True
    assert col["doneCount"] == 3 and col["allDone"] is True
    assert all(w["resultMarkdown"] for w in col["workers"])


def test_shutdown_kills_only_the_team_panes(
    server: Tmux, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The leader sits in a tmux pane of its own session; a bystander session shares the server.
    _, wid, leader = server.new_session("leader", cwd=project, command=["sh"])
    _, _, bystander = server.new_session("other", cwd=project, command=["sh"])
    info = server.server_identity()
    assert info is not None
    monkeypatch.setenv("TMUX", f"{info['socket_path']},{info['server_pid']},0")
    monkeypatch.setenv("TMUX_PANE", leader)
    res = launch(LaunchRequest(workers=2, task="t", agent="demo", name="t1", cwd=project))
    panes = [w["paneId"] for w in res["workers"]]
    states = server.pane_states([leader, *panes])
    assert all((s := states[p]) and s.window_id == wid for p in [leader, *panes])
    cfg = team_config.load(StatePaths(project).team("t1"))
    out = shutdown(cfg)
    assert sorted(out["killedPanes"]) == sorted(panes)
    assert out["killedSession"] is False
    after = server.pane_states([leader, bystander, *panes])
    assert after[leader] is not None and after[bystander] is not None
    assert all(after[p] is None for p in panes)
    # state and mail are kept, and the team reads as shut down
    assert (project / ".omp/state/team/t1/shutdown.json").exists()
    assert _status(project)["shutdown"] is not None
    # a later launch under the same name works
    monkeypatch.delenv("TMUX")
    monkeypatch.delenv("TMUX_PANE")
    res2 = _launch(server, project, n=1)
    assert res2["team"] == "t1"
    assert _status(project)["shutdown"] is None


def _write_agents(root: Path, text: str) -> None:
    (root / ".omp").mkdir(exist_ok=True)
    (root / ".omp" / "agents.toml").write_text(text)


def test_failure_midway_leaves_no_session_and_no_team(server: Tmux, project: Path) -> None:
    # An agent that exits at once: the launch must notice and undo everything.
    _write_agents(
        project,
        f'[agents.quitter]\ncommand = ["{sys.executable}", "-c", "print(1)"]\n'
        f'program = "{sys.executable}"\nstartup_timeout = 5\n',
    )
    with pytest.raises(OmpError) as err:
        _launch(server, project, n=2, agent="quitter")
    assert err.value.code == "launch_worker_exited"
    assert "nothing was left behind" in err.value.message
    assert not server.has_session("omp-team-t1")
    assert not (project / ".omp/state/team/t1").exists()


def test_missing_agent_program_touches_nothing(server: Tmux, project: Path) -> None:
    _write_agents(
        project,
        '[agents.ghost]\ncommand = ["omp-no-such-agent-cli"]\nprogram = "omp-no-such-agent-cli"\n',
    )
    before = snapshot_tree(project)
    with pytest.raises(OmpError) as err:
        _launch(server, project, agent="ghost")
    assert err.value.code == "agent_not_found"
    assert "omp-no-such-agent-cli" in err.value.message and "demo" in err.value.message
    assert snapshot_tree(project) == before
    assert server.server_identity() is None  # no tmux server was even started


@pytest.mark.parametrize("sandbox", ["", "1"])
def test_claude_as_root_without_is_sandbox_is_refused_before_anything_starts(
    server: Tmux, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """Claude Code as root refuses --dangerously-skip-permissions unless IS_SANDBOX=1, and its
    one line vanishes with its pane: launch said only "exited ... Pane is dead"."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"  # never run: the refusal comes first
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    env = {**os.environ, "IS_SANDBOX": sandbox}
    before = snapshot_tree(project)
    if sandbox:  # a sandbox: no refusal (the fake agent then exits, which is another matter)
        with pytest.raises(OmpError) as err:
            launch(_request(server, project, agent="claude"), env=env)
        assert err.value.code != "launch_blocked"
        return
    with pytest.raises(OmpError) as err:
        launch(_request(server, project, agent="claude"), env=env)
    assert err.value.code == "launch_blocked"
    assert "IS_SANDBOX=1" in err.value.message and "nothing was started" in err.value.message
    assert "IS_SANDBOX" in err.value.detail["fix"]
    assert snapshot_tree(project) == before
    assert server.server_identity() is None  # no tmux server was even started


def test_name_clash_refuses_with_the_shutdown_command(server: Tmux, project: Path) -> None:
    _launch(server, project, n=1)
    with pytest.raises(OmpError) as err:
        _launch(server, project, n=1)
    assert err.value.code == "team_exists"
    assert "omp team shutdown t1" in err.value.message


def test_a_team_name_with_a_dot_launches_and_shuts_down(server: Tmux, project: Path) -> None:
    """Team names may hold '.'; tmux session names may not (launch failed, launch_failed)."""
    res = _launch(server, project, n=1, name="v1.2")
    assert res["session"] == "omp-team-v1_2" and server.has_session("omp-team-v1_2")
    poll(lambda: _status(project, "v1.2")["allDone"])
    with pytest.raises(OmpError) as err:  # v1_2 would take the same session: whose it is
        _launch(server, project, n=1, name="v1_2")
    assert err.value.code == "session_exists"
    assert "team shutdown v1.2" in err.value.message
    assert not (project / ".omp" / "state" / "team" / "v1_2").exists()
    shutdown(team_config.load(StatePaths(project).team("v1.2")))
    assert not server.has_session("omp-team-v1_2")


def test_cli_launch_json_and_status(server: Tmux, project: Path) -> None:
    env = child_env(OMP_TMUX_SOCKET=str(server.socket_name), OMP_DEMO_WORK_SECONDS="0.3")
    rc, _, err, obj = run_omp("team", "launch", "2:demo", "count to 3", "--name", "c1",
                                "--json", cwd=project, env=env)  # fmt: skip
    assert rc == 0, err
    assert obj["ok"] is True and obj["team"] == "c1" and len(obj["workers"]) == 2
    assert "ready, task handed over" in err  # progress goes to stderr, never into the JSON
    poll(lambda: _status(project, "c1")["allDone"])
    rc, _, _, obj = run_omp("team", "status", "c1", "--json", cwd=project, env=env)
    assert rc == 0 and obj["teams"][0]["allDone"] is True
    rc, _out, _, _ = run_omp("team", "status", "nope", cwd=project, env=env)
    assert rc == 1


def test_two_demo_workers_complete_a_task_req_exchange(server: Tmux, project: Path) -> None:
    _launch(server, project, n=2)
    poll(lambda: _settled(project))
    req = run_api(
        "send-message",
        {
            "team_name": "t1",
            "from": "worker-1",
            "to": "worker-2",
            "body": "please count the files in src/",
            "event": "task_req",
        },
        cwd=project,
    )
    assert req.rc == 0, req.stdout + req.stderr
    assert req.json["status"] == "acknowledged"
    tid = req.json["taskId"]

    def answered() -> list[dict[str, Any]]:
        res = run_api("mailbox-list", {"team_name": "t1", "worker": "worker-1"}, cwd=project)
        return [m for m in res.json["messages"] if m.get("task_id") == tid]

    msgs = poll(lambda: [m for m in answered() if m.get("event") == "task_done"] and answered())
    events = [m["event"] for m in msgs]
    assert events[0] == "task_ack" and events[-1] == "task_done"
    done = msgs[-1]
    assert done["from"] == "worker-2" and done["ref_message_id"] == tid
    roster = run_api("roster", {"team_name": "t1", "worker": "worker-1"}, cwd=project)
    member = next(m for m in roster.json["members"] if m["name"] == "worker-2")
    assert member["status"] == "available"


def test_a_launch_without_a_task_leaves_workers_free_for_requests(
    server: Tmux, project: Path
) -> None:
    res = _launch(server, project, n=1, task="")
    assert res["workers"][0]["taskId"] is None
    assert _status(project)["tasks"] == []
    inbox = (project / ".omp/state/team/t1/workers/worker-1/inbox.md").read_text()
    assert "claim-task" not in inbox
    req = run_api(
        "send-message",
        {"team_name": "t1", "from": "leader", "to": "worker-1", "body": "fix foo",
         "event": "task_req"},
        cwd=project,
    )  # fmt: skip
    assert req.rc == 0 and req.json["status"] == "acknowledged", req.stdout


def test_inside_tmux_a_socket_naming_the_leaders_own_server_still_splits_its_window(
    server: Tmux, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`OMP_TMUX_SOCKET` / `--socket` naming the server the leader's pane lives on is that
    server: split the leader's window, never a new detached session of shells."""
    _, wid, leader = server.new_session("leader", cwd=project, command=["sh"])
    info = server.server_identity()
    assert info is not None
    monkeypatch.setenv("TMUX", f"{info['socket_path']},{info['server_pid']},0")
    monkeypatch.setenv("TMUX_PANE", leader)
    res = _launch(server, project, n=2, nudge_leader=True, leader_agent="copilot")
    assert res["session"] is None and res["leaderPaneId"] == leader
    states = server.pane_states([w["paneId"] for w in res["workers"]])
    assert all(st is not None and st.window_id == wid for st in states.values())
    assert not server.has_session("omp-team-t1")
    raw = team_config.load(StatePaths(project).team("t1")).raw
    assert (raw["leaderAgent"], raw["nudgeLeader"]) == ("copilot", True)
    # The leader's pane is judged by its own agent: a shell prompt is not an idle Copilot.
    sent = run_api(
        "send-message",
        {"team_name": "t1", "from": "worker-1", "to": "leader", "body": "done"},
        cwd=project,
        env=child_env(Path(os.environ["HOME"])),
    )
    assert sent.json["nudge"] == "deferred", sent.json
    shutdown(team_config.load(StatePaths(project).team("t1")))


def test_an_unknown_leader_agent_is_refused_before_anything_is_made(
    server: Tmux, project: Path
) -> None:
    with pytest.raises(OmpError) as exc:
        _launch(server, project, n=1, leader_agent="nope")
    assert exc.value.code == "unknown_agent" and "--leader-agent" in exc.value.message
    assert not (project / ".omp/state/team/t1").exists()
