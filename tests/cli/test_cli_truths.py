"""The small truths of a CLI (issue 12, class 6): usage errors under `--json` are one JSON object
on stdout; an empty body says "empty body"; a task id given as an integral JSON number works;
hints name a command that runs this omp; `--watch --json` streams one JSON object per line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omp.invocation import omp_command
from tests.helpers import call_api, child_env, isolate, make_project, make_team, run_cli


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, task="build it", no_limits=True)
    monkeypatch.setenv("OMP_ROOT", str(r))
    return r


def env(root: Path) -> dict[str, str]:
    return child_env(root.parent / "home", OMP_NO_MONITOR="1", OMP_ROOT=str(root))


@pytest.mark.parametrize(
    "args",
    [
        ["team", "status", "--bogus"],
        ["team", "launch"],
        ["team", "nosuch"],
        ["team", "wait"],
        ["team", "wait", "t", "--timeout", "soon"],
        ["doctor", "--bogus"],
        ["team", "shutdown"],
    ],
)
def test_a_usage_error_under_json_is_one_json_object(root: Path, args: list[str]) -> None:
    r = run_cli(*args, "--json", cwd=root, env=env(root))
    assert r.rc == 2, r
    assert r.json is not None and r.json["ok"] is False and r.json["error"] == "usage", r
    assert r.stdout.count("\n") == 1 and r.json["message"]
    assert r.stderr == ""


def test_a_usage_error_without_json_is_usage_on_stderr_and_sanitised(root: Path) -> None:
    r = run_cli("team", "status", "--bogus\x1b]0;owned\x07", cwd=root, env=env(root))
    assert r.rc == 2 and r.stdout == ""
    assert "Usage: omp team status" in r.stderr and "\x1b" not in r.stderr
    assert "\\x1b]0;owned" in r.stderr


def test_an_empty_body_says_empty_body(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = {"team_name": "t", "from": "leader", "to": "worker-1", "body": ""}
    r = call_api(capsys, "send-message", payload)
    assert r.rc == 2 and r.json["error"] == "invalid_input"
    assert r.json["message"].startswith("empty body") and "missing" not in r.json["message"]
    del payload["body"]
    assert "missing field 'body'" in call_api(capsys, "send-message", payload).json["message"]


@pytest.mark.parametrize(("given", "ok"), [(1, True), (2.0, True), ("1", True), (True, False),
                                           (-1, False), (1.5, False)])  # fmt: skip
def test_a_task_id_may_be_an_integral_json_number(
    root: Path, capsys: pytest.CaptureFixture[str], given: Any, ok: bool
) -> None:
    r = call_api(capsys, "claim-task", {"team_name": "t", "task_id": given, "worker": "worker-1"})
    if ok:
        assert r.rc == 0 and r.json["task"]["id"] == str(int(given)), r
        tok = r.json["claimToken"]
        t = {"team_name": "t", "task_id": given, "from": "in_progress", "to": "completed"}
        done = call_api(capsys, "transition-task-status", {**t, "claim_token": tok})
        assert done.rc == 0, done
    else:
        assert r.rc == 2 and r.json["error"] in ("invalid_input", "invalid_task_id"), r


def test_hints_name_the_omp_that_runs_here(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from omp.cli.output import invocation
    from omp.cli.team_text import status_text, wait_text

    omp = omp_command()
    assert invocation() == omp
    assert f'{omp} team launch 3 "<task>"' in status_text({"teams": [], "monitor": None})
    r = {"team": "t", "event": "timeout", "waitedSeconds": 1.0, "moved": [],
         "messages": {"count": 0, "senders": []},
         "next": f"{omp} team wait t --since c1"}  # fmt: skip
    assert f"wait again: {omp} team wait t --since c1" in wait_text(r)
    bad = call_api(capsys, None, argv=["claim-task", "--json"])
    assert f"usage: {omp} team api" in bad.json["message"]
    from omp import modes
    from omp.errors import OmpError
    from omp.store.paths import StatePaths

    with pytest.raises(OmpError) as exc:
        modes.record_cycle(StatePaths(root), "pass")
    assert f"{omp} ultraqa start" in exc.value.message


@pytest.mark.slow  # a real process that prints a frame a second, killed after two
def test_watch_json_streams_one_object_per_line(root: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "omp", "team", "status", "t", "--watch", "--json"],
        cwd=root,
        env=env(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        frames = [json.loads(proc.stdout.readline()) for _ in range(2)]
    finally:
        proc.kill()
        proc.wait()
    assert [f["teams"][0]["team"] for f in frames] == ["t", "t"]
