"""omp.tmux against a real tmux server on a private socket, plus the checks that need no server."""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.tmux import MAX_LITERAL_BYTES, PaneIdentity, Tmux, check_literal
from tests.helpers import poll


def shows(tmux: Tmux, pane: str, line: str) -> bool:
    return line in tmux.capture(pane)


def printed(tmux: Tmux, pane: str, line: str) -> bool:
    """`line` anywhere the pane printed it, history included: a pane narrowed and shortened by
    later splits pushes the first rows of a wrapped line (a long temp path) above its screen."""
    return line in tmux.cmd("capture-pane", "-p", "-J", "-S", "-", "-t", pane).splitlines()


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
        poll(partial(printed, omp_tmux, pane, f"w{i}|{tmp_path}|ends;"))
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
