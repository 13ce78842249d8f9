"""Another host for tests: a real `sshd` on 127.0.0.1 (a private port, its own host key and
config in a temporary directory) and a second user whose home plays the remote machine.

Needs root (sshd must switch to the second user) and OpenSSH's server; without either the tests
that use it skip, saying why. The second user (`omp-remote-test`) is made once with `useradd`
and kept; its key is authorised by this sshd's own `AuthorizedKeysFile`, never a `~/.ssh` of
anyone's. The client side is explicit too: `-i` the test key, `UserKnownHostsFile` a file here,
so the real `~/.ssh` of root is never read or written.

`omp` on the "remote" host is this checkout run by Debian's python3 with the venv's packages on
its path (a wrapper script in the user's home): root's venv lives under /root, which the second
user cannot enter.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.tmux.ssh import Host, HostSettings
from tests.helpers import REPO, poll
from tests.store.redis_server import free_port

USER = "omp-remote-test"
REMOTE_PYTHON = "/usr/bin/python3"  # the "other host's" Python: Debian's, not root's pyenv
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def missing_reason() -> str | None:
    """Why the ssh tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "an sshd that logs in as a second user needs root"
    if not os.path.exists(SSHD):
        return "sshd is not installed (Debian: apt-get install -y openssh-server; .ci/run does)"
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        return "the OpenSSH client is not installed (apt-get install -y openssh-client)"
    if not os.path.exists("/usr/bin/python3"):
        return "the remote user needs /usr/bin/python3"
    return None


def ensure_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/sh", USER], check=True, timeout=60
        )
        # a locked account ("!") is refused by sshd even with a key: no password, not locked
        subprocess.run(["usermod", "-p", "*", USER], check=True, timeout=60)
        return pwd.getpwnam(USER)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), children first."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rpartition(")")[2].split()
            parent[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    out: list[int] = []
    todo = [pid]
    while todo:
        here = todo.pop()
        kids = [p for p, pp in parent.items() if pp == here]
        out += kids
        todo += kids
    return out


class SshServer:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.user = ensure_user()
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.host_key = self.dir / "host_ed25519"
        self.client_key = self.dir / "client_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        for key in (self.host_key, self.client_key):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "omp-test", "-f", str(key)],
                check=True,
                timeout=60,
            )
        keys = self.dir / "authorized"
        keys.mkdir()
        (keys / USER).write_text(self.client_key.with_suffix(".pub").read_text())
        os.chmod(keys, 0o755)
        os.chmod(keys / USER, 0o644)
        pub = self.host_key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        self.config = self.dir / "sshd_config"
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"PidFile {self.dir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {keys}/%u",
                    "StrictModes no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "PermitRootLogin no",
                    f"AllowUsers {USER}",
                    "MaxSessions 64",
                    "MaxStartups 64",
                    "LogLevel VERBOSE",
                    "",
                ]
            )
        )
        self.omp = self._install_omp()

    def _install_omp(self) -> str:
        """The `omp` command of the remote user: this checkout on Debian's python3."""
        home = Path(self.user.pw_dir)
        bin_dir = home / "bin"
        bin_dir.mkdir(exist_ok=True)
        site = sysconfig.get_paths()["purelib"]
        deps = home / "pydeps"
        path = f"{REPO}:{site}:{deps}"
        probe = [REMOTE_PYTHON, "-c", "import redis"]
        if subprocess.run(probe, env={"PYTHONPATH": path}, capture_output=True).returncode:
            # Debian's 3.11.2 needs what the venv's 3.11.7 does not (redis-py's async_timeout,
            # for Pythons before 3.11.3): installed for that user, beside the venv's packages
            pip = [sys.executable, "-m", "pip", "install", "-q", "--target", str(deps)]
            subprocess.run([*pip, "async-timeout"], check=True, capture_output=True, timeout=300)
            subprocess.run(["chown", "-R", f"{USER}:", str(deps)], check=True)
        # one wrapper per checkout: several checkouts' tests may share this user at once
        script = bin_dir / f"omp-{hashlib.sha256(str(REPO).encode()).hexdigest()[:8]}"
        tmp = script.with_suffix(".tmp")
        tmp.write_text(
            "#!/bin/sh\n"
            f'PYTHONPATH="{path}" PYTHONPYCACHEPREFIX="$HOME/.pycache" '
            f'exec {REMOTE_PYTHON} -m omp "$@"\n'
        )
        os.chmod(tmp, 0o755)
        os.chown(bin_dir, self.user.pw_uid, self.user.pw_gid)
        os.chown(tmp, self.user.pw_uid, self.user.pw_gid)
        os.replace(tmp, script)
        return str(script)

    def host(self, name: str = "build1", **settings: object) -> Host:
        base = {
            "address": f"{USER}@127.0.0.1",
            "port": self.port,
            "identity_file": str(self.client_key),
            "known_hosts": str(self.known_hosts),
            "omp": self.omp,
        }
        base.update(settings)
        return Host(name, HostSettings(**base))  # type: ignore[arg-type]

    def start(self) -> SshServer:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-f", str(self.config), "-E", str(self.dir / "sshd.log")],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        poll(self._listening, timeout=30, what=f"sshd on port {self.port}")
        return self

    def _listening(self) -> bool:
        import socket

        assert self.proc is not None
        if self.proc.poll() is not None:
            log = (self.dir / "sshd.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"sshd exited {self.proc.returncode}: {log}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                return s.recv(64).startswith(b"SSH-")
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the listener and every connection it serves (a host that drops off): the
        listener's own descendants, found by pid, nothing else."""
        if self.proc is None:
            return
        doomed = descendants(self.proc.pid)
        for pid in [self.proc.pid, *doomed]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)
        self.proc = None

    def remote_dir(self, name: str) -> Path:
        """A fresh directory in the remote user's home (theirs, 0700)."""
        path = Path(self.user.pw_dir) / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(mode=0o700)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)
        return path


@contextlib.contextmanager
def running(monkeypatch: pytest.MonkeyPatch) -> Iterator[SshServer]:
    """A started sshd for one test, its ssh master sockets in a short private directory (a
    socket path must fit in 108 bytes), every master and the server stopped after it."""
    short = Path(tempfile.mkdtemp(prefix="omp-t-", dir="/tmp"))
    short.chmod(0o755)  # the second user must reach its authorized keys in there
    monkeypatch.setenv("TMPDIR", str(short))
    server = SshServer(short / "sshd").start()
    try:
        yield server
    finally:
        for sock in (short / f"omp-ssh-{os.geteuid()}").glob("*"):
            subprocess.run(
                ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"],
                capture_output=True,
                check=False,
            )
        server.stop()
        shutil.rmtree(short, ignore_errors=True)
