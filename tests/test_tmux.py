"""omp.tmux against a real tmux server on a private socket, plus the checks that need no server."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from omp.agents import BUILTIN_PROFILES, AgentProfile, classify_screen
from omp.errors import OmpError
from omp.team.typein import Delivery, Timing, pane_lock, type_line
from omp.tmux import MAX_LITERAL_BYTES, PaneIdentity, Tmux, check_literal
from tests.helpers import poll

# A stand-in agent. "line" mode behaves like the demo agent (prompt always on the last line);
# "box" mode redraws a full screen like Codex: transcript, input box, blank line, a footer that
# repeats the first message. Both print `got: <line>` only for an Enter that arrives on its own:
# an Enter in the same burst as text (or within 20 ms of it) becomes part of a paste and is
# dropped, as Codex and Gemini do.
FAKE_AGENT = r"""
import os, sys, time, tty

mode = sys.argv[1]
tty.setraw(0)
buf, log, first, last_text = "", [], None, 0.0

def out(s):
    os.write(1, s.encode())

def draw():
    if mode == "line":
        return
    box = "› " + buf if buf else "› Ask the fake anything"
    foot = "  fake · " + first + " · ? for shortcuts" if first else "  ? for shortcuts"
    out("\x1b[H\x1b[2J" + "\r\n".join([*log[-20:], "", box, "", foot]))

out("❯ " if mode == "line" else "")
draw()
while True:
    data = os.read(0, 4096).decode("utf-8", "replace")
    now = time.monotonic()
    printable = any(c >= " " for c in data)
    for ch in data:
        if ch == "\x03":
            sys.exit(0)
        if ch == "\r":
            if printable or now - last_text < 0.02:
                continue  # part of a paste: not a submit
            if mode == "line":
                out("\r\ngot: " + buf + "\r\n❯ ")
            else:
                first = first or buf
                log += ["› " + buf, "got: " + buf]
            buf = ""
        elif ch >= " ":
            buf += ch
            if mode == "line":
                out(ch)
    if printable:
        last_text = now
    draw()
"""


@pytest.fixture
def fake_script(tmp_path: Path) -> Path:
    path = tmp_path / "fake_agent.py"
    path.write_text(FAKE_AGENT)
    return path


def line_profile(script: Path) -> AgentProfile:
    return dataclasses.replace(
        BUILTIN_PROFILES["demo"], command=[sys.executable, str(script), "line"]
    )


def box_profile(script: Path) -> AgentProfile:
    return dataclasses.replace(
        BUILTIN_PROFILES["codex"],
        command=[sys.executable, str(script), "box"],
        program=sys.executable,
        submit_delay=0.05,
    )


def start(tmux: Tmux, tmp_path: Path, profile: AgentProfile, name: str = "t") -> str:
    """A session running the profile's command; waits until its screen reads as ready."""
    _, _, pane = tmux.new_session(name, cwd=tmp_path, command=profile.command)
    poll(lambda: classify_screen(profile, tmux.capture(pane)) == "ready")
    return pane


def shows(tmux: Tmux, pane: str, line: str) -> bool:
    return line in tmux.capture(pane)


def got(tmux: Tmux, pane: str, text: str) -> int:
    return tmux.capture(pane, 200).count(f"got: {text}")


# -- no server needed ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", "invalid_text"),
        ("two\nlines", "invalid_text"),
        ("carriage\rreturn", "invalid_text"),
        ("tab\there", "invalid_text"),
        ("escape \x1b[2J", "invalid_text"),
        ("nul\x00", "invalid_text"),
        ("c1 \x9b", "invalid_text"),
        ("lone \udc80 surrogate", "invalid_text"),
        ("x" * (MAX_LITERAL_BYTES + 1), "text_too_long"),
        ("é" * (MAX_LITERAL_BYTES // 2 + 1), "text_too_long"),  # bytes, not characters
    ],
)
def test_check_literal_refuses(text: str, code: str) -> None:
    with pytest.raises(OmpError) as err:
        check_literal(text)
    assert err.value.code == code


def test_check_literal_accepts_plain_lines() -> None:
    for text in ("x" * MAX_LITERAL_BYTES, "echo a;", "-n", "❯ é ' \" $HOME #{pane_id}"):
        check_literal(text)


