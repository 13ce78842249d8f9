"""Sender identity and launch fencing: a pane acts only as its own worker, and only for the
launch that made it. Refusals are exit 1 with a stable code and write nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omp.errors import USAGE_CODES
from omp.record import config as team_config
from omp.store.paths import StatePaths, TeamPaths
from tests.helpers import OmpRun, call_api, isolate, make_project, make_team, snapshot_tree

TOKEN = "lt-now"


@pytest.fixture(autouse=True)
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    team = make_team(root, "t", 3, task="x", no_limits=True)
    make_team(root, "other", 1, no_limits=True)
    raw = team_config.load(team).raw
    raw["launchToken"] = TOKEN
    team_config.write(team, raw)
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


@pytest.fixture
def team(root: Path) -> TeamPaths:
    return StatePaths(root).team("t")


@pytest.fixture
def pane(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """This process is worker-1's pane of the current launch."""
    monkeypatch.setenv("OMP_TEAM", "t")
    monkeypatch.setenv("OMP_WORKER", "worker-1")
    monkeypatch.setenv("OMP_LAUNCH_TOKEN", TOKEN)
    return monkeypatch


def call(capsys: pytest.CaptureFixture[str], sub: str, team: str = "t", **fields: Any) -> OmpRun:
    return call_api(capsys, sub, {"team_name": team, **fields})


def refused(run: OmpRun, code: str) -> None:
    assert run.json is not None and run.json.get("error") == code, run
    assert code not in USAGE_CODES and run.rc == 1, run
    assert "\n" not in run.json["message"]


IMPERSONATIONS = [
    ("send-message", {"from": "worker-2", "to": "leader", "body": "x"}),
    ("send-message", {"from": "leader", "to": "worker-2", "body": "x"}),
    ("send-message", {"from": "worker-2", "to": "leader", "body": "x", "event": "task_req"}),
    ("broadcast", {"from": "leader", "body": "x"}),
    ("mailbox-read", {"worker": "worker-2"}),
    ("mailbox-list", {"worker": "leader"}),
    ("mailbox-mark-delivered", {"worker": "worker-2", "message_id": "01X"}),
    ("claim-task", {"task_id": "2", "worker": "worker-2"}),
    (
        "transition-task-status",
        {"task_id": "2", "worker": "worker-2", "from": "pending", "to": "in_progress"},
    ),
    ("roster", {"worker": "worker-3"}),
]


@pytest.mark.parametrize(("sub", "fields"), IMPERSONATIONS)
def test_a_pane_cannot_act_as_someone_else(
    root: Path,
    pane: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sub: str,
    fields: dict[str, Any],
) -> None:
    before = snapshot_tree(root / ".omp")
    run = call(capsys, sub, **fields)
    refused(run, "sender_mismatch")
    assert "worker-1" in run.json["message"]
    assert snapshot_tree(root / ".omp") == before


def test_a_pane_acts_as_itself(
    team: TeamPaths, pane: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        call(capsys, "send-message", **{"from": "worker-1", "to": "leader", "body": "hi"}).rc == 0
    )
    assert call(capsys, "mailbox-read", worker="worker-1").rc == 0
    assert call(capsys, "claim-task", task_id="1", worker="worker-1").rc == 0
    assert call(capsys, "list-tasks").rc == 0
    assert call(capsys, "roster").json["you"] == "worker-1"


@pytest.mark.parametrize("config_token", ["lt-later", None])
def test_a_pane_of_another_launch_is_stale(
    root: Path,
    team: TeamPaths,
    pane: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    config_token: str | None,
) -> None:
    raw = team_config.load(team).raw
    raw.pop("launchToken")
    if config_token:
        raw["launchToken"] = config_token
    team_config.write(team, raw)
    before = snapshot_tree(root / ".omp")
    for sub, fields in [
        ("send-message", {"from": "worker-1", "to": "leader", "body": "x"}),
        ("mailbox-list", {"worker": "worker-1"}),
        ("list-tasks", {}),
        ("roster", {}),
    ]:
        refused(call(capsys, sub, **fields), "stale_generation")
    assert snapshot_tree(root / ".omp") == before


