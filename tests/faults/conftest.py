"""The fault suite (killed processes, a full disk, unsafe paths, tmux failures, property tests)
is slow: every test here is marked `slow`, so `pytest -m "not slow"` is the quick loop."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.slow)
