"""Loop breaking, counted in the files: duplicate, rate_limited, mailbox_full, and their config."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import OmpRun, call_api, isolate, make_project, make_team, snapshot_tree


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 3)
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def send(capsys: pytest.CaptureFixture[str], frm: str, to: str, body: str, **kw: Any) -> OmpRun:
    payload = {"team_name": "t", "from": frm, "to": to, "body": body, **kw}
    return call_api(capsys, "send-message", payload)


def config(root: Path, text: str) -> None:
    (root / ".omp" / "config.toml").write_text(text)


def test_the_same_body_twice_within_10s_is_a_duplicate(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = send(capsys, "worker-1", "worker-2", "are you there?")
    assert first.rc == 0
    before = snapshot_tree(root / ".omp")
    again = send(capsys, "worker-1", "worker-2", "are you there?")
    assert again.rc == 1 and again.json["error"] == "duplicate"
    assert "10s" in again.json["message"] and again.json["messageId"] == first.json["messageId"]
    assert snapshot_tree(root / ".omp") == before  # a refusal writes nothing
    # another recipient, another sender, or another body is not a duplicate
    assert send(capsys, "worker-1", "worker-3", "are you there?").rc == 0
    assert send(capsys, "worker-3", "worker-2", "are you there?").rc == 0
    assert send(capsys, "worker-1", "worker-2", "are you there now?").rc == 0


def test_a_duplicate_window_passes(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert send(capsys, "worker-1", "worker-2", "ping").rc == 0
    later = time.time() + 11
    monkeypatch.setattr(time, "time", lambda: later)
    assert send(capsys, "worker-1", "worker-2", "ping").rc == 0


def test_more_than_8_messages_in_30s_are_rate_limited(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(8):
        assert send(capsys, "worker-1", "leader", f"update {i}").rc == 0
    r = send(capsys, "worker-1", "leader", "update 8")
    assert r.rc == 1 and r.json["error"] == "rate_limited"
    assert r.json["limit"] == 8 and 1 <= r.json["retry_after_seconds"] <= 31
    assert "limit 8" in r.json["message"] and "wait" in r.json["message"]
    # the pair is limited, not the sender or the recipient
    assert send(capsys, "worker-1", "worker-2", "hello").rc == 0
    assert send(capsys, "worker-2", "leader", "hello").rc == 0


def test_a_full_mailbox_refuses_until_it_is_read(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config(root, "[limits]\nmailbox_max_unread = 3\nrate_max_messages = 100\n")
    for i in range(3):
        assert send(capsys, f"worker-{i % 2 + 1}", "worker-3", f"note {i}").rc == 0
    r = send(capsys, "leader", "worker-3", "one more")
    assert r.rc == 1 and r.json["error"] == "mailbox_full"
    assert r.json["limit"] == 3 and r.json["unread"] == 3
    read = call_api(capsys, "mailbox-read", {"team_name": "t", "worker": "worker-3"})
    assert len(read.json["messages"]) == 3
    assert send(capsys, "leader", "worker-3", "one more").rc == 0


def test_limits_come_from_the_project_config(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config(root, "[limits]\nrate_max_messages = 2\nduplicate_window_seconds = 0\n")
    assert send(capsys, "leader", "worker-1", "a").rc == 0
    assert send(capsys, "leader", "worker-1", "a").rc == 0  # duplicates allowed by config
    r = send(capsys, "leader", "worker-1", "b")
    assert r.json["error"] == "rate_limited" and r.json["limit"] == 2


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[limits]\nrate_max = 3\n", "unknown limit 'rate_max'"),
        ("[limits]\nrate_max_messages = -1\n", "must be a number >= 0"),
        ("[limits]\nrate_max_messages = true\n", "must be a number >= 0"),
        ("limits = 3\n", "[limits] must be a table"),
        ("[limits\n", "config.toml"),
    ],
)
def test_a_bad_config_is_refused_clearly_and_nothing_is_sent(
    root: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    config(root, text)
    before = snapshot_tree(root / ".omp")
    r = send(capsys, "leader", "worker-1", "hi")
    assert r.rc == 1 and r.json["error"] == "invalid_config"
    assert needle in r.json["message"]
    assert snapshot_tree(root / ".omp") == before


def test_a_zero_second_window_is_off_even_within_one_millisecond(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stamps are whole milliseconds: two sends in the same one must not be a duplicate (or a
    rate) when the config sets those windows to 0 s."""
    config(root, "[limits]\nduplicate_window_seconds = 0\nrate_window_seconds = 0\n")
    frozen = 1_796_000_000.1234
    monkeypatch.setattr(time, "time", lambda: frozen)
    for _ in range(10):
        assert send(capsys, "worker-1", "worker-2", "same body").rc == 0