@pytest.mark.parametrize(
    ("sub", "fields"),
    [
        ("send-message", {"from": "leader", "to": "worker-1", "body": "x"}),
        ("send-message", {"from": "worker-1", "to": "leader", "body": "x"}),
        ("broadcast", {"from": "leader", "body": "x"}),
        ("mailbox-read", {"worker": "leader"}),
        ("mailbox-list", {"worker": "worker-1"}),
        ("claim-task", {"task_id": "1", "worker": "worker-1"}),
        ("list-tasks", {}),
        ("roster", {}),
    ],
)
def test_a_worker_cannot_act_in_another_team(
    root: Path,
    pane: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sub: str,
    fields: dict[str, Any],
) -> None:
    # worker-1 of team t is worker-1 of team t everywhere: never the leader of another team,
    # not even a worker there with the same name
    before = snapshot_tree(root / ".omp")
    run = call(capsys, sub, team="other", **fields)
    refused(run, "sender_mismatch")
    assert "team other" in run.json["message"]
    assert snapshot_tree(root / ".omp") == before


def _claim(capsys: pytest.CaptureFixture[str], tid: str, worker: str) -> str:
    run = call(capsys, "claim-task", task_id=tid, worker=worker)
    assert run.rc == 0, run
    return str(run.json["claimToken"])


