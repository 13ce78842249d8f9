"""`[hosts.<name>]` in .omp/config.toml, and the ssh command omp builds from it (no sshd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.store.paths import StatePaths
from omp.tmux import ssh
from tests.helpers import isolate, make_project


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    (root / ".omp").mkdir()
    return root


def test_hosts_are_read_with_their_settings(root: Path) -> None:
    (root / ".omp/config.toml").write_text(
        '[hosts.build1]\naddress = "me@b1"\nport = 2222\n\n[hosts.gpu]\nworkers = 4\n'
    )
    hosts = ssh.load_hosts(StatePaths(root))
    assert set(hosts) == {"build1", "gpu"}
    assert hosts["build1"].destination == "me@b1" and hosts["build1"].settings.port == 2222
    assert hosts["gpu"].destination == "gpu" and hosts["gpu"].settings.workers == 4
    argv = ssh.argv(hosts["build1"], ["tmux", "-L", "x y", "list-panes"])
    assert (
        argv[0] == "ssh"
        and "BatchMode=yes" in argv
        and argv[-3:]
        == [
            "me@b1",
            "--",
            "tmux -L 'x y' list-panes",
        ]
    )
    assert argv[argv.index("-p") + 1] == "2222"


@pytest.mark.parametrize(
    "body",
    ['[hosts.b]\nadress = "x"\n', "[hosts.b]\nport = -1\n", '[hosts.b]\nport = "22"\n',
     "[hosts]\nb = 1\n", '[hosts."bad/name"]\nport = 1\n'],
)  # fmt: skip
def test_a_wrong_host_setting_is_refused(root: Path, body: str) -> None:
    (root / ".omp/config.toml").write_text(body)
    with pytest.raises(OmpError) as err:
        ssh.load_hosts(StatePaths(root))
    assert err.value.code == "invalid_config"


def test_no_hosts_no_tables(root: Path) -> None:
    assert ssh.load_hosts(StatePaths(root)) == {}
