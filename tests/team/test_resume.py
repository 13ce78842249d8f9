"""`omp team resume` without a tmux server of its own: refusals that change nothing, the tasks it
gives back, the texts a resumed worker reads, and what `status` and `wait` say of a dead team.

The teams here have a recorded tmux identity whose server never existed (a socket in a directory
that does not exist): to omp that is a team after a reboot. The runs on real tmux are in
`test_resume_tmux.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.cli import replies
from omp.mail import bootstrap
from omp.record import config as team_config
from omp.store.paths import StatePaths, TeamPaths
from omp.tasks import tasks
from tests.helpers import (
    assert_reply,
    child_env,
    isolate,
    make_project,
    make_team,
    run_cli,
    snapshot_tree,
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    return make_project(tmp_path / "proj")


def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home", SHELL="/bin/sh")


def rebooted_team(root: Path, tmp_path: Path, name: str = "t", workers: int = 2) -> TeamPaths:
    """A team as a reboot leaves it: panes and a tmux identity recorded, no server anywhere."""
    team: TeamPaths = make_team(root, name, workers, task="count")
    raw = json.loads(team.config.read_text())
    raw.update(
        agent="demo",
        launchToken="tok-1",
        leaderPaneId="%0",
        tmuxSession=f"omp-team-{name}",
        createdSession=True,
        tmuxIdentity={
            "socketPath": str(tmp_path / "gone" / "tmux-0" / "sock"),
            "serverPid": 4242,
            "serverStartedAt": 1700000000,
            "sessionId": "$0",
            "windowId": "@0",
        },
    )
    for i, w in enumerate(raw["workers"], start=1):
        w.update(paneId=f"%{i}", agent="demo", forwardedEnv=["OMP_DEMO_WORK_SECONDS"])
    team.config.write_text(json.dumps(raw))
    return team


def resume(root: Path, tmp_path: Path, *args: str) -> Any:
    return run_cli("team", "resume", *args, "--json", cwd=root, env=env(tmp_path))


def test_a_deleted_team_is_refused(project: Path, tmp_path: Path) -> None:
    make_team(project, "gone", 1)
    assert run_cli("team", "delete", "gone", cwd=project, env=env(tmp_path)).rc == 0
    before = snapshot_tree(project / ".omp")
    r = resume(project, tmp_path, "gone")
    assert r.rc == 1 and r.json["error"] == "unknown_team", r
    assert snapshot_tree(project / ".omp") == before


def test_a_removed_worker_is_refused_and_nothing_changes(project: Path, tmp_path: Path) -> None:
    rebooted_team(project, tmp_path)
    r = run_cli("team", "remove-worker", "t", "worker-2", "--json", cwd=project, env=env(tmp_path))
    assert r.rc == 0, r
    before = snapshot_tree(project / ".omp")
    r = resume(project, tmp_path, "t", "--worker", "worker-2")
    assert r.rc == 1 and r.json["error"] == "worker_removed", r
    assert "add-worker" in r.json["message"]
    r = resume(project, tmp_path, "t", "--worker", "worker-9")
    assert r.rc == 1 and r.json["error"] == "unknown_worker", r
    assert snapshot_tree(project / ".omp") == before


def test_a_member_whose_worktree_is_gone_is_refused_before_anything_starts(
    project: Path, tmp_path: Path
) -> None:
    team = rebooted_team(project, tmp_path)
    raw = json.loads(team.config.read_text())
    raw["workers"][1]["workspace"] = {
        "kind": "worktree",
        "path": str(tmp_path / "wt" / "worker-2"),
        "branch": "omp/t/worker-2",
        "base": "0" * 40,
    }
    team.config.write_text(json.dumps(raw))
    before = snapshot_tree(project / ".omp")
    r = resume(project, tmp_path, "t")
    assert r.rc == 1 and r.json["error"] == "worktree_missing", r
    assert r.json["worker"] == "worker-2" and "Nothing was started" in r.json["message"]
    assert snapshot_tree(project / ".omp") == before  # not even omp's hook files


def test_a_shut_down_and_a_headless_team_are_refused(project: Path, tmp_path: Path) -> None:
    make_team(project, "h", 1)
    r = resume(project, tmp_path, "h")
    assert r.rc == 1 and r.json["error"] == "team_headless", r
    rebooted_team(project, tmp_path)
    assert run_cli("team", "shutdown", "t", cwd=project, env=env(tmp_path)).rc == 0
    r = resume(project, tmp_path, "t")
    assert r.rc == 1 and r.json["error"] == "team_shut_down", r


def test_status_and_wait_of_a_rebooted_team_say_how_to_resume(
    project: Path, tmp_path: Path
) -> None:
    rebooted_team(project, tmp_path)
    r = run_cli("team", "status", "t", "--json", cwd=project, env=env(tmp_path))
    st = r.json["teams"][0]
    assert_reply(st, replies.TeamStatus)
    assert_reply(st["resume"], replies.ResumeHint)
    assert [w["pane"] for w in st["workers"]] == ["gone", "gone"]
    assert st["resume"]["workers"] == ["worker-1", "worker-2"]
    assert st["resume"]["command"].endswith("team resume t")
    text = run_cli("team", "status", "t", cwd=project, env=env(tmp_path)).stdout
    assert f"resume with: {st['resume']['command']}" in text
    r = run_cli("team", "wait", "t", "--timeout", "30", "--json", cwd=project, env=env(tmp_path))
    assert r.rc == 13 and r.json["event"] == "gone", r
    assert r.json["resume"] == st["resume"]["command"]
    assert_reply(r.json, replies.WaitReply)
    text = run_cli("team", "wait", "t", "--timeout", "30", cwd=project, env=env(tmp_path)).stdout
    assert f"resume with: {st['resume']['command']}" in text


def test_a_live_team_status_offers_no_resume(project: Path) -> None:
    from omp.views.status import team_status

    team = make_team(project, "h", 1)
    assert team_status(team_config.load(team))["resume"] is None  # headless: no pane to lose


# ---- the tasks a resume gives back ------------------------------------------------------------


def interrupt(team: TeamPaths, tid: str, worker: str, result: str) -> str:
    _, token = tasks.claim(team, tid, worker)
    tasks.transition(
        team, tid, worker=None, from_status="in_progress", to_status="interrupted",
        token=token, result=result,
    )  # fmt: skip
    return token


def test_reclaim_gives_back_only_what_the_monitor_interrupted(project: Path) -> None:
    team = make_team(project, "r", 3, task="count")
    offline = tasks.offline_result("worker-1") + " (x); not replayed"
    token = interrupt(team, "1", "worker-1", offline)
    back = tasks.reclaim(team, "1", "worker-1")
    assert back is not None and back["status"] == "in_progress"
    assert back["owner"] == "worker-1" and back["claimToken"] == token
    assert "result" not in back and "finishedAt" not in back
    assert team.task_lock("1").exists()
    # the same claim finishes it
    done = tasks.transition(
        team, "1", worker="worker-1", from_status="in_progress", to_status="completed",
        token=token, result="ok",
    )  # fmt: skip
    assert done["status"] == "completed"
    # not an offline interruption, not its owner, not interrupted: left alone
    interrupt(team, "2", "worker-2", "interrupted: the leader stopped it")
    assert tasks.reclaim(team, "2", "worker-2") is None
    interrupt(team, "3", "worker-3", tasks.offline_result("worker-3") + " (x)")
    assert tasks.reclaim(team, "3", "worker-1") is None
    assert tasks.reclaim(team, "1", "worker-1") is None  # completed
    assert tasks.read(team, "3")["status"] == "interrupted"  # type: ignore[index]


# ---- what a resumed worker reads --------------------------------------------------------------


def test_the_resume_inbox_names_the_task_the_claim_the_worktree_and_the_mail(
    tmp_path: Path,
) -> None:
    text = bootstrap.resume_markdown(
        team="t",
        worker="worker-1",
        restarted_at="2026-01-01T00:00:00.000Z",
        why="the team's tmux server was gone",
        inbox=tmp_path / "inbox.md",
        conversation_resumed=False,
        task={"id": "1", "status": "in_progress", "owner": "worker-1", "claimToken": "tok"},
        result_path=tmp_path / "result.md",
        worktree={"path": "/w", "branch": "omp/t/worker-1", "ahead": 2, "uncommitted": ["a.py"]},
        unread=3,
        omp="omp",
    )
    assert text.startswith("# worker-1: resumed in omp team t\n")
    assert "Restarted: 2026-01-01T00:00:00.000Z by omp team resume (the team's tmux server" in text
    assert f"Reread {tmp_path / 'inbox.md'}" in text
    assert "Task ID: 1\nStatus: in_progress, claimed by you. The claim is still yours" in text
    assert "Claim token: tok\n" in text
    assert '"claim_token":"tok"' in text and '"to":"completed"' in text
    assert "Branch: omp/t/worker-1\nCommits ahead of base: 2\nUncommitted files: 1 (a.py)" in text
    assert "Unread messages: 3.\nRead them: omp team api mailbox-read" in text
    assert text.endswith("Go on.\n")
    done = bootstrap.resume_markdown(
        team="t", worker="worker-1", restarted_at="x", why="y", inbox=tmp_path / "inbox.md",
        conversation_resumed=True, task={"id": "1", "status": "completed"},
        result_path=tmp_path / "r", worktree=None, unread=0, omp="omp",
    )  # fmt: skip
    assert "Your own conversation was resumed" in done
    assert "Status: completed. Nothing is left to do on it." in done
    assert "Read them" not in done and "worktree" not in done


def test_launch_state_paths_archive_the_session_and_the_resume_inbox(project: Path) -> None:
    team = StatePaths(project).team("t")
    assert team.session("worker-1") in team.run_files("worker-1")
    assert team.resume_inbox("worker-1") in team.run_files("worker-1")


def test_a_worker_without_a_hook_resumes_into_the_session_its_record_names(
    project: Path, tmp_path: Path
) -> None:
    """Codex and Gemini workers get no hook of omp's: the session comes from the newest record
    the monitor's usage index found for the worker (`omp.usage.locate.session_id`), never from
    a subagent's, another CLI's, a deleted one, or an index of an earlier launch."""
    import os
    import shutil

    from omp.record.budget import generation
    from omp.team.resume import _from_record
    from tests.usage import fixtures as fx

    team = rebooted_team(project, tmp_path)
    cfg = team_config.load(team)
    paths = StatePaths(project)
    index = paths.monitor_usage_index("t")
    index.parent.mkdir(parents=True, exist_ok=True)
    old, new, sub, gone = (tmp_path / "rec" / n for n in ("old", "new", "sub", "gone"))
    (main,) = fx.records("codex")
    for d in (old, new, sub, gone):
        d.mkdir(parents=True)
    other = "2222-3333-4444-555555555555.jsonl"
    older = shutil.copy(main, old / f"rollout-2026-11-30T10-00-00-11111111-{other}")
    newer = shutil.copy(main, new / main.name)
    subrec = shutil.copy(main, sub / f"rollout-2026-12-01T18-00-00-99999999-{other}")
    os.utime(older, (1_000, 1_000))
    os.utime(newer, (2_000, 2_000))
    os.utime(subrec, (3_000, 3_000))
    records = [
        {"path": str(newer), "kind": "codex", "state": None},
        {"path": str(older), "kind": "codex", "state": None},
        {"path": str(subrec), "kind": "codex", "state": None, "sub": True},
        {"path": str(gone / "rollout-x-77777777-2222-3333-4444-555555555555.jsonl"),
         "kind": "codex", "state": None},
        {"path": str(fx.records("claude")[0]), "kind": "claude", "state": None},
    ]  # fmt: skip
    doc = {
        "schemaVersion": 1,
        "team": "t",
        "generation": generation(cfg.raw),
        "members": {"worker-1": {"agent": "codex", "records": records}},
    }
    index.write_text(json.dumps(doc))
    want = "01a231eb-af5f-7072-8638-f478dc8de9a5"  # the newest main record's session
    assert _from_record(cfg, "worker-1", ("codex",)) == want
    assert _from_record(cfg, "worker-2", ("codex",)) is None  # nothing found for it
    assert _from_record(cfg, "worker-1", ("gemini",)) is None  # another CLI's records only
    index.write_text(json.dumps({**doc, "generation": "an earlier launch"}))
    assert _from_record(cfg, "worker-1", ("codex",)) is None
