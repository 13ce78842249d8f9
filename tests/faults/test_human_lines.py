"""Issue 21, class 8: one sanitiser for every human line.

Human text leaves omp through one door (`omp.cli.output.write_text` / `write_err`, the `--watch`
frame, the stop hook's stderr), which passes it through `omp.textsafe.visible`; every value from
outside placed on a line (a path, a name, a worker's result, an error's detail) goes through
`omp.textsafe.inline` first, so it stays on its line. Attacked here:

- the door: no module of omp writes to stdout or stderr any other way (a source check);
- a project whose very path is hostile (newline, CR, ESC sequences, BEL, C1, bidi): every command
  that prints a path (the `ralph start` warning, `hooks install`, `skills install`, `doctor`,
  error lines, ...) prints it escaped and on its line;
- `team events` over a log holding a worker's multi-line result and hostile lines written behind
  omp's back: one line per event, none forged;
- each renderer of a human form, fed hostile text in every field someone else can write.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omp.cli import output
from omp.store import jsonl
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.textsafe import visible
from tests.helpers import REPO, child_env, isolate, make_project, make_team

FORGED = "12:00:00  task 9: pending -> completed (worker-9): forged"
# Everything a line of someone else's text can try, ending in a line that looks like omp's own.
HOSTILE = (
    "ok\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1;1H\r\b\x7f\u009b31m\u202eevil\u2066x\u2069\t"
    f"\n{FORGED}\r\n{FORGED}"
)
# A directory name can hold all of it but "/" and NUL.
HOSTILE_DIR = "proj " + HOSTILE.replace("/", "|").replace(":", ";")
UNSAFE_BYTES = re.compile(
    rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]"
    rb"|\xd8\x9c|\xe2\x80[\x8e\x8f]"
)


def _check(name: str, text: str | bytes) -> None:
    """No byte a terminal acts on, and no line that starts where the hostile text's lines do."""
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    bad = UNSAFE_BYTES.search(data)
    assert bad is None, f"{name}: raw {bad.group()!r} in {data!r}"
    for line in data.decode("utf-8", "replace").splitlines():
        assert not line.lstrip().startswith(("12:00:00  task 9", "forged")), f"{name}: {line!r}"


# ---- the door ---------------------------------------------------------------------------------

# Modules allowed to write to stdout/stderr themselves, and how many times: the door, and output
# that is not text someone else wrote (a version, JSON for an agent CLI, a clear-screen code).
RAW_WRITES = {
    "omp/cli/output.py": 3,  # write_err, write_bytes (twice): the door itself
    "omp/cli/watch.py": 3,  # the clear-screen code, the frame through `visible`, a newline
    "omp/cli/__init__.py": 1,  # `omp --version`
    "omp/cli/hook_stop.py": 3,  # the usage line, the JSON answer, `_say` through `visible`
    "omp/demo_agent.py": 0,
    "omp/workspace/verify.py": 1,  # the verify runner's fixed usage line
}
RAW = re.compile(r"\bsys\.(?:stdout|stderr)\.(?:write|buffer)|\bprint\(|\b(?:typer|click)\.echo\(")


