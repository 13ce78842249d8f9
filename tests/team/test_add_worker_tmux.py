"""`omp team add-worker` and `remove-worker --force` on real tmux (a private server per test),
through the CLI; plus add-worker on a headless team and a failure midway that leaves the team
as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from omp.cli.replies import AddWorkerReply, LaunchReply
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tmux import Tmux
from tests.helpers import (
    assert_reply,
    child_env,
    isolate,
    make_project,
    make_team,
    poll,
    run_cli,
    run_omp,
    snapshot_tree,
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    return make_project(tmp_path / "proj")


def env_for(tmux: Tmux, home: Path) -> dict[str, str]:
    return child_env(
        home, OMP_TMUX_SOCKET=str(tmux.socket_name), OMP_DEMO_WORK_SECONDS="0.3", SHELL="/bin/sh"
    )


def omp(project: Path, env: dict[str, str], *args: str) -> Any:
    return run_omp(*args, cwd=project, env=env, timeout=120)


def here(project: Path, env: dict[str, str], *args: str) -> Any:
    """A command without tmux, run in this process."""
    return run_cli(*args, cwd=project, env=env)


def status(project: Path, env: dict[str, str]) -> dict[str, Any]:
    r = omp(project, env, "team", "status", "g", "--json")
    assert r.rc == 0, r
    return dict(r.json["teams"][0])


@pytest.mark.tmux
@pytest.mark.slow
def test_a_worker_joins_a_running_team_and_leaves_it(
    omp_tmux: Tmux, tmux_env: Path, project: Path
) -> None:
    env = env_for(omp_tmux, tmux_env)
    r = omp(project, env, "team", "launch", "2:demo", "count to 3", "--name", "g", "--json")
    assert r.rc == 0, r
    assert_reply(r.json, LaunchReply)
    poll(lambda: status(project, env)["allDone"], timeout=60)
    r = omp(project, env, "team", "add-worker", "g", "1", "count to 4", "--json")
    assert r.rc == 0, r
    assert_reply(r.json, AddWorkerReply)
    new = r.json["workers"][0]
    assert new["name"] == "worker-3" and new["taskId"] == "3" and new["paneId"].startswith("%")
    assert r.json["members"] == ["worker-1", "worker-2", "worker-3"]
    cfg = team_config.load(StatePaths(project).team("g"))
    entry = cfg.worker("worker-3")
    assert entry is not None and entry["launchToken"] != cfg.raw["launchToken"]
    # in the team's window, and it does its task like the others
    st = omp_tmux.pane_states([new["paneId"]])[new["paneId"]]
    assert st is not None and st.window_id == cfg.raw["tmuxIdentity"]["windowId"]

    def third_done() -> list[dict[str, Any]]:
        tasks = status(project, env)["tasks"]
        return [t for t in tasks if t["id"] == "3" and t["status"] == "completed"]

    done = poll(third_done, timeout=60)
    assert done[0]["owner"] == "worker-3"
    view = {w["name"]: w for w in status(project, env)["workers"]}
    assert view["worker-3"]["pane"] == "alive"
    msg = json.dumps({"team_name": "g", "from": "leader", "body": "all of you"})
    b = omp(project, env, "team", "api", "broadcast", "--input", msg, "--json")
    assert b.json["recipients"] == ["worker-1", "worker-2", "worker-3"]
    # removing it: refused while its pane lives, then --force closes the pane
    before = snapshot_tree(project / ".omp" / "state" / "team")
    r = omp(project, env, "team", "remove-worker", "g", "worker-3", "--json")
    assert r.rc == 1 and r.json["error"] == "worker_alive", r
    assert snapshot_tree(project / ".omp" / "state" / "team") == before
    r = omp(project, env, "team", "remove-worker", "g", "worker-3", "--force", "--json")
    assert r.rc == 0 and r.json["killedPane"] == new["paneId"], r
    assert omp_tmux.pane_states([new["paneId"]])[new["paneId"]] is None
    assert [w["name"] for w in status(project, env)["workers"]] == ["worker-1", "worker-2"]
    # the next one gets a fresh name, never the removed one's mailbox
    r = omp(project, env, "team", "add-worker", "g", "--json")
    assert r.rc == 0 and r.json["workers"][0]["name"] == "worker-4", r
    assert omp(project, env, "team", "shutdown", "g").rc == 0


@pytest.mark.tmux
@pytest.mark.slow
def test_an_add_that_fails_midway_leaves_the_team_as_it_was(
    omp_tmux: Tmux, tmux_env: Path, project: Path
) -> None:
    env = env_for(omp_tmux, tmux_env)
    (project / ".omp").mkdir(exist_ok=True)
    # an agent that starts but never shows a ready screen: the add times out after its panes
    (project / ".omp" / "agents.toml").write_text(
        '[agents.mute]\ncommand = ["sh", "-c", "sleep 60"]\nready_patterns = ["^NEVER$"]\n'
    )
    r = omp(project, env, "team", "launch", "1:demo", "--name", "g", "--json")
    assert r.rc == 0, r
    team_dir = project / ".omp" / "state" / "team" / "g"
    cfg_before = (team_dir / "config.json").read_bytes()
    panes_before = set(omp_tmux.cmd("list-panes", "-a", "-F", "#{pane_id}").split())
    r = omp(project, env, "team", "add-worker", "g", "2", "a task", "--agent", "mute",
            "--ready-timeout", "1", "--json")  # fmt: skip
    assert r.rc == 1 and r.json["error"] == "launch_timeout", r
    assert "the team is as before" in r.json["message"]
    assert (team_dir / "config.json").read_bytes() == cfg_before
    assert sorted(os.listdir(team_dir / "tasks")) == [".guard"]  # no task of theirs is left
    assert set(omp_tmux.cmd("list-panes", "-a", "-F", "#{pane_id}").split()) == panes_before
    st = status(project, env)
    assert [w["name"] for w in st["workers"]] == ["worker-1"]
    assert omp(project, env, "team", "shutdown", "g").rc == 0


def test_add_worker_to_a_headless_team(project: Path, tmp_path: Path) -> None:
    env = child_env(tmp_path / "home")
    make_team(project, "h", 2, task="old work")
    r = here(project, env, "team", "remove-worker", "h", "worker-2")
    assert r.rc == 0, r
    r = here(project, env, "team", "add-worker", "h", "2", "new work", "--agent", "demo", "--json")
    assert r.rc == 0, r
    assert [(w["name"], w["taskId"]) for w in r.json["workers"]] == [
        ("worker-3", "3"),
        ("worker-4", "4"),
    ]
    roster = here(project, env, "team", "api", "roster", "--input",
                 json.dumps({"team_name": "h"}), "--json").json  # fmt: skip
    names = [m["name"] for m in roster["members"]]
    assert names == ["worker-1", "worker-3", "worker-4", "leader"]
    inbox = (project / ".omp/state/team/h/workers/worker-4/inbox.md").read_text()
    assert "new work (part 2/2)" in inbox and "worker-3" in inbox
    tasks = here(project, env, "team", "api", "list-tasks", "--input",
                json.dumps({"team_name": "h"}), "--json").json["tasks"]  # fmt: skip
    assert [t["id"] for t in tasks] == ["1", "2", "3", "4"]
    # a plain TASK without N means one worker
    r = here(project, env, "team", "add-worker", "h", "review it", "--agent", "demo", "--json")
    assert r.json["workers"] == [{"name": "worker-5", "paneId": None, "taskId": "5"}]


def test_add_worker_refusals_change_nothing(project: Path, tmp_path: Path) -> None:
    env = child_env(tmp_path / "home")
    make_team(project, "h", 31)
    before = snapshot_tree(project / ".omp")
    for args, code in [
        (("h", "2"), "invalid_input"),  # 31 + 2 > 32
        (("h", "0"), "invalid_input"),
        (("h", "1", "--agent", "nope"), "unknown_agent"),
        (("nope",), "unknown_team"),
    ]:
        r = here(project, env, "team", "add-worker", *args, "--json")
        assert r.json["error"] == code, (args, r)
    (project / ".omp/state/team/h/shutdown.json").write_text("{}")
    os.chmod(project / ".omp/state/team/h/shutdown.json", 0o600)
    before = snapshot_tree(project / ".omp")
    r = here(project, env, "team", "add-worker", "h", "1", "--agent", "demo", "--json")
    assert r.rc == 1 and r.json["error"] == "team_shut_down", r
    assert snapshot_tree(project / ".omp") == before


def _add_dying_before_the_trigger(root: str) -> None:
    """`omp team add-worker` killed after its pane and config entry, before the agent's task."""
    from omp.cli import main
    from omp.team.launch import Launch
    from tests.faults.support import die

    os.chdir(root)
    Launch.wait_and_trigger = lambda *a, **k: die()  # type: ignore[method-assign]
    main(["team", "add-worker", "g", "1", "a late part"])


@pytest.mark.tmux
@pytest.mark.slow
def test_an_add_killed_before_the_trigger_is_cleaned_up_by_remove_worker(
    omp_tmux: Tmux, tmux_env: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.faults.support import start

    env = env_for(omp_tmux, tmux_env)
    r = omp(project, env, "team", "launch", "1:demo", "--name", "g", "--json")
    assert r.rc == 0, r
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    proc = start(_add_dying_before_the_trigger, str(project))
    proc.join(60)
    assert proc.exitcode == -9
    # the newcomer is a member with a live pane that never got its task: status shows it
    st = status(project, env)
    assert [w["name"] for w in st["workers"]] == ["worker-1", "worker-2"]
    assert [(t["id"], t["status"]) for t in st["tasks"]] == [("1", "pending")]
    # the way out is the ordinary one
    r = omp(project, env, "team", "remove-worker", "g", "worker-2", "--force", "--json")
    assert r.rc == 0 and r.json["killedPane"], r
    assert [w["name"] for w in status(project, env)["workers"]] == ["worker-1"]
    assert omp(project, env, "team", "shutdown", "g").rc == 0
