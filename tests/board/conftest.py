"""The board's browser tests: the board as a person starts it (`omp team board` in a child
process, its URL read from its first line) and Debian's chromium driven by Playwright.

Playwright's own browser downloads are never used (`executable_path` is the system chromium).
A test that fails saves a screenshot of the page into its temporary directory (kept for failed
tests) and names it in the report.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import child_env

CHROMIUM = os.environ.get("OMP_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome: Any = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@contextlib.contextmanager
def board(root: Path, env: dict[str, str], team: str | None = None) -> Iterator[str]:
    """`omp team board [TEAM]` in `root`, running; yields the URL it printed first."""
    args = [sys.executable, "-m", "omp", "team", "board", *([team] if team else [])]
    proc = subprocess.Popen(
        args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        why = proc.stderr.read() if not url and proc.stderr is not None else ""
        assert url.startswith("http://127.0.0.1:"), (url, why)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()


def board_env(home: Path, **extra: str) -> dict[str, str]:
    return child_env(home, OMP_NO_MONITOR="1", **extra)


@pytest.fixture
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    pytest.importorskip("starlette")
    if not os.path.exists(CHROMIUM) and shutil.which("chromium") is None:
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh page (1280x900); on failure, a screenshot in the test's kept temp directory."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors
    yield pg
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        shot = tmp_path / f"{request.node.name}.png"
        with contextlib.suppress(Exception):
            pg.screenshot(path=str(shot), full_page=True)
            request.node.add_report_section("call", "screenshot", str(shot))
            sys.stderr.write(f"\nscreenshot of the failed page: {shot}\n")
    context.close()
    assert errors == [], f"the page raised: {errors}"
