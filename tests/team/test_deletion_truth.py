"""Deletion tells the truth (issue 21, classes 2 and 3).

Class 2: a mailbox omp refuses to read (unsafe, or not a file) is "cannot tell", never "no unread
mail": `delete` and `prune` refuse it like unread mail, and `--force` lists it as lost.

Class 3: a deleted team stays deleted. No writer but launch and create makes a team's directory;
a writer that loaded a team which is then deleted (or deleted and made again under its name)
fails with `unknown_team`, writes nothing anywhere, and never reports "sent". `delete` renames
the team away, waits for the senders that got in before (they hold their mailbox's lock), and
only then counts what is lost: every message a send reported as sent is either in the team or in
that count. A later team of the same name starts with no old mail and no old events.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.mail.mailbox import Mailbox, new_message
from omp.record import config as team_config
from omp.store.paths import StatePaths, TeamPaths
from omp.team import removal
from tests.faults.support import start
from tests.helpers import (
    call_api,
    isolate,
    make_project,
    make_team,
    poll,
    records,
    snapshot_tree,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, task="build it", no_limits=True)
    monkeypatch.setenv("OMP_ROOT", str(r))
    return r


def team(root: Path, name: str = "t") -> TeamPaths:
    return StatePaths(root).team(name)


def mail(root: Path, to: str, n: int = 1, name: str = "t") -> list[str]:
    msgs = [new_message("worker-1", to, f"m{i}") for i in range(n)]
    Mailbox(team(root, name), to).append_messages(msgs)
    return [m["id"] for m in msgs]


def shut(root: Path, name: str = "t", days_ago: float = 30) -> None:
    from omp import clock

    path = team(root, name).shutdown
    path.write_text(json.dumps({"shutdownAt": clock.iso(time.time() - days_ago * 86400)}))
    path.chmod(0o600)


# ---- class 2: "cannot tell" counts as unread ----------------------------------------------


def _outside(root: Path) -> Path:
    """A file outside the state tree holding unread mail, for links to point at."""
    target = root.parent / "elsewhere.jsonl"
    target.write_bytes((json.dumps(new_message("worker-1", "leader", "hidden")) + "\n").encode())
    return target


def _link_mailbox(root: Path) -> None:
    box = team(root).mailbox("leader")
    box.unlink(missing_ok=True)
    box.symlink_to(_outside(root))


def _widen_mailbox(root: Path) -> None:
    mail(root, "leader")
    team(root).mailbox("leader").chmod(0o666)


def _fifo_mailbox(root: Path) -> None:
    os.mkfifo(team(root).mailbox("leader"), 0o600)


def _dir_mailbox(root: Path) -> None:
    team(root).mailbox("leader").mkdir(mode=0o700)


def _link_mailbox_dir(root: Path) -> None:
    tp = team(root)
    mail(root, "leader")
    elsewhere = root.parent / "mail-elsewhere"
    tp.mailbox_dir.rename(elsewhere)
    tp.mailbox_dir.symlink_to(elsewhere)


def _widen_mailbox_dir(root: Path) -> None:
    mail(root, "leader")
    team(root).mailbox_dir.chmod(0o777)


def _link_runs_dir(root: Path) -> None:
    runs = root.parent / "runs-elsewhere"
    runs.mkdir()
    team(root).runs_dir.symlink_to(runs)


def _link_run_mailbox(root: Path) -> None:
    from omp.team.setup import archive_previous_run

    mail(root, "leader")
    shut(root, days_ago=40)
    run = archive_previous_run(team(root))
    assert run is not None
    box = TeamPaths(team(root).project, run).mailbox("leader")
    box.unlink()
    box.symlink_to(_outside(root))


CANNOT_TELL: dict[str, Callable[[Path], None]] = {
    "symlinked mailbox": _link_mailbox,
    "mailbox writable by others": _widen_mailbox,
    "FIFO as mailbox": _fifo_mailbox,
    "directory as mailbox": _dir_mailbox,
    "symlinked mailbox directory": _link_mailbox_dir,
    "mailbox directory writable by others": _widen_mailbox_dir,
    "symlinked runs directory": _link_runs_dir,
    "symlinked mailbox of an archived run": _link_run_mailbox,
}


@pytest.mark.parametrize("plant", sorted(CANNOT_TELL))
def test_delete_refuses_a_mailbox_it_cannot_read_and_force_reports_it(
    root: Path, plant: str
) -> None:
    CANNOT_TELL[plant](root)
    project = StatePaths(root)
    before = snapshot_tree(root.parent)
    with pytest.raises(OmpError) as exc:
        removal.delete(project, "t")
    assert exc.value.code == "unread_mail", exc.value
    unread = exc.value.detail["unread"]
    assert any(e["unread"] is None and e["cannotTell"] for e in unread), unread
    assert "cannot tell" in exc.value.message
    assert snapshot_tree(root.parent) == before  # refused: nothing moved, nothing followed
    names = ("elsewhere.jsonl", "mail-elsewhere", "runs-elsewhere")
    outside = [root.parent / n for n in names if (root.parent / n).exists()]
    done = removal.delete(project, "t", force=True)
    assert any(e["unread"] is None and e["cannotTell"] for e in done["lost"]), done
    assert not team(root).dir.exists()
    for target in outside:
        assert target.exists()  # a link was removed, never followed


@pytest.mark.parametrize("plant", sorted(CANNOT_TELL))
def test_prune_keeps_a_team_whose_mail_it_cannot_read_unless_force(root: Path, plant: str) -> None:
    CANNOT_TELL[plant](root)
    shut(root)
    project = StatePaths(root)
    kept = removal.prune(project, older_than=86400)
    whole = [e for e in kept["kept"] if e["kind"] == "team"]
    assert whole and "cannot tell" in whole[0]["why"], kept
    assert team(root).dir.exists()
    gone = removal.prune(project, older_than=86400, force=True)
    removed = [e for e in gone["removed"] if e["kind"] == "team"]
    assert removed and any(e["unread"] is None for e in removed[0]["lost"]), gone
    assert not team(root).dir.exists()


def test_the_cli_says_what_it_could_not_read(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from omp.cli import main

    _link_mailbox(root)
    monkeypatch.chdir(root)  # restored after: the tests after it run in the same process
    with pytest.raises(SystemExit) as exc:
        main(["team", "delete", "t", "--force"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "lost the mailbox of leader, unread mail unknown (omp could not read it" in out


# ---- class 3: no writer makes a team's directory but launch and create ------------------------

# Every call in omp/ that can make a directory, with what it makes. A new one fails this test
# until it is judged: a writer must use `TeamPaths.ensure_in` (creates inside an existing team
# directory only), never create a team's own directory or anything above it.
MAKERS = {
    ("omp/team/setup.py", "team.project.ensure(team.dir)"): "create and launch make the team",
    ("omp/team/setup.py", "team.project.ensure(run.dir)"): "a relaunch archives the last run",
    ("omp/team/setup.py", "team.project.ensure(dst.parent)"): "the archive's subdirectories",
    ("omp/team/launch.py", "team.project.ensure(team.dir)"): "launch makes the team",
    ("omp/team/launch.py", "team.project.ensure(lock_dir)"): "tmux-locks/, no team's",
    ("omp/team/removal.py", "project.ensure(project.teams)"): "team/ itself, for a tombstone",
    ("omp/modes.py", "paths.ensure(paths.state)"): "the state directory, for loop files",
    ("omp/stophook/memory.py", "paths.ensure(path.parent)"): "hooks/, no team's",
    ("omp/stophook/memory.py", "paths.ensure(hooks_dir(paths))"): "hooks/, no team's",
    ("omp/stophook/install.py", "project.ensure(project.hooks)"): "hooks/, no team's",
    ("omp/monitor/ctl.py", "paths.ensure(paths.monitor)"): "team-monitor/, no team's",
    ("omp/monitor/trackers.py", "self.paths.ensure(self.paths.monitor_targets)"): "monitor/",
    ("omp/monitor/loop.py", "self.trackers.ensure_dir()"): "the same, team-monitor/targets/",
    ("omp/mail/typein.py", "os.mkdir(lock_dir, fs.DIR_MODE)"): "tmux-locks/, no team's",
    ("omp/skills.py", "dest.parent.mkdir(parents=True, exist_ok=True)"): "skills, no state",
    ("omp/store/fs.py", "os.mkdir(cur, DIR_MODE)"): "ensure_dir itself",
    ("omp/stophook/install.py", "os.mkdir(d)"): "the agent's hook directory, no state",
    ("omp/stophook/workers.py", "project.ensure(project.worker_hooks)"): "hooks/workers/",
    ("omp/stophook/workers.py", "project.ensure(plugin)"): "hooks/workers/<agent>, no team's",
    ("omp/workspace/verify.py", "fs.ensure_dir(run_dir, base=base)"): "a verify run's own dir",
    ("omp/workspace/create.py", "path.parent.mkdir(parents=True, exist_ok=True)"): "worktrees",
    ("omp/workspace/create.py", "dst.parent.mkdir(parents=True, exist_ok=True)"): "copy/link",
    ("omp/workspace/create.py", "StatePaths(root).ensure(where)"): "the worktrees directory",
    ("omp/workspace/create.py", "info.mkdir(exist_ok=True)"): "git's info/ for exclude",
    ("omp/notify.py", "paths.ensure(paths.notify)"): "notify/, the project's outbox, no team's",
    ("omp/monitor/usage.py", "project.ensure(project.monitor_usage)"): "team-monitor/usage/",
    # `omp.monitor.verifying.start` calls it holding the task's guard: the team exists then
    ("omp/demo_agent.py", "target.parent.mkdir(parents=True, exist_ok=True)"): "its worktree",
    ("omp/cli/demo.py", "repo.mkdir()"): "the demo's throwaway repository",
    ("omp/backlog/worktrees.py", "home.mkdir(parents=True, exist_ok=True)"): "tasks' worktrees",
    ("omp/cli/demo.py", "(repo / rel).parent.mkdir(parents=True, exist_ok=True)"): "the same",
    ("omp/cli/crash.py", "d.mkdir(mode=0o700, parents=True, exist_ok=True)"): "crash logs",
    # the store interface's file backend: `ensure_team` is the store's "create" (launch's)
    ("omp/store/filestore.py", "self.paths.ensure(self.paths.team(team_name(team)).dir)"): "create",
    ("omp/store/filestore.py", "self.paths.ensure(self.paths.store_locks)"): "locks/, no team's",
    ("omp/store/filestore.py", "self.paths.ensure(dst.parent)"): "a relaunch's runs/<label>/",
    ("omp/tmux/ssh.py", "os.mkdir(base, 0o700)"): "ssh master sockets, outside the state",
}


def _makers() -> Iterator[tuple[str, str]]:
    for path in sorted((REPO / "omp").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("ensure", "ensure_dir", "mkdir", "makedirs"):
                if rel in ("omp/store/paths.py", "omp/store/layout.py"):
                    continue  # the definitions of ensure / ensure_in themselves
                yield rel, ast.get_source_segment(text, node) or ""


def test_only_launch_and_create_make_a_team_directory() -> None:
    assert set(_makers()) == set(MAKERS)


def _deleted(tp: TeamPaths) -> Path:
    tomb = tp.dir.with_name(".tomb-team~t~test")
    os.rename(tp.dir, tomb)
    return tomb


def _made_again(tp: TeamPaths) -> Path:
    tomb = _deleted(tp)
    make_team(tp.project.root, "t", 2, task="new", no_limits=True)
    return tomb


WRITES: list[tuple[str, dict[str, Any]]] = [
    ("send-message", {"from": "leader", "to": "worker-1", "body": "hello"}),
    ("send-message", {"from": "worker-1", "to": "leader", "body": "done"}),
    ("send-message", {"from": "worker-2", "to": "worker-1", "body": "q", "event": "task_req"}),
    ("broadcast", {"from": "leader", "body": "all"}),
    ("mailbox-mark-delivered", {"worker": "worker-1", "message_id": "MID"}),
    ("claim-task", {"task_id": "1", "worker": "worker-1"}),
    (
        "transition-task-status",
        {"task_id": "2", "from": "in_progress", "to": "completed", "claim_token": "TOKEN"},
    ),
    ("mailbox-read", {"worker": "worker-1"}),
]


@pytest.mark.parametrize("gone", [_deleted, _made_again], ids=["deleted", "made again"])
@pytest.mark.parametrize(
    ("sub", "fields"), WRITES, ids=[f"{s}-{i}" for i, (s, _) in enumerate(WRITES)]
)
def test_a_writer_whose_team_goes_away_writes_nothing_and_says_so(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    gone: Callable[[TeamPaths], Path],
    sub: str,
    fields: dict[str, Any],
) -> None:
    """The team is deleted (or deleted and made again) right after the call loaded its config:
    the worst moment. The call fails with `unknown_team` (mailbox-read shows what it read, and
    marks nothing), no team directory comes back, and neither the old team's files nor the new
    team's change."""
    from omp.tasks import tasks

    tp = team(root)
    mid = mail(root, "worker-1")[0]
    _, token = tasks.claim(tp, "2", "worker-2")
    payload = json.loads(json.dumps(fields).replace("MID", mid).replace("TOKEN", token))
    real_load = team_config.load
    moved: dict[str, Any] = {}

    def load_then_delete(paths: TeamPaths) -> team_config.TeamConfig:
        cfg = real_load(paths)
        if not moved:
            monkeypatch.setattr(team_config, "load", real_load)
            moved["tomb"] = gone(tp)
            moved["old"] = snapshot_tree(moved["tomb"])
            moved["new"] = snapshot_tree(tp.dir)
        return cfg

    monkeypatch.setattr(team_config, "load", load_then_delete)
    run = call_api(capsys, sub, {"team_name": "t", **payload})
    assert moved, "the call never loaded the team"
    if sub != "mailbox-read":
        assert run.rc == 1 and run.json is not None, run
        assert run.json["error"] == "unknown_team", run
        assert "deleted" in run.json["message"]
    assert snapshot_tree(moved["tomb"]) == moved["old"]  # nothing written into the old team
    assert snapshot_tree(tp.dir) == moved["new"]  # nor into the new one (or no team at all)


