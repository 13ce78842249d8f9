"""Typing a line into an agent (omp.mail.typein) on a real private tmux server: a stand-in agent
that behaves as Codex and the demo agent do, the per-pane lock, the refusals."""

from __future__ import annotations

import dataclasses
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from omp.agents import BUILTIN_PROFILES, AgentProfile, classify_screen, screen_state
from omp.errors import OmpError
from omp.mail.typein import Delivery, Timing, pane_lock, type_line
from omp.tmux import Tmux
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


def got(tmux: Tmux, pane: str, text: str) -> int:
    return tmux.capture(pane, 200).count(f"got: {text}")


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
def test_guard_is_asked_under_the_lock_and_the_typed_line_recorded_there(
    omp_tmux: Tmux, tmp_path: Path, fake_script: Path
) -> None:
    """A nudge another typer made while this one waited for the pane's lock is not typed
    again (`guard`); one that was typed is recorded before the lock is let go."""
    profile = line_profile(fake_script)
    pane = start(omp_tmux, tmp_path, profile)
    locks = tmp_path / "locks"
    held: list[bool] = []

    def lock_held() -> bool:  # another process trying the pane's lock right now
        with pane_lock(omp_tmux, locks, pane, 0.0) as taken:
            return not taken

    res = type_line(omp_tmux, pane, "nudge", profile, lock_dir=locks, guard=lambda: "covered")
    assert res.reason == "unwanted" and res.screen == "covered" and not res.ok
    assert got(omp_tmux, pane, "nudge") == 0

    def guard() -> None:
        held.append(lock_held())

    res = type_line(
        omp_tmux,
        pane,
        "nudge",
        profile,
        lock_dir=locks,
        guard=guard,
        on_submitted=lambda: held.append(lock_held()),
    )
    assert res.ok and held == [True, True]
    poll(lambda: got(omp_tmux, pane, "nudge") == 1)


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


# A stand-in Claude Code: shows a real captured screen (`argv[1]`, the permission prompt) until
# the file `argv[3]` exists, logging every key it gets meanwhile; then Claude's idle screen
# (`argv[2]`) with a working input box, logging each submitted line as `got: <line>`.
FAKE_CLAUDE = r"""
import os, select, sys, tty

dialog, ready, flag, log = sys.argv[1:5]
tty.setraw(0)

def out(s):
    os.write(1, s.encode())

def show(path, buf=None):
    lines = open(path, encoding="utf-8").read().rstrip("\n").split("\n")
    if buf is not None:
        lines = ["❯\u00a0" + buf if ln.startswith("❯") else ln for ln in lines]
    out("\x1b[H\x1b[2J" + "\r\n".join(ln[:79] for ln in lines if ln.strip()))

def note(text):
    with open(log, "a", encoding="utf-8") as f:
        f.write(text + "\n")

show(dialog)
while not os.path.exists(flag):
    if select.select([0], [], [], 0.05)[0]:
        note("key while the dialog showed: " + repr(os.read(0, 4096)))
buf = ""
show(ready, buf)
while True:
    for ch in os.read(0, 4096).decode("utf-8", "replace"):
        if ch == "\r":
            note("got: " + buf)
            buf = ""
        elif ch >= " ":
            buf += ch
    show(ready, buf)
"""
SCREENS = Path(__file__).parents[1] / "fixtures" / "screens"


@pytest.mark.tmux
@pytest.mark.parametrize("shown", ["claude-16-permission-prompt", "claude-21-error-429-rate-limit"])
def test_nothing_is_typed_into_a_screen_that_needs_a_person_until_it_is_gone(
    omp_tmux: Tmux, tmp_path: Path, shown: str
) -> None:
    """Claude Code's permission prompt preselects `1. Yes`: a nudge's Enter would approve the
    command. Typing refuses (reason `needs_person`, what the screen shows) and sends no key;
    once the screen is back at the idle prompt, the same line is delivered."""
    script, flag, log = tmp_path / "fake_claude.py", tmp_path / "cleared", tmp_path / "keys.log"
    script.write_text(FAKE_CLAUDE)
    claude = dataclasses.replace(BUILTIN_PROFILES["claude"], program=sys.executable)
    ready = SCREENS / "claude-07-ready.txt"
    argv = [sys.executable, str(script), str(SCREENS / f"{shown}.txt"), str(ready), str(flag)]
    _, _, pane = omp_tmux.new_session("t", cwd=tmp_path, command=[*argv, str(log)])
    what = "permission prompt" if "permission" in shown else "rate limit"
    poll(lambda: screen_state(claude, omp_tmux.capture(pane)) == ("needs_person", what))
    locks = tmp_path / "locks"
    for _ in range(2):
        result = type_line(omp_tmux, pane, "You have 1 new message(s).", claude, lock_dir=locks)
        assert (result.ok, result.reason, result.screen) == (False, "needs_person", what)
    assert not log.exists()  # not one key reached the agent
    flag.touch()
    poll(lambda: screen_state(claude, omp_tmux.capture(pane)) == ("ready", None))
    assert type_line(omp_tmux, pane, "You have 1 new message(s).", claude, lock_dir=locks).ok
    poll(lambda: log.exists() and log.read_text() == "got: You have 1 new message(s).\n")
