"""Text a worker or peer wrote never controls the reader's terminal (issue 12, class 1).

A state tree is seeded with hostile text everywhere a worker can write it (task description,
result and owner, result.md, message bodies and senders, the team's agent field, the monitor's
status), then every human-form output of omp is printed over it and its bytes checked: no C0
control but newline and tab, no ESC (so no CSI, OSC, DCS, APC, SS2/SS3 of any kind), no C1, no
bidi control; what was taken out is shown escaped. JSON output keeps the text exact.
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

from omp.mail.mailbox import Mailbox, new_message
from omp.store import fs
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.textsafe import inline, visible
from tests.helpers import child_env, isolate, make_project, make_team

HOSTILE = (
    "ok\x1b]52;c;ZXZpbA==\x07"  # OSC 52: write the clipboard
    "\x1b[2J\x1b[1;1H"  # CSI: clear, cursor home
    "\x1bP1$r\x1b\\"  # DCS
    "\x1b_apc\x1b\\"  # APC
    "\x1bN\x1bO"  # SS2, SS3
    "\r\b\x00\x7f"  # CR, BS, NUL, DEL
    "\u009b31m\u009d0;t\u0007"  # C1 CSI, C1 OSC
    "\u202eevil\u2066x\u2069"  # bidi override, isolate
    "\nforged line\ttab"
)
# Every byte a terminal could act on, as it reaches the wire in UTF-8.
UNSAFE_BYTES = re.compile(
    rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]"
    rb"|\xd8\x9c|\xe2\x80[\x8e\x8f]"
)


def test_visible_escapes_every_kind_and_keeps_newline_and_tab() -> None:
    out = visible(HOSTILE)
    assert UNSAFE_BYTES.search(out.encode()) is None
    assert "\\x1b]52;c;" in out and "\\x9b31m" in out and "\\u202e" in out and "\\r" in out
    assert "\nforged line\ttab" in out
    assert "\n" not in inline(HOSTILE) and "\\nforged line\\ttab" in inline(HOSTILE)
    assert visible("plain text, ünïcode ✓\n") == "plain text, ünïcode ✓\n"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    tp = make_team(r, "t", 2, task="build " + HOSTILE)
    cfg_raw = json.loads(tp.config.read_text())
    cfg_raw["agent"] = HOSTILE
    fs.write_json_atomic(tp.config, cfg_raw)
    _, tok = tasks.claim(tp, "1", "worker-1")
    tasks.transition(
        tp, "1", worker="worker-1", from_status="in_progress", to_status="completed",
        token=tok, result=HOSTILE,
    )  # fmt: skip
    task2 = json.loads(tp.task("2").read_text())
    task2.update(owner=HOSTILE)
    fs.write_json_atomic(tp.task("2"), task2)
    StatePaths(r).ensure(tp.worker_dir("worker-2"))
    fs.write_json_atomic(tp.worker_dir("worker-2") / "x.json", {})
    (tp.worker_dir("worker-2") / "result.md").write_text("# result\n" + HOSTILE)
    Mailbox(tp, "leader").append_messages([new_message("worker-1", "leader", HOSTILE)])
    box = Mailbox(tp, "worker-1")
    box.append_messages([new_message("worker-2", "worker-1", HOSTILE)])
    raw = {**new_message("worker-2", "worker-1", "x"), "from": HOSTILE}
    with open(box.path, "ab") as f:
        f.write((json.dumps(raw) + "\n").encode())
    project = StatePaths(r)
    project.ensure(project.monitor)
    fs.write_json_atomic(
        project.monitor / "status.json",
        {"pid": HOSTILE, "reason": HOSTILE, "updatedAt": HOSTILE, "nudgesSent": HOSTILE},
    )
    return r


def _run(root: Path, *args: str) -> tuple[int, bytes, bytes]:
    env = child_env(Path(str(root.parent / "home")), OMP_NO_MONITOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "omp", *args], cwd=root, env=env, capture_output=True, timeout=60
    )
    return proc.returncode, proc.stdout, proc.stderr


def _api(sub: str, **payload: Any) -> list[str]:
    return ["team", "api", sub, "--input", json.dumps({"team_name": "t", **payload})]


HUMAN_COMMANDS: dict[str, list[str]] = {
    "status": ["team", "status"],
    "status-team": ["team", "status", "t"],
    "collect": ["team", "collect", "t"],
    "wait": ["team", "wait", "t", "--timeout", "5"],
    "list": ["team", "list"],
    "doctor": ["doctor", "--agent", "demo"],
    "mailbox-list": _api("mailbox-list", worker="worker-1"),
    "mailbox-list-leader": _api("mailbox-list", worker="leader"),
    "mailbox-read": _api("mailbox-read", worker="worker-1"),
    "list-tasks": _api("list-tasks"),
    "roster": _api("roster"),
    "error-line": _api("claim-task", task_id="9", worker="worker-1"),
    "send-to-unknown": _api("send-message", to="nobody", body="x", **{"from": "leader"}),
}


@pytest.mark.parametrize("name", sorted(HUMAN_COMMANDS))
def test_every_human_output_over_hostile_state_is_safe(root: Path, name: str) -> None:
    rc, out, err = _run(root, *HUMAN_COMMANDS[name])
    assert rc != 3, err
    for stream in (out, err):
        bad = UNSAFE_BYTES.search(stream)
        assert bad is None, f"{name}: raw {bad.group()!r} in {stream!r}"
    if name in ("status-team", "collect", "mailbox-list", "mailbox-read", "list-tasks"):
        assert b"\\x1b" in out  # shown escaped, not silently dropped


def test_status_rows_cannot_be_forged_by_a_newline(root: Path) -> None:
    _, out, _ = _run(root, "team", "status", "t")
    lines = out.decode().splitlines()
    assert not any(line.startswith("forged line") for line in lines)
    assert sum(1 for line in lines if "completed" in line) == 1


@pytest.mark.parametrize("name", ["status-team", "collect", "mailbox-list", "list-tasks"])
def test_json_keeps_the_text_exact_and_escaped(root: Path, name: str) -> None:
    rc, out, _ = _run(root, *HUMAN_COMMANDS[name], "--json")
    assert rc == 0
    assert UNSAFE_BYTES.search(out) is None
    assert HOSTILE in _strings(json.loads(out))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_watch_frames_and_launch_progress_are_safe(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from omp.cli.output import progress
    from omp.cli.team_text import status_text
    from omp.cli.watch import watch_loop
    from omp.views.status import status

    monkeypatch.chdir(root)
    with pytest.raises(SystemExit):
        watch_loop(lambda: status(StatePaths(root), "t"), status_text, interval=0, max_frames=2)
    progress(f"worker-1 said {HOSTILE}")
    out, err = capsys.readouterr()
    assert "\\x1b]52" in out and "\\x1b]52" in err
    for stream in (out, err):
        assert UNSAFE_BYTES.search(stream.encode()) is None


def test_write_text_is_the_one_door(monkeypatch: pytest.MonkeyPatch) -> None:
    from omp.cli import output

    buf = io.BytesIO()

    class Out:
        buffer = buf

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stdout", Out())
    output.write_text(HOSTILE)
    assert UNSAFE_BYTES.search(buf.getvalue()) is None


def test_wait_text_shows_a_hostile_result_on_one_row() -> None:
    from omp.cli.team_text import wait_text

    moved = [{"id": "1", "from": "in_progress", "to": "completed", "owner": HOSTILE}]
    moved[0]["result"] = HOSTILE
    r = {"team": "t", "event": "tasks", "messages": {"count": 0, "senders": []}, "moved": moved}
    out = wait_text(r)
    assert UNSAFE_BYTES.search(visible(out).encode()) is None
    assert len(out.splitlines()) == 1 and "\\x1b]52" in out