def test_identity_json_round_trip() -> None:
    ident = PaneIdentity("/tmp/tmux-1/s", 42, 1700000000, "$1", "@2", "%3")
    assert PaneIdentity.from_json(ident.to_json()) == ident
    assert ident.to_json()["serverPid"] == 42
    assert PaneIdentity.from_json({**ident.to_json(), "serverPid": "x"}) is None
    assert PaneIdentity.from_json({"paneId": "%3"}) is None
    assert PaneIdentity.from_json(None) is None


def test_missing_binary_and_timeout(tmp_path: Path) -> None:
    missing = Tmux("x", binary=str(tmp_path / "no-such-tmux"))
    assert missing.version() is None
    assert not missing.is_available()
    with pytest.raises(OmpError) as err:
        missing.cmd("list-sessions")
    assert err.value.code == "tmux_not_found"

    hung = tmp_path / "hung-tmux"
    hung.write_text("#!/bin/sh\nexec sleep 30\n")
    hung.chmod(0o755)
    t0 = time.monotonic()
    with pytest.raises(OmpError) as err:
        Tmux("x", binary=str(hung), timeout=0.3).cmd("list-panes", "-a")
    assert err.value.code == "tmux_error"
    assert err.value.message == "list-panes: no answer from tmux within 0.3s"
    assert time.monotonic() - t0 < 3


def test_kill_server_refuses_the_default_server() -> None:
    with pytest.raises(OmpError) as err:
        Tmux().kill_server()
    assert "default server" in err.value.message


def test_socket_name_and_path_are_exclusive() -> None:
    with pytest.raises(ValueError):
        Tmux(socket_name="a", socket_path="/tmp/b")


# -- a real server ------------------------------------------------------------------------------


@pytest.mark.tmux
def test_no_server_reads_as_nothing(omp_tmux: Tmux) -> None:
    assert omp_tmux.is_available()
    assert omp_tmux.version()
    assert omp_tmux.server_identity() is None
    assert not omp_tmux.has_session("t")
    assert omp_tmux.pane_states(["%0"]) == {"%0": None}
    assert omp_tmux.identity_of("%0") is None
    assert not omp_tmux.kill_session("t")
    assert not omp_tmux.kill_pane("%0")
    assert not omp_tmux.kill_server()


@pytest.mark.tmux
def test_session_ids_size_and_exact_names(omp_tmux: Tmux, tmp_path: Path) -> None:
    sid, wid, pane = omp_tmux.new_session("omp-team-alpha", cwd=tmp_path, command=["cat"])
    assert (sid[0], wid[0], pane[0]) == ("$", "@", "%")
    size = omp_tmux.cmd("display-message", "-p", "-t", pane, "#{window_width}x#{window_height}")
    assert size.strip() == "240x60"
    # A bare `-t omp-team` would match omp-team-alpha by prefix.
    assert not omp_tmux.has_session("omp-team")
    assert omp_tmux.has_session("omp-team-alpha")
    assert not omp_tmux.kill_session("omp-team")
    info = omp_tmux.server_identity()
    assert info is not None and info["socket_path"].endswith(omp_tmux.socket_name or "")
    with pytest.raises(OmpError) as err:
        omp_tmux.new_session("omp-team-alpha", cwd=tmp_path, command=["cat"])
    assert err.value.code == "tmux_error"
    assert err.value.message.startswith("new-session: duplicate session")
    with pytest.raises(OmpError) as err:
        omp_tmux.new_session("a.b", cwd=tmp_path)
    assert err.value.code == "invalid_input"
    assert omp_tmux.kill_session("omp-team-alpha")