def test_a_claim_token_is_shown_only_to_its_claimant_and_the_leader(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tok2 = _claim(capsys, "2", "worker-2")
    monkeypatch.setenv("OMP_TEAM", "t")
    monkeypatch.setenv("OMP_LAUNCH_TOKEN", TOKEN)
    monkeypatch.setenv("OMP_WORKER", "worker-1")
    tok1 = _claim(capsys, "1", "worker-1")
    seen = call(capsys, "list-tasks")
    assert tok2 not in seen.stdout and tok1 in seen.stdout
    text = call_api(capsys, "list-tasks", {"team_name": "t"}, as_json=False)
    assert tok2 not in text.stdout
    monkeypatch.setenv("OMP_WORKER", "worker-2")
    assert tok2 in call(capsys, "list-tasks").stdout
    for var in ("OMP_TEAM", "OMP_WORKER", "OMP_LAUNCH_TOKEN"):
        monkeypatch.delenv(var)
    leader = call(capsys, "list-tasks")
    assert tok1 in leader.stdout and tok2 in leader.stdout


def test_status_collect_and_wait_never_show_a_claim_token(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from omp.views.status import collect, status
    from omp.views.wait import wait

    tok = _claim(capsys, "2", "worker-2")
    team = StatePaths(root).team("t")
    for shown in (
        status(StatePaths(root), "t"),
        collect(team_config.load(team)),
        wait(team_config.load(team), timeout=0.01),
    ):
        assert tok not in repr(shown)


@pytest.mark.parametrize("name_it", [True, False])
def test_a_worker_cannot_move_another_workers_task_even_with_its_token(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name_it: bool,
) -> None:
    tok2 = _claim(capsys, "2", "worker-2")  # the leader (no identity) claims for worker-2
    monkeypatch.setenv("OMP_TEAM", "t")
    monkeypatch.setenv("OMP_LAUNCH_TOKEN", TOKEN)
    monkeypatch.setenv("OMP_WORKER", "worker-1")
    before = snapshot_tree(root / ".omp")
    fields: dict[str, Any] = {"task_id": "2", "from": "in_progress", "to": "completed"}
    fields["claim_token"] = tok2  # even a stolen token does not help
    run = call(
        capsys, "transition-task-status", **fields, **({"worker": "worker-1"} if name_it else {})
    )
    refused(run, "not_task_owner")
    assert snapshot_tree(root / ".omp") == before
    monkeypatch.setenv("OMP_WORKER", "worker-2")
    assert call(capsys, "transition-task-status", **fields).rc == 0


def test_the_leader_moves_any_task_with_its_token(capsys: pytest.CaptureFixture[str]) -> None:
    tok = _claim(capsys, "3", "worker-3")
    fields = {"task_id": "3", "from": "in_progress", "to": "failed", "claim_token": tok}
    assert call(capsys, "transition-task-status", **fields).rc == 0


@pytest.mark.parametrize(
    "kept",
    [
        ("OMP_TEAM", "OMP_WORKER"),
        ("OMP_WORKER", "OMP_LAUNCH_TOKEN"),
        ("OMP_TEAM", "OMP_LAUNCH_TOKEN"),
        ("OMP_TEAM",),
        ("OMP_WORKER",),
        ("OMP_LAUNCH_TOKEN",),
        ("OMP_TEAM_WORKER",),
    ],
)
def test_unsetting_some_identity_variables_never_widens_what_a_pane_may_do(
    root: Path, pane: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kept: tuple[str, ...]
) -> None:
    """A pane whose team expects a launch token and which dropped any of its variables may do
    nothing at all: not even speak as itself (it cannot prove it is the current launch)."""
    pane.setenv("OMP_TEAM_WORKER", "1")
    for var in ("OMP_TEAM", "OMP_WORKER", "OMP_LAUNCH_TOKEN", "OMP_TEAM_WORKER"):
        if var not in kept:
            pane.delenv(var)
    before = snapshot_tree(root / ".omp")
    for who in ("worker-1", "leader", "worker-3"):
        run = call(capsys, "send-message", **{"from": who, "to": "worker-2", "body": "a"})
        assert run.json is not None and run.json.get("error") in (
            "sender_mismatch",
            "stale_generation",
        ), (kept, who, run)
    run = call(capsys, "claim-task", task_id="1", worker="worker-1")
    assert run.rc == 1, (kept, run)
    assert snapshot_tree(root / ".omp") == before


def test_a_team_made_without_a_token_checks_the_name_only(
    root: Path, pane: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`omp team create` gives no launch token: its workers carry none and act as themselves."""
    raw = team_config.load(StatePaths(root).team("t")).raw
    del raw["launchToken"]
    team_config.write(StatePaths(root).team("t"), raw)
    pane.delenv("OMP_LAUNCH_TOKEN")
    assert call(capsys, "send-message", **{"from": "worker-1", "to": "leader", "body": "a"}).rc == 0
    refused(
        call(capsys, "send-message", **{"from": "worker-3", "to": "leader", "body": "b"}),
        "sender_mismatch",
    )
    pane.setenv("OMP_LAUNCH_TOKEN", TOKEN)  # a token the team never gave: refused
    refused(
        call(capsys, "send-message", **{"from": "worker-1", "to": "leader", "body": "c"}),
        "stale_generation",
    )


def test_without_a_pane_identity_anyone_may_speak_for_themselves(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for who in ("leader", "worker-2"):
        run = call(capsys, "send-message", **{"from": who, "to": "worker-1", "body": who})
        assert run.rc == 0, run


def test_a_refusal_is_checked_before_anything_is_written(
    root: Path, pane: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # input errors (exit 2) come first; the identity refusal comes before any write
    run = call(
        capsys, "send-message", **{"from": "worker-2", "to": "leader", "body": "x", "event": "nope"}
    )
    assert (run.rc, run.json["error"]) == (2, "invalid_event")
    before = snapshot_tree(root / ".omp")
    refused(
        call(
            capsys,
            "send-message",
            **{"from": "worker-2", "to": "leader", "body": "x", "event": "ping"},
        ),
        "sender_mismatch",
    )
    assert snapshot_tree(root / ".omp") == before
