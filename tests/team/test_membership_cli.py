"""`omp team remove-worker` through the CLI: work settled (never replayed), mail kept, identity
fenced. (`add-worker` needs panes: tests/team/test_add_worker_tmux.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.record import config as team_config
from omp.store.paths import StatePaths
from tests.helpers import child_env, isolate, make_project, make_team, records, run_omp


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 3, task="build it", no_limits=True)
    return r


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home")


def omp(root: Path, env: dict[str, str], *args: str) -> Any:
    return run_omp(*args, cwd=root, env=env)


def api(root: Path, env: dict[str, str], sub: str, **fields: Any) -> Any:
    payload = json.dumps({"team_name": "t", **fields})
    return omp(root, env, "team", "api", sub, "--input", payload, "--json")


def mailbox(root: Path, who: str) -> list[dict[str, Any]]:
    path = StatePaths(root).team("t").mailbox(who)
    return [r for r in records(path) if r["type"] == "message"] if path.exists() else []


def test_remove_worker_settles_its_work_and_keeps_its_mail(root: Path, env: dict[str, str]) -> None:
    tp = StatePaths(root).team("t")
    to_it = api(
        root, env, "send-message", event="task_req",
        **{"from": "leader", "to": "worker-2", "body": "also check the tests"},
    )  # fmt: skip
    assert to_it.rc == 0, to_it
    from_it = api(
        root, env, "send-message", event="task_req",
        **{"from": "worker-2", "to": "worker-1", "body": "please review my part"},
    )  # fmt: skip
    assert from_it.rc == 0, from_it
    assert to_it.json["status"] == from_it.json["status"] == "acknowledged", (to_it, from_it)
    claimed = api(root, env, "claim-task", task_id="2", worker="worker-2")
    assert claimed.rc == 0, claimed
    r = omp(root, env, "team", "remove-worker", "t", "worker-2", "--json")
    assert r.rc == 0, r
    doc = r.json
    assert doc["workers"] == ["worker-1", "worker-3"] and doc["killedPane"] is None
    # its claimed task and the request addressed to it: interrupted, the leader told
    got = {(a.get("claimedTaskId") or a.get("taskId")) for a in doc["interrupted"]}
    assert got == {"2", to_it.json["messageId"]}
    assert json.loads(tp.task("2").read_text())["status"] == "interrupted"
    fails = [m for m in mailbox(root, "leader") if m.get("event") == "task_fail"]
    assert len(fails) == 2 and all(m["from"] == "worker-2" and m.get("auto") for m in fails)
    # the request it emitted: cancelled, its worker told to stop
    assert [a["taskId"] for a in doc["cancelled"]] == [from_it.json["messageId"]]
    cancel = [m for m in mailbox(root, "worker-1") if m.get("event") == "task_cancel"]
    assert len(cancel) == 1 and cancel[0]["task_id"] == from_it.json["messageId"]
    # its mail and results stay readable on disk
    assert tp.mailbox("worker-2").exists()
    assert mailbox(root, "worker-2")[0]["body"] == "also check the tests"
    listed = api(root, env, "mailbox-list", worker="worker-2")
    assert listed.rc == 0 and listed.json["messages"][0]["body"] == "also check the tests"
    r = api(root, env, "mailbox-read", worker="worker-2")  # reading it as the worker: no
    assert r.rc == 1 and r.json["error"] == "unknown_recipient"
    # the roster, broadcasts and status no longer have it
    cfg = team_config.load(tp)
    assert cfg.worker_names == ["worker-1", "worker-3"] and cfg.raw["workerCount"] == 2
    assert cfg.raw["removedWorkers"][0]["name"] == "worker-2"
    roster = api(root, env, "roster", worker="leader").json
    assert [m["name"] for m in roster["members"]] == ["worker-1", "worker-3"]
    b = api(root, env, "broadcast", **{"from": "leader", "body": "regroup"}).json
    assert b["recipients"] == ["worker-1", "worker-3"]
    st = omp(root, env, "team", "status", "t", "--json").json["teams"][0]
    assert [w["name"] for w in st["workers"]] == ["worker-1", "worker-3"]
    r = api(root, env, "send-message", **{"from": "leader", "to": "worker-2", "body": "x"})
    assert r.rc == 1 and r.json["error"] == "unknown_recipient"
    # the history says so
    evs = [
        json.loads(x) for x in omp(root, env, "team", "events", "t", "--json").stdout.splitlines()
    ]
    members = [(e["worker"], e["change"]) for e in evs if e["type"] == "member"]
    assert members[-1] == ("worker-2", "removed")
    # a second removal only settles again (nothing left to settle: nobody is told twice)
    r = omp(root, env, "team", "remove-worker", "t", "worker-2", "--json")
    assert r.rc == 0 and r.json["alreadyRemoved"] is True, r
    assert r.json["interrupted"] == [] and r.json["cancelled"] == []
    assert len([m for m in mailbox(root, "leader") if m.get("event") == "task_fail"]) == len(fails)
    # an unknown name is refused
    r = omp(root, env, "team", "remove-worker", "t", "worker-9", "--json")
    assert r.rc == 1 and r.json["error"] == "unknown_worker", r
    r = omp(root, env, "team", "remove-worker", "t", "../x", "--json")
    assert r.rc == 2 and r.json["error"] == "invalid_worker_name"


def test_a_process_still_holding_the_removed_identity_is_refused(
    root: Path, env: dict[str, str]
) -> None:
    result = StatePaths(root).team("t").worker_dir("worker-3") / "result.md"
    result.write_text("# worker-3\nhalf of the parser")
    assert omp(root, env, "team", "remove-worker", "t", "worker-3").rc == 0
    # its results stay readable in collect
    c = omp(root, env, "team", "collect", "t", "--json").json
    assert [w["name"] for w in c["workers"]] == ["worker-1", "worker-2"]
    assert c["removed"][0]["name"] == "worker-3"
    assert "half of the parser" in c["removed"][0]["resultMarkdown"]
    text = omp(root, env, "team", "collect", "t").stdout
    assert "## worker-3: removed from the team" in text and "half of the parser" in text
    pane_env = {**env, "OMP_TEAM": "t", "OMP_WORKER": "worker-3"}
    for sub, fields in [
        ("send-message", {"from": "worker-3", "to": "leader", "body": "still here"}),
        ("mailbox-read", {"worker": "worker-3"}),
        ("list-tasks", {}),
        ("claim-task", {"task_id": "1", "worker": "worker-3"}),
    ]:
        r = run_omp(
            "team", "api", sub, "--input", json.dumps({"team_name": "t", **fields}), "--json",
            cwd=root, env=pane_env,
        )  # fmt: skip
        assert r.rc == 1 and r.json["error"] == "worker_removed", (sub, r)
    assert mailbox(root, "leader") == []


def test_a_live_pane_is_refused_without_force(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omp.errors import OmpError
    from omp.mail import panes
    from omp.mail.panes import PaneView
    from omp.team import membership
    from tests.helpers import snapshot_tree

    monkeypatch.setattr(
        panes, "pane_views", lambda cfg: {w: PaneView("alive") for w in cfg.worker_names}
    )
    cfg = team_config.load(StatePaths(root).team("t"))
    before = snapshot_tree(root / ".omp")
    with pytest.raises(OmpError) as exc:
        membership.remove_worker(cfg, "worker-1")
    assert exc.value.code == "worker_alive" and "--force" in exc.value.message
    assert snapshot_tree(root / ".omp") == before


def _remove_dying_before_the_settling(root: str, worker: str) -> None:
    """`omp team remove-worker` killed after the roster changed, before the work is settled."""
    import os

    from omp.cli import main
    from omp.monitor import sweep
    from tests.faults.support import die

    os.chdir(root)
    sweep.interrupt_worker = lambda *a, **k: die()  # type: ignore[assignment]
    main(["team", "remove-worker", "t", worker])


def test_a_removal_killed_midway_is_finished_by_running_it_again(
    root: Path, env: dict[str, str]
) -> None:
    from tests.faults.support import start

    claimed = api(root, env, "claim-task", task_id="3", worker="worker-3")
    assert claimed.rc == 0, claimed
    proc = start(_remove_dying_before_the_settling, str(root), "worker-3")
    proc.join(30)
    assert proc.exitcode == -9
    # the roster changed, the work not yet settled: a task held by a worker who is gone
    tp = StatePaths(root).team("t")
    assert "worker-3" not in team_config.load(tp).worker_names
    assert json.loads(tp.task("3").read_text())["status"] == "in_progress"
    # running it again settles it, telling the leader once
    r = omp(root, env, "team", "remove-worker", "t", "worker-3", "--json")
    assert r.rc == 0 and r.json["alreadyRemoved"] is True, r
    assert [a["claimedTaskId"] for a in r.json["interrupted"]] == ["3"]
    assert json.loads(tp.task("3").read_text())["status"] == "interrupted"
    assert team_config.load(tp).worker_names == ["worker-1", "worker-2"]
    assert len([m for m in mailbox(root, "leader") if m.get("event") == "task_fail"]) == 1
    # and again: nothing more to do, nobody told twice
    r = omp(root, env, "team", "remove-worker", "t", "worker-3", "--json")
    assert r.rc == 0 and r.json["interrupted"] == [], r
    assert len([m for m in mailbox(root, "leader") if m.get("event") == "task_fail"]) == 1
