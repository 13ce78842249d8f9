"""A worker pane's hook records the agent's session (`workers/<w>/session.json`), and the files
that bring omp's hook to worker panes (`omp.stophook.workers`)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omp.stophook import sessions, workers
from omp.store.paths import StatePaths, TeamPaths
from tests.helpers import child_env, make_project, make_team, run_omp

SID = "1cd515cb-f92b-4f84-bd26-e9b82ac8497a"


@pytest.fixture
def team(tmp_path: Path) -> TeamPaths:
    root = make_project(tmp_path / "proj")
    (tmp_path / "home").mkdir()
    t: TeamPaths = make_team(root, "t", 2)
    raw = json.loads(t.config.read_text())
    raw["launchToken"] = "tok-1"
    raw["workers"][1]["launchToken"] = "tok-2"  # added later: a generation of its own
    t.config.write_text(json.dumps(raw))
    return t


def pane_env(team: TeamPaths, worker: str, token: str) -> dict[str, str]:
    env = child_env(
        team.project.root.parent / "home",
        OMP_TEAM=team.name,
        OMP_WORKER=worker,
        OMP_TEAM_WORKER="1",
        OMP_LAUNCH_TOKEN=token,
        OMP_ROOT=str(team.project.root),
    )
    for k in ("COPILOT_CLI", "CODEX_HOME", "GEMINI_PROJECT_DIR", "GEMINI_SESSION_ID"):
        env.pop(k, None)
    return env


def fire(team: TeamPaths, payload: dict[str, Any], worker: str, token: str) -> str:
    r = run_omp(
        "hook", "stop", input=json.dumps(payload), cwd=team.project.root,
        env=pane_env(team, worker, token),
    )  # fmt: skip
    assert r.rc == 0, r
    return r.stdout.strip()


def copilot_start(team: TeamPaths) -> dict[str, Any]:
    return {"sessionId": SID, "timestamp": 1796134026461, "cwd": str(team.project.root),
            "source": "new", "initialPrompt": "Read x and follow it."}  # fmt: skip


def copilot_stop(team: TeamPaths) -> dict[str, Any]:
    return {"sessionId": SID, "timestamp": 1796134072151, "cwd": str(team.project.root),
            "transcriptPath": f"/home/u/.copilot/session-state/{SID}/events.jsonl",
            "stopReason": "end_turn", "stop_hook_active": False}  # fmt: skip


def test_a_workers_hook_records_its_session_and_lets_it_stop(team: TeamPaths) -> None:
    assert fire(team, copilot_start(team), "worker-1", "tok-1") == "{}"
    rec = json.loads(team.session("worker-1").read_text())
    assert rec["agent"] == "copilot" and rec["sessionId"] == SID
    assert rec["cwd"] == str(team.project.root) and rec["transcriptPath"] is None
    assert rec["updatedAt"]
    assert fire(team, copilot_stop(team), "worker-1", "tok-1") == "{}"
    rec = json.loads(team.session("worker-1").read_text())
    assert rec["transcriptPath"].endswith(f"{SID}/events.jsonl")
    stamp = os.stat(team.session("worker-1")).st_mtime_ns
    fire(team, copilot_start(team), "worker-1", "tok-1")  # nothing new: not rewritten
    assert os.stat(team.session("worker-1")).st_mtime_ns == stamp
    assert (
        json.loads(team.session("worker-1").read_text())["transcriptPath"]
        == (rec["transcriptPath"])
    )
    claude = {"session_id": "c-1", "transcript_path": "/t.jsonl", "cwd": "/w",
              "last_assistant_message": "done", "stop_hook_active": False}  # fmt: skip
    assert fire(team, claude, "worker-2", "tok-2") == "{}"
    assert json.loads(team.session("worker-2").read_text())["agent"] == "claude"
    assert sessions.read(team, "worker-2") is not None


@pytest.mark.parametrize(
    ("worker", "token"),
    [("worker-1", "tok-old"), ("worker-2", "tok-1"), ("worker-9", "tok-1")],
)
def test_a_pane_of_an_earlier_generation_or_no_member_records_nothing(
    team: TeamPaths, worker: str, token: str
) -> None:
    assert fire(team, copilot_stop(team), worker, token) == "{}"
    assert not any(p.name == "session.json" for p in team.workers_dir.rglob("*"))


def test_a_missing_worker_directory_is_never_created(team: TeamPaths) -> None:
    wdir = team.worker_dir("worker-1")
    os.rmdir(wdir)
    assert fire(team, copilot_stop(team), "worker-1", "tok-1") == "{}"
    assert not wdir.exists()


def test_an_id_omp_would_not_put_on_a_command_line_is_not_recorded(team: TeamPaths) -> None:
    bad = {**copilot_stop(team), "sessionId": "x; rm -rf /"}
    fire(team, bad, "worker-1", "tok-1")
    assert not team.session("worker-1").exists()
    team.session("worker-1").write_text(json.dumps({"sessionId": "../../etc"}))
    assert sessions.read(team, "worker-1") is None


def test_hook_files_for_worker_panes(tmp_path: Path) -> None:
    project = StatePaths(make_project(tmp_path / "p"))
    args = workers.hook_args("copilot", project, "/opt/omp/bin/omp")
    assert args[0] == "--plugin-dir"
    plugin = Path(args[1])
    assert plugin.parent == project.worker_hooks
    manifest = json.loads((plugin / "plugin.json").read_text())
    assert manifest["hooks"] == "hooks.json" and manifest["name"] == workers.PLUGIN
    hooks = json.loads((plugin / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"sessionStart", "agentStop"}
    assert hooks["agentStop"][0]["bash"] == "/opt/omp/bin/omp hook stop"
    stamp = os.stat(plugin / "hooks.json").st_mtime_ns
    assert workers.hook_args("copilot", project, "/opt/omp/bin/omp") == args
    assert os.stat(plugin / "hooks.json").st_mtime_ns == stamp  # unchanged: not rewritten
    other = workers.hook_args("copilot", project, "/elsewhere/omp")
    assert other[1] != args[1]  # another omp, its own plugin
    flag, path = workers.hook_args("claude", project, "omp")
    assert flag == "--settings"
    settings = json.loads(Path(path).read_text())["hooks"]
    assert settings["Stop"][0]["hooks"][0]["command"] == "omp hook stop"
    assert set(settings) == {"SessionStart", "Stop"}
    assert workers.hook_args("codex", project, "omp") == []
    assert workers.hook_args("python3", project, "omp") == []


def test_a_pane_of_a_deleted_team_records_nothing_and_says_nothing(team: TeamPaths) -> None:
    shutil.rmtree(team.dir)
    r = run_omp(
        "hook", "stop", input=json.dumps(copilot_stop(team)), cwd=team.project.root,
        env=pane_env(team, "worker-1", "tok-1"),
    )  # fmt: skip
    assert r.rc == 0 and r.stdout.strip() == "{}" and r.stderr == ""
    assert not team.dir.exists()


def test_a_copilot_subagents_stop_records_the_session_not_the_subagent(team: TeamPaths) -> None:
    sub = {**copilot_stop(team), "sessionId": "a213ea1a-96c5-4dba-b798-33a412ee1d0f",
           "agentId": "a213ea1a-96c5-4dba-b798-33a412ee1d0f", "agentType": "general-purpose",
           "parentAgentId": SID}  # fmt: skip
    assert fire(team, sub, "worker-1", "tok-1") == "{}"
    assert json.loads(team.session("worker-1").read_text())["sessionId"] == SID


def test_pi_workers_get_omps_extension(tmp_path: Path) -> None:
    from omp.stophook.pi_extension import MARKER

    project = StatePaths(make_project(tmp_path / "p"))
    flag, path = workers.hook_args("pi", project, "/opt/omp/bin/omp")
    assert flag == "--extension" and path.endswith(".ts")
    text = Path(path).read_text()
    assert text.startswith(MARKER) and '"/opt/omp/bin/omp hook stop"' in text


@given(
    st.text(max_size=210)
    | st.text("abZ09._:-", min_size=195, max_size=205)
    | st.sampled_from(["", "-a", ".a", "a b", "0f1e-9", "é", "a\n", "A" * 200, "A" * 201])
)
def test_a_session_id_is_what_the_pattern_said(value: str) -> None:
    """`sessions.valid_id` (str methods) takes exactly what its pattern took."""
    pattern = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
    assert (sessions.valid_id(value) == value) is bool(pattern.fullmatch(value))
    assert sessions.valid_id(value) in (None, value)
