"""Each typer command's `--json` reply has exactly the keys `omp.cli.replies` documents: every
required key, and no key it does not name (a new key fails here until it is documented). The
commands run in this process (`run_cli`) on a headless team; launch and add-worker, which need
tmux, are checked by tests/team/test_add_worker_tmux.py with `assert_reply`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from omp.cli import replies
from omp.cli.replies import COMMANDS
from tests.helpers import assert_reply, child_env, isolate, make_project, make_team, run_cli


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, task="build it")
    return r


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home", OMP_NO_MONITOR="1", TMUX_TMPDIR=str(tmp_path))


def omp(root: Path, env: dict[str, str], *args: str, rc: int = 0) -> dict[str, Any]:
    r = run_cli(*args, "--json", cwd=root, env=env)
    assert r.rc == rc, r
    assert isinstance(r.json, dict), r
    return r.json


def test_every_command_with_json_has_its_reply_documented() -> None:
    import typer.main

    from omp.cli.app import app

    group: Any = typer.main.get_command(app)
    documented = {name.split()[0] for name in COMMANDS}
    for name in group.list_commands(None):
        if name == "hook" or group.get_command(None, name).hidden:
            continue  # an agent CLI's stop protocol; the demo agent itself
        assert name in documented or name == "team", name
    assert {n.split()[1] for n in COMMANDS if n.startswith("team ")} >= {
        "launch", "status", "collect", "shutdown", "list", "create", "wait", "add-worker",
        "remove-worker", "delete", "prune", "resume", "usage",
    }  # fmt: skip


def test_the_team_commands_replies(root: Path, env: dict[str, str]) -> None:
    out = omp(root, env, "team", "create", "u", "--workers", "1")
    assert_reply(out, replies.CreateReply)
    omp(root, env, "ralph", "start", "keep going")  # a loop for status's `loops`
    out = omp(root, env, "team", "status", "t")
    assert_reply(out, replies.StatusReply)
    assert_reply(out["teams"][0], replies.TeamStatus)
    for w in out["teams"][0]["workers"]:
        assert_reply(w, replies.WorkerStatus)
        assert_reply(w["usage"], replies.UsageUnreadable)  # a headless worker: no session known
    assert_reply(out["teams"][0]["usage"], replies.TeamSpent)
    used = omp(root, env, "team", "usage", "t")
    assert_reply(used, replies.UsageReply)
    assert_reply(used["totals"], replies.UsageTotalsRow)
    for row in used["members"]:
        assert_reply(row, replies.MemberUsage)
    assert out["loops"]
    for loop in out["loops"]:
        assert_reply(loop, replies.LoopSummary)
    (root / ".omp" / "state" / "team" / "u" / "config.json").write_text("{broken")
    out = omp(root, env, "team", "status")
    assert_reply(out, replies.StatusReply)
    rows = {row["team"]: row for row in out["teams"]}
    assert_reply(rows["t"], replies.TeamStatus)
    assert_reply(rows["u"], replies.TeamError)
    out = omp(root, env, "team", "list")
    assert_reply(out, replies.ListReply)
    rows = {row["team"]: row for row in out["teams"]}
    assert_reply(rows["t"], replies.ListRow)
    assert_reply(rows["u"], replies.TeamError)
    result = root / ".omp" / "state" / "team" / "t" / "workers" / "worker-2" / "result.md"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text("# done\n")
    out = omp(root, env, "team", "remove-worker", "t", "worker-2")
    assert_reply(out, replies.RemoveWorkerReply)
    out = omp(root, env, "team", "collect", "t")
    assert_reply(out, replies.CollectReply)
    assert_reply(out["workers"][0], replies.CollectRow)
    assert out["removed"]
    assert_reply(out["removed"][0], replies.RemovedRow)
    out = omp(root, env, "team", "wait", "t", "--timeout", "0.05")
    assert_reply(out, replies.WaitReply)
    run_cli(
        "team", "api", "send-message", "--input",
        '{"team_name":"t","from":"worker-1","to":"leader","body":"hi"}', cwd=root, env=env,
    )  # fmt: skip
    out = omp(root, env, "team", "wait", "t", "--timeout", "5")
    assert out["event"] == "mail" and "readCommand" in out["messages"]
    assert_reply(out, replies.WaitReply)
    out = omp(root, env, "team", "shutdown", "t")
    assert_reply(out, replies.ShutdownReply)
    out = omp(root, env, "team", "shutdown", "--force", "u")
    assert out["forced"] is True
    assert_reply(out, replies.ShutdownReply)
    out = omp(root, env, "team", "prune", "--older-than", "0", "--dry-run")
    assert_reply(out, replies.PruneReply)
    out = omp(root, env, "team", "delete", "t", "--force")
    assert_reply(out, replies.DeleteReply)
    out = omp(root, env, "team", "status", "ghost", rc=1)
    assert_reply({k: out[k] for k in ("ok", "error", "message")}, replies.ErrorReply)


def test_the_loop_commands_replies(root: Path, env: dict[str, str]) -> None:
    for args in (
        ["ralph", "status"],  # none yet
        ["ralph", "cancel"],
        ["ralph", "start", "work", "--max-iterations", "3"],
        ["ralph", "status"],
        ["ralph", "cancel"],
        ["ultrawork", "start", "ship it", "--task-count", "2"],
        ["ultrawork", "status"],
        ["ultrawork", "cancel"],
        ["ultraqa", "start", "tests pass"],
        ["ultraqa", "cycle", "fail"],
        ["ultraqa", "cycle", "pass"],
        ["ultraqa", "status"],
    ):
        assert_reply(omp(root, env, *args), replies.LoopReply, " ".join(args))
    (root / ".omp" / "state" / "ralph.json").write_text("[1]")  # not an object: shown as such
    out = omp(root, env, "ralph", "status")
    assert out["unreadable"] is True
    assert_reply(out, replies.LoopReply)


def test_doctor_skills_and_hooks_replies(root: Path, env: dict[str, str]) -> None:
    out = omp(root, env, "doctor", "--agent", "demo")
    assert_reply(out, replies.DoctorReply)
    out = omp(root, env, "skills", "install")
    assert_reply(out, replies.SkillsReply)
    out = omp(root, env, "hooks", "install", "--agent", "copilot")
    assert_reply(out, replies.HooksReply)
    assert os.path.exists(out["hooks"][0]["path"])
