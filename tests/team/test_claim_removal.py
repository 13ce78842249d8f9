"""Claims and removal (issue 21, class 9): a `claim-task` racing `remove-worker` never leaves a
task in_progress owned by a worker who is no longer a member.

The removal changes the roster first, then takes the tasks' guard (`tasks.settle_claims`: every
claim that read the old roster is done) and settles what the worker holds; a claim reads the
roster under that same guard. So a claim either lands before the settling (and is interrupted,
its requester told) or finds the worker gone (`worker_removed`) and changes nothing. Running
`remove-worker` again on a removed worker settles again, which repairs a team an older omp left
with such a task.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.record import config as team_config
from omp.store.layout import TeamFiles
from omp.store.paths import StatePaths, TeamPaths
from omp.tasks import tasks
from omp.team import membership
from tests.faults.support import start
from tests.helpers import call_api, isolate, make_project, make_team, poll, records, run_omp

TASKS = 40


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, task="build it", no_limits=True)
    monkeypatch.setenv("OMP_ROOT", str(r))
    return r


def team(root: Path) -> TeamPaths:
    return StatePaths(root).team("t")


def held_by_strangers(tp: TeamPaths) -> list[dict[str, Any]]:
    """Tasks in progress whose owner is not a member: what must never exist."""
    members = set(team_config.load(tp).worker_names)
    return [
        t for t in tasks.list_all(tp) if t["status"] == "in_progress" and t["owner"] not in members
    ]


def status_of(root: Path, tid: str) -> str | None:
    task = tasks.read(team(root), tid)
    return None if task is None else task.get("status")


def remove(root: Path, who: str = "worker-2") -> dict[str, Any]:
    return membership.remove_worker(team_config.load(team(root)), who, force=True)


def test_a_removed_worker_cannot_claim(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    remove(root)
    with pytest.raises(OmpError) as exc:
        tasks.claim(team(root), "1", "worker-2")
    assert exc.value.code == "worker_removed"
    monkeypatch.setenv("OMP_TEAM", "t")
    monkeypatch.setenv("OMP_WORKER", "worker-2")
    run = call_api(capsys, "claim-task", {"team_name": "t", "task_id": "1", "worker": "worker-2"})
    assert run.json["error"] == "worker_removed", run
    assert status_of(root, "1") == "pending"


def test_a_claim_that_read_the_roster_before_the_removal_loses_cleanly(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The claim loaded the config (worker-2 a member), then the whole removal ran: the claim
    finds worker-2 gone under the guard and changes nothing."""
    real = team_config.load
    removed: list[dict[str, Any]] = []

    def load_then_remove(paths: TeamPaths) -> team_config.TeamConfig:
        cfg = real(paths)
        if not removed:
            monkeypatch.setattr(team_config, "load", real)
            removed.append(remove(root))
        return cfg

    monkeypatch.setattr(team_config, "load", load_then_remove)
    run = call_api(capsys, "claim-task", {"team_name": "t", "task_id": "1", "worker": "worker-2"})
    assert removed
    assert run.rc == 1 and run.json["error"] == "worker_removed", run
    assert status_of(root, "1") == "pending"
    assert not team(root).task_lock("1").exists()
    assert held_by_strangers(team(root)) == []


