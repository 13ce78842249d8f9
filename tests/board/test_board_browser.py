"""The board in a real browser (Debian's chromium, driven by Playwright), against teams on real
tmux (a private server per test): the page loads for a running demo team, a task that moves
shows without a reload, a line comment reaches the worker's mailbox, a permission prompt is
answered from the page, a request without the token is refused, a worker's hostile text shows as
text, and the page works by keyboard with every control labelled."""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from omp.mail.mailbox import Mailbox
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.tmux import Tmux
from tests.board.conftest import board, board_env
from tests.helpers import FIXTURES, poll, run_api, run_omp
from tests.monitor.test_monitor_tmux import make_live_team

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

# Markup, an event handler, a bidi override and escape sequences, as a worker could write them.
HOSTILE = (
    "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2> "
    "\u202eevil\u202c \x1b[31mRED\x1b[0m \x1b]0;title\x07done"
)


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator)


def status(root: Path, env: dict[str, str]) -> dict[str, Any]:
    r = run_omp("team", "status", "t", "--json", cwd=root, env=env)
    assert r.rc == 0, r
    return dict(r.json["teams"][0])


def http(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
    req = urllib.request.Request(
        url, method=method, headers=headers or {}, data=b"{}" if method == "POST" else None
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return int(res.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def unnamed_controls(page: Any) -> list[str]:
    """Buttons, text boxes and lists in the accessibility tree that have no name."""
    snap = page.locator("body").aria_snapshot()
    return re.findall(r"^\s*- (?:button|textbox|combobox)(?::|$| \[)", snap, re.M)


@pytest.fixture
def demo_team(omp_tmux: Tmux, tmux_env: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    from omp.cli.demo import make_repo

    repo, is_git = make_repo(tmp_path)
    assert is_git
    env = board_env(
        tmux_env,
        OMP_TMUX_SOCKET=str(omp_tmux.socket_name),
        OMP_DEMO_WORK_SECONDS="0.3",
        SHELL="/bin/sh",
    )
    r = run_omp(
        "team", "launch", "2:demo", "write a haiku", "--name", "t", "--workspace", "worktree",
        "--json", cwd=repo, env=env, timeout=120,
    )  # fmt: skip
    assert r.rc == 0, r
    poll(lambda: status(repo, env)["allDone"], timeout=90, what="the demo team done")
    return repo, env


def test_the_board_shows_a_demo_team_live_and_acts_as_its_leader(
    demo_team: tuple[Path, dict[str, str]], page: Any
) -> None:
    root, env = demo_team
    team = StatePaths(root).team("t")
    with board(root, env, "t") as url:
        base = url.split("?")[0]
        # no token, a wrong token, a forged Host: refused before anything is served
        assert http(base) == 403
        assert http(base + "?token=wrong") == 403
        assert http(url, headers={"Host": "evil.example:80"}) == 403

        page.goto(url)
        assert "token" not in page.url  # moved into a cookie, out of the address bar
        expect(page.locator("#team-title")).to_have_text("Team t")
        expect(page.locator("#workers tbody tr")).to_have_count(2)
        expect(page.locator("#screens figure")).to_have_count(2)
        expect(page.locator("[data-column=done] .task")).to_have_count(2)
        expect(page.locator("#workers tr[data-worker=worker-1]")).to_contain_text("1 ahead")
        expect(page.locator("#events")).to_contain_text("task 1:")

        # a task that moves shows without a reload
        page.evaluate("window.__kept = 'same page'")
        tasks.create(team, "3", "a third task")
        expect(page.locator("[data-column=ready] [data-task='3']")).to_be_visible()
        moved = run_api(
            "claim-task",
            {"team_name": "t", "task_id": "3", "worker": "worker-1"},
            cwd=root,
            env=env,
        )
        assert moved.rc == 0, moved
        expect(page.locator("[data-column=in_progress] [data-task='3']")).to_be_visible()
        assert page.evaluate("window.__kept") == "same page"

        # a state-changing request from anywhere but the page is refused
        assert http(base + "api/send", "POST", {"Content-Type": "application/json"}) == 403

        # read worker-1's diff by keyboard, comment on a line: the comment is mailed to it
        for _ in range(60):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.getAttribute('aria-label')") == (
                "Diff of worker-1"
            ):
                break
        else:
            pytest.fail("Tab never reached the Diff button of worker-1")
        page.keyboard.press("Enter")
        expect(page.locator("#diff-section")).to_be_visible()
        expect(page.locator("#h-diff")).to_be_focused()
        comment = page.get_by_role("button", name=re.compile(r"^Comment on work.[^ ]+ line 1$"))
        label = comment.first.get_attribute("aria-label")
        assert label is not None
        path = label.split(" ")[2]
        comment.first.press("Enter")
        page.get_by_role("textbox", name=re.compile(r"^Comment on work.")).fill(
            "say more about the moon"
        )
        page.get_by_role("button", name="Send the comment").click()
        expect(page.locator("#notice")).to_contain_text(f"comment on {path} line 1 sent")
        msgs, _, _ = Mailbox(team, "worker-1").listing(undelivered_only=False, limit=50)
        mine = [m for m in msgs if m["from"] == "leader" and "Review comment" in m["body"]]
        assert len(mine) == 1, msgs
        assert mine[0]["body"].startswith(f"Review comment on {path}, line 1")
        assert "say more about the moon" in mine[0]["body"]

        # a worker's hostile mail shows as text
        sent = run_api(
            "send-message",
            {"team_name": "t", "from": "worker-2", "to": "leader", "body": HOSTILE},
            cwd=root,
            env=env,
        )
        assert sent.rc == 0, sent
        expect(page.locator("#mail")).to_contain_text("<script>window.__pwned=1</script>")
        expect(page.locator("#mail")).to_contain_text("\\x1b[31mRED")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#mail script, #mail img").count() == 0

        # every control has a name; the send form's fields have labels
        assert unnamed_controls(page) == []
        page.get_by_label("To", exact=True).select_option("worker-2")
        page.get_by_label("Message", exact=True).fill("hello from the board")
        page.get_by_role("button", name="Send", exact=True).click()
        expect(page.locator("#notice")).to_contain_text("sent to worker-2")
        msgs, _, _ = Mailbox(team, "worker-2").listing(undelivered_only=False, limit=50)
        assert any(m["body"] == "hello from the board" and m["from"] == "leader" for m in msgs)


def test_a_permission_prompt_is_answered_from_the_page(
    omp_tmux: Tmux, tmux_env: Path, tmp_path: Path, page: Any
) -> None:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    keys = tmp_path / "keys"
    agent = [
        sys.executable,
        str(FIXTURES / "agents" / "prompt_agent.py"),
        str(FIXTURES / "screens" / "claude-16-permission-prompt.txt"),
        str(keys),
        HOSTILE,
    ]
    pane = make_live_team(root, omp_tmux, "t", 1, agent, session="omp-team-t")["worker-1"]
    tp = StatePaths(root).team("t")
    raw = team_config.load(tp).raw
    raw.update(agent="claude", tmuxSession="omp-team-t")
    team_config.write(tp, raw)
    poll(lambda: any("Do you want to proceed?" in ln for ln in omp_tmux.capture(pane)))
    env = board_env(tmux_env)
    with board(root, env, "t") as url:
        page.goto(url)
        card = page.locator(".needs-card[data-worker=worker-1]")
        expect(card).to_contain_text("worker-1 needs you: permission prompt")
        expect(page.locator("#workers tr[data-worker=worker-1]")).to_contain_text("needs you")
        options = card.get_by_role("button")
        expect(options).to_have_count(4)
        # the worker's screen, hostile text and all, shows as text
        screen = page.locator("figure[data-worker=worker-1] pre")
        expect(screen).to_contain_text("<script>window.__pwned=1</script>")
        expect(screen).to_contain_text("\\u202eevil")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#screens script, #screens img").count() == 0
        assert keys.read_bytes() == b""  # nothing typed by looking

        card.get_by_role(
            "button", name=re.compile(r"^Answer worker-1: 2\. Yes, and always")
        ).click()
        expect(page.locator("#notice")).to_contain_text("worker-1: chose 2. Yes, and always allow")
        assert (tmp_path / "keys.chosen").read_text() == "2"
        assert keys.read_bytes() in (b"\x1b[B\r", b"\x1bOB\r")  # one Down, then Enter
        expect(page.locator("#needs-section")).to_be_hidden()
        expect(page.locator("#workers tr[data-worker=worker-1]")).to_contain_text("idle")
        events = run_omp("team", "events", "t", cwd=root, env=env)
        assert "answer: " in events.stdout and "choice=Yes, and always allow" in events.stdout
        assert unnamed_controls(page) == []


def test_a_request_without_the_token_is_refused(tmux_env: Path, tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    with board(root, board_env(tmux_env)) as url:
        base = url.split("?")[0]
        token = url.split("token=")[1].split("&")[0]
        assert http(base) == 403
        assert http(base + "api/stream") == 403
        assert http(base + "static/board.js") == 403
        ok = {"Cookie": f"omp_board_{base.rsplit(':', 1)[1].strip('/')}={token}"}
        assert http(base, headers=ok) == 200
        # with the cookie but not the header, Origin and JSON a POST is refused
        assert http(base + "api/send", "POST", ok) == 403
        full = {
            **ok,
            "X-OMP-Board-Token": token,
            "Origin": base.rstrip("/"),
            "Content-Type": "application/json",
        }
        assert http(base + "api/send", "POST", {**full, "Origin": "http://evil.example"}) == 403
        # all of them: the request reaches the action (which refuses the empty input)
        req = urllib.request.Request(base + "api/send", method="POST", headers=full, data=b"{}")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 400
        assert json.loads(err.value.read())["error"] == "invalid_input"
