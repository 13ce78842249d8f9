"""Broken state has a way out (issue 12, class 4): a corrupt or invalid config or task file is
shown by every read command as an error naming the file (a task never silently disappears), and
`omp team shutdown --force` stops a team whose config cannot be read, killing only panes omp can
prove it started."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from omp.cli.team_text import collect_markdown, status_text, wait_text
from omp.errors import OmpError
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.team.shutdown import force_shutdown
from omp.tmux import Tmux
from omp.views.status import collect, status
from omp.views.wait import wait
from tests.helpers import call_api, child_env, isolate, make_project, make_team, run_cli


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 3, task="build it")
    monkeypatch.setenv("OMP_ROOT", str(r))
    return r


def team(root: Path) -> Any:
    return StatePaths(root).team("t")


BROKEN_TASKS = {
    "2": b"{not json",
    "3": json.dumps({"id": "7", "status": "pending"}).encode(),
    "4": json.dumps({"id": "4", "status": "finished-ish"}).encode(),
}


def plant_tasks(root: Path) -> None:
    for tid, data in BROKEN_TASKS.items():
        team(root).task(tid).write_bytes(data)


def test_every_read_command_shows_a_broken_task_naming_its_file(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plant_tasks(root)
    files = [str(team(root).task(t)) for t in BROKEN_TASKS]
    st = status(StatePaths(root), "t")
    rows = [t for t in st["teams"][0]["tasks"] if "error" in t]
    assert [r["file"] for r in rows] == files and st["teams"][0]["allDone"] is False
    text = status_text(st)
    assert all(f in text for f in files) and "not valid JSON" in text
    assert "holds id '7'" in text and "unknown status 'finished-ish'" in text
    col = collect(team_config.load(team(root)))
    assert [b["file"] for b in col["brokenTasks"]] == files
    assert all(f in collect_markdown(col) for f in files)
    api = call_api(capsys, "list-tasks", {"team_name": "t"})
    assert [b["file"] for b in api.json["broken"]] == files
    assert [t["id"] for t in api.json["tasks"]] == ["1"]
    api_text = call_api(capsys, "list-tasks", {"team_name": "t"}, as_json=False).stdout
    assert all(f in api_text for f in files)
    from omp.doctor.checks import check_teams

    warned = " ".join(c.message for c in check_teams(StatePaths(root)))
    assert all(f in warned for f in files)
    w = wait(team_config.load(team(root)), timeout=0.05)
    assert [b["file"] for b in w["brokenTasks"]] == files and all(f in wait_text(w) for f in files)


def test_a_broken_task_is_never_all_done_nor_claimable(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tp = team(root)
    for tid in ("1", "2"):
        _, tok = tasks.claim(tp, tid, f"worker-{tid}")
        tasks.transition(tp, tid, worker=f"worker-{tid}", from_status="in_progress",
                         to_status="completed", token=tok)  # fmt: skip
    tp.task("3").write_bytes(b"[]")
    assert status(StatePaths(root), "t")["teams"][0]["allDone"] is False
    assert wait(team_config.load(tp), timeout=0.05)["event"] != "all_done"
    run = call_api(capsys, "claim-task", {"team_name": "t", "task_id": "3", "worker": "worker-3"})
    assert run.json["error"] == "invalid_task" and str(tp.task("3")) in run.json["message"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"workers": "worker-1"}, "has no workers list"),
        ({"workers": [{"name": "../x"}]}, "invalid worker at position 1"),
        ({"workers": [{"name": "leader"}]}, "invalid worker at position 1"),
        ({"workers": [{"name": "worker-1"}, {"name": "worker-1"}]}, "lists worker worker-1 twice"),
        ({"name": "other"}, "names team 'other'"),
        ({"tmuxIdentity": "x"}, "tmuxIdentity that is not an object"),
    ],
)
def test_an_invalid_config_is_a_clear_error_naming_the_file(
    root: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], why: str
) -> None:
    tp = team(root)
    raw = json.loads(tp.config.read_text())
    raw.update(change)
    tp.config.write_text(json.dumps(raw))
    with pytest.raises(OmpError) as exc:
        team_config.load(tp)
    assert exc.value.code == "invalid_config" and why in exc.value.message
    assert str(tp.config) in exc.value.message
    row = status(StatePaths(root), None)["teams"][0]
    assert row["error"] == "invalid_config" and str(tp.config) in row["message"]
    for sub, payload in [
        ("list-tasks", {}),
        ("roster", {}),
        ("mailbox-list", {"worker": "leader"}),
    ]:
        run = call_api(capsys, sub, {"team_name": "t", **payload})
        assert run.rc == 1 and run.json["error"] == "invalid_config", run


def test_every_read_command_names_a_corrupt_config(root: Path) -> None:
    tp = team(root)
    tp.config.write_text("{corrupt")
    env = child_env(Path(os.environ["HOME"]), OMP_NO_MONITOR="1")
    for args in (["team", "status"], ["team", "list"], ["doctor", "--agent", "demo"]):
        r = run_cli(*args, cwd=root, env=env)
        assert str(tp.config) in r.stdout, (args, r)
    for args in (["team", "status", "t"], ["team", "collect", "t"], ["team", "wait", "t"]):
        r = run_cli(*args, "--json", cwd=root, env=env)
        assert r.json["error"] == "invalid_config" and str(tp.config) in r.json["message"]
    r = run_cli("team", "shutdown", "t", cwd=root, env=env)
    assert r.rc == 1 and "team shutdown --force t" in r.stderr
    env["TMUX_TMPDIR"] = str(root.parent)  # never the user's default tmux server
    r = run_cli("team", "shutdown", "--force", "t", "--json", cwd=root, env=env)
    assert r.rc == 0 and r.json["forced"] is True and tp.shutdown.exists(), r
    assert tp.config.read_text() == "{corrupt"


# ---- shutdown --force, on a private tmux server ---------------------------------------------


def test_force_shutdown_kills_only_the_panes_omp_started_for_the_team(
    root: Path, omp_tmux: Tmux, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))  # "the default server" is a private one too
    tp = team(root)
    base = {
        "OMP_TEAM": "t",
        "OMP_WORKER": "worker-1",
        "OMP_LAUNCH_TOKEN": "lt",
        "OMP_ROOT": str(root),
    }
    cmd = ["sleep", "300"]
    # as launch does: a session with no OMP_* variables, then one pane per worker with them
    _, _, leader = omp_tmux.new_session("s1", cwd=root, command=cmd, env={})
    mine = omp_tmux.split_pane(leader, cwd=root, command=cmd, env=base)
    mine2 = omp_tmux.split_pane(leader, cwd=root, command=cmd, env={**base, "OMP_WORKER": "w-2"})
    no_worker = omp_tmux.split_pane(leader, cwd=root, command=cmd, env={"OMP_TEAM": "t"})
    other_team = omp_tmux.split_pane(leader, cwd=root, command=cmd, env={**base, "OMP_TEAM": "u"})
    other_root = omp_tmux.split_pane(
        leader, cwd=root, command=cmd, env={**base, "OMP_ROOT": str(root.parent)}
    )
    server = omp_tmux.server_identity()
    assert server is not None
    tp.config.write_text(
        '{"tmuxIdentity": {"socketPath": ' + json.dumps(server["socket_path"]) + '}, "workers": ['
    )
    r = force_shutdown(tp)  # the socket is found in what is left of the config
    assert sorted(r["killedPanes"]) == sorted([mine, mine2]) and r["forced"] is True
    left = omp_tmux.pane_states([mine, mine2, leader, no_worker, other_team, other_root])
    assert left[mine] is None and left[mine2] is None
    assert all(left[p] is not None for p in (leader, no_worker, other_team, other_root))
    assert json.loads(tp.shutdown.read_text())["killedPanes"] == r["killedPanes"]
    assert tp.config.read_text().startswith('{"tmuxIdentity"')  # every file kept
