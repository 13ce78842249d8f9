"""Mixed teams with the TypeScript tool (issue 12, class 5).

- Under umask 002 the TypeScript tool creates `mailbox/` 0775: a group-writable entry is judged
  like OpenSSH's StrictModes, safe when its group has no member but the owner; otherwise the
  refusal names the entry and the `chmod` that fixes it.
- The TypeScript tool's task calls write a heartbeat holding the pid of their own short-lived
  process: a heartbeat omp did not write never makes a live worker inactive.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from omp import clock
from omp.conversations import availability
from omp.record import config as team_config
from omp.store import fs
from omp.store.paths import StatePaths
from omp.tasks import presence
from tests.helpers import call_api, isolate, make_project, make_team


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, no_limits=True)
    monkeypatch.setenv("OMP_ROOT", str(r))
    return r


@pytest.fixture
def group(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bool]]:
    """Whether the owner's group counts as private, decided by the test."""
    answer = {"private": True}
    monkeypatch.setattr(fs, "_PRIVATE_GROUPS", {})
    monkeypatch.setattr(fs, "_lookup_private", lambda gid, uid: answer["private"])
    yield answer


def send(capsys: pytest.CaptureFixture[str], body: str) -> Any:
    payload = {"team_name": "t", "from": "leader", "to": "worker-1", "body": body}
    return call_api(capsys, "send-message", payload)


def widen_like_umask_002(root: Path) -> Path:
    box = root / ".omp" / "state" / "team" / "t" / "mailbox"
    box.chmod(0o775)
    for f in box.iterdir():
        f.chmod(0o664)
    return box


def test_a_group_writable_mailbox_of_a_private_group_is_accepted(
    root: Path, group: dict[str, bool], capsys: pytest.CaptureFixture[str]
) -> None:
    assert send(capsys, "one").rc == 0
    widen_like_umask_002(root)
    assert send(capsys, "two").rc == 0
    read = call_api(capsys, "mailbox-read", {"team_name": "t", "worker": "worker-1"})
    assert [m["body"] for m in read.json["messages"]] == ["one", "two"]
    from omp.views.status import status

    assert status(StatePaths(root), "t")["teams"][0]["team"] == "t"


def test_a_group_with_other_members_is_refused_naming_entry_and_fix(
    root: Path, group: dict[str, bool], capsys: pytest.CaptureFixture[str]
) -> None:
    assert send(capsys, "one").rc == 0
    box = widen_like_umask_002(root)
    group["private"] = False
    r = send(capsys, "two")
    assert r.rc == 1 and r.json["error"] == "unsafe_path"
    assert f"chmod g-w {box}" in r.json["message"]
    assert stat.S_IMODE(os.lstat(box).st_mode) == 0o775  # never repaired


def test_writable_by_every_user_is_refused_whatever_the_group(
    root: Path, group: dict[str, bool], capsys: pytest.CaptureFixture[str]
) -> None:
    box = root / ".omp" / "state" / "team" / "t" / "mailbox"
    box.chmod(0o777)
    r = send(capsys, "x")
    assert r.json["error"] == "unsafe_path" and f"chmod o-w {box}" in r.json["message"]


def test_the_strictmodes_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    import grp
    import pwd

    users = [
        SimpleNamespace(pw_name="ann", pw_uid=1000, pw_gid=1000),
        SimpleNamespace(pw_name="bob", pw_uid=1001, pw_gid=1001),
        SimpleNamespace(pw_name="cat", pw_uid=1002, pw_gid=100),
    ]
    groups = {
        1000: SimpleNamespace(gr_mem=[]),  # ann's own group
        1001: SimpleNamespace(gr_mem=["ann"]),  # bob's primary group, ann added: shared
        100: SimpleNamespace(gr_mem=[]),  # cat's primary group only
        50: SimpleNamespace(gr_mem=["ann"]),  # ann alone, by member list
        51: SimpleNamespace(gr_mem=[]),  # nobody at all (setgid-style): not private
        52: SimpleNamespace(gr_mem=["ann", "cat"]),
    }
    monkeypatch.setattr(pwd, "getpwall", lambda: users)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: next(u for u in users if u.pw_uid == uid))
    monkeypatch.setattr(grp, "getgrgid", lambda gid: groups[gid])
    verdicts = {gid: fs._lookup_private(gid, 1000) for gid in groups}
    assert verdicts == {1000: True, 1001: False, 100: False, 50: True, 51: False, 52: False}


# ---- heartbeats the TypeScript tool wrote ---------------------------------------------------


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def ts_heartbeat(root: Path, worker: str) -> None:
    """As the TypeScript tool writes it: the pid of its own CLI call, long gone."""
    team = StatePaths(root).team("t")
    fs.write_json_atomic(
        team.worker_dir(worker) / "heartbeat.json",
        {"pid": dead_pid(), "workerName": worker, "teamName": "t",
         "lastPollAt": clock.iso(), "turnCount": 3, "alive": True},
    )  # fmt: skip


def test_a_heartbeat_omp_did_not_write_never_makes_a_worker_inactive(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ts_heartbeat(root, "worker-1")
    cfg = team_config.load(StatePaths(root).team("t"))
    st = availability.member_states(cfg, clock.now())["worker-1"]
    assert st.presence != "offline" and st.status == "available"
    roster = call_api(capsys, "roster", {"team_name": "t"})
    w1 = next(m for m in roster.json["members"] if m["name"] == "worker-1")
    assert w1["status"] == "available", w1
    # a task request to it is delivered, not auto-rejected as offline
    req = {
        "team_name": "t",
        "from": "leader",
        "to": "worker-1",
        "body": "do x",
        "event": "task_req",
    }
    r = call_api(capsys, "send-message", req)
    assert r.rc == 0 and r.json.get("status") != "rejected", r.json
    # and omp's own writes never adopt the foreign pid
    presence.touch(cfg, "worker-1")
    hb = json.loads(
        (StatePaths(root).team("t").worker_dir("worker-1") / "heartbeat.json").read_text()
    )
    assert hb["pid"] is None and hb["source"] == "api"


def test_a_pid_omp_recorded_still_says_a_worker_is_gone(root: Path) -> None:
    cfg = team_config.load(StatePaths(root).team("t"))
    presence.observe_pane(cfg, "worker-1", now=clock.now(), alive=True, pid=dead_pid())
    assert availability.member_states(cfg, clock.now())["worker-1"].presence == "offline"
    # but a pane seen alive outweighs a pid
    hb = presence.read(cfg.paths, "worker-1")
    assert presence.classify(hb, clock.now(), "alive") != "offline"