def test_a_late_writer_never_makes_a_deleted_team_again(root: Path) -> None:
    """Every library writer, given the paths of a team that was deleted since."""
    from omp.conversations import record as conversations
    from omp.record import history
    from omp.tasks import presence, tasks

    tp = team(root)
    cfg = team_config.load(tp)
    _deleted(tp)
    writers: list[Callable[[], object]] = [
        lambda: Mailbox(tp, "leader").append_messages([new_message("worker-1", "leader", "x")]),
        lambda: tasks.create(tp, "9", "late"),
        lambda: tasks.claim(tp, "1", "worker-1"),
        lambda: tasks.settle_claims(tp),
        lambda: team_config.write(tp, cfg.raw),
        lambda: conversations.locked(tp).__enter__(),
        lambda: history.member(tp, "worker-1", "joined"),
        lambda: presence.touch(cfg, "worker-1"),
    ]
    for write in writers:
        with contextlib.suppress(OmpError):
            write()
        assert not tp.dir.exists()
    for write in writers[:6]:
        with pytest.raises(OmpError) as exc:
            write()
        assert exc.value.code == "unknown_team", exc.value


def test_delete_waits_for_a_sender_that_got_in_before_and_counts_its_message(
    root: Path,
) -> None:
    """A sender that checked the team, under its mailbox's lock, just before delete renamed the
    team away: delete waits for it and lists its message as lost (never "sent" and gone)."""
    tp = team(root)
    box = Mailbox(team_config.load(tp).paths, "leader")
    box.append_messages([new_message("worker-1", "leader", "first")])
    in_place = threading.Event()
    renamed = threading.Event()
    sent: list[str] = []

    def sender() -> None:
        msg = new_message("worker-2", "leader", "late")
        with box._writing(create=True) as fd:  # past the check, holding the lock
            in_place.set()
            renamed.wait(30)
            from omp.store import jsonl

            jsonl.append_locked(fd, jsonl.encode(msg), box.path)
        sent.append(msg["id"])

    t = threading.Thread(target=sender)
    t.start()
    assert in_place.wait(30)
    result: dict[str, Any] = {}
    deleter = threading.Thread(
        target=lambda: result.update(removal.delete(StatePaths(root), "t", force=True))
    )
    deleter.start()
    poll(lambda: not tp.dir.exists(), what="the rename")
    renamed.set()
    t.join(30)
    deleter.join(30)
    lost = {mid for e in result["lost"] for mid in e["messageIds"]}
    assert sent and sent[0] in lost, (sent, result)


