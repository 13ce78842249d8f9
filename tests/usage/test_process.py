"""What /proc shows of a real process tree (a child this test starts and ends), and a Copilot-
like session lock found through it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.usage.locate import from_process
from omp.usage.process import describe, tree
from tests.helpers import poll

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

# The child opens its file, then starts a grandchild and waits: a pane's shell running the CLI.
CHILD = """
import subprocess, sys, time
f = open(sys.argv[1], "a")
sub = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(sub.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture
def child(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    """A process holding `<home>/.copilot/session-state/s1/inuse.<pid>.hold` open, in cwd
    `tmp_path/proj`, with HOME `tmp_path/home`; and its own child's pid."""
    home = tmp_path / "home"
    state = home / ".copilot" / "session-state" / "s1"
    state.mkdir(parents=True)
    (tmp_path / "proj").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(state / "inuse.hold")],
        cwd=tmp_path / "proj",
        env={
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "OMP_WORKER": "worker-1",
            "SOME_API_KEY": "secret",
        },
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        yield proc, grandchild, home
    finally:
        proc.kill()
        proc.wait(10)
        subprocess.run(["kill", str(grandchild)], check=False)


def test_a_process_tree_shows_cwd_env_start_and_open_files(
    child: tuple[subprocess.Popen[str], int, Path], tmp_path: Path
) -> None:
    proc, grandchild, home = child
    before = time.time()
    procs = tree(proc.pid)
    assert [p.pid for p in procs] == [proc.pid, grandchild]
    top = procs[0]
    assert top.cwd == tmp_path / "proj"
    assert top.env == {"OMP_WORKER": "worker-1", "HOME": str(home)}  # no other variable
    assert top.started is not None and before - 60 < top.started <= before + 1
    hold = str(home / ".copilot" / "session-state" / "s1" / "inuse.hold")
    assert hold in top.open_files
    assert describe(2**22 + 12345) is None  # no such pid
    assert tree(2**22 + 12345) == []


def test_a_copilot_session_lock_held_by_the_process_names_its_record(
    child: tuple[subprocess.Popen[str], int, Path],
) -> None:
    proc, _, home = child
    # Copilot's lock is named for its pid: `inuse.<pid>.hold`; rename ours to that shape
    state = home / ".copilot" / "session-state" / "s1"
    (state / "inuse.hold").rename(state / f"inuse.{proc.pid}.hold")
    got = poll(lambda: from_process("copilot", tree(proc.pid)).path, 10, "the lock seen")
    assert got == state / "events.jsonl"