@pytest.mark.tmux
def test_splits_keep_focus_carry_env_and_eight_fit(omp_tmux: Tmux, tmp_path: Path) -> None:
    _, wid, leader = omp_tmux.new_session("t", cwd=tmp_path, command=["cat"])
    panes = []
    for i in range(8):
        script = 'printf "%s|%s|" "$OMP_WORKER" "$PWD"; echo "$SEMI"; exec cat'
        panes.append(
            omp_tmux.split_pane(
                leader,
                cwd=tmp_path,
                command=["sh", "-c", script],
                env={"OMP_WORKER": f"w{i}", "SEMI": "ends;"},
                horizontal=i % 2 == 0,
            )
        )
        omp_tmux.select_layout(wid, "tiled")
    active = omp_tmux.cmd("display-message", "-p", "-t", wid, "#{pane_id}").strip()
    assert active == leader
    for i, pane in enumerate(panes):
        poll(partial(shows, omp_tmux, pane, f"w{i}|{tmp_path}|ends;"))
    omp_tmux.set_pane_title(panes[0], "worker-1 #1;")
    title = omp_tmux.cmd("display-message", "-p", "-t", panes[0], "#{pane_title}")
    assert title.strip() == "worker-1 #1;"


@pytest.mark.tmux
@pytest.mark.parametrize(
    "text",
    ["echo a;", "ends with two;;", "-x leading dash", "a;b in the middle", "\\;", "back\\", "❯ é"],
)
def test_send_literal_delivers_text_intact(omp_tmux: Tmux, tmp_path: Path, text: str) -> None:
    _, _, pane = omp_tmux.new_session("t", cwd=tmp_path, command=["cat"])
    omp_tmux.send_literal(pane, text)
    omp_tmux.send_key(pane, "Enter")
    # The tty echoes the line, then cat prints it again.
    poll(lambda: omp_tmux.capture(pane).count(text) == 2)


@pytest.mark.tmux
def test_refused_text_never_reaches_the_pane(omp_tmux: Tmux, tmp_path: Path) -> None:
    _, _, pane = omp_tmux.new_session("t", cwd=tmp_path, command=["cat"])
    for bad in ("rm -rf x\n", "x" * (MAX_LITERAL_BYTES + 1)):
        with pytest.raises(OmpError):
            omp_tmux.send_literal(pane, bad)
    with pytest.raises(OmpError) as err:
        omp_tmux.send_key(pane, "Enter;")
    assert err.value.code == "invalid_key"
    omp_tmux.send_literal(pane, "marker")
    poll(lambda: omp_tmux.capture(pane) == ["marker"])


@pytest.mark.tmux
def test_missing_pane_is_an_error_not_silence(omp_tmux: Tmux, tmp_path: Path) -> None:
    omp_tmux.new_session("t", cwd=tmp_path, command=["cat"])
    for call in (
        lambda: omp_tmux.send_literal("%999", "hello"),
        lambda: omp_tmux.send_key("%999", "Enter"),
        lambda: omp_tmux.capture("%999"),
    ):
        with pytest.raises(OmpError) as err:
            call()
        assert err.value.code == "tmux_error"
        assert "can't find pane: %999" in err.value.message


