"""The leader pane's hook records the leader's agent session (`workers/leader/session.json`) in
each team whose recorded leader pane it runs in, proved by tmux's own `$TMUX_PANE` and `$TMUX`
(`omp.stophook.sessions.record_leader`); anything else records nothing, and every stop is still
allowed (or decided by the loop) as before."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from omp import clock
from omp.record import config as team_config
from omp.stophook import sessions
from omp.stophook.sessions import SHUT_GRACE_S
from omp.store.paths import StatePaths, TeamPaths
from tests.helpers import child_env, make_project, make_team, run_cli, run_omp, snapshot_tree

SID = "1cd515cb-f92b-4f84-bd26-e9b82ac8497a"
SOCK = "/tmp/omp-test-sock/leader"  # never opened: the hook only compares it with the config
SERVER = 4242


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = make_project(tmp_path / "proj")
    (tmp_path / "home").mkdir()
    lead(make_team(r, "t", 2), "%3")
    return r


def lead(team: TeamPaths, pane: str, sock: str = SOCK, server: int | None = SERVER) -> None:
    """The team's config as launch writes it from inside tmux: the leader's pane, the server."""
    raw = team_config.load(team).raw
    raw["leaderPaneId"] = pane
    raw["launchToken"] = "tok-1"
    raw["tmuxIdentity"] = {
        "socketPath": sock,
        "serverPid": server,
        "serverStartedAt": 1796000000,
        "sessionId": "$0",
        "windowId": "@0",
    }
    team_config.write(team, raw)


def pane_env(root: Path, pane: str = "%3", tmux: str = f"{SOCK},{SERVER},0", **extra: str) -> Any:
    env = child_env(root.parent / "home", TMUX_PANE=pane, TMUX=tmux, **extra)
    for k in ("COPILOT_CLI", "CODEX_HOME", "GEMINI_PROJECT_DIR", "GEMINI_SESSION_ID"):
        env.pop(k, None)
    return env


def copilot_stop(root: Path, sid: str = SID) -> dict[str, Any]:
    return {"sessionId": sid, "timestamp": 1796134072151, "cwd": str(root),
            "transcriptPath": f"/home/u/.copilot/session-state/{sid}/events.jsonl",
            "stopReason": "end_turn", "stop_hook_active": False}  # fmt: skip


def claude_stop(root: Path) -> dict[str, Any]:
    return {"session_id": "c-1", "transcript_path": "/h/.claude/projects/p/c-1.jsonl",
            "cwd": str(root), "hook_event_name": "Stop", "stop_hook_active": False,
            "last_assistant_message": "done"}  # fmt: skip


def fire(root: Path, payload: dict[str, Any] | str, env: dict[str, str]) -> str:
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    r = run_cli("hook", "stop", input=raw, cwd=root, env=env)
    assert r.rc == 0, r
    return r.stdout.strip()


def team(root: Path, name: str = "t") -> TeamPaths:
    return StatePaths(root).team(name)


def recorded(root: Path, name: str = "t") -> dict[str, Any] | None:
    return sessions.read(team(root, name), "leader")


def test_the_leader_panes_hook_records_the_leaders_session(root: Path) -> None:
    assert not team(root).worker_dir("leader").exists()
    assert fire(root, copilot_stop(root), pane_env(root)) == "{}"
    rec = recorded(root)
    assert rec is not None
    assert (rec["agent"], rec["sessionId"], rec["cwd"]) == ("copilot", SID, str(root))
    assert rec["transcriptPath"] == f"/home/u/.copilot/session-state/{SID}/events.jsonl"
    path = team(root).session("leader")
    stamp = os.stat(path).st_mtime_ns
    fire(root, copilot_stop(root), pane_env(root))  # the same session: not rewritten
    assert os.stat(path).st_mtime_ns == stamp
    assert fire(root, claude_stop(root), pane_env(root)) == "{}"
    rec = recorded(root)
    assert rec is not None and (rec["agent"], rec["sessionId"]) == ("claude", "c-1")
    assert rec["transcriptPath"] == "/h/.claude/projects/p/c-1.jsonl"


def test_every_team_the_pane_leads_gets_it_and_no_other(root: Path) -> None:
    lead(make_team(root, "u", 1), "%3")
    lead(make_team(root, "v", 1), "%4")  # another leader pane
    lead(make_team(root, "w", 1), "%3", sock="/tmp/omp-test-sock/other")  # another server
    lead(make_team(root, "x", 1), "%3", server=SERVER + 1)  # the socket's earlier server
    lead(make_team(root, "y", 1), "%3", server=None)  # a server omp cannot prove
    fire(root, copilot_stop(root), pane_env(root))
    got = {n: recorded(root, n) is not None for n in "tuvwxy"}
    assert got == {"t": True, "u": True, "v": False, "w": False, "x": False, "y": False}
    assert not any(team(root, n).worker_dir("leader").exists() for n in "vwxy")


def test_a_subagents_stop_records_its_session(root: Path) -> None:
    sub = {**copilot_stop(root), "sessionId": "a213ea1a-96c5-4dba-b798-33a412ee1d0f",
           "parentAgentId": SID}  # fmt: skip
    fire(root, sub, pane_env(root))
    assert (recorded(root) or {}).get("sessionId") == SID


def test_a_workers_hook_never_records_the_leaders_session(root: Path) -> None:
    # a worker pane whose TMUX_PANE were the leader's still speaks for the worker only
    env = pane_env(
        root, OMP_TEAM="t", OMP_WORKER="worker-1", OMP_TEAM_WORKER="1",
        OMP_LAUNCH_TOKEN="tok-1", OMP_ROOT=str(root),
    )  # fmt: skip
    assert fire(root, copilot_stop(root), env) == "{}"
    assert (sessions.read(team(root), "worker-1") or {}).get("sessionId") == SID
    assert not team(root).worker_dir("leader").exists()


@pytest.mark.parametrize(
    ("pane", "tmux"),
    [
        ("%9", f"{SOCK},{SERVER},0"),  # a pane of no team
        ("%3", f"/tmp/elsewhere,{SERVER},0"),  # the same id on another server
        ("", f"{SOCK},{SERVER},0"),  # outside tmux
        ("%3", ""),
        ("%3", "garbage"),
        ("3", f"{SOCK},{SERVER},0"),
        ("%3", f"{SOCK},not-a-pid,0"),
        ("%3", f"relative/sock,{SERVER},0"),
    ],
)
def test_a_pane_of_no_team_writes_nothing(root: Path, pane: str, tmux: str) -> None:
    before = snapshot_tree(root / ".omp")
    assert fire(root, copilot_stop(root), pane_env(root, pane=pane, tmux=tmux)) == "{}"
    assert snapshot_tree(root / ".omp") == before


def test_a_team_shut_down_takes_only_the_session_that_ran_it(root: Path) -> None:
    """The leader's first stop after its `shutdown` (a team run in one turn) is recorded; a
    later session in the same pane, or a stop long after the shutdown, is not the team's."""
    shut = team(root).shutdown
    shut.write_text(json.dumps({"shutdownAt": clock.iso(time.time() - 2 * SHUT_GRACE_S)}))
    before = snapshot_tree(root / ".omp")
    fire(root, copilot_stop(root), pane_env(root))
    assert snapshot_tree(root / ".omp") == before  # shut down long ago
    shut.write_text(json.dumps({"shutdownAt": clock.iso(time.time() - 5)}))
    fire(root, copilot_stop(root), pane_env(root))
    assert (recorded(root) or {}).get("sessionId") == SID  # the turn that shut it down
    before = snapshot_tree(root / ".omp")
    fire(root, claude_stop(root), pane_env(root))  # another session, after the team
    assert snapshot_tree(root / ".omp") == before
    shut.write_text(json.dumps({"shutdownAt": "not a time"}))
    shutil.rmtree(team(root).worker_dir("leader"))
    fire(root, copilot_stop(root), pane_env(root))
    assert not team(root).worker_dir("leader").exists()


