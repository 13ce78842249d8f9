"""Issue 21, class 10: the stop hook's per-session memory files expire.

Every session id names two files under `.omp/state/hooks/` (`decisions-<id>.json`,
`session-<id>.json`). A write of either sweeps away those not written for a week; nothing else in
the directory is touched, and a planted link is removed as itself, never followed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from omp.stophook import memory
from omp.store.paths import StatePaths
from tests.helpers import REPO, child_env, run_omp

FIX = REPO / "tests" / "fixtures" / "hooks"
DAY = 86400.0


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    (p / ".git").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    return p


def _age(path: Path, days: float) -> None:
    t = time.time() - days * DAY
    os.utime(path, (t, t), follow_symlinks=False)


def _seed(proj: Path) -> tuple[Path, dict[str, float]]:
    """A hooks directory holding memory files of every age, and things that are not memory."""
    hooks = StatePaths(proj).hooks
    StatePaths(proj).ensure(hooks)
    ages = {
        "decisions-old.json": 8,
        "session-old.json": 30,
        "decisions-week.json": 6.9,
        "session-recent.json": 0.01,
        "hook.log": 400,
        "lock": 400,
        "notes.txt": 400,
        "session-notes.txt": 400,  # not a memory file name (no .json)
    }
    for name, days in ages.items():
        (hooks / name).write_text("{}")
        os.chmod(hooks / name, 0o600)
        _age(hooks / name, days)
    outside = proj / "kept.json"
    outside.write_text('{"mine": true}')
    _age(outside, 400)
    (hooks / "session-link.json").symlink_to(outside)
    _age(hooks / "session-link.json", 400)
    (hooks / "decisions-dir.json").mkdir()
    _age(hooks / "decisions-dir.json", 400)
    return hooks, ages


def test_a_write_sweeps_memory_older_than_a_week_and_nothing_else(proj: Path) -> None:
    hooks, _ = _seed(proj)
    paths = StatePaths(proj)
    memory.save_session_info(paths, "new-session", blocks=1)
    assert sorted(os.listdir(hooks)) == [
        "decisions-dir.json",
        "decisions-week.json",
        "hook.log",
        "lock",
        "notes.txt",
        "session-new-session.json",
        "session-notes.txt",
        "session-recent.json",
    ]
    assert json.loads((proj / "kept.json").read_text()) == {"mine": True}  # the link's target


def test_remembering_a_decision_sweeps_too(proj: Path) -> None:
    hooks, _ = _seed(proj)
    memory.remember(StatePaths(proj), "s", "t1", {"action": "allow"}, now_ms=0)
    assert not (hooks / "decisions-old.json").exists() and not (hooks / "session-old.json").exists()
    assert (hooks / "decisions-s.json").exists()


def test_the_age_is_counted_from_the_last_write(proj: Path) -> None:
    paths = StatePaths(proj)
    memory.save_session_info(paths, "a", blocks=1)
    path = paths.hook_file("session", "a")
    now = os.lstat(path).st_mtime
    assert memory.sweep(paths, now=now + memory.MAX_AGE_S - 60) == 0
    memory.save_session_info(paths, "a", blocks=2)  # written again: young again
    later = os.lstat(path).st_mtime + memory.MAX_AGE_S + 60
    assert memory.sweep(paths, now=later) == 1 and not path.exists()


def test_the_hook_itself_sweeps_when_it_remembers_a_session(proj: Path) -> None:
    env = child_env(proj.parent / "home", OMP_NO_MONITOR="1")
    for k in ("COPILOT_CLI", "CODEX_HOME", "GEMINI_PROJECT_DIR", "GEMINI_SESSION_ID"):
        env.pop(k, None)
    assert run_omp("ralph", "start", "x", cwd=proj, env=env).rc == 0
    hooks, _ = _seed(proj)
    stop = json.loads((FIX / "claude-Stop.json").read_text())
    stop.update(cwd=str(proj), session_id="live", last_assistant_message="working")
    r = run_omp("hook", "stop", input=json.dumps(stop), cwd=proj, env=env)
    assert r.rc == 0 and json.loads(r.stdout)["decision"] == "block"
    names = set(os.listdir(hooks))
    assert {"decisions-live.json", "session-live.json", "session-recent.json"} <= names
    assert not names & {"decisions-old.json", "session-old.json", "session-link.json"}
    assert {"hook.log", "lock", "notes.txt", "decisions-dir.json"} <= names
