"""The monitor on a real tmux server (a private `-L omp-test-<random>` socket, never the user's):
a demo worker whose nudge was missed gets the unread-count line again and reads its mail."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp import clock
from omp.agents import BUILTIN_PROFILES, classify_screen
from omp.invocation import omp_command
from omp.mail import bootstrap
from omp.mail.mailbox import Mailbox, new_message
from omp.monitor import ctl as ctl
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tmux import Tmux, TmuxIdentity
from tests.helpers import child_env, make_project, make_team, poll, run_api

pytestmark = [pytest.mark.tmux, pytest.mark.slow]  # real teams and monitors

DEMO = [sys.executable, "-c", "from omp.demo_agent import main; raise SystemExit(main())"]
# A trivial idle "agent": draws the demo profile's prompt and waits.
IDLE = ["sh", "-c", "printf '\\342\\235\\257 '; exec cat >/dev/null"]


def make_live_team(
    root: Path,
    tmux: Tmux,
    name: str,
    workers: int,
    command: list[str],
    *,
    session: str | None = None,
    env: dict[str, str] | None = None,
    task: str | None = None,
) -> dict[str, str]:
    """A team config pointing at real panes on `tmux` (one session, one window). Worker -> pane."""
    make_team(root, name, workers, task=task or "")
    sess = session or f"omp-{name}"
    panes: dict[str, str] = {}
    # every pane carries the launch's token, as launch gives it: a worker without one is fenced
    token = f"lt-{name}"
    first_env = dict(
        env or {}, OMP_TEAM=name, OMP_WORKER="worker-1", OMP_ROOT=str(root), OMP_LAUNCH_TOKEN=token
    )
    sid, wid, first = tmux.new_session(sess, cwd=root, command=command, env=first_env)
    panes["worker-1"] = first
    for i in range(2, workers + 1):
        wenv = dict(
            env or {},
            OMP_TEAM=name,
            OMP_WORKER=f"worker-{i}",
            OMP_ROOT=str(root),
            OMP_LAUNCH_TOKEN=token,
        )
        panes[f"worker-{i}"] = tmux.split_pane(
            first, cwd=root, command=command, env=wenv, horizontal=i % 2 == 0
        )
        tmux.select_layout(wid, "tiled")
    server = tmux.server_identity()
    assert server is not None
    tp = StatePaths(root).team(name)
    raw = team_config.load(tp).raw
    for w in raw["workers"]:
        w["paneId"] = panes[w["name"]]
    raw.update(
        agent="demo",
        launchToken=token,
        tmuxIdentity=TmuxIdentity.of(server, sid, wid).to_config(),
    )
    team_config.write(tp, raw)
    return panes


def monitor_pids(root: Path) -> list[int]:
    """Live (non-zombie) `omp team monitor-run` processes for this root."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"monitor-run" in argv and str(root).encode() in argv:
            out.append(int(entry))
    # A tmux client the monitor has forked but not yet exec'd still shows the monitor's argv.
    return [p for p in out if _ppid(p) not in out]


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def owner(root: Path) -> dict[str, Any] | None:
    try:
        return json.loads((StatePaths(root).monitor / "owner.lock").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def status_of(root: Path) -> dict[str, Any]:
    """The monitor's status.json, or {} before its first write."""
    try:
        return json.loads((StatePaths(root).monitor / "status.json").read_text())  # type: ignore[no-any-return]
    except FileNotFoundError:
        return {}


def running_owner(root: Path) -> dict[str, Any] | None:
    o = owner(root)
    return o if o and o.get("phase") == "running" else None


def kill_monitors(root: Path) -> None:
    for pid in monitor_pids(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    ctl._reap()
    poll(lambda: not monitor_pids(root), 10, "monitors to die")


@pytest.fixture
def project(tmp_path: Path, tmux_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for key in list(os.environ):
        if key.startswith("OMP_"):
            monkeypatch.delenv(key)
    root = make_project(tmp_path / "proj")
    yield root
    kill_monitors(root)


def test_a_demo_worker_whose_nudge_was_missed_is_renudged_and_reads_it(
    project: Path, omp_tmux: Tmux, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project
    panes = make_live_team(root, omp_tmux, "t", 2, DEMO, env={"HOME": os.environ["HOME"]})
    pane = panes["worker-1"]
    poll(lambda: any("❯" in ln for ln in omp_tmux.capture(pane)), what="the demo prompt")
    # Mail written two minutes ago whose own nudge never arrived (as if typed into a busy pane).
    msg = new_message("worker-2", "worker-1", "please check the parser")
    msg["timestamp"] = clock.iso(time.time() - 120)
    team = StatePaths(root).team("t")
    box = Mailbox(team, "worker-1")
    box.append_messages([msg])
    assert box.unread_count() == 1

    monkeypatch.setenv("OMP_MONITOR_SCAN_SECONDS", "0.2")
    monkeypatch.setenv("OMP_MONITOR_UNREAD_REPEAT_SECONDS", "2")
    started = ctl.ensure_monitor(root)
    assert started["started"] is True, started

    poll(lambda: box.unread_count() == 0, 30, "worker-1 to read its mail")
    screen = poll(
        lambda: (s := "\n".join(omp_tmux.capture(pane, 60))) and "✉ worker-2:" in s and s,
        10,
        "the mail on screen",
    )
    assert f"You have 1 new message(s). Read them: {omp_command()} team api mailbox-read" in screen
    assert "✉ worker-2: please check the parser" in screen
    poll(lambda: status_of(root).get("nudgesSent") == 1, what="nudgesSent 1")
    events = [
        json.loads(x) for x in (StatePaths(root).monitor / "events.jsonl").read_text().splitlines()
    ]
    nudges = [e for e in events if e["type"] == "unread-nudge"]
    assert [(e["worker"], e["outcome"]) for e in nudges] == [("worker-1", "sent")]

    # SIGTERM: a final status, the lock released, the process gone.
    pid = running_owner(root)["pid"]  # type: ignore[index]
    os.kill(pid, signal.SIGTERM)
    poll(lambda: owner(root) is None, 10, "the lock to be released")
    final = json.loads((StatePaths(root).monitor / "status.json").read_text())
    assert final["reason"] == "signal" and final["terminal"] is True
    ctl._reap()
    poll(lambda: not monitor_pids(root), 10, "the monitor to exit")


# ---- a nudge never disturbs a busy agent -----------------------------------------------------


def _send(root: Path, frm: str, to: str, body: str) -> dict[str, Any]:
    env = child_env(Path(os.environ["HOME"]), OMP_ROOT=str(root))
    r = run_api("send-message", {"team_name": "t", "from": frm, "to": to, "body": body}, env=env)
    assert r.rc == 0, r
    return r.json  # type: ignore[no-any-return]


def test_mail_to_a_busy_worker_is_nudged_by_the_monitor_once_it_is_idle(
    project: Path, omp_tmux: Tmux, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project
    env = {"HOME": os.environ["HOME"], "OMP_DEMO_WORK_SECONDS": "4"}
    panes = make_live_team(root, omp_tmux, "t", 2, DEMO, env=env, task="port the parser")
    pane = panes["worker-1"]
    poll(lambda: any("❯" in ln for ln in omp_tmux.capture(pane)), what="the demo prompt")
    wdir = StatePaths(root).team("t").worker_dir("worker-1")
    inbox = wdir / "inbox.md"
    inbox.write_text(
        bootstrap.inbox_markdown(
            team="t",
            worker="worker-1",
            task_id="1",
            description="port the parser",
            teammates=["worker-2"],
            result_path=wdir / "result.md",
            omp=omp_command(),
        )
    )
    omp_tmux.send_literal(pane, f"Read {inbox} and follow it.")
    omp_tmux.send_key(pane, "Enter")
    poll(
        lambda: any("working on task" in ln for ln in omp_tmux.capture(pane)),
        what=f"busy: {omp_tmux.capture(pane)}",
    )

    # Held busy while the send looks: its process stopped, its screen stays the busy one. A
    # timed busy stretch alone was outlived by the send's own start on a loaded machine (CI:
    # `typed` into the by then idle agent).
    agent = omp_tmux.pane_states([pane])[pane]
    assert agent is not None and agent.pid
    os.kill(agent.pid, signal.SIGSTOP)
    try:
        assert classify_screen(BUILTIN_PROFILES["demo"], omp_tmux.capture(pane)) == "busy"
        first = _send(root, "worker-2", "worker-1", "are you on the parser?")
    finally:
        os.kill(agent.pid, signal.SIGCONT)
    assert (first["nudged"], first["nudge"]) == (False, "deferred"), first
    assert "busy" in first["nudgeReason"]

    monkeypatch.setenv("OMP_MONITOR_SCAN_SECONDS", "0.2")
    ctl.ensure_monitor(root)
    box = Mailbox(StatePaths(root).team("t"), "worker-1")
    poll(lambda: box.unread_count() == 0, 30, "worker-1 to read its mail")
    rows = omp_tmux.capture(pane, 200)
    done = next(i for i, ln in enumerate(rows) if "completed task 1" in ln)
    nudged = [i for i, ln in enumerate(rows) if "You have 1 new message(s)" in ln]
    assert nudged and all(i > done for i in nudged), rows  # typed only once it was idle
    assert len(nudged) == 1