def test_a_deleted_team_is_not_made_again(root: Path) -> None:
    cfg = team_config.load(team(root))
    shutil.rmtree(team(root).dir)
    # a team deleted between its config's read and the write: never made again
    assert sessions.record_leader(
        pane_env(root), StatePaths(root), agent="copilot", session_id=SID,
        transcript_path=None, cwd=str(root),
    ) == []  # fmt: skip
    assert not cfg.paths.dir.exists()
    assert fire(root, copilot_stop(root), pane_env(root)) == "{}"
    assert not cfg.paths.dir.exists()


def test_the_workers_directory_is_made_inside_the_team_only(root: Path) -> None:
    shutil.rmtree(team(root).workers_dir)
    fire(root, copilot_stop(root), pane_env(root))
    assert recorded(root) is not None  # workers/ and workers/leader/ made inside the team's


@pytest.mark.parametrize(
    "stdin",
    [
        "not json",
        "[1, 2]",
        "[" * 100_000,
        json.dumps({"sessionId": "x; rm -rf /", "transcriptPath": "/t", "cwd": "/"}),
        json.dumps({"sessionId": "../../etc/passwd", "timestamp": "soon"}),
        json.dumps({"session_id": "a" * 5000, "transcript_path": "/t"}),
    ],
)
def test_hostile_payloads_fail_open_and_record_nothing(root: Path, stdin: str) -> None:
    r = run_cli("hook", "stop", input=stdin, cwd=root, env=pane_env(root))
    assert r.rc == 0 and r.stdout.strip() in ("", "{}"), r
    assert not team(root).session("leader").exists()


def test_fields_of_the_wrong_type_are_not_recorded(root: Path) -> None:
    stdin = json.dumps({"sessionId": SID, "transcriptPath": ["no"], "cwd": 7})
    assert fire(root, stdin, pane_env(root)) == "{}"
    rec = recorded(root)
    assert rec is not None and rec["sessionId"] == SID
    assert (rec["transcriptPath"], rec["cwd"]) == (None, None)


def test_an_unsafe_leader_directory_fails_open(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    team(root).workers_dir.joinpath("leader").symlink_to(elsewhere)
    r = run_cli("hook", "stop", input=json.dumps(copilot_stop(root)), cwd=root,
                env=pane_env(root))  # fmt: skip
    assert r.rc == 0 and r.stdout.strip() == "{}", r
    assert "leader session not recorded" in r.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_leader_loop_still_decides_and_the_session_is_recorded(root: Path) -> None:
    r = run_cli("ralph", "start", "keep going", cwd=root, env=pane_env(root))
    assert r.rc == 0, r
    out = json.loads(fire(root, claude_stop(root), pane_env(root)))
    assert out.get("decision") == "block"  # the loop holds the leader, as before
    assert (recorded(root) or {}).get("sessionId") == "c-1"


@pytest.mark.slow
def test_a_real_hook_process_in_the_leader_pane(root: Path) -> None:
    """The console entry's fast path, in a process of its own, as a CLI runs it."""
    env = pane_env(root)
    r = run_omp("hook", "stop", input=json.dumps(copilot_stop(root)), cwd=root, env=env)
    assert (r.rc, r.stdout.strip(), r.stderr) == (0, "{}", "")
    assert (recorded(root) or {}).get("sessionId") == SID
