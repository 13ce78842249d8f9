"""Choosing a project's store: OMP_STORE, OMP_STORE_FILE, `[store]` in .omp/config.toml; URLs
shown without passwords; warnings for an open store; the files import no Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.store import select
from omp.store.filestore import FileStore
from omp.store.paths import StatePaths
from tests.helpers import REPO, child_env, isolate, make_project


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    isolate(monkeypatch, tmp_path)
    return make_project(tmp_path / "proj")


def config(root: Path, text: str) -> None:
    (root / ".omp").mkdir(exist_ok=True)
    (root / ".omp/config.toml").write_text(text)


def test_the_files_are_the_default(root: Path) -> None:
    assert select.configured_url(StatePaths(root)) == ""
    assert isinstance(select.open_store(root), FileStore)


def test_env_wins_over_config_and_file_means_the_files(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config(root, '[store]\nurl = "redis://db.example:6379/0"\n')
    assert select.configured_url(StatePaths(root)) == "redis://db.example:6379/0"
    monkeypatch.setenv("OMP_STORE", "file")
    assert select.configured_url(StatePaths(root)) == ""
    monkeypatch.setenv("OMP_STORE", "redis://127.0.0.1:1/2")
    assert select.configured_url(StatePaths(root)) == "redis://127.0.0.1:1/2"


def test_a_url_file_must_be_private(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = root / "store-url"
    secret.write_text("redis://:hunter2@10.0.0.5:6379/0\n")
    os.chmod(secret, 0o600)
    monkeypatch.setenv("OMP_STORE_FILE", str(secret))
    assert select.configured_url(StatePaths(root)) == "redis://:hunter2@10.0.0.5:6379/0"
    os.chmod(secret, 0o644)
    with pytest.raises(OmpError) as err:
        select.configured_url(StatePaths(root))
    assert err.value.code == "invalid_store" and "chmod 600" in err.value.message
    assert "hunter2" not in err.value.message


@pytest.mark.parametrize("url", ["http://x", "redis:/x", "mongodb://db/0", "postgres"])
def test_unknown_stores_are_refused(root: Path, url: str) -> None:
    with pytest.raises(OmpError) as err:
        select.open_store(root, url=url)
    assert err.value.code == "invalid_store"


def test_passwords_are_never_shown() -> None:
    assert select.shown("redis://:hunter2@db:6379/0") == "redis://***@db:6379/0"
    assert select.shown("redis://omp:hunter2@db:6379/0?ns=x") == "redis://***@db:6379/0?ns=x"
    assert select.shown("redis://db:6379/0") == "redis://db:6379/0"
    with pytest.raises(OmpError) as err:
        select.scheme_of("bogus://:hunter2@db")
    assert "hunter2" not in err.value.message


def test_an_open_store_off_the_loopback_is_warned_about() -> None:
    (warning,) = select.warnings("redis://10.1.2.3:6379/0")
    assert "no password" in warning and "10.1.2.3" in warning
    assert select.warnings("redis://:pw@10.1.2.3:6379/0") == []
    assert select.warnings("redis://127.0.0.1:6379/0") == []
    assert select.warnings("redis://localhost:6379/0") == []
    assert select.warnings("unix:///run/redis.sock") == []


def test_the_namespace(root: Path) -> None:
    paths = StatePaths(root)
    assert select.namespace(paths, "redis://h/0?ns=proj1") == "proj1"
    derived = select.namespace(paths, "redis://h/0")
    assert derived == select.namespace(StatePaths(root), "redis://h/0")  # stable
    assert derived != select.namespace(StatePaths(root / "other"), "redis://h/0")
    config(root, '[store]\nnamespace = "shared"\n')
    assert select.namespace(paths, "redis://h/0") == "shared"
    assert select.with_namespace("redis://:p@h:1/0?ns=a", "b") == "redis://:p@h:1/0?ns=b"


def test_choosing_the_files_imports_no_redis(root: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from omp.store import select; "
        f"select.open_store(Path({str(root)!r})); print('redis' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=child_env(), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