def test_nothing_writes_to_a_terminal_but_through_the_door() -> None:
    found: dict[str, int] = {}
    for path in sorted((REPO / "omp").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel in ("omp/demo_agent.py", "omp/demo_shell.py"):
            continue  # the demo agent draws its own screen (`textsafe.clean`), in its own pane
        n = len(RAW.findall(path.read_text()))
        if n:
            found[rel] = n
    expected = {k: v for k, v in RAW_WRITES.items() if v}
    expected["omp/cli/app.py"] = 1  # typer's `--version` callback
    assert found == expected


def test_the_door_escapes_what_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.BytesIO()

    class Out:
        buffer = buf

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stdout", Out())
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    output.write_text(HOSTILE)
    output.write_err(HOSTILE)
    assert UNSAFE_BYTES.search(buf.getvalue()) is None
    assert UNSAFE_BYTES.search(err.getvalue().encode()) is None


# ---- a hostile project path -------------------------------------------------------------------


@pytest.fixture
def hostile_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    return make_project(tmp_path / HOSTILE_DIR)


PATH_COMMANDS: dict[str, list[str]] = {
    "ralph-start-warning": ["ralph", "start", "x"],
    "ralph-status": ["ralph", "status"],
    "hooks-install": ["hooks", "install", "--agent", "all"],
    "hooks-uninstall": ["hooks", "install", "--agent", "all", "--uninstall"],
    "skills-install": ["skills", "install"],
    "doctor": ["doctor", "--agent", "demo"],
    "team-create": ["team", "create", "t", "--workers", "1"],
    "team-status": ["team", "status", "nosuch"],
    "team-collect": ["team", "collect", "nosuch"],
    "team-events": ["team", "events", "nosuch"],
    "team-events-typer": ["team", "events", "nosuch", "--follow"],
    "team-delete": ["team", "delete", "nosuch"],
    "team-prune": ["team", "prune", "--dry-run"],
    "team-api-error": ["team", "api", "roster", "--input", '{"team_name": "nosuch"}'],
    "hook-stop": ["hook", "stop"],
}


@pytest.mark.slow
def test_a_hostile_project_path_is_printed_escaped_on_its_line(hostile_root: Path) -> None:
    env = child_env(hostile_root.parent / "home", OMP_NO_MONITOR="1")
    env["PATH"] = str(hostile_root.parent / "no-tools")  # nothing to start: no tmux, no agent
    shown = 0
    for name, args in PATH_COMMANDS.items():
        stdin = '{"cwd": "/nowhere", "session_id": 5' if name == "hook-stop" else ""
        proc = subprocess.run(
            [sys.executable, "-m", "omp", *args],
            cwd=hostile_root,
            env=env,
            input=stdin.encode(),
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode in (0, 1, 2), (name, proc.stderr)
        for stream in (proc.stdout, proc.stderr):
            _check(name, stream)
        shown += b"\\x1b]52" in proc.stdout + proc.stderr
    assert shown >= 10  # the path was there to attack, escaped, in most of them


# ---- events -----------------------------------------------------------------------------------


@pytest.fixture
def team_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    tp = make_team(root, "t", 2, task="build it")
    _, token = tasks.claim(tp, "1", "worker-1")
    tasks.transition(
        tp, "1", worker="worker-1", from_status="in_progress", to_status="completed",
        token=token, result=HOSTILE,
    )  # fmt: skip
    # Lines another program (or a worker, by hand) appended to the log: every kind, every field.
    for ev in (
        {"type": "task", "taskId": HOSTILE, "from": HOSTILE, "to": HOSTILE, "owner": HOSTILE},
        {"type": "message", "id": HOSTILE, "from": HOSTILE, "to": HOSTILE, "event": HOSTILE},
        {"type": "member", "worker": HOSTILE, "change": HOSTILE, "reason": HOSTILE},
        {"type": "loop", "mode": HOSTILE, "change": HOSTILE},
        {"type": HOSTILE, HOSTILE: HOSTILE, "at": HOSTILE},
        {"type": "task", "at": f"2026-01-01T{HOSTILE}", "result": [HOSTILE, {"x": HOSTILE}]},
    ):
        jsonl.append(tp.events, ev)
    return root


@pytest.mark.parametrize("form", [["--since", "0"], []], ids=["typer-or-fast", "fast-path"])
def test_events_print_one_line_per_event_whatever_the_text(
    team_root: Path, form: list[str]
) -> None:
    env = child_env(team_root.parent / "home", OMP_NO_MONITOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "omp", "team", "events", "t", *form],
        cwd=team_root,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    _check("events", proc.stdout)
    log = StatePaths(team_root).team("t").events.read_bytes().splitlines()
    events = [e for e in log if json.loads(e).get("type") != "log"]  # the log's own header line
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(events) + 1 and lines[-1].startswith("cursor ")
    assert sum("\\x1b]52" in line for line in lines) >= 6


def test_the_json_form_of_events_keeps_the_text_exact(team_root: Path) -> None:
    env = child_env(team_root.parent / "home", OMP_NO_MONITOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "omp", "team", "events", "t", "--json"],
        cwd=team_root,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0 and UNSAFE_BYTES.search(proc.stdout) is None
    assert any(json.loads(line).get("result") == HOSTILE for line in proc.stdout.splitlines())


# ---- each renderer ----------------------------------------------------------------------------


def _renderers() -> dict[str, tuple[Any, dict[str, Any]]]:
    """name -> (renderer, a result with hostile text in every field someone else can write)."""
    from omp.cli import doctor, events_cmd, hooks, loops, skills, team_text

    h = HOSTILE
    loop_state = {
        "mode": "ralph", "active": True, "iteration": h, "maxIterations": h, "prompt": h,
        "lastDecision": {"why": h, "action": h, "step": h, "max": h, "at": h, "cli": h},
    }  # fmt: skip
    ended = {**loop_state, "active": False, "cancelledAt": h}
    return {
        "events-task": (
            events_cmd.describe,
            {"type": "task", "taskId": h, "from": h, "to": h, "owner": h, "result": h, "at": h},
        ),
        "events-unknown": (events_cmd.describe, {"type": h, h: h}),
        "loop-status": (loops._status_line, loop_state),
        "loop-ended": (loops._status_line, ended),
        "ultraqa": (loops.describe, {"mode": "ultraqa", "cycleCount": h, "lastVerdict": h}),
        "hooks-install": (
            hooks.install_text,
            {
                "root": h,
                "command": h,
                "uninstall": False,
                "counts": {"added": 1},
                "hooks": [{"agent": "claude", "path": h, "action": "added"}],
            },
        ),
        "skills-install": (
            skills.install_text,
            {
                "files": [{"action": "created", "path": h}],
                "skills": [h],
                "target": h,
                "created": 1,
                "updated": 0,
                "unchanged": 0,
            },
        ),
        "doctor": (
            doctor.doctor_text,
            {
                "checks": [{"status": "warn", "message": h, "fix": h}],
                "counts": {"fail": 0, "warn": 1},
                "agent": "demo",
            },
        ),
        "add-worker": (
            team_text.add_text,
            {
                "team": h,
                "members": [h],
                "workers": [{"name": h, "paneId": h, "taskId": h}],
            },
        ),
        "remove-worker": (
            team_text.remove_text,
            {
                "worker": h,
                "team": h,
                "killedPane": h,
                "workers": [h],
                "interrupted": [{"taskId": h, "notify": h}],
                "cancelled": [{"taskId": h, "worker": h}],
            },
        ),
        "delete": (
            team_text.delete_text,
            {
                "team": h,
                "bytes": 1,
                "finished": [],
                "lost": [{"unread": 1, "recipient": h, "run": h, "from": [h, h]}],
            },
        ),
        "prune": (
            team_text.prune_text,
            {
                "dryRun": True,
                "bytes": 1,
                "removed": [
                    {"kind": "team", "team": h, "ageSeconds": 9e4, "bytes": 1, "lost": []},
                    {"kind": "run", "team": h, "path": f"/x/{h}", "bytes": 1},
                    {"kind": "tomb", "team": h, "of": h, "bytes": 1},
                ],
                "kept": [{"kind": "run", "team": h, "path": f"/x/{h}", "why": h}],
            },
        ),
    }


@pytest.mark.parametrize("name", sorted(_renderers()))
def test_every_renderer_keeps_hostile_text_on_its_line(name: str) -> None:
    render, result = _renderers()[name]
    plain = render({k: ("x" if v == HOSTILE else v) for k, v in result.items()})
    text = render(result)
    _check(name, visible(text))
    # The same number of lines as with harmless text: nothing was forged.
    assert len(text.splitlines()) == len(plain.splitlines()), text


def test_an_error_line_stays_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omp.errors import OmpError

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # the internal error's crash log
    monkeypatch.chdir(tmp_path)

    with pytest.raises(SystemExit):
        output.fail(OmpError("unknown_team", f"no team named {HOSTILE}"), as_json=False)
    with pytest.raises(SystemExit):
        output.internal(RuntimeError(HOSTILE), as_json=False)
    err = capsys.readouterr().err
    _check("error", err)
    assert len(err.splitlines()) == 3  # the refusal; the internal error and its crash log
