"""`omp team events`: the team's history as JSON lines, resumable by byte offset, read-only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tasks import presence
from tests.helpers import (
    child_env,
    isolate,
    make_project,
    make_team,
    poll,
    run_cli,
    snapshot_tree,
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, task="build it", no_limits=True)
    return r


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home")


def omp(root: Path, env: dict[str, str], *args: str) -> Any:
    return run_cli(*args, cwd=root, env=env)


def api(root: Path, env: dict[str, str], sub: str, **fields: Any) -> Any:
    r = omp(root, env, "team", "api", sub, "--input", json.dumps({"team_name": "t", **fields}))
    assert r.rc == 0, r
    return r


def events(root: Path, env: dict[str, str], *extra: str) -> list[dict[str, Any]]:
    r = omp(root, env, "team", "events", "t", "--json", *extra)
    assert r.rc == 0, r
    return [json.loads(line) for line in r.stdout.splitlines()]


def short(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in evs:
        if e["type"] == "task":
            out.append(("task", e["taskId"], e["from"], e["to"]))
        elif e["type"] == "message":
            out.append(("message", e["from"], e["to"]))
        elif e["type"] == "member":
            out.append(("member", e["worker"], e["change"]))
        else:
            out.append((e["type"], e.get("mode"), e.get("change")))
    return out


def test_the_history_in_order_and_resumed_from_a_cursor(root: Path, env: dict[str, str]) -> None:
    first = events(root, env)
    assert short(first) == [
        ("task", "1", None, "pending"),
        ("task", "2", None, "pending"),
        ("member", "worker-1", "joined"),
        ("member", "worker-2", "joined"),
    ]
    cursor = first[-1]["cursor"]
    r = omp(
        root,
        env,
        "team",
        "api",
        "claim-task",
        "--input",
        json.dumps({"team_name": "t", "task_id": "1", "worker": "worker-1"}),
        "--json",
    )
    token = r.json["claimToken"]
    sent = omp(
        root,
        env,
        "team",
        "api",
        "send-message",
        "--input",
        json.dumps({"team_name": "t", "from": "worker-1", "to": "leader", "body": "started"}),
        "--json",
    ).json["messageId"]
    api(root, env, "send-message", **{"from": "worker-1", "to": "worker-2", "body": "peer talk"})
    api(root, env, "send-message", **{"from": "leader", "to": "worker-2", "body": "hello"})
    api(
        root,
        env,
        "transition-task-status",
        task_id="1",
        worker="worker-1",
        **{"from": "in_progress", "to": "completed", "claim_token": token, "result": "built"},
    )
    assert omp(root, env, "ralph", "start", "go on").rc == 0
    assert omp(root, env, "ralph", "cancel").rc == 0
    new = events(root, env, "--since", cursor)
    assert short(new) == [
        ("task", "1", "pending", "in_progress"),
        ("message", "worker-1", "leader"),  # peer-to-peer talk is not the leader's business
        ("message", "leader", "worker-2"),
        ("task", "1", "in_progress", "completed"),
        ("loop", "ralph", "started"),
        ("loop", "ralph", "ended"),
    ]
    assert new[1]["id"] == sent and "body" not in new[1]
    assert new[3]["owner"] == "worker-1" and new[3]["result"] == "built"
    # each event exactly once: from the last cursor, nothing; the whole log is the concatenation
    assert events(root, env, "--since", new[-1]["cursor"]) == []
    assert short(events(root, env)) == short(first) + short(new)
    # the cursor of every line resumes right after it
    assert short(events(root, env, "--since", new[2]["cursor"])) == short(new[3:])
    # shutdown: every worker leaves
    assert omp(root, env, "team", "shutdown", "t").rc == 0
    assert short(events(root, env, "--since", new[-1]["cursor"])) == [
        ("member", "worker-1", "left"),
        ("member", "worker-2", "left"),
    ]


def test_events_is_read_only_and_its_text_form(root: Path, env: dict[str, str]) -> None:
    before = snapshot_tree(root / ".omp")
    r = omp(root, env, "team", "events", "t")
    assert r.rc == 0, r
    lines = r.stdout.splitlines()
    assert lines[0].endswith("task 1: new -> pending") and lines[2].endswith("worker-1 joined")
    from omp.record import history

    tp = StatePaths(root).team("t")
    cursor = history.cursor_at(tp, (tp.dir / "events.jsonl").stat().st_size)
    assert cursor.startswith("t:") and cursor.count(":") == 2
    assert lines[-1].startswith(f"cursor {cursor}; next: ")
    assert lines[-1].endswith(f"team events t --since {cursor}")
    r = omp(root, env, "team", "events", "t", "--since", cursor)
    assert r.stdout.startswith("no new events\n")
    assert snapshot_tree(root / ".omp") == before


@pytest.mark.parametrize(
    "bad", ["x", "-1", "5", "99999999", "t:zz:0", "t:-:5", "t:00000000", "t::0", ":00000000:0"]
)
def test_a_bad_cursor_is_refused(root: Path, env: dict[str, str], bad: str) -> None:
    r = omp(root, env, "team", "events", "t", "--json", "--since", bad)
    assert r.rc == 2 and r.json["error"] == "invalid_cursor", r


def test_unknown_team(root: Path, env: dict[str, str]) -> None:
    r = omp(root, env, "team", "events", "nope", "--json")
    assert r.rc == 1 and r.json["error"] == "unknown_team"


def test_a_worker_going_offline_and_back(root: Path, env: dict[str, str]) -> None:
    cfg = team_config.load(StatePaths(root).team("t"))
    start = events(root, env)[-1]["cursor"]
    assert presence.observe_pane(cfg, "worker-2", now=100.0, alive=True, activity_at=100.0)
    assert presence.observe_pane(cfg, "worker-2", now=101.0, alive=False)
    assert not presence.observe_pane(cfg, "worker-2", now=102.0, alive=False)  # no change
    assert presence.observe_pane(cfg, "worker-2", now=103.0, alive=True, activity_at=103.0)
    assert short(events(root, env, "--since", start)) == [
        ("member", "worker-2", "offline"),
        ("member", "worker-2", "online"),
    ]


def test_a_deleted_team_is_never_recreated_by_a_late_writer(root: Path) -> None:
    from omp.record import history

    tp = StatePaths(root).team("t")
    os.rename(tp.dir, tp.dir.with_name(".gone"))
    history.member(tp, "worker-1", "joined")
    assert not tp.dir.exists()


def test_follow_prints_new_events_as_they_come(root: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "omp", "team", "events", "t", "--json", "--follow"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        poll(lambda: len(lines) >= 4, timeout=30, what="the existing events")
        api(root, env, "send-message", **{"from": "worker-2", "to": "leader", "body": "news"})
        poll(lambda: len(lines) >= 5, timeout=30, what="the new event")
        ev = json.loads(lines[4])
        assert (ev["type"], ev["from"], ev["to"]) == ("message", "worker-2", "leader")
    finally:
        proc.terminate()
        proc.wait(10)


def test_reading_a_block_at_a_time_misses_nothing_and_stops_before_a_torn_line(
    root: Path,
) -> None:
    from omp.record import history

    tp = StatePaths(root).team("t")
    for i in range(50):
        history.member(tp, "worker-1", "online", "x" * (i * 7))  # lines of many sizes
    log = Path(history.path(tp))
    with open(log, "ab") as f:
        f.write(b'{"type":"member","worker":"worker-2","chan')  # a writer still at work
    whole, end = history.read_since(tp, 0)
    assert end == log.stat().st_size - len(b'{"type":"member","worker":"worker-2","chan')
    for block in (1, 64, 300, 1 << 20):
        got: list[dict[str, Any]] = []
        last = 0
        for evs, cur in history.iter_since(tp, 0, block=block):
            got += evs
            last = cur
        assert got == whole and last == end, block
    assert len(whole) == 4 + 50 and whole[-1]["cursor"] == history.cursor_at(tp, end)


_PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write("
    "'HEAVY=' + ','.join(m for m in ('typer', 'libtmux', 'ulid') if m in sys.modules) + '\\n'))\n"
    "from omp.cli import main\n"
    "main(sys.argv[1:])\n"
)


@pytest.mark.parametrize(
    "args",
    [
        ["team", "events", "t", "--json"],
        ["team", "events", "t"],
        ["team", "events", "--since", "0", "t", "--json"],
    ],
)
def test_polling_events_never_loads_typer(root: Path, env: dict[str, str], args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY=\n" in proc.stderr, proc.stderr
    # the same output as the typer command
    via_typer = "import sys; from omp.cli.app import app; app(args=sys.argv[1:])"
    typer_run = subprocess.run(
        [sys.executable, "-c", via_typer, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout == typer_run.stdout and proc.stdout
    # help and anything unusual still go through typer
    r = omp(root, env, "team", "events", "--help")
    assert r.rc == 0 and "--follow" in r.stdout


def test_events_json_passes_lines_through_as_the_json_it_would_write(
    root: Path, env: dict[str, str]
) -> None:
    from omp.cli.output import dumps
    from omp.record import history

    tp = StatePaths(root).team("t")
    history.member(tp, "worker-1", "online", "é \u202e \x85 done")  # as omp writes it
    attention = {"worker": "worker-1", "change": "started", "what": "permission prompt", "seq": 1}
    history.record(tp, {"type": "attention", **attention})  # the monitor's line
    odd = [
        b'{"type": "note", "spaced": [1, 2.50]}',  # another writer's blanks and numbers
        b'{"type":"note","cursor":"mine"}',  # a key the output sets
        b"{}",
        b'{"type":"note","text":"\\ud800 alone"}',  # a lone surrogate, escaped
        b"not json",
    ]
    with open(history.path(tp), "ab") as f:
        f.write(b"\n".join(odd) + b"\n")
    for raw_surrogate in (False, True):  # a lone surrogate, escaped and then raw
        if raw_surrogate:
            with open(history.path(tp), "ab") as f:
                f.write(b'{"type":"note","raw":"\xed\xa0\x80"}\n')  # bytes UTF-8 cannot hold
        whole, _ = history.read_since(tp, 0)
        r = omp(root, env, "team", "events", "t", "--json")
        assert r.rc == 0, r
        lines = r.stdout.splitlines()
        assert len(lines) == len(whole)
        # the parse path (`--follow`'s too) shows a lone surrogate as "?", escaped or raw
        n = len(whole) - (2 if raw_surrogate else 1)
        assert [json.loads(x) for x in lines[:n]] == whole[:n]
        assert not any(0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in r.stdout)
        # omp's own lines come out exactly as encoding them again would write them
        ours = [i for i, ev in enumerate(whole) if ev.get("type") not in ("note", None)]
        assert [lines[i] for i in ours] == [dumps(whole[i]) for i in ours]
        # the log's header line names the log: skipped; every cursor names the team and the log
        assert Path(history.path(tp)).read_bytes().startswith(b'{"type":"log",')
        shown = [json.loads(x) for x in lines[:n]]
        assert not [e for e in shown if e.get("type") == "log"]
        (att,) = [e for e in whole if e.get("type") == "attention"]
        assert [e for e in shown if e.get("type") == "attention"] == [att]
        assert {k: att[k] for k in attention} == attention
        assert all(
            str(e["cursor"]).startswith(f"t:{whole[0]['cursor'].split(':')[1]}:") for e in shown
        )
        assert json.loads(lines[-1])["cursor"] == whole[-1]["cursor"]
