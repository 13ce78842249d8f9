"""`omp team delete` and `omp team prune` through the CLI, including deaths between their steps."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from omp.mail.mailbox import Mailbox, new_message
from omp.store.paths import StatePaths
from tests.faults.support import die, start
from tests.helpers import (
    child_env,
    isolate,
    make_project,
    make_team,
    run_cli,
    snapshot_tree,
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    return make_project(tmp_path / "proj")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home")


def omp(root: Path, env: dict[str, str], *args: str) -> Any:
    return run_cli(*args, cwd=root, env=env)


def teams_dir(root: Path) -> Path:
    return root / ".omp" / "state" / "team"


def mail(root: Path, team: str, to: str, n: int = 1, frm: str = "worker-1") -> list[str]:
    box = Mailbox(StatePaths(root).team(team), to)
    msgs = [new_message(frm, to, f"m{i}") for i in range(n)]
    box.append_messages(msgs)
    return [m["id"] for m in msgs]


def read_all(root: Path, team: str, who: str) -> None:
    box = Mailbox(StatePaths(root).team(team), who)
    box.mark([m["id"] for m in box.undelivered()[0]])


def shut(root: Path, team: str, days_ago: float) -> None:
    at = time.time() - days_ago * 86400
    from omp import clock

    path = StatePaths(root).team(team).shutdown
    path.write_text(json.dumps({"shutdownAt": clock.iso(at)}))
    path.chmod(0o600)


def archive_run(root: Path, team: str, days_ago: float) -> Path:
    """A shut-down run archived by a relaunch: what `setup.archive_previous_run` makes."""
    from omp.team.setup import archive_previous_run

    tp = StatePaths(root).team(team)
    shut(root, team, days_ago)
    dest = archive_previous_run(tp)
    assert dest is not None
    return dest


# ---- delete -----------------------------------------------------------------------------------


def test_delete_removes_the_whole_team(root: Path, env: dict[str, str]) -> None:
    make_team(root, "a", 2, task="x")
    make_team(root, "b", 1)
    r = omp(root, env, "team", "delete", "a", "--json")
    assert r.rc == 0, r
    assert r.json["team"] == "a" and r.json["bytes"] > 0 and r.json["lost"] == []
    assert sorted(os.listdir(teams_dir(root))) == ["b"]  # no tombstone left
    assert omp(root, env, "team", "list", "--json").json["teams"][0]["team"] == "b"
    r = omp(root, env, "team", "delete", "a", "--json")
    assert r.rc == 1 and r.json["error"] == "unknown_team"


def test_delete_refuses_unread_mail_and_changes_nothing(root: Path, env: dict[str, str]) -> None:
    tp = make_team(root, "a", 2)
    ids = mail(root, "a", "leader", 2) + mail(root, "a", "worker-2", 1)
    before = snapshot_tree(root / ".omp")
    r = omp(root, env, "team", "delete", "a", "--json")
    assert r.rc == 1 and r.json["error"] == "unread_mail", r
    assert {e["recipient"]: e["unread"] for e in r.json["unread"]} == {"leader": 2, "worker-2": 1}
    assert snapshot_tree(root / ".omp") == before
    r = omp(root, env, "team", "delete", "a")
    assert r.rc == 1 and "[unread_mail]" in r.stderr and "leader 2, worker-2 1" in r.stderr
    # read mail is not lost mail
    read_all(root, "a", "worker-2")
    r = omp(root, env, "team", "delete", "a", "--json")
    assert [e["recipient"] for e in r.json["unread"]] == ["leader"]
    # --force deletes and lists exactly what was lost
    r = omp(root, env, "team", "delete", "a", "--force")
    assert r.rc == 0, r
    assert "lost 2 unread message(s) for leader from worker-1" in r.stdout
    assert not tp.dir.exists()
    assert set(ids[:2])  # ids listed under --json too:
    make_team(root, "c", 1)
    cid = mail(root, "c", "worker-1", 1, frm="leader")
    r = omp(root, env, "team", "delete", "c", "--force", "--json")
    assert r.json["lost"] == [
        {"recipient": "worker-1", "unread": 1, "from": ["leader"], "messageIds": cid}
    ]


def test_delete_refuses_a_team_with_a_live_pane(
    root: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from omp.team import removal

    make_team(root, "a", 1)
    monkeypatch.setattr(
        removal,
        "live_panes",
        lambda cfg: [{"worker": "worker-1", "pane": "%3", "state": "alive"}],
    )
    before = snapshot_tree(root / ".omp")
    from omp.errors import OmpError

    with pytest.raises(OmpError) as exc:
        removal.delete(StatePaths(root), "a", force=True)
    assert exc.value.code == "team_alive" and "team shutdown a" in exc.value.message
    assert snapshot_tree(root / ".omp") == before


def test_bad_names_are_refused(root: Path, env: dict[str, str]) -> None:
    r = omp(root, env, "team", "delete", "../x", "--json")
    assert r.rc == 2 and r.json["error"] == "invalid_team_name"


def _delete_dying_in_rmtree(root: str, team: str) -> None:
    """`omp team delete TEAM` killed after its rename, before the removal."""
    from omp.cli import main

    os.chdir(root)
    shutil.rmtree = lambda *a, **k: die()  # type: ignore[assignment]
    main(["team", "delete", team])


def _run_child(target: Any, *args: Any) -> int | None:
    proc = start(target, *args)
    proc.join(30)
    assert not proc.is_alive()
    return proc.exitcode


@pytest.mark.slow
def test_a_delete_killed_between_rename_and_removal_is_finished_by_the_next(
    root: Path, env: dict[str, str]
) -> None:
    make_team(root, "a", 2, task="x")
    make_team(root, "b", 1)
    assert _run_child(_delete_dying_in_rmtree, str(root), "a") == -9
    left = sorted(os.listdir(teams_dir(root)))
    assert left[0].startswith(".tomb-team~a~") and left[1:] == ["b"]
    # readers never see half a team: it is simply gone
    r = omp(root, env, "team", "list", "--json")
    assert [t["team"] for t in r.json["teams"]] == ["b"]
    r = omp(root, env, "team", "status", "a", "--json")
    assert r.rc == 1 and r.json["error"] == "unknown_team"
    # the next delete of that name finishes it
    r = omp(root, env, "team", "delete", "a", "--json")
    assert r.rc == 0, r
    assert r.json["finished"][0]["team"] == "a" and r.json["finished"][0]["of"] == "team"
    assert sorted(os.listdir(teams_dir(root))) == ["b"]


@pytest.mark.slow  # a removal killed or failing midway
def test_a_killed_delete_is_finished_by_prune_or_another_delete(
    root: Path, env: dict[str, str]
) -> None:
    make_team(root, "a", 1)
    make_team(root, "b", 1)
    assert _run_child(_delete_dying_in_rmtree, str(root), "a") == -9
    r = omp(root, env, "team", "prune", "--dry-run", "--json")
    assert [e["kind"] for e in r.json["removed"]] == ["tombstone"]
    assert any(n.startswith(".tomb-") for n in os.listdir(teams_dir(root)))  # dry run: kept
    r = omp(root, env, "team", "prune")
    assert r.rc == 0 and "removed      the interrupted removal of team a" in r.stdout, r
    assert sorted(os.listdir(teams_dir(root))) == ["b"]
    # and a delete of another team finishes a leftover too
    make_team(root, "c", 1)
    assert _run_child(_delete_dying_in_rmtree, str(root), "c") == -9
    r = omp(root, env, "team", "delete", "b", "--json")
    assert r.rc == 0 and [e["team"] for e in r.json["finished"]] == ["c"]
    assert os.listdir(teams_dir(root)) == []


def _delete_failing_midway(root: str, team: str) -> None:
    """A removal that deletes part of the tree, then hits an I/O error."""
    from omp.cli import main

    os.chdir(root)
    real = shutil.rmtree

    def half(path: Any, *a: Any, **k: Any) -> None:
        real(os.path.join(path, "tasks"))
        raise OSError(5, "Input/output error")

    shutil.rmtree = half  # type: ignore[assignment]
    main(["team", "delete", team, "--json"])


@pytest.mark.slow  # a removal killed or failing midway
def test_a_removal_that_fails_midway_is_reported_and_finished_later(
    root: Path, env: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    make_team(root, "a", 2, task="x")
    assert _run_child(_delete_failing_midway, str(root), "a") == 1
    out = capfd.readouterr().out
    doc = json.loads(out)
    assert doc["error"] == "storage_error" and "next `omp team delete`" in doc["message"]
    assert omp(root, env, "team", "list", "--json").json["teams"] == []
    r = omp(root, env, "team", "delete", "a", "--json")
    assert r.rc == 0 and r.json["finished"], r
    assert os.listdir(teams_dir(root)) == []


# ---- prune ------------------------------------------------------------------------------------


def test_prune_removes_old_runs_and_old_shut_down_teams(root: Path, env: dict[str, str]) -> None:
    # live team with an old archived run and a recent one
    make_team(root, "live", 1, task="x")
    old_run = archive_run(root, "live", days_ago=10)
    new_run = archive_run(root, "live", days_ago=1)
    # a team shut down long ago, all mail read
    make_team(root, "old", 1)
    mail(root, "old", "leader")
    read_all(root, "old", "leader")
    shut(root, "old", 30)
    # a recently shut-down team
    make_team(root, "recent", 1)
    shut(root, "recent", 2)
    before = snapshot_tree(root / ".omp")
    r = omp(root, env, "team", "prune", "--dry-run", "--json")
    assert r.rc == 0, r
    assert snapshot_tree(root / ".omp") == before  # a dry run writes nothing
    got = sorted((e["kind"], e.get("team"), Path(e["path"]).name) for e in r.json["removed"])
    assert got == [("run", "live", old_run.name), ("team", "old", "old")]
    assert r.json["bytes"] == sum(e["bytes"] for e in r.json["removed"]) > 0
    r = omp(root, env, "team", "prune")
    assert r.rc == 0, r
    assert f"removed      run {old_run.name} of team live" in r.stdout
    assert "removed      team old (shut down 30.0 d ago)" in r.stdout
    assert "2 item(s)" in r.stdout and "freed" in r.stdout
    assert not old_run.exists() and new_run.exists()
    assert sorted(os.listdir(teams_dir(root))) == ["live", "recent"]
    # a shorter bound takes the rest; the live team itself stays
    r = omp(root, env, "team", "prune", "--older-than", "12h", "--json")
    assert sorted(e["kind"] for e in r.json["removed"]) == ["run", "team"]
    assert sorted(os.listdir(teams_dir(root))) == ["live"]
    assert not (teams_dir(root) / "live" / "runs" / new_run.name).exists()
    r = omp(root, env, "team", "prune")
    assert r.rc == 0 and r.stdout.strip() == "nothing to prune"


def test_prune_never_removes_unread_mail_without_force(root: Path, env: dict[str, str]) -> None:
    make_team(root, "old", 2)
    mail(root, "old", "leader", 3, frm="worker-2")
    shut(root, "old", 30)
    before = snapshot_tree(root / ".omp")
    r = omp(root, env, "team", "prune", "--json")
    assert r.rc == 0 and r.json["removed"] == []
    assert (
        r.json["kept"][0]["team"] == "old" and "unread mail (leader 3)" in r.json["kept"][0]["why"]
    )
    assert snapshot_tree(root / ".omp") == before
    r = omp(root, env, "team", "prune")
    assert "kept         team old: unread mail (leader 3); --force loses it" in r.stdout
    r = omp(root, env, "team", "prune", "--force", "--json")
    assert [e["team"] for e in r.json["removed"]] == ["old"]
    assert r.json["removed"][0]["lost"][0]["unread"] == 3
    assert os.listdir(teams_dir(root)) == []


@pytest.mark.parametrize("bad", ["soon", "-1d", "7 days", "1y", ""])
def test_prune_refuses_a_bad_duration(root: Path, env: dict[str, str], bad: str) -> None:
    r = omp(root, env, "team", "prune", "--older-than", bad, "--json")
    assert r.rc == 2 and r.json["error"] == "invalid_input", r


def test_durations() -> None:
    from omp.team.removal import parse_duration

    assert parse_duration("0") == 0
    assert parse_duration("90") == parse_duration("90s") == 90
    assert parse_duration("1.5h") == 5400
    assert parse_duration("7d") == 7 * 86400 and parse_duration("2w") == 14 * 86400


def test_a_run_holding_unread_leader_mail_is_kept_unless_force(
    root: Path, env: dict[str, str]
) -> None:
    # a relaunch moves the last run's leader mail into runs/<time>/mailbox/: still mail
    make_team(root, "t", 1, task="x")
    mail(root, "t", "leader", 2)
    run = archive_run(root, "t", days_ago=10)
    assert (run / "mailbox" / "leader.jsonl").exists()
    before = snapshot_tree(root / ".omp")
    r = omp(root, env, "team", "prune", "--json")
    assert r.rc == 0 and r.json["removed"] == [], r
    assert (
        r.json["kept"][0]["kind"] == "run"
        and "unread mail (leader (run " in r.json["kept"][0]["why"]
    )
    assert snapshot_tree(root / ".omp") == before
    r = omp(root, env, "team", "prune")
    assert f"kept         run {run.name} of team t: unread mail" in r.stdout, r
    # delete sees it too
    r = omp(root, env, "team", "delete", "t", "--json")
    assert r.rc == 1 and r.json["unread"][0]["run"] == run.name, r
    r = omp(root, env, "team", "prune", "--force", "--json")
    assert r.json["removed"][0]["lost"][0]["unread"] == 2 and not run.exists()


def test_a_recently_shut_down_team_still_loses_its_old_runs(
    root: Path, env: dict[str, str]
) -> None:
    make_team(root, "t", 1, task="x")
    old = archive_run(root, "t", days_ago=10)
    shut(root, "t", days_ago=1)
    r = omp(root, env, "team", "prune", "--json")
    assert [(e["kind"], Path(e["path"]).name) for e in r.json["removed"]] == [("run", old.name)]
    assert (teams_dir(root) / "t" / "config.json").exists()
