"""tmux fixtures: a private server per test, never the user's; and how the suite itself runs."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Bytecode outside the checkout rather than none at all: an environment with
# PYTHONDONTWRITEBYTECODE=1 would otherwise have pytest rewrite and compile every test module and
# omp again on each run (measured: collection 17.6 s instead of 4.2 s). The children the tests
# start use the same directory (tests.helpers.child_env).
if sys.dont_write_bytecode:
    sys.dont_write_bytecode = False
    sys.pycache_prefix = sys.pycache_prefix or str(
        Path(tempfile.gettempdir()) / f"omp-tests-pycache-{os.getuid()}"
    )

import pytest
from hypothesis import settings

from omp.tmux import Tmux

# ---- where the suite's temporary files go -----------------------------------------------------
# omp fsyncs what it must not lose, so on a disk the tests wait on it: tmp_path on /tmp cost the
# quick loop about 6 s of its 40 (2 cores). pytest's own temp root moves to /dev/shm when that is
# a tmpfs this user may write and run programs in, with 2 GiB free there and in memory: still
# numbered per session, per user, the last 3 sessions kept (`tmp_path_retention_policy =
# "failed"` in pyproject.toml keeps only failed tests' directories, so the real agents' homes,
# 240 MB each, do not pile up in memory). `--basetemp`, PYTEST_DEBUG_TEMPROOT or a TMPDIR on
# tmpfs already win; otherwise the default stays. Paths stay short enough for tmux's sockets:
# "/dev/shm" is 4 bytes longer than "/tmp".
TMPFS_MIN_FREE = 2 << 30  # bytes: free in the tmpfs and in memory (tmpfs pages are memory)


def _fs_type(path: str) -> str:
    """The filesystem type of the mount that holds `path` ("" when /proc/mounts is unreadable)."""
    best, kind = "", ""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mount = parts[1].replace("\\040", " ")
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = mount, parts[2]
    except OSError:
        return ""
    return kind


def _mem_available() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tmpfs_temproot(candidate: str = "/dev/shm") -> str | None:
    """`candidate` when the suite's temp files should go there, else None (keep the default)."""
    if os.environ.get("PYTEST_DEBUG_TEMPROOT"):
        return None  # chosen by the person running the tests
    if _fs_type(os.path.realpath(tempfile.gettempdir())) == "tmpfs":
        return None  # the default is in memory already
    try:
        st = os.statvfs(candidate)
    except OSError:
        return None
    if _fs_type(os.path.realpath(candidate)) != "tmpfs":
        return None
    if st.f_flag & (os.ST_RDONLY | os.ST_NOEXEC):
        return None  # tests run scripts they write (fake agents, hooks)
    if not os.access(candidate, os.W_OK | os.X_OK):
        return None
    if min(st.f_bavail * st.f_frsize, _mem_available()) < TMPFS_MIN_FREE:
        return None
    mine = Path(candidate) / f"pytest-of-{_user()}"
    try:
        if mine.lstat().st_uid != os.getuid():
            return None  # someone else's: pytest would refuse it
    except FileNotFoundError:
        pass
    except OSError:
        return None
    return candidate


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (ImportError, KeyError, OSError):
        return "unknown"


_TEMPROOT = tmpfs_temproot()
if _TEMPROOT is not None:
    # pytest reads it when the first tmp_path is made; xdist's workers get their basetemp from
    # the controller, under this root.
    os.environ["PYTEST_DEBUG_TEMPROOT"] = _TEMPROOT


# ---- the quick loop on every core -------------------------------------------------------------
# `pytest -m "not slow"` over the whole suite runs in pytest-xdist workers, one per core: most of
# its time is waiting on files and child processes. An explicit -n / --dist / --tx, `-p no:xdist`,
# --pdb, -s, a part of the suite (a directory, a file, a test id), one core, or the full suite
# (CI: real agents, kept serial) leave pytest as it is.


def _quick_loop_workers(config: pytest.Config) -> int:
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return 0
    opt = config.option
    if getattr(opt, "numprocesses", 0) is not None or getattr(opt, "tx", None):
        return 0  # -n given (-n 0 included)
    if getattr(opt, "dist", "no") != "no" or getattr(opt, "distload", False):
        return 0
    if "not slow" not in (opt.markexpr or ""):
        return 0
    if opt.usepdb or getattr(opt, "trace", False) or opt.capture == "no" or opt.collectonly:
        return 0
    whole = {os.path.realpath(config.rootpath / p) for p in ("", *config.getini("testpaths"))}
    if not all(os.path.realpath(a) in whole for a in config.args):
        return 0  # a part of the suite: one process starts faster than two collect it all
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores if cores and cores >= 2 else 0


_ADDED_WORKERS = 0


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # Runs before xdist's own pytest_cmdline_main (a later-registered tryfirst hook runs first),
    # which turns numprocesses into workers.
    global _ADDED_WORKERS
    _ADDED_WORKERS = _quick_loop_workers(config)
    if _ADDED_WORKERS:
        config.option.numprocesses = _ADDED_WORKERS
        # an idle worker takes tests queued for the other: the durations are uneven (a few
        # tests of 0.5-1 s among 2,000 short ones); 2-3 s less than `--dist load` here
        config.option.dist = "worksteal"


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    if _TEMPROOT is not None:
        lines.append(f"omp: temporary files under {_TEMPROOT} (tmpfs)")
    if _ADDED_WORKERS:
        lines.append(f"omp: the quick loop in {_ADDED_WORKERS} workers (-n 0: one process)")
    return lines


# Property tests: the quick loop (`-m "not slow"`) tries fewer examples of each (tests that set
# their own `max_examples` keep it); CI, running everything, tries hypothesis's default 100.
settings.register_profile("quick", max_examples=20)


def pytest_configure(config: pytest.Config) -> None:
    if "not slow" in (config.getoption("markexpr") or ""):
        settings.load_profile("quick")


@pytest.fixture(autouse=True)
def _cwd_kept() -> Iterator[None]:
    """A test that leaves the process in another directory fails, by name: the next tests would
    run there, and once its tmp_path is removed (a passed test's is) every child started after
    it fails on a cwd that no longer exists."""
    before = os.getcwd()
    yield
    try:
        after = os.getcwd()
    except FileNotFoundError:
        after = "(a removed directory)"
    if after != before:
        os.chdir(before)
        pytest.fail(f"the test left the working directory in {after} (use monkeypatch.chdir)")


@pytest.fixture
def tmux_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """HOME pinned to a temp dir, SHELL=/bin/sh, and no $TMUX pointing at a live server."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", "/bin/sh")
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TMUX_PANE", raising=False)
    return home


@pytest.fixture
def omp_tmux(tmux_env: Path) -> Iterator[Tmux]:
    """An adapter bound to a fresh private server (`-L omp-test-<random>`, no config file).

    Teardown kills the server and checks that its socket is gone.
    """
    tmux = Tmux(socket_name=f"omp-test-{secrets.token_hex(4)}", config_file="/dev/null")
    yield tmux
    tmux.kill_server()
    assert not os.path.exists(tmux._socket_file())
