"""A real `redis-server` for tests and benchmarks: a private port on 127.0.0.1, its files in a
temporary directory, the append-only file on and fsynced on every write (`appendfsync always`),
so a SIGKILL loses nothing the server acknowledged. Never the machine's own Redis."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import poll

BINARY = "redis-server"


def binary() -> str | None:
    return shutil.which(BINARY)


def missing_reason() -> str:
    return (
        "redis-server is not installed (Debian: apt-get install -y redis-server; .ci/run installs "
        "it): the Redis half of the store conformance suite needs a real server"
    )


def free_port() -> int:
    # The kernel's choice of a free port, released at once: redis-server cannot be told
    # `port 0`. A clash in between is possible but rare; `start` fails loudly if it happens.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(self, directory: Path, *, password: str = "", port: int = 0) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.password = password
        self.proc: subprocess.Popen[bytes] | None = None
        self.conf = self.dir / "redis.conf"
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.dir}",
            "appendonly yes",
            "appendfsync always",
            'save ""',
            "daemonize no",
            f"logfile {self.dir / 'redis.log'}",
            f"pidfile {self.dir / 'redis.pid'}",
        ]
        if password:
            lines.append(f"requirepass {password}")
        self.conf.write_text("\n".join(lines) + "\n")

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        exe = binary()
        assert exe is not None, missing_reason()
        self.proc = subprocess.Popen(
            [exe, str(self.conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the test run is not delivered to it twice
        )
        poll(self._answers, timeout=30, what=f"redis-server on port {self.port}")
        return self

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            log = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"redis-server exited {self.proc.returncode}: {log}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                auth = f"AUTH {self.password}\r\n".encode() if self.password else b""
                s.sendall(auth + b"PING\r\n")
                data = b""
                while b"PONG" not in data and b"LOADING" not in data:
                    chunk = s.recv(256)
                    if not chunk:
                        return False
                    data += chunk
                return b"PONG" in data
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown save, no goodbye; what was fsynced is all there is."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


def session_server(factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A server for a test session (a fixture's body): skipped, saying why, without the binary."""
    if binary() is None:
        pytest.skip(missing_reason())
    server = RedisServer(factory.mktemp("redis")).start()
    yield server
    server.stop()
