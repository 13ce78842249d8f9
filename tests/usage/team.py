"""A headless team whose workers' agent sessions are the recorded ones of tests/fixtures/usage/:
each worker's session found as the stop hook records it (`session.json`) or from a real process
standing in for the pane's agent CLI (its cwd, HOME and open files, read from /proc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store.paths import StatePaths
from omp.usage.locate import claude_project, pi_project
from tests.helpers import make_project, make_team
from tests.usage import fixtures as fx

# A stand-in for an agent CLI: opens the files it is given and waits, in its cwd and HOME.
HOLDER = (
    "import sys, time\n"
    "fs = [open(p, 'rb') for p in sys.argv[1:]]\n"
    "print('up', flush=True)\n"
    "time.sleep(600)\n"
)


class Team:
    def __init__(self, root: Path, name: str = "t") -> None:
        self.root = root
        self.paths = StatePaths(root)
        self.name = name

    @property
    def cfg(self) -> TeamConfig:
        return team_config.load(self.paths.team(self.name))

    def set_agent(self, worker: str, agent: str) -> None:
        tp = self.paths.team(self.name)
        raw = team_config.load(tp).raw
        for w in raw["workers"]:
            if w["name"] == worker:
                w["agent"] = agent
        team_config.write(tp, raw)

    def update(self, **fields: Any) -> None:
        tp = self.paths.team(self.name)
        raw = team_config.load(tp).raw
        raw.update(fields)
        team_config.write(tp, raw)

    def session_json(self, worker: str, doc: dict[str, Any]) -> Path:
        """What the worker's stop hook records (branch `resume`'s `omp.stophook.sessions`)."""
        path = self.paths.team(self.name).session(worker)
        path.write_text(json.dumps({**doc, "updatedAt": "2026-12-01T00:00:00.000Z"}))
        return path

    def inbox(self, worker: str) -> Path:
        return self.paths.team(self.name).inbox(worker)


def new_team(tmp_path: Path, workers: int = 3, name: str = "t") -> Team:
    root = make_project(tmp_path / "proj")
    make_team(root, name, workers)
    return Team(root, name)


def worker_home(name: str, dest: Path) -> tuple[Path, Path, dict[str, Any]]:
    """The fixture's HOME copied to `dest`: (home, the main record, its first stop payload
    with the paths moved there)."""
    home = fx.copy_home(name, dest)
    main = home / fx.records(name)[0].relative_to(fx.home(name))
    stops = [
        json.loads(json.dumps(p).replace(f'"{fx.FAKE_HOME}/.', f'"{home}/.'))
        for p in fx.stops(name)
    ]
    return home, main, (stops[0] if stops else {})


def hook_record(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """session.json as the stop hook writes it from a payload."""
    return {
        "agent": fx.kind(name),
        "sessionId": payload.get("sessionId") or payload.get("session_id"),
        "transcriptPath": payload.get("transcriptPath") or payload.get("transcript_path"),
        "cwd": payload.get("cwd"),
    }


def move_cwd(name: str, home: Path, main: Path, cwd: Path, marker: str) -> Path:
    """For the CLIs found by cwd (Claude Code, Gemini, pi): move the record to the folder the
    CLI would use for `cwd`, and put `marker` (the worker's inbox path) in its first prompt, as
    omp's trigger line does. Returns the record's new path."""
    kind = fx.kind(name)
    text = main.read_text().replace(
        "Write the word usage", f"Read {marker} and follow it. Write the word usage"
    )
    assert marker in text, name
    if kind == "claude":
        folder = home / ".claude" / "projects" / claude_project(str(cwd))
        main.parent.rename(folder)
        new = folder / main.name
    elif kind == "pi":
        folder = home / ".pi" / "agent" / "sessions" / pi_project(str(cwd))
        main.parent.rename(folder)
        new = folder / main.name
    else:
        projects = home / ".gemini" / "projects.json"
        doc = json.loads(projects.read_text())
        doc["projects"] = {str(cwd): "proj"}
        projects.write_text(json.dumps(doc))
        new = main
    new.write_text(text)
    return new


@contextmanager
def agent_process(home: Path, cwd: Path, files: list[Path]) -> Iterator[int]:
    """A process standing in for the pane's agent CLI; yields its pid (as tmux's pane_pid)."""
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *map(str, files)],
        cwd=cwd,
        env={"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)


def touch_now(*paths: Path) -> None:
    """Written just now, as by a running CLI (the copies keep the recording's times)."""
    now = time.time() + 1
    for p in paths:
        os.utime(p, (now, now))