@pytest.mark.tmux
def test_pane_states_alive_dead_gone_in_one_call(
    omp_tmux: Tmux, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, wid, alive = omp_tmux.new_session("t", cwd=tmp_path, command=["cat"])
    omp_tmux.set_window_option(wid, "remain-on-exit", "on")
    dead = omp_tmux.split_pane(alive, cwd=tmp_path, command=["sh", "-c", "exit 7"])
    gone = omp_tmux.split_pane(alive, cwd=tmp_path, command=["cat"])
    assert omp_tmux.kill_pane(gone)
    poll(lambda: (s := omp_tmux.pane_states([dead])[dead]) is not None and s.dead)

    calls: list[tuple[str, ...]] = []
    real = omp_tmux._exec

    def counting(args: tuple[str, ...]) -> tuple[int, str, str]:
        calls.append(tuple(args))
        return real(args)

    monkeypatch.setattr(omp_tmux, "_exec", counting)
    states = omp_tmux.pane_states([alive, dead, gone])
    assert len(calls) == 1

    a, d = states[alive], states[dead]
    assert a is not None and d is not None and states[gone] is None
    assert (a.dead, a.current_command, a.in_mode, a.window_id) == (False, "cat", False, wid)
    assert a.pid and a.pid > 0 and a.current_path == str(tmp_path) and a.activity
    assert (d.dead, d.dead_status) == (True, 7)


@pytest.mark.tmux
def test_identity_refuses_a_pane_id_from_a_restarted_server(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    profile = line_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    before = omp_tmux.identity_of(pane)
    assert before is not None and before.pane_id == pane
    assert omp_tmux.matches(before)

    omp_tmux.kill_server()
    again = start(omp_tmux, tmp_path, profile)
    assert again == pane  # the new server hands out the same id
    assert not omp_tmux.matches(before)
    with pytest.raises(OmpError) as err:
        type_line(omp_tmux, pane, "hello", profile, lock_dir=tmp_path / "locks", expected=before)
    assert err.value.code == "pane_mismatch"
    assert got(omp_tmux, pane, "hello") == 0
    now = omp_tmux.identity_of(pane)
    assert now is not None
    assert type_line(omp_tmux, pane, "hello", profile, lock_dir=tmp_path / "locks", expected=now).ok


@pytest.mark.tmux
@pytest.mark.parametrize("text", ["You have 1 new message(s). Read them;", "-n starts with a dash"])
def test_deliver_to_a_line_agent_submits_once(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path, text: str
) -> None:
    profile = line_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    result = type_line(omp_tmux, pane, text, profile, lock_dir=tmp_path / "locks")
    assert result == Delivery(True, "delivered", 1, result.elapsed)
    poll(lambda: got(omp_tmux, pane, text) == 1)
    assert omp_tmux.capture(pane)[-1] == "❯"


@pytest.mark.tmux
def test_deliver_to_a_full_screen_agent_reads_the_box_not_the_footer(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    profile = box_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    locks = tmp_path / "locks"
    assert type_line(omp_tmux, pane, "first line", profile, lock_dir=locks).ok
    # The footer now repeats "first line": it must not read as unsent text.
    assert type_line(omp_tmux, pane, "first line", profile, lock_dir=locks).ok
    poll(lambda: got(omp_tmux, pane, "first line") == 2)


@pytest.mark.tmux
def test_the_fake_drops_a_burst_enter_and_deliver_does_not(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    """Faithfulness check: text + Enter in one tmux call is not submitted (as in Codex)."""
    profile = line_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    base = ["tmux", "-L", omp_tmux.socket_name or "", "-f", "/dev/null"]
    burst = [*base, "send-keys", "-t", pane, "-l", "--", "burst", ";"]
    subprocess.run([*burst, "send-keys", "-t", pane, "Enter"], check=True)
    poll(lambda: omp_tmux.capture(pane)[-1] == "❯ burst")
    assert type_line(omp_tmux, pane, " then", profile, lock_dir=tmp_path / "locks").ok
    poll(lambda: got(omp_tmux, pane, "burst then") == 1)
    assert got(omp_tmux, pane, "burst") == 0  # the burst alone was never submitted


@pytest.mark.tmux
def test_deliver_does_not_retype_text_left_in_the_box(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    profile = line_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    omp_tmux.send_literal(pane, "left over")  # an earlier attempt typed it but never submitted
    poll(lambda: omp_tmux.capture(pane)[-1] == "❯ left over")
    assert type_line(omp_tmux, pane, "left over", profile, lock_dir=tmp_path / "locks").ok
    poll(lambda: got(omp_tmux, pane, "left over") == 1)
    assert got(omp_tmux, pane, "left overleft over") == 0


@pytest.mark.tmux
def test_deliver_leaves_a_pane_in_copy_mode_alone(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    profile = line_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    omp_tmux.cmd("copy-mode", "-t", pane)
    result = type_line(omp_tmux, pane, "nudge", profile, lock_dir=tmp_path / "locks")
    assert (result.ok, result.reason) == (False, "copy_mode")
    state = omp_tmux.pane_states([pane])[pane]
    assert state is not None and state.in_mode  # the user's copy mode was not cancelled
    omp_tmux.cmd("send-keys", "-t", pane, "-X", "cancel")
    poll(lambda: not (s := omp_tmux.pane_states([pane])[pane]) or not s.in_mode)
    assert omp_tmux.capture(pane) == ["❯"]  # nothing was typed


@pytest.mark.tmux
def test_deliver_refuses_gone_dead_shell_and_dialog_panes(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    profile = line_profile(fake_script)
    locks = tmp_path / "locks"
    _, wid, first = omp_tmux.new_session("t", cwd=tmp_path, command=["sh"])
    omp_tmux.set_window_option(wid, "remain-on-exit", "on")
    dead = omp_tmux.split_pane(first, cwd=tmp_path, command=["sh", "-c", "echo '❯ '; exit 3"])
    dialog = omp_tmux.split_pane(
        first,
        cwd=tmp_path,
        command=["sh", "-c", "echo 'Do you trust the files in this folder?'; exec cat"],
    )
    poll(lambda: (s := omp_tmux.pane_states([dead])[dead]) is not None and s.dead)
    poll(lambda: omp_tmux.pane_states([dialog])[dialog].current_command == "cat")  # type: ignore[union-attr]
    poll(lambda: omp_tmux.capture(dialog))

    def reason(pane: str, prof: AgentProfile = profile) -> str:
        return type_line(omp_tmux, pane, "nudge", prof, lock_dir=locks).reason

    assert reason("%999") == "gone"
    assert reason(dead) == "dead"
    assert reason(first) == "agent_not_running"  # a bare shell: text would run as a command
    copilot = dataclasses.replace(BUILTIN_PROFILES["copilot"], program=sys.executable)
    result = type_line(omp_tmux, dialog, "nudge", copilot, lock_dir=locks)
    assert (result.reason, result.screen) == ("not_ready", "dialog")
    assert "nudge" not in omp_tmux.capture(dialog)


@pytest.mark.tmux
def test_concurrent_delivers_never_interleave(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    profile = line_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    locks = tmp_path / "locks"
    texts = [f"message from sender {i}" for i in range(3)]
    results: dict[str, bool] = {}

    def send(text: str) -> None:
        results[text] = type_line(
            Tmux(omp_tmux.socket_name), pane, text, profile, lock_dir=locks
        ).ok

    threads = [threading.Thread(target=send, args=(t,)) for t in texts]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == dict.fromkeys(texts, True)
    screen = omp_tmux.capture(pane, 200)
    assert sorted(ln for ln in screen if ln.startswith("got: ")) == [f"got: {t}" for t in texts]

    assert stat.S_IMODE(locks.stat().st_mode) == 0o700
    (lock,) = locks.iterdir()
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


@pytest.mark.tmux
def test_a_held_lock_times_out_instead_of_typing(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    profile = line_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    with pane_lock(omp_tmux, tmp_path / "locks", pane, 1.0) as held:
        assert held
        result = type_line(
            omp_tmux,
            pane,
            "late",
            profile,
            lock_dir=tmp_path / "locks",
            timing=Timing(lock_timeout=0.1),
        )
    assert (result.ok, result.reason) == (False, "lock_timeout")
    assert got(omp_tmux, pane, "late") == 0


@pytest.mark.tmux
def test_kill_server_unlinks_its_socket(omp_tmux: Tmux, tmp_path: Path) -> None:
    omp_tmux.new_session("t", cwd=tmp_path, command=["cat"])
    info = omp_tmux.server_identity()
    assert info is not None and os.path.exists(info["socket_path"])
    assert omp_tmux.kill_server()
    assert not os.path.exists(info["socket_path"])
    assert omp_tmux.server_identity() is None


def test_capture_many_reads_every_pane_in_one_client(omp_tmux: Tmux, tmp_path: Path) -> None:
    _, _, a = omp_tmux.new_session("many", cwd=tmp_path, command=["cat"])
    b = omp_tmux.split_pane(a, cwd=tmp_path, command=["cat"])
    c = omp_tmux.split_pane(b, cwd=tmp_path, command=["cat"], horizontal=False)
    for pane, word in ((a, "alpha %3 one"), (b, "beta; two"), (c, "gamma three")):
        omp_tmux.send_literal(pane, word)
    poll(lambda: "gamma three" in "\n".join(omp_tmux.capture(c)))
    many = omp_tmux.capture_many([a, b, c])
    assert many == {p: omp_tmux.capture(p) for p in (a, b, c)}
    assert "alpha %3 one" in many[a][-1] and "beta; two" in many[b][-1]
    # a gone pane is left out; the panes before it still come back
    omp_tmux.kill_pane(c)
    assert set(omp_tmux.capture_many([a, b, c])) == {a, b}
    assert omp_tmux.capture_many([]) == {}
    with pytest.raises(OmpError):
        omp_tmux.capture_many(["%1; kill-server"])
