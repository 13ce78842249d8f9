"""The leader's pane lifecycle (omp.tmux.lifecycle, libtmux's object API) on real private servers,
its error mapping, and the per-call paths that must never import libtmux."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import libtmux
import pytest

from omp.errors import OmpError
from omp.tmux import NO_SERVER, Tmux, TmuxIdentity
from omp.tmux.lifecycle import OmpServer
from tests.helpers import child_env, make_project, poll
from tests.monitor.test_monitor_tmux import DEMO, make_live_team

REPO = Path(__file__).resolve().parents[2]


def shown(tmux: Tmux, pane: str) -> str:
    return "\n".join(tmux.capture(pane))


@pytest.mark.tmux
def test_create_split_layout_options_identity_kill(
    omp_tmux: Tmux, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def untimed(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"libtmux ran tmux with no timeout: {args}")

    # libtmux's own runner has no timeout: every command must go through omp's instead.
    monkeypatch.setattr(libtmux.common.tmux_cmd, "__init__", untimed)
    sid, wid, leader = omp_tmux.new_session("omp-team-life", cwd=tmp_path, command=["cat"])
    assert isinstance(omp_tmux._lifecycle().server, OmpServer)  # libtmux's Server, omp's runner
    # argv, not a shell string: a word with spaces and quotes reaches the program intact, and
    # PATH comes from `env` (tmux 3.3a would hand the pane the client's PATH).
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = 'printf "%s|%s|%s|" "$OMP_WORKER" "$PWD" "$1"; echo "$PATH"; exec cat'
    worker = omp_tmux.split_pane(
        leader,
        cwd=tmp_path,
        command=["sh", "-c", script, "sh", "two words 'quoted'"],
        env={"OMP_WORKER": "w1", "PATH": f"{bindir}:{os.defpath}"},
    )
    poll(
        lambda: f"w1|{tmp_path}|two words 'quoted'|{bindir}:{os.defpath}" in shown(omp_tmux, worker)
    )
    state = omp_tmux.pane_states([worker])[worker]
    assert state is not None and state.current_command == "cat"  # exec'd: the program, no shell

    omp_tmux.select_layout(wid, "main-vertical")
    layout = omp_tmux.cmd("display-message", "-p", "-t", wid, "#{window_layout}")
    omp_tmux.select_layout(wid, "even-vertical")
    assert omp_tmux.cmd("display-message", "-p", "-t", wid, "#{window_layout}") != layout

    omp_tmux.set_pane_option(worker, "remain-on-exit", "on")
    opt = omp_tmux.cmd("show-options", "-p", "-t", worker, "-v", "remain-on-exit")
    assert opt.strip() == "on"
    omp_tmux.set_window_option(wid, "monitor-bell", "off")
    assert omp_tmux.cmd("show-options", "-w", "-t", wid, "-v", "monitor-bell").strip() == "off"
    omp_tmux.set_pane_title(worker, "worker-1 #1;")
    title = omp_tmux.cmd("display-message", "-p", "-t", worker, "#{pane_title}")
    assert title.strip() == "worker-1 #1;"

    # The identity launch records, built and compared in one place.
    ident = TmuxIdentity.of(omp_tmux.server_identity(), sid, wid)
    assert TmuxIdentity.from_config(ident.to_config()) == ident
    assert list(ident.to_config()) == [
        "socketPath",
        "serverPid",
        "serverStartedAt",
        "sessionId",
        "windowId",
    ]
    assert ident.same_server(omp_tmux.server_identity())
    assert ident.pane(worker) == omp_tmux.identity_of(worker)
    assert state is not None and ident.holds(state, session=True)

    assert omp_tmux.kill_pane(worker)
    assert omp_tmux.pane_states([worker])[worker] is None
    assert not omp_tmux.kill_pane(worker)  # already gone: False, not an error
    assert omp_tmux.kill_session("omp-team-life")
    assert not omp_tmux.has_session("omp-team-life")


@pytest.mark.tmux
def test_libtmux_sees_what_omp_made(tmux_env: Path, server: libtmux.Server, tmp_path: Path) -> None:
    """libtmux's own fixture server (an isolated socket) as the oracle of omp's lifecycle."""
    tmux = Tmux(socket_name=server.socket_name)
    sid, wid, leader = tmux.new_session("made-by-omp", cwd=tmp_path, command=["cat"])
    first = tmux.split_pane(leader, cwd=tmp_path, command=["cat"], env={"K": "v"})
    second = tmux.split_pane(first, cwd=tmp_path, command=["cat"], horizontal=False)
    tmux.select_layout(wid, "tiled")
    session = server.sessions.get(session_name="made-by-omp")
    assert session is not None and session.session_id == sid
    assert {p.pane_id for p in session.panes} == {leader, first, second}
    assert session.windows[0].window_id == wid
    assert tmux.kill_session("made-by-omp")
    assert not server.has_session("made-by-omp")


@pytest.mark.tmux
def test_errors_name_the_subcommand(omp_tmux: Tmux, tmp_path: Path) -> None:
    def error(call: Callable[[], object]) -> str:
        with pytest.raises(OmpError) as err:
            call()
        assert err.value.code == "tmux_error"
        return err.value.message

    # A dead server (one that ran and was killed): the kills say False, the rest fail clearly.
    omp_tmux.new_session("t", cwd=tmp_path, command=["cat"])
    assert omp_tmux.kill_server()
    assert not omp_tmux.kill_pane("%1")
    assert not omp_tmux.kill_session("nope")
    for call, sub in [
        (lambda: omp_tmux.select_layout("@1", "tiled"), "select-layout"),
        (lambda: omp_tmux.set_pane_option("%1", "remain-on-exit", "on"), "set-option"),
        (lambda: omp_tmux.split_pane("%1", cwd=tmp_path, command=["cat"]), "split-window"),
    ]:
        msg = error(call)
        assert msg.startswith(f"{sub}: ") and any(s in msg for s in NO_SERVER), msg

    # A live server and a bad target, or a bad option.
    _, _, pane = omp_tmux.new_session("t", cwd=tmp_path, command=["cat"])
    assert error(lambda: omp_tmux.select_layout("@99", "tiled")) == (
        "select-layout: can't find window: @99"
    )
    assert error(lambda: omp_tmux.set_pane_option("%99", "remain-on-exit", "on")) == (
        "set-option: no such pane: %99"
    )
    assert error(lambda: omp_tmux.set_pane_title("%99", "x")) == "select-pane: can't find pane: %99"
    assert error(lambda: omp_tmux.split_pane("%99", cwd=tmp_path)) == (
        "split-window: can't find pane: %99"
    )
    assert error(lambda: omp_tmux.set_pane_option(pane, "no-such-option", "x")).startswith(
        "set-option: "
    )
    assert error(lambda: omp_tmux.select_layout(omp_tmux.all_panes()[pane].window_id, "bogus"))
    with pytest.raises(OmpError) as bad:
        omp_tmux.split_pane(pane, cwd=tmp_path, env={"A=B": "x"})
    assert bad.value.code == "invalid_input"


@pytest.mark.slow  # each call waits out its time limit on a hung tmux
def test_lifecycle_calls_are_bounded_in_time(tmp_path: Path) -> None:
    hung = tmp_path / "hung-tmux"
    hung.write_text("#!/bin/sh\nexec sleep 30\n")
    hung.chmod(0o755)
    tmux = Tmux("x", binary=str(hung), timeout=0.3)
    calls: list[tuple[Callable[[], object], str]] = [
        (lambda: tmux.new_session("t", cwd=tmp_path), "new-session"),
        (lambda: tmux.split_pane("%1", cwd=tmp_path), "split-window"),
        (lambda: tmux.select_layout("@1", "tiled"), "select-layout"),
        (lambda: tmux.set_pane_option("%1", "remain-on-exit", "on"), "set-option"),
        (lambda: tmux.kill_pane("%1"), "kill-pane"),
        (lambda: tmux.kill_session("t"), "kill-session"),
    ]
    for call, sub in calls:
        t0 = time.monotonic()
        with pytest.raises(OmpError) as err:
            call()
        assert err.value.message == f"{sub}: no answer from tmux within 0.3s"
        assert time.monotonic() - t0 < 3
    missing = Tmux("x", binary=str(tmp_path / "no-such-tmux"))
    with pytest.raises(OmpError) as err:
        missing.kill_session("t")
    assert err.value.code == "tmux_not_found"


_PROBE = """
import sys
from pathlib import Path
from omp.tmux import Tmux
import omp.monitor.loop, omp.mail.panes, omp.views.status, omp.mail.typein, omp.views.wait
t = Tmux(socket_name="omp-probe-never-started")
assert t.server_identity() is None and t.pane_states(["%1"]) == {"%1": None}
assert t.capture_many([]) == {} and t.identity_of("%1") is None
assert not t.has_session("x")
t.lock_path(Path("/tmp"), "%1")
before = "libtmux" in sys.modules
t.kill_pane("%1")  # a lifecycle call: imports it
print(before, "libtmux" in sys.modules)
"""


@pytest.mark.tmux
def test_per_call_paths_never_import_libtmux(tmux_env: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["False", "True"]


_SEND = """
import sys
from omp.cli.api import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(sorted(m for m in ("libtmux", "omp.tmux.lifecycle", "omp.mail.typein") if m in sys.modules))
"""


@pytest.mark.slow
@pytest.mark.tmux
def test_a_send_that_types_its_nudge_never_imports_libtmux(
    omp_tmux: Tmux, tmux_env: Path, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "proj")
    panes = make_live_team(root, omp_tmux, "t", 1, DEMO, env={"HOME": str(tmux_env)})
    poll(lambda: any("❯" in ln for ln in omp_tmux.capture(panes["worker-1"])), what="the prompt")
    payload = {"team_name": "t", "from": "leader", "to": "worker-1", "body": "hello"}
    out = subprocess.run(
        [sys.executable, "-c", _SEND, "send-message", "--input", json.dumps(payload), "--json"],
        cwd=REPO,
        env=child_env(tmux_env, OMP_ROOT=str(root)),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert json.loads(out[0])["ok"] is True, out
    assert out[1] == "['omp.mail.typein']"  # the nudge was typed, with the thin client only