def test_a_send_between_the_check_and_the_rename_makes_delete_refuse(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --force, mail that arrives after delete looked and before it renamed the team is
    not lost: the team is put back, whole, and the delete refused."""
    real = removal.finish_tombstones

    def then_mail(*a: Any, **k: Any) -> Any:
        out = real(*a, **k)
        mail(root, "leader")
        return out

    monkeypatch.setattr(removal, "finish_tombstones", then_mail)
    with pytest.raises(OmpError) as exc:
        removal.delete(StatePaths(root), "t")
    assert exc.value.code == "unread_mail"
    assert len(Mailbox(team(root), "leader").undelivered()[0]) == 1
    assert team_config.load(team(root)).worker_names == ["worker-1", "worker-2"]


# ---- the race, for real: processes sending while delete --force runs ---------------------------


def _sender(root: str, who: str, out: str, stop: str) -> None:
    from omp.cli.api import main

    results: list[str] = []
    i = 0
    while i < 5000 and not os.path.exists(stop):
        buf = io.StringIO()
        payload = {"team_name": "t", "from": who, "to": "leader", "body": f"{who}:{i}"}
        with contextlib.redirect_stdout(buf):
            try:
                main(["send-message", "--input", json.dumps(payload), "--json"])
            except SystemExit:
                pass
        doc = json.loads(buf.getvalue())
        results.append(f"ok:{doc['messageId']}" if doc.get("ok") else f"err:{doc['error']}")
        i += 1
    Path(out).write_text(json.dumps(results))


def test_a_heartbeat_that_lands_in_the_tombstone_does_not_fail_the_delete(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's heartbeat whose path lookup passed the team's name before the rename writes
    its temporary file inside the tombstone while it is being removed (seen under load as
    `Directory not empty` from `delete --force` racing sends): the removal finishes anyway."""
    real_rmdir = os.rmdir
    landed: list[str] = []

    def rmdir(path: Any, *, dir_fd: int | None = None) -> None:
        if path == "worker-1" and dir_fd is not None and not landed:
            fd = os.open(
                "worker-1/.heartbeat.json.late.tmp", os.O_CREAT | os.O_WRONLY, dir_fd=dir_fd
            )
            os.close(fd)
            landed.append(path)
        real_rmdir(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "rmdir", rmdir)
    done = removal.delete(StatePaths(root), "t", force=True)
    assert done["ok"] is True and landed == ["worker-1"]
    assert not team(root).dir.exists() and removal.tombstones(StatePaths(root), "t") == []


ROUNDS = 12


@pytest.mark.slow  # races processes: the full suite's, not the quick loop's (CONTRIBUTING.md)
def test_sends_racing_delete_force_are_never_sent_and_lost(root: Path, tmp_path: Path) -> None:
    project = StatePaths(root)
    removal.delete(project, "t", force=True)
    for rnd in range(ROUNDS):
        make_team(root, "t", 2, task="build it", no_limits=True)
        stop = tmp_path / f"stop-{rnd}"
        outs = [tmp_path / f"out-{rnd}-{w}" for w in ("worker-1", "worker-2", "worker-3")]
        procs = [
            start(_sender, str(root), who, str(out), str(stop))
            for who, out in zip(("worker-1", "worker-2", "worker-1"), outs, strict=True)
        ]
        box = team(root).mailbox("leader")
        poll(lambda: box.exists() and box.stat().st_size > 2000, what="some sends")  # noqa: B023
        done = removal.delete(project, "t", force=True)
        time.sleep(0.02 * (rnd % 4))  # let the senders run into the deleted team a while
        stop.touch()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        results = [r for out in outs for r in json.loads(out.read_text())]
        sent = {r[3:] for r in results if r.startswith("ok:")}
        errors = {r[4:] for r in results if r.startswith("err:")}
        lost = {mid for e in done["lost"] for mid in e["messageIds"]}
        assert sent and sent <= lost, f"round {rnd}: sent but never counted: {sent - lost}"
        assert errors <= {"unknown_team"}, (rnd, errors)
        assert not team(root).dir.exists(), f"round {rnd}: a sender made the team again"
        # a new team of the same name inherits nothing
        make_team(root, "t", 2, task="again", no_limits=True)
        assert not team(root).mailbox("leader").exists()
        old = {e.get("id") for e in records(team(root).events)}
        assert not old & sent
        removal.delete(project, "t", force=True)
