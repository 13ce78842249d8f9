"""A team's history with and without a store (`OMP_STORE`): `omp team events` shows the same
events, lines and cursors' behaviour whether they were written into `events.jsonl` or into the
store's `events` log, and with a store no `events.jsonl` is written at all."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.store.paths import StatePaths
from tests.helpers import REPO, child_env, isolate, make_project, make_team, poll, run_cli
from tests.store.redis_server import RedisServer, session_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from session_server(tmp_path_factory)


class Where:
    """One project and team `t` (2 workers, 2 tasks), its history in the files or in Redis."""

    def __init__(self, name: str, root: Path, env: dict[str, str]) -> None:
        self.name, self.root, self.env = name, root, env

    @property
    def events_file(self) -> Path:
        return StatePaths(self.root).team("t").events

    def omp(self, *args: str) -> Any:
        return run_cli(*args, cwd=self.root, env=self.env)

    def api(self, sub: str, **fields: Any) -> Any:
        payload = json.dumps({"team_name": "t", **fields})
        r = self.omp("team", "api", sub, "--input", payload, "--json")
        assert r.rc == 0, r
        return r.json

    def events(self, *extra: str) -> list[dict[str, Any]]:
        r = self.omp("team", "events", "t", "--json", *extra)
        assert r.rc == 0, r
        return [json.loads(line) for line in r.stdout.splitlines()]


def _where(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> Where:
    tmp_path.mkdir(parents=True, exist_ok=True)
    home = isolate(monkeypatch, tmp_path)
    extra = {"OMP_STORE": url} if url else {}
    for k, v in extra.items():
        monkeypatch.setenv(k, v)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 2, task="build it", no_limits=True)
    env = child_env(home, **extra)
    env["PYTHONPATH"] = str(REPO)
    return Where(name, root, env)


@pytest.fixture(params=["files", "redis"])
def where(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Where:
    url = ""
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("server")
        url = f"{server.url}?ns=t{secrets.token_hex(6)}"
    return _where(request.param, tmp_path, monkeypatch, url)


def _scenario(w: Where) -> None:
    """What `tests/team/test_history_cli.py` does to a team: a claim, mail to and from the
    leader and between workers, a completion, a loop started and ended."""
    token = w.api("claim-task", task_id="1", worker="worker-1")["claimToken"]
    w.api("send-message", **{"from": "worker-1", "to": "leader", "body": "started"})
    w.api("send-message", **{"from": "worker-1", "to": "worker-2", "body": "peer talk"})
    w.api("send-message", **{"from": "leader", "to": "worker-2", "body": "hello"})
    w.api(
        "transition-task-status",
        task_id="1",
        worker="worker-1",
        **{"from": "in_progress", "to": "completed", "claim_token": token, "result": "built"},
    )
    assert w.omp("ralph", "start", "go on").rc == 0
    assert w.omp("ralph", "cancel").rc == 0


_VARYING = ("at", "cursor", "id")  # times, positions and message ids differ run to run


def _same(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in _VARYING} for e in evs]


def test_the_same_history_from_the_files_and_from_the_store(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _where("files", tmp_path / "f", monkeypatch, "")
    _scenario(files)
    want = files.events()
    text = files.omp("team", "events", "t").stdout
    redis = _where("redis", tmp_path / "r", monkeypatch, f"{server.url}?ns=t{secrets.token_hex(6)}")
    _scenario(redis)
    got = redis.events()
    assert len(want) == 10 and _same(got) == _same(want)
    assert not redis.events_file.exists()  # nothing of it in the files
    assert files.events_file.exists()
    # a person's lines: the same but for the times, message ids and cursors

    def plain(out: str) -> list[str]:
        out = re.sub(r"^\d\d:\d\d:\d\d  ", "", out, flags=re.M)
        out = re.sub(r"message \S+ ", "message ID ", out)
        return out.splitlines()[:-1]  # the last line: the cursor

    assert plain(redis.omp("team", "events", "t").stdout) == plain(text)


def test_cursors_resume_and_refuse(where: Where) -> None:
    first = where.events()
    assert [(e["type"], e.get("taskId") or e.get("worker")) for e in first] == [
        ("task", "1"),
        ("task", "2"),
        ("member", "worker-1"),
        ("member", "worker-2"),
    ]
    assert len({e["cursor"] for e in first}) == 4
    _scenario(where)
    every = where.events()
    assert every[:4] == first
    for i, e in enumerate(every):  # each line's cursor resumes right after it
        assert where.events("--since", e["cursor"]) == every[i + 1 :]
    r = where.omp("team", "events", "t", "--since", every[-1]["cursor"])
    assert r.rc == 0 and r.stdout.startswith("no new events\ncursor " + every[-1]["cursor"])
    r = where.omp("team", "events", "t", "--since", "x:1")
    assert r.rc == 2 and "invalid_cursor" in r.stderr
    other = every[-1]["cursor"].replace("t:", "u:", 1)
    r = where.omp("team", "events", "t", "--since", other, "--json")
    assert r.rc == 2 and r.json["error"] == "invalid_cursor"
    assert where.events_file.exists() == (where.name == "files")


@pytest.mark.slow
def test_events_from_separate_processes_all_in_order(where: Where) -> None:
    """Four processes append at once: `omp team events --json` reads every event back, once,
    each process's in the order it wrote them, every line whole."""
    writers, count = 4, 150
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.record.history_writer",
                str(where.root),
                "t",
                f"w{i}",
                str(count),
            ],
            env=where.env,
            cwd=REPO,
        )
        for i in range(writers)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    notes = [e for e in where.events() if e["type"] == "note"]
    assert len(notes) == writers * count
    for i in range(writers):
        assert [e["seq"] for e in notes if e["writer"] == f"w{i}"] == list(range(count))
    half = notes[len(notes) // 2]["cursor"]
    assert where.events("--since", half) == notes[len(notes) // 2 + 1 :]
    if where.name == "redis":
        assert not where.events_file.exists()
    else:  # today's file: its header line, then one line per event
        lines = where.events_file.read_bytes().splitlines()
        assert json.loads(lines[0])["type"] == "log" and len(lines) == 1 + 4 + writers * count


@pytest.mark.slow
def test_follow_shows_events_as_they_come(where: Where) -> None:
    last = where.events()[-1]["cursor"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "omp", "team", "events", "t", "--follow", "--json", "--since", last],
        env=where.env,
        cwd=where.root,
        stdout=subprocess.PIPE,
        text=True,
    )
    seen: list[dict[str, Any]] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(json.loads(line))

    threading.Thread(target=reader, daemon=True).start()
    try:
        where.api("send-message", **{"from": "worker-2", "to": "leader", "body": "one"})
        where.api("send-message", **{"from": "leader", "to": "worker-1", "body": "two"})
        poll(lambda: len(seen) >= 2, what="two followed events")
        assert [(e["from"], e["to"]) for e in seen] == [
            ("worker-2", "leader"),
            ("leader", "worker-1"),
        ]
        assert seen == where.events("--since", last)
    finally:
        proc.kill()
        proc.wait()


def test_the_board_feed_reads_the_store(where: Where, monkeypatch: pytest.MonkeyPatch) -> None:
    from omp.board.feed import TeamFeed

    for k, v in where.env.items():
        if k.startswith("OMP_"):
            monkeypatch.setenv(k, v)
    feed = TeamFeed(StatePaths(where.root), "t", clock=lambda: 0.0)
    feed._tick_screens = lambda cfg, now: {}  # type: ignore[method-assign]  # no tmux here
    first = feed.tick()["events"]
    assert first["reset"] and [e["text"][10:] for e in first["events"]][:2] == [
        "task 1: new -> pending",
        "task 2: new -> pending",
    ]
    where.api("send-message", **{"from": "worker-1", "to": "leader", "body": "hi"})
    new = feed.tick()["events"]
    assert not new["reset"] and [e["type"] for e in new["events"]] == ["message"]
    assert "events" not in feed.tick()  # nothing new, nothing sent
