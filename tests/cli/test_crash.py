"""An internal error (exit 3) leaves a crash log a person can attach: versions, the command with
secrets masked, the traceback; the message names the file and where to report it. No place to
write it still gives a clean message."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import pytest

from omp.cli import crash
from tests.helpers import call_api, isolate, make_project, make_team, run_cli

GH_TOKEN = "ghp_" + "A1b2" * 9  # shaped like a GitHub token
LAUNCH = "launch-token-4f1c9a"
API_KEY = "my-anthropic-key-0042"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, no_limits=True)
    monkeypatch.chdir(r)
    monkeypatch.setenv("OMP_LAUNCH_TOKEN", LAUNCH)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    return r


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> None:
    """`list-tasks` has a bug whose message quotes what it was given."""
    from omp.api import operations

    def boom(data: dict[str, Any]) -> NoReturn:
        raise RuntimeError(f"kaboom on {data.get('note')} (password={API_KEY})")

    monkeypatch.setitem(operations.OPERATIONS, "list-tasks", boom)


def _payload() -> dict[str, str]:
    return {"team_name": "t", "note": f"{GH_TOKEN} and {LAUNCH}", "auth_token": "plain-4242"}


def test_a_crash_writes_a_log_in_the_project_and_names_it(
    root: Path, broken: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["omp", "team", "api", "list-tasks", "--input", json.dumps(_payload()), "--json"]
    monkeypatch.setattr(sys, "argv", argv)
    r = call_api(capsys, "list-tasks", _payload())
    assert r.rc == 3
    out = r.json
    assert set(out) == {"ok", "error", "message", "crashLog", "reportTo"}
    assert (out["ok"], out["error"]) == (False, "internal")
    log = Path(out["crashLog"])
    assert log.parent == root / ".omp" / "logs" and log.name.startswith("crash-")
    assert str(log) in out["message"] and "report it" in out["message"]
    assert oct(log.stat().st_mode & 0o777) == oct(0o600)
    text = log.read_text(encoding="utf-8")
    for part in ("omp:       0.1.0", "python:    ", "system:    ", "tmux:      ", "git:       "):
        assert part in text
    assert "Traceback (most recent call last)" in text and "RuntimeError: kaboom on ***" in text
    assert "command:   omp team api list-tasks --input" in text and '"team_name": "t"' in text
    assert '"auth_token": "***"' in text  # a field named like a secret
    assert "OMP_LAUNCH_TOKEN=***" in text
    for secret in (GH_TOKEN, LAUNCH, API_KEY, "plain-4242"):
        assert secret not in text and secret not in r.stdout + r.stderr, secret


def test_without_json_two_lines_name_the_log(
    root: Path, broken: None, capsys: pytest.CaptureFixture[str]
) -> None:
    r = call_api(capsys, "list-tasks", _payload(), as_json=False)
    assert r.rc == 3 and r.stdout == ""
    first, second = r.stderr.splitlines()[:2]
    assert first.startswith("omp: internal error: RuntimeError: kaboom on ***")
    assert second.startswith(f"omp: a crash log is in {root / '.omp' / 'logs'}/crash-")
    assert "report it" in second


def test_outside_a_project_the_log_goes_to_the_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = isolate(monkeypatch, tmp_path)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    (tmp_path / "nowhere").mkdir()
    monkeypatch.chdir(tmp_path / "nowhere")  # no .omp/ above: none is made
    from omp.cli import app as app_mod

    def boom(*_: Any, **__: Any) -> NoReturn:
        raise ValueError("broken")

    monkeypatch.setattr(app_mod, "app", _one_command_app(boom))
    r = run_cli("go", "--json")
    assert r.rc == 3
    log = Path(r.json["crashLog"])
    assert log.parent == home / ".local" / "state" / "omp"
    assert not (tmp_path / "nowhere" / ".omp").exists()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    r = run_cli("go", "--json")
    assert Path(r.json["crashLog"]).parent == tmp_path / "xdg" / "omp"


def _one_command_app(body: Any) -> Any:
    import typer

    app = typer.Typer()

    @app.command()
    def go(as_json: bool = typer.Option(False, "--json")) -> None:
        body()

    @app.command()
    def other() -> None:
        pass

    return app


def test_no_writable_place_still_gives_a_clean_message(
    root: Path, broken: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = root.parent / "a-file"
    blocker.write_text("")
    (root / ".omp" / "logs").write_text("not a directory")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))
    r = call_api(capsys, "list-tasks", _payload())
    assert r.rc == 3 and r.json["crashLog"] is None
    assert "no crash log could be written" in r.json["message"]
    assert "Traceback" not in r.stderr
    r = call_api(capsys, "list-tasks", _payload(), as_json=False)
    assert r.rc == 3 and "omp: no crash log could be written (" in r.stderr


def test_a_log_that_cannot_even_be_rendered_is_not_a_second_crash(
    root: Path, broken: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(*_: Any, **__: Any) -> str:
        raise MemoryError

    monkeypatch.setattr(crash, "render", fails)
    r = call_api(capsys, "list-tasks", _payload())
    assert r.rc == 3 and r.json["crashLog"] is None and r.json["error"] == "internal"


def test_two_crashes_at_once_get_two_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    at = 1_800_000_000.5
    first, _ = crash.write(RuntimeError("one"), ["omp"], when=at)
    second, _ = crash.write(RuntimeError("two"), ["omp"], when=at)
    assert first is not None and second is not None and first.parent == second.parent
    assert first.name == f"crash-20270115T080000.500Z-{os.getpid()}.log"
    assert second.name == f"crash-20270115T080000.500Z-{os.getpid()}-1.log"
    assert "RuntimeError: two" in second.read_text(encoding="utf-8")


def test_old_logs_are_pruned(root: Path, broken: None, capsys: pytest.CaptureFixture[str]) -> None:
    logs = root / ".omp" / "logs"
    logs.mkdir()
    for i in range(crash.KEEP + 5):
        (logs / f"crash-20200101T0000{i:02d}Z-1.log").write_text("old")
    r = call_api(capsys, "list-tasks", _payload())
    kept = sorted(p.name for p in logs.iterdir())
    assert len(kept) == crash.KEEP and Path(r.json["crashLog"]).name in kept


def test_the_tracker_comes_from_the_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    class Meta:
        def __init__(self, urls: list[str]) -> None:
            self.urls = urls

        def get_all(self, key: str) -> list[str]:
            return self.urls if key == "Project-URL" else []

    urls = ["Homepage, https://example.org/omp", "Issues, https://example.org/omp/issues"]
    monkeypatch.setattr(importlib.metadata, "metadata", lambda name: Meta(urls))
    assert crash.report_to() == "https://example.org/omp/issues"
    monkeypatch.setattr(importlib.metadata, "metadata", lambda name: Meta(urls[:1]))
    assert crash.report_to() is None


@pytest.mark.parametrize(
    ("argv", "masked"),
    [
        (["--token", "abc123", "x"], ["--token", "***", "x"]),
        (["--api-key=abc123"], ["--api-key=***"]),
        (["--password", "hunter22"], ["--password", "***"]),
        (
            ["--input", '{"secret": "s3", "body": "hi"}'],
            ["--input", '{"secret": "***", "body": "hi"}'],
        ),
        (["run", "TOKEN=abcdef"], ["run", "TOKEN=***"]),
        (["Bearer abcdefgh12345"], ["***"]),
        (["sk-ant-api03-abcdefghijklmnop"], ["***"]),
        (["--worker", "worker-1", "--json"], ["--worker", "worker-1", "--json"]),
    ],
)
def test_mask_argv(argv: list[str], masked: list[str]) -> None:
    assert crash.mask_argv(argv) == masked


def test_exact_values_of_secret_variables_are_masked_anywhere() -> None:
    env = {"OMP_LAUNCH_TOKEN": "tok-123456", "MY_SECRET": "xyzzy-1", "PWD": "/tmp", "A": "bb"}
    secrets = crash.secret_values(env)
    assert secrets == ["tok-123456", "xyzzy-1"]
    assert crash.mask("at /tmp: tok-123456 / xyzzy-1", secrets) == "at /tmp: *** / ***"
    assert os.sep not in "".join(secrets)
