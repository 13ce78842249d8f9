"""Cursors belong to one team (issue 21, class 7).

An `events` cursor names the team and the log it was read from (`<team>:<log>:<offset>`, the log
by a fingerprint of its first line, which for a log omp starts is a random id); a `wait` cursor
names the team and its run (`<team>:<run>:<statuses>`). A cursor of another team, or of an
earlier team of the same name (deleted and made again, or relaunched), is refused with
`invalid_cursor` (exit 2), even when it falls on a line boundary of the new log, where it used
to skip events without a word. A bare byte offset or a bare snapshot (what an older omp printed)
names no team, so it is refused too, with what to do instead; `--since 0` (from the start) is
safe whatever it meant and still works.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.record import config as team_config
from omp.record import history
from omp.store.paths import StatePaths, TeamPaths
from omp.team import removal
from omp.views import wait as wait_mod
from tests.helpers import child_env, isolate, make_project, make_team, run_cli


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "a", 2, task="x", no_limits=True)
    make_team(r, "b", 2, task="x", no_limits=True)
    return r


def tp(root: Path, name: str) -> TeamPaths:
    return StatePaths(root).team(name)


def events(root: Path, team: str, *extra: str) -> Any:
    return run_cli("team", "events", team, "--json", *extra, cwd=root, env=child_env())


def end_cursor(root: Path, team: str) -> str:
    r = events(root, team)
    assert r.rc == 0, r
    return str(json.loads(r.stdout.splitlines()[-1])["cursor"])


def refused(r: Any, *words: str) -> None:
    assert r.rc == 2, r
    doc = json.loads(r.stdout)
    assert doc["error"] == "invalid_cursor", doc
    for w in words:
        assert w in doc["message"], doc["message"]


# ---- events ---------------------------------------------------------------------------------


def test_a_cursor_of_this_log_resumes_and_names_the_team(root: Path) -> None:
    c = end_cursor(root, "a")
    team, log, offset = c.split(":")
    assert (
        team == "a"
        and len(log) == 8
        and int(offset) == Path(history.path(tp(root, "a"))).stat().st_size
    )
    history.member(tp(root, "a"), "worker-1", "offline")
    r = events(root, "a", "--since", c)
    assert r.rc == 0 and [json.loads(x)["change"] for x in r.stdout.splitlines()] == ["offline"]


def test_another_teams_cursor_is_refused_even_on_a_line_boundary(root: Path) -> None:
    a_end = end_cursor(root, "a")
    offset = int(a_end.split(":")[2])
    b_log = Path(history.path(tp(root, "b"))).read_bytes()
    assert b_log[offset - 1 : offset] == b"\n"  # the old byte cursor would have been accepted
    refused(events(root, "b", "--since", a_end), "belongs to team a")
    # the same offset dressed up with b's name but a's log is refused as another log
    forged = f"b:{a_end.split(':')[1]}:{offset}"
    refused(events(root, "b", "--since", forged), "another event log")


def _remake(root: Path, name: str) -> None:
    removal.delete(StatePaths(root), name, force=True)
    make_team(root, name, 2, task="x", no_limits=True)


def test_a_cursor_of_an_earlier_team_of_the_same_name_is_refused(root: Path) -> None:
    old = end_cursor(root, "a")
    _remake(root, "a")
    history.member(tp(root, "a"), "worker-2", "offline")  # news the old cursor would skip
    offset = int(old.split(":")[2])
    assert Path(history.path(tp(root, "a"))).read_bytes()[offset - 1 : offset] == b"\n"
    refused(events(root, "a", "--since", old), "deleted and made again")
    assert events(root, "a").rc == 0  # from the start it reads


def test_a_log_an_older_omp_wrote_is_named_by_its_first_line(root: Path) -> None:
    """No header line: the fingerprint of its first line (its time, to the ms) names it."""
    log = Path(history.path(tp(root, "a")))
    lines = log.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[0])["type"] == "log"
    log.write_bytes(b"".join(lines[1:]))  # as an older omp left it
    c = end_cursor(root, "a")
    history.member(tp(root, "a"), "worker-1", "online")
    r = events(root, "a", "--since", c)
    assert r.rc == 0 and len(r.stdout.splitlines()) == 1
    log.write_bytes(lines[0] + b"".join(lines[1:]))  # the log now starts otherwise: another log
    refused(events(root, "a", "--since", c), "another event log")


@pytest.mark.parametrize("bare", ["352", "1", "99999"])
def test_a_bare_byte_offset_is_refused_with_what_to_do(root: Path, bare: str) -> None:
    refused(events(root, "a", "--since", bare), "bare byte offset", "without --since")


def test_since_zero_still_reads_from_the_start(root: Path) -> None:
    r = events(root, "a", "--since", "0")
    assert r.rc == 0 and len(r.stdout.splitlines()) == 4


def test_a_log_replaced_while_following_ends_the_follow(root: Path) -> None:
    c = end_cursor(root, "a")
    _, n = history.parse_cursor(c, "a")
    log, _ = history.parse_cursor(c, "a")
    _remake(root, "a")
    with pytest.raises(OmpError) as exc:
        history.read_since(tp(root, "a"), n, log=log)
    assert exc.value.code == "invalid_cursor"


# ---- wait -----------------------------------------------------------------------------------


def cfg(root: Path, name: str) -> team_config.TeamConfig:
    return team_config.load(tp(root, name))


def test_a_wait_cursor_names_the_team_and_its_run(root: Path) -> None:
    c = wait_mod.wait(cfg(root, "a"), timeout=0.05)["cursor"]
    assert c == f"a:{wait_mod.run_id(cfg(root, 'a'))}:1=p,2=p"
    assert wait_mod.wait(cfg(root, "a"), since=c, timeout=0.05)["event"] == "timeout"


def test_another_teams_wait_cursor_is_refused(root: Path) -> None:
    c = wait_mod.wait(cfg(root, "a"), timeout=0.05)["cursor"]
    with pytest.raises(OmpError) as exc:
        wait_mod.wait(cfg(root, "b"), since=c, timeout=0.05)
    assert exc.value.code == "invalid_cursor" and "belongs to team a" in exc.value.message
    forged = "b:" + c.split(":", 1)[1]  # a's run under b's name
    with pytest.raises(OmpError) as exc:
        wait_mod.wait(cfg(root, "b"), since=forged, timeout=0.05)
    assert exc.value.code == "invalid_cursor" and "earlier run" in exc.value.message


def test_a_wait_cursor_of_an_earlier_run_is_refused(root: Path) -> None:
    """A relaunch (a new launch token and time) or a team deleted and made again is a new run:
    its tasks start over, and the old snapshot (`1=c`) would hide task 1 completing again."""
    from tests.helpers import finish_task

    finish_task(tp(root, "a"), "worker-1", "1")
    old = wait_mod.wait(cfg(root, "a"), timeout=0.05)["cursor"]
    assert old.endswith(":1=c,2=p")
    raw = cfg(root, "a").raw
    raw["launchToken"], raw["createdAt"] = "lt-relaunched", "2031-01-01T00:00:00.000Z"
    team_config.write(tp(root, "a"), raw)
    with pytest.raises(OmpError) as exc:
        wait_mod.wait(cfg(root, "a"), since=old, timeout=0.05)
    assert exc.value.code == "invalid_cursor" and "earlier run" in exc.value.message
    old = wait_mod.wait(cfg(root, "a"), timeout=0.05)["cursor"]
    _remake(root, "a")
    finish_task(tp(root, "a"), "worker-1", "1")
    with pytest.raises(OmpError) as exc:
        wait_mod.wait(cfg(root, "a"), since=old, timeout=0.05)
    assert exc.value.code == "invalid_cursor"


@pytest.mark.parametrize("bare", ["1=c,2=i", "-", "1=p"])
def test_an_older_omps_wait_cursor_is_refused_with_what_to_do(root: Path, bare: str) -> None:
    r = run_cli(
        "team",
        "wait",
        "a",
        "--since",
        bare,
        "--timeout",
        "0.05",
        "--json",
        cwd=root,
        env=child_env(),
    )
    refused(r, "older omp", "without --since")


def test_the_cli_refuses_another_teams_wait_cursor(root: Path) -> None:
    c = wait_mod.wait(cfg(root, "a"), timeout=0.05)["cursor"]
    r = run_cli(
        "team", "wait", "b", "--since", c, "--timeout", "0.05", "--json", cwd=root, env=child_env()
    )
    refused(r, "belongs to team a")
