"""`omp.tmux.ssh` against a real sshd on 127.0.0.1 with a second user as the other host."""

from __future__ import annotations

import os
import pwd
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.tmux import ssh
from tests.helpers import isolate, poll
from tests.tmux.sshd_server import USER, SshServer, missing_reason, running

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason()))


@pytest.fixture
def sshd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshServer]:
    isolate(monkeypatch, tmp_path)
    with running(monkeypatch) as server:
        yield server


def test_a_command_arrives_word_for_word(sshd: SshServer) -> None:
    host = sshd.host()
    words = ["printf", "%s|", "a b", "it's", '"q"', "x;y", "$HOME", "*", "-n", ""]
    out = ssh.run(host, words).out
    assert out == "".join(w + "|" for w in words[2:])
    assert ssh.run(host, ["id", "-un"]).out.strip() == USER


def test_calls_share_one_master_connection(sshd: SshServer) -> None:
    host = sshd.host()
    assert not ssh.master_running(host)
    ssh.run(host, ["true"])
    assert ssh.master_running(host)
    sock_dir = ssh.control_dir()
    assert os.stat(sock_dir).st_mode & 0o777 == 0o700
    assert len(os.listdir(sock_dir)) == 1
    ssh.run(host, ["true"])
    assert len(os.listdir(sock_dir)) == 1
    ssh.stop_master(host)
    assert not ssh.master_running(host)


def test_a_failing_command_and_an_unreachable_host_differ(sshd: SshServer) -> None:
    host = sshd.host()
    with pytest.raises(OmpError) as err:
        ssh.run(host, ["sh", "-c", "echo oops >&2; exit 3"])
    assert err.value.code == "remote_failed" and "oops" in err.value.message
    assert ssh.run(host, ["false"], check=False).code == 1
    assert ssh.alive(host)
    sshd.stop()  # the host drops off, master connection and all
    assert not ssh.alive(host, timeout=15)
    with pytest.raises(OmpError) as err:
        ssh.run(host, ["true"])
    assert err.value.code == "host_unreachable" and "build1" in err.value.message


def test_a_refused_key_is_unreachable_not_a_prompt(sshd: SshServer, tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {shlex.quote(str(other))}")
    host = sshd.host(identity_file=str(other))
    with pytest.raises(OmpError) as err:
        ssh.run(host, ["true"], master=False)
    assert err.value.code == "host_unreachable"


def test_a_secret_goes_to_a_private_file_never_a_command_line(sshd: SshServer) -> None:
    host = sshd.host()
    ssh.put_file(host, ".omp-remote/t/store-url", "redis://:hunter2@10.0.0.1/0\n")
    path = Path(pwd.getpwnam(USER).pw_dir) / ".omp-remote/t/store-url"
    assert path.read_text() == "redis://:hunter2@10.0.0.1/0\n"
    st = os.stat(path)
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == pwd.getpwnam(USER).pw_uid
    assert "hunter2" not in " ".join(ssh.argv(host, ["true"]))


# ---- a tmux server on the other host ------------------------------------------------------------


def test_a_remote_pane_is_made_read_typed_into_and_killed(sshd: SshServer) -> None:
    from omp.tmux.remote import RemoteTmux

    host = sshd.host()
    tmux = RemoteTmux(host, f"omp-test-{os.getpid()}")
    try:
        assert tmux.is_available()
        _, _, pane = tmux.new_session(
            "omp-team-r", cwd="/tmp", command=["sh", "-c", "echo ready-$OMP_X; exec cat"],
            env={"OMP_X": "on-the-other-host"},
        )  # fmt: skip
        poll(lambda: "ready-on-the-other-host" in tmux.capture(pane), what="the remote pane")
        tmux.send_literal(pane, "typed; over ssh")
        tmux.send_key(pane, "Enter")
        poll(lambda: tmux.capture(pane).count("typed; over ssh") == 2, what="cat's echo")
        assert tmux.capture_many([pane])[pane] == tmux.capture(pane)
        state = tmux.pane_states([pane])[pane]
        assert state is not None and not state.dead and state.current_command == "cat"
        ident = tmux.identity_of(pane)
        assert ident is not None and tmux.matches(ident)
        second = tmux.split_pane(pane, cwd="/tmp", command=["cat"])
        assert set(tmux.all_panes()) == {pane, second}
        assert tmux.kill_pane(second) and not tmux.kill_pane(second)
        assert tmux.kill_session("omp-team-r")
        assert tmux.pane_states([pane])[pane] is None
    finally:
        tmux.kill_server()
    assert tmux.server_identity() is None


def test_a_dropped_host_is_not_a_gone_server(sshd: SshServer) -> None:
    from omp.tmux.remote import RemoteTmux

    tmux = RemoteTmux(sshd.host(), f"omp-test-{os.getpid()}-b")
    try:
        _, _, pane = tmux.new_session("omp-team-d", cwd="/tmp", command=["cat"])
        sshd.stop()
        with pytest.raises(OmpError) as err:
            tmux.pane_states([pane])
        assert err.value.code == "host_unreachable"
    finally:
        sshd.start()
        tmux.kill_server()


@pytest.mark.slow
def test_bench_remote_quick_prints_its_table(tmp_path: Path) -> None:
    from tests.helpers import run_benchmark

    proc = run_benchmark(tmp_path, "bench_remote.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert all(line.rstrip().endswith(" ms |") for line in rows), rows
    # each part measured: a command (a), the monitor's capture (b), the first call (c), and
    # the monitor's whole scan of 16 remote panes (d)
    assert sorted({line.split("|")[1].strip() for line in rows}) == ["a", "b", "c", "d"], rows
    assert len(rows) == 8, rows