def test_a_claim_inside_the_guard_when_the_roster_changes_is_settled_by_the_removal(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim passed its membership check under the guard; the removal changes the roster
    meanwhile and must wait for the guard, then interrupt the task the claim took."""
    checked = threading.Event()
    go = threading.Event()
    real = tasks._require_member

    def check_then_hold(tp: TeamFiles, worker: str) -> None:
        real(tp, worker)
        checked.set()
        go.wait(30)

    monkeypatch.setattr(tasks, "_require_member", check_then_hold)
    claim = threading.Thread(target=lambda: tasks.claim(team(root), "1", "worker-2"))
    claim.start()
    assert checked.wait(30)
    result: dict[str, Any] = {}
    remover = threading.Thread(target=lambda: result.update(remove(root)))
    remover.start()
    poll(lambda: "worker-2" not in team_config.load(team(root)).worker_names, what="the roster")
    remover.join(0.3)  # it must be waiting for the claim to finish, not settling without it
    go.set()
    claim.join(30)
    remover.join(30)
    assert [a["claimedTaskId"] for a in result["interrupted"]] == ["1"], result
    assert status_of(root, "1") == "interrupted"
    assert held_by_strangers(team(root)) == []


def test_running_remove_worker_again_repairs_a_task_an_older_omp_left(root: Path) -> None:
    """The broken state itself (as an older omp could leave it): worker-2 off the roster, its
    task still in_progress. `remove-worker` again settles it and the team can end."""
    tp = team(root)
    tasks.claim(tp, "2", "worker-2")
    raw = team_config.load(tp).raw
    raw["workers"] = [w for w in raw["workers"] if w["name"] != "worker-2"]
    raw["removedWorkers"] = [{"name": "worker-2", "removedAt": "2030-01-01T00:00:00.000Z"}]
    team_config.write(tp, raw)
    assert [t["id"] for t in held_by_strangers(tp)] == ["2"]
    r = run_omp("team", "remove-worker", "t", "worker-2", "--json", cwd=root)
    assert r.rc == 0 and r.json["alreadyRemoved"] is True, r
    assert [a["claimedTaskId"] for a in r.json["interrupted"]] == ["2"]
    assert held_by_strangers(tp) == []
    fails = [m for m in records(tp.mailbox("leader")) if m.get("event") == "task_fail"]
    assert len(fails) == 1 and fails[0]["claimed_task_id"] == "2"
    _, tok1 = tasks.claim(tp, "1", "worker-1")
    tasks.transition(
        tp, "1", worker="worker-1", from_status="in_progress", to_status="completed", token=tok1
    )
    st = run_omp("team", "status", "t", "--json", cwd=root)
    assert st.json["teams"][0]["allDone"] is True, st


# ---- the race, for real: a process claiming while remove-worker runs -----------------------------


def _claimer(root: str, as_pane: bool, out: str) -> None:
    from omp.cli.api import main

    if as_pane:
        os.environ.update(OMP_TEAM="t", OMP_WORKER="worker-2")
    got: list[str] = []
    for tid in range(3, 3 + TASKS):
        buf = io.StringIO()
        payload = {"team_name": "t", "task_id": str(tid), "worker": "worker-2"}
        with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
            main(["claim-task", "--input", json.dumps(payload), "--json"])
        doc = json.loads(buf.getvalue())
        got.append("ok" if doc.get("ok") else doc["error"])
        if not doc.get("ok"):
            break
    Path(out).write_text(json.dumps(got))


ROUNDS = 15


@pytest.mark.slow  # races a process: the full suite's, not the quick loop's (CONTRIBUTING.md)
@pytest.mark.parametrize("as_pane", [False, True], ids=["leader claims for it", "its pane claims"])
def test_claims_racing_remove_worker_never_leave_a_task_with_a_stranger(
    root: Path, tmp_path: Path, as_pane: bool
) -> None:
    project = StatePaths(root)
    for rnd in range(ROUNDS):
        from omp.team.removal import delete

        delete(project, "t", force=True)
        make_team(root, "t", 2, task="build it", no_limits=True)
        tp = team(root)
        for tid in range(3, 3 + TASKS):
            tasks.create(tp, str(tid), f"extra {tid}")
        out = tmp_path / f"claims-{rnd}"
        proc = start(_claimer, str(root), as_pane, str(out))
        poll(lambda: any(t["status"] == "in_progress" for t in tasks.list_all(tp)), what="a claim")  # noqa: B023
        done = remove(root)
        proc.join(60)
        assert proc.exitcode == 0
        got = json.loads(out.read_text())
        assert got[-1] in ("ok", "worker_removed", "stale_generation", "unknown_worker"), got
        assert held_by_strangers(tp) == [], f"round {rnd}: {held_by_strangers(tp)}"
        claimed = {t["id"] for t in tasks.list_all(tp) if t.get("owner") == "worker-2"}
        interrupted = {a["claimedTaskId"] for a in done["interrupted"]}
        assert claimed == interrupted, (rnd, claimed, interrupted)
