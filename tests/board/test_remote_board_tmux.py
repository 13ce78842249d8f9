"""The board with a worker on another host (a real sshd as the host, a Redis store): the worker is
on the board's status with its host, its screen and prompt are shown, and an answer sent through
the board's HTTP API (`POST /api/answer`, as the page sends it) is typed into its pane there; a
host that does not answer is refused with `host_unreachable`, nothing typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from omp.board.feed import TeamFeed
from omp.mail.answer import show
from omp.store.paths import StatePaths
from omp.tmux import ssh
from tests.board.test_backlog_routes import post
from tests.helpers import poll
from tests.mail.test_remote_answer_tmux import cleanup, prompt_team
from tests.remote_parts import MARKS, redis, sshd
from tests.store.redis_server import RedisServer
from tests.tmux.sshd_server import SshServer

pytestmark = MARKS
__all__ = ["redis", "sshd"]  # the shared fixtures


def test_a_remote_worker_is_on_the_board_and_answered_through_it(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = prompt_team(sshd, redis, tmp_path, monkeypatch)
    try:
        feed = TeamFeed(StatePaths(t.repo), "t")
        status = feed.tick()["status"]
        (row,) = status["workers"]
        assert (row["name"], row["host"], row["pane"], row["paneId"]) == (
            "worker-1", "build1", "alive", None,
        )  # fmt: skip
        prompt = show(t.cfg(), "worker-1")["prompt"]
        assert prompt is not None

        # its screen too, read over ssh in a thread of its own (never in the board's tick),
        # with the prompt the board offers to answer
        def screen() -> dict[str, Any] | None:
            got: dict[str, Any] | None = feed.tick().get("screen:worker-1")
            return got if got and got["pane"] == "alive" and got["lines"] else None

        shown = poll(screen, timeout=30, what="the remote worker's screen on the board")
        assert shown["prompt"] is not None and shown["prompt"]["promptId"] == prompt["promptId"]
        body = {"team": "t", "worker": "worker-1", "choice": "No", "prompt": prompt["promptId"]}

        sshd.stop()
        down = post(t.repo, "/api/answer", body)
        assert down.json["error"] == "host_unreachable", down.json
        sshd.start()
        assert t.typed() == ""

        done = post(t.repo, "/api/answer", body)
        assert done.status == 200, done.json
        assert done.json["ok"] is True and done.json["keys"] == ["Down", "Down", "Down", "Enter"]
        assert ssh.run(t.host, ["cat", f"{t.keys}.chosen"]).out == "4"
    finally:
        cleanup(t)
