"""Every reader of agents' records is bounded (issue 28, findings 3 and 4).

A worker names its own transcript (`omp hook stop`), so a record may be a 3 GB sparse file whose
second line never ends, a one-document record of that size, or a line nested 200,000 deep.
`status`, `usage` and the monitor read such records within 100 MB and a few seconds, say what
they left out (`longLines`, `unreadBytes`, `too_large`), never crash, and the monitor ends
promptly on SIGTERM in the middle of one.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.monitor import ctl
from omp.record import config as team_config
from omp.store import fs
from omp.store.paths import StatePaths
from tests.faults.monitor_child import FAKE_SERVER
from tests.helpers import child_env, isolate, make_project, make_team, poll

pytestmark = pytest.mark.slow  # gigabyte-sized (sparse) files, subprocesses measured

GIB3 = 3 << 30
MIB = 1 << 20
RSS_LIMIT = 100 * MIB
SECONDS = 10.0  # "a few seconds", with room for a loaded machine (each read's budget is 2 s)
CHILD = Path(__file__).resolve().parents[1] / "faults" / "monitor_child.py"
FIRST = {"type": "user", "sessionId": "s-1", "timestamp": "2026-01-01T00:00:00Z", "message": {}}


def _usage_line(msg_id: str, n: int) -> bytes:
    rec = {
        "type": "assistant",
        "sessionId": "s-1",
        "timestamp": "2026-01-01T00:00:01Z",
        "message": {"id": msg_id, "model": "m", "usage": {"input_tokens": n, "output_tokens": 1}},
    }
    return json.dumps(rec).encode() + b"\n"


def sparse_record(path: Path) -> Path:
    """A Claude transcript: one genuine line, then 3 GB of a second line that never ends."""
    with path.open("wb") as f:
        f.write(json.dumps(FIRST).encode() + b"\n" + _usage_line("a", 10))
        f.truncate(GIB3)
    return path


def deep_record(path: Path) -> Path:
    """A Claude transcript whose usage line is nested 200,000 deep, then a genuine one."""
    deep = b'{"type":"assistant","message":{"usage":' + b"[" * 200_000 + b"]" * 200_000 + b"}}\n"
    path.write_bytes(json.dumps(FIRST).encode() + b"\n" + deep + _usage_line("b", 7))
    return path


def huge_number_record(path: Path) -> Path:
    path.write_bytes(json.dumps(FIRST).encode() + b"\n" + _usage_line("c", 10**30))
    return path


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any]]:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    monkeypatch.setenv("OMP_ROOT", str(root))
    tp = make_team(root, "t", 3, task="work")
    raw = team_config.load(tp).raw
    raw["agent"] = "claude"
    team_config.write(tp, raw)
    records = {
        "worker-1": sparse_record(tmp_path / "sparse.jsonl"),
        "worker-2": deep_record(tmp_path / "deep.jsonl"),
        "worker-3": huge_number_record(tmp_path / "huge.jsonl"),
    }
    for w, rec in records.items():
        session = {"agent": "claude", "sessionId": f"s-{w}", "transcriptPath": str(rec)}
        fs.write_json_atomic(tp.session(w), session)
    yield root, tp


def measured(argv: list[str], cwd: Path) -> dict[str, Any]:
    """Run `argv` under a wrapper that reports its exit, output, seconds and peak RSS (bytes:
    `ru_maxrss` of the child, KiB on Linux)."""
    wrapper = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.monotonic()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "took = time.monotonic() - t\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr,"
        " 'seconds': took, 'rss': rss}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, *argv],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.mark.parametrize("command", ["status", "usage"])
def test_status_and_usage_read_hostile_records_within_100_mb_and_seconds(
    team: tuple[Path, Any], command: str
) -> None:
    root, _tp = team
    got = measured([sys.executable, "-m", "omp", "team", command, "t", "--json"], root)
    print(f"{command}: {got['seconds']:.2f} s, peak RSS {got['rss'] / MIB:.1f} MiB")
    assert got["rc"] == 0, got["err"]
    assert got["rss"] < RSS_LIMIT, f"{command}: peak RSS {got['rss'] / MIB:.0f} MiB"
    assert got["seconds"] < SECONDS, f"{command}: {got['seconds']:.1f} s"
    doc = json.loads(got["out"])
    if command == "usage":
        rows = {m["name"]: m for m in doc["members"]}
    else:
        rows = {w["name"]: w["usage"] for w in doc["teams"][0]["workers"]}
    sparse, deep, huge = rows["worker-1"], rows["worker-2"], rows["worker-3"]
    assert sparse["calls"] == 1 and sparse["input"] == 10  # the genuine line before it
    assert sparse.get("unreadBytes", 0) > 0  # the read stopped within its allowance
    assert deep["calls"] == 1 and deep["input"] == 7  # the deep line skipped, not a crash
    assert huge["input"] == 2**53 - 1 and huge["total"] == 2**53 - 1  # what JSON readers hold
    if command == "usage":
        assert deep["skippedLines"] == 1


def _live(root: Path) -> None:
    """Make team t look alive to the monitor's fake tmux (tests/faults/monitor_child.py)."""
    tp = StatePaths(root).team("t")
    raw = team_config.load(tp).raw
    for i, w in enumerate(raw["workers"], 1):
        w["paneId"] = f"%{i}"
    raw.update(
        launchToken="lt-hostile",
        tmuxIdentity={
            "socketPath": FAKE_SERVER["socket_path"],
            "serverPid": FAKE_SERVER["server_pid"],
            "serverStartedAt": FAKE_SERVER["server_started_at"],
            "sessionId": "$1",
            "windowId": "@1",
        },
    )
    team_config.write(tp, raw)


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads the monitor's /proc status")
def test_the_monitor_reads_them_within_its_scan_budget_and_ends_at_once_on_sigterm(
    team: tuple[Path, Any], tmp_path: Path
) -> None:
    root, _tp = team
    _live(root)
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(r: Path, token: str) -> int:
        argv = [sys.executable, str(CHILD), "--root", str(r), "--token", token,
                "--log", str(tmp_path / "typed.jsonl")]  # fmt: skip
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                env=child_env())  # fmt: skip
        procs.append(proc)
        return proc.pid

    res = ctl.ensure_monitor(root, spawn=spawn)
    assert res["started"] is True, res
    [proc] = procs
    try:
        index = StatePaths(root).monitor_usage_index("t")

        def counted_past(n: int) -> bool:
            doc = fs.read_json(index) if index.exists() else None
            if not isinstance(doc, dict):
                return False
            recs = doc["members"]["worker-1"]["records"]
            return bool(recs) and int(recs[0]["state"]["offset"]) > n

        poll(lambda: counted_past(0), 60, "the monitor's first scan to read worker-1's record")
        first = json.loads(index.read_text())["members"]["worker-1"]["records"][0]["state"]
        poll(lambda: counted_past(int(first["offset"])), 60, "a later scan to read on")
        # each scan read a bounded share: far from the 3 GB in one go
        assert int(first["offset"]) <= 512 * MIB
        assert first["memo"].get("longLine") is True and first["long_lines"] == 1
        assert _peak_rss(proc.pid) < RSS_LIMIT, f"{_peak_rss(proc.pid) / MIB:.0f} MiB"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # mid-way through the 3 GB line
        proc.wait(timeout=30)
        assert time.monotonic() - t0 < 5.0
        assert proc.returncode == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    _ = resource  # the RSS of the views is measured by `measured`
