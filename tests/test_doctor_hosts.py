"""`omp doctor` looks at each `[hosts.<name>]`: a host that does not answer fails naming it and
how to fix it; hosts that place workers without a store every host reaches fail; no host
configured, no host check. (A host that answers is checked in tests/team/test_launch_hosts_tmux.py's
harness, by launch's own probe.)"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.doctor.hosts import check_hosts
from omp.store.paths import StatePaths
from tests.helpers import isolate, make_project
from tests.store.redis_server import free_port


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StatePaths]:
    isolate(monkeypatch, tmp_path)
    short = Path(tempfile.mkdtemp(prefix="omp-d-", dir="/tmp"))  # ssh's master sockets
    monkeypatch.setenv("TMPDIR", str(short))
    yield StatePaths(make_project(tmp_path / "proj"))
    shutil.rmtree(short, ignore_errors=True)


def _config(project: StatePaths, text: str) -> None:
    project.config_toml.parent.mkdir(parents=True, exist_ok=True)
    project.config_toml.write_text(text, encoding="utf-8")


def test_no_host_configured_no_host_check(project: StatePaths) -> None:
    assert check_hosts(project, "omp 0.1.0") == []


@pytest.mark.skipif(shutil.which("ssh") is None, reason="the OpenSSH client is needed")
def test_a_host_that_does_not_answer_fails_by_name_and_workers_need_a_store(
    project: StatePaths,
) -> None:
    # a closed port: ssh is refused at once (exit 255), as by a host whose sshd is down
    _config(
        project,
        f'[hosts.build1]\naddress = "nobody@127.0.0.1"\nport = {free_port()}\nworkers = 2\n',
    )
    checks = check_hosts(project, "omp 0.1.0")
    by = {c.name: c for c in checks}
    assert by["host build1"].status == "fail"
    assert "build1" in by["host build1"].message and "ssh" in (by["host build1"].fix or "")
    assert by["hosts"].status == "fail" and "OMP_STORE" in (by["hosts"].fix or "")


def test_a_broken_hosts_table_is_one_failed_check(project: StatePaths) -> None:
    _config(project, '[hosts.build1]\nadress = "typo"\n')
    (check,) = check_hosts(project, "omp 0.1.0")
    assert check.status == "fail" and "adress" in check.message
