"""What the tests with the real remote parts share: an `sshd` on 127.0.0.1 with a second user
as the other host (`tests/tmux/sshd_server.py`), a `redis-server` with a password
(`tests/store/redis_server.py`) and a private tmux server here; skipped, saying why, when a part
is missing. A test module takes them with `pytestmark = MARKS` and imports the fixtures."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.tmux import Tmux
from tests.store.redis_server import RedisServer
from tests.store.redis_server import binary as redis_binary
from tests.tmux.sshd_server import SshServer, missing_reason, running

PASSWORD = "pw-" + secrets.token_hex(6)  # never on a screen, in an inbox or a file of the team's
WHY = missing_reason() or (None if redis_binary() else "redis-server is not installed")
MARKS = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.skipif(WHY is not None, reason=str(WHY))]


@pytest.fixture
def sshd(monkeypatch: pytest.MonkeyPatch) -> Iterator[SshServer]:
    """The other host, its ssh masters in a short private TMPDIR, everything stopped after."""
    with running(monkeypatch) as server:
        yield server


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", password=PASSWORD).start()
    yield server
    server.stop()


@pytest.fixture
def local_tmux() -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is needed")
    tmux = Tmux(socket_name=f"omp-test-{secrets.token_hex(4)}", config_file="/dev/null")
    yield tmux
    tmux.kill_server()
