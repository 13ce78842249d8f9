"""Notifications (issue 20, section 5): the outbox, the command's run, its limits and its log."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from omp import notify, procs
from omp.errors import OmpError
from omp.store.paths import StatePaths
from omp.tasks import tasks
from tests.helpers import FIXTURES, isolate, make_project
from tests.monitor.test_monitor_policy import (
    FakeClock,
    FakePane,
    FakeTmux,
    World,
    live_config,
    own_lock,
)

PROMPT = (FIXTURES / "screens" / "claude-16-permission-prompt.txt").read_text().splitlines()


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StatePaths:
    isolate(monkeypatch, tmp_path)
    return StatePaths(make_project(tmp_path / "proj"))


def configure(paths: StatePaths, command: str, timeout: float | None = None) -> None:
    paths.ensure(paths.omp_dir)
    text = f"[notify]\ncommand = {json.dumps(command)}\n"
    if timeout is not None:
        text += f"timeout = {timeout}\n"
    (paths.omp_dir / "config.toml").write_text(text)


def recorder(tmp_path: Path) -> tuple[str, Path]:
    """A command that appends its stdin and its OMP_EVENT_* variables to a file, one run a line."""
    out = tmp_path / "runs.jsonl"
    script = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import json, os, sys; "
        "ev = json.loads(sys.stdin.read()); "
        "env = {k: v for k, v in os.environ.items() if k.startswith('OMP_EVENT_')}; "
        f"open({str(out)!r}, 'a').write(json.dumps({{'stdin': ev, 'env': env}}) + '\\n')"
    )
    return script, out


def runs(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []


def test_the_command_gets_the_event_as_json_on_stdin_and_in_variables(
    paths: StatePaths, tmp_path: Path
) -> None:
    cmd, out = recorder(tmp_path)
    configure(paths, cmd)
    assert notify.emit(
        paths,
        {"kind": "attention", "team": "t", "worker": "worker-1", "text": "t/worker-1 needs you"},
    )
    (res,) = notify.deliver(paths)
    assert res.outcome == "ok"
    (run,) = runs(out)
    assert run["stdin"]["kind"] == "attention" and run["stdin"]["worker"] == "worker-1"
    assert run["env"] == {
        "OMP_EVENT_KIND": "attention",
        "OMP_EVENT_TEAM": "t",
        "OMP_EVENT_WORKER": "worker-1",
        "OMP_EVENT_TEXT": "t/worker-1 needs you",
        "OMP_EVENT_ID": run["stdin"]["id"],
    }
    assert notify.deliver(paths) == []  # delivered: never again
    assert runs(out) == [run]


def test_a_keyed_event_is_queued_once_whoever_emits_it(paths: StatePaths) -> None:
    ev = {"kind": "verify_failed", "team": "t", "text": "verify of worker-1 failed"}
    assert notify.emit(paths, ev, key="verify:t:worker-1:abc") is True
    assert notify.emit(paths, ev, key="verify:t:worker-1:abc") is False
    assert notify.emit(paths, ev, key="verify:t:worker-1:def") is True
    assert len(notify.pending(paths)) == 2


def test_bad_events_and_settings_are_refused(paths: StatePaths) -> None:
    with pytest.raises(OmpError) as err:
        notify.emit(paths, {"kind": "lunch", "team": "t"})
    assert err.value.code == "invalid_input"
    paths.ensure(paths.omp_dir)
    (paths.omp_dir / "config.toml").write_text("[notify]\ncommand = 3\n")
    with pytest.raises(OmpError) as err:
        notify.settings(paths)
    assert err.value.code == "invalid_config" and "command must be a string" in err.value.message
    for bad in ("", "   ", "x" * 5000, "a\0b"):
        with pytest.raises(OmpError):
            notify.check_command(bad)


@pytest.mark.slow  # waits out a time limit and kills a process group (CONTRIBUTING.md)
def test_a_hanging_command_is_killed_at_the_limit(paths: StatePaths, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    configure(paths, f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300", timeout=0.5)
    notify.emit(paths, {"kind": "all_done", "team": "t", "text": "all done"})
    (res,) = notify.deliver(paths)
    assert res.outcome == "timeout"
    pid = int(pid_file.read_text())
    assert not procs.pid_alive(pid)  # its whole process group was ended
    assert "timeout all_done team=t" in notify.read_log(paths)


def test_a_failing_command_is_logged_and_the_next_event_still_runs(
    paths: StatePaths, tmp_path: Path
) -> None:
    configure(paths, 'echo "no route to host" >&2; [ "$OMP_EVENT_KIND" = gone ] || exit 3')
    notify.emit(paths, {"kind": "all_done", "team": "t", "text": "done"})
    notify.emit(paths, {"kind": "gone", "team": "t", "text": "gone"})
    first, second = notify.deliver(paths)
    assert (first.outcome, second.outcome) == ("failed", "ok")
    log = notify.read_log(paths)
    assert "failed all_done team=t" in log and "exit 3: no route to host" in log
    assert "gone" not in log


def test_a_team_s_own_command_wins_and_tmux_shows_it_in_the_leader_s_client(
    paths: StatePaths, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cmd, out = recorder(tmp_path)
    configure(paths, cmd)
    live_config(paths.root, "t", 1)
    from omp.record import config as team_config

    raw = team_config.load(paths.team("t")).raw
    raw["notify"] = "tmux"
    team_config.write(paths.team("t"), raw)
    shown: list[tuple[str, ...]] = []
    from omp.tmux import Tmux

    def display(self: Tmux, *args: str) -> str:
        shown.append(args)
        return ""

    monkeypatch.setattr(Tmux, "cmd", display)
    notify.emit(paths, {"kind": "attention", "team": "t", "text": "t/worker-1 needs you: #1"})
    notify.emit(paths, {"kind": "all_done", "team": "other", "text": "other is done"})
    a, b = notify.deliver(paths)
    assert a.outcome == "shown" and b.outcome == "ok"
    assert shown == [
        ("display-message", "-d", "10000", "-t", "%0", "omp: t/worker-1 needs you: ##1")
    ]
    assert [r["stdin"]["team"] for r in runs(out)] == ["other"]  # the project's command


# ---- the monitor delivers, once per event, across restarts ---------------------------------


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    workers, leader = live_config(root)
    fake = FakeTmux(panes={p: FakePane() for p in [*workers.values(), leader]})
    own_lock(StatePaths(root))
    w = World(root, StatePaths(root), fake, FakeClock(), workers, leader)
    w.all_ready()
    return w


def test_the_monitor_runs_the_command_once_per_event_across_a_restart(
    world: World, tmp_path: Path
) -> None:
    cmd, out = recorder(tmp_path)
    configure(world.paths, cmd)
    from omp.record import config as team_config

    tp = world.paths.team("t")
    raw = team_config.load(tp).raw
    raw["agent"] = "claude"
    team_config.write(tp, raw)
    world.fake.screens["%1"] = PROMPT
    world.scan_for(world.monitor(), 20)
    assert [r["stdin"]["kind"] for r in runs(out)] == ["attention"]
    first = runs(out)[0]
    assert first["env"]["OMP_EVENT_WORKER"] == "worker-1"
    assert first["stdin"]["what"] == "permission prompt"
    assert first["stdin"]["lines"][0] == "Do you want to proceed?"
    assert "select-pane -t %1" in first["stdin"]["attach"]
    # A new monitor process: the episode is known, nothing is emitted or run again.
    world.scan_for(world.monitor(), 20)
    assert len(runs(out)) == 1
    # Every task done: one all_done, however many scans and restarts see it.
    for tid in ("1", "2", "3"):
        _, tok = tasks.claim(tp, tid, f"worker-{tid}")
        tasks.transition(
            tp, tid, worker=f"worker-{tid}", from_status="in_progress", to_status="completed",
            token=tok, result="ok",
        )  # fmt: skip
    world.scan_for(world.monitor(), 20)
    world.scan_for(world.monitor(), 20)
    assert [r["stdin"]["kind"] for r in runs(out)] == ["attention", "all_done"]
    assert runs(out)[1]["env"]["OMP_EVENT_TEXT"] == "team t: every task is done"


def test_a_team_whose_panes_are_gone_is_notified_once(world: World, tmp_path: Path) -> None:
    cmd, out = recorder(tmp_path)
    configure(world.paths, cmd)
    mon = world.monitor()
    mon.scan()
    for p in world.workers.values():
        world.fake.panes[p].dead = True
    world.scan_for(mon, 30)
    world.scan_for(world.monitor(), 30)
    assert [r["stdin"]["kind"] for r in runs(out)] == ["gone"]
    assert "no worker pane is alive" in runs(out)[0]["stdin"]["text"]


def test_a_failing_command_never_stops_the_monitor(world: World) -> None:
    configure(world.paths, "exit 7")
    world.fake.server = dict(world.fake.server, server_started_at=78)  # the server is gone
    mon = world.monitor()
    world.scan_for(mon, 30)
    assert "failed gone team=t" in notify.read_log(world.paths)
    assert "exit 7" in notify.read_log(world.paths)
