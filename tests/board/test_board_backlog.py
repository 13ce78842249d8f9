"""A backlog on the board, in a real browser (Debian's chromium through Playwright) against demo
workers on a private tmux server: the graph shows each task's state as `omp team status`
computes it and moves without a reload (blocked, ready, to merge, done, cancelled); retry, cancel,
add and a task's merge from the page change the task store as the CLI does; a comment on a task's
diff reaches the worker holding it, and is refused when none does; the page's new controls work
by keyboard and have names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from omp.mail.mailbox import Mailbox
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.tmux import Tmux
from omp.workspace.git import git
from tests.board.conftest import board, board_env
from tests.board.test_board_browser import expect, unnamed_controls
from tests.helpers import poll, run_omp

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

TASKS = """
[[task]]
title = "Write the notes"

[[task]]
title = "Review the notes"
blocked_by = [1]

[[task]]
title = "Check the links"
blocked_by = [1]
agent = "nobody"      # no worker of that agent: once ready, it stays ready
"""


def listed(root: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    r = run_omp("team", "task", "list", "t", "--json", cwd=root, env=env)
    assert r.rc == 0, r
    return {str(t["id"]): t for t in r.json["tasks"]}


def launch(tmp_path: Path, omp_tmux: Tmux, tmux_env: Path, text: str,
           work: str) -> tuple[Path, dict[str, str]]:  # fmt: skip
    from omp.cli.demo import make_repo

    repo, is_git = make_repo(tmp_path)
    assert is_git
    (tmp_path / "tasks.toml").write_text(text)
    env = board_env(
        tmux_env,
        OMP_TMUX_SOCKET=str(omp_tmux.socket_name),
        OMP_DEMO_WORK_SECONDS=work,
        SHELL="/bin/sh",
    )
    r = run_omp("team", "launch", "1:demo", "--tasks", str(tmp_path / "tasks.toml"), "--name",
                "t", "--json", cwd=repo, env=env, timeout=120)  # fmt: skip
    assert r.rc == 0, r
    return repo, env


def card(page: Any, column: str, tid: str) -> Any:
    return page.locator(f"[data-column={column}] [data-task='{tid}']")


def review_comments(root: Path) -> list[str]:
    msgs, _, _ = Mailbox(StatePaths(root).team("t"), "worker-1").listing(
        undelivered_only=False, limit=100
    )
    return [m["body"] for m in msgs if m["from"] == "leader" and "Review comment" in m["body"]]


def test_the_task_graph_moves_live_and_the_page_steers_the_backlog(
    omp_tmux: Tmux, tmux_env: Path, tmp_path: Path, page: Any
) -> None:
    root, env = launch(tmp_path, omp_tmux, tmux_env, TASKS, "0.3")
    poll(lambda: listed(root, env)["1"]["state"] == "to_merge", timeout=90, what="task 1 done")
    team = StatePaths(root).team("t")
    page.on("dialog", lambda d: d.accept())  # the merge asks first
    with board(root, env, "t") as url:
        page.goto(url)
        page.evaluate("window.__kept = 'same page'")
        # the graph: 1 waits for its merge, 2 and 3 wait for 1, as status says
        expect(card(page, "to_merge", "1")).to_contain_text("needed by #2, #3")
        expect(card(page, "blocked", "2")).to_contain_text("waits for #1")
        expect(card(page, "blocked", "3")).to_contain_text("waits for #1")
        expect(card(page, "to_merge", "1")).to_contain_text("omp/t/task-1")
        expect(page.locator("#tasks-summary")).to_contain_text("1 to merge, 2 blocked")
        graph = page.locator("#task-graph svg")
        expect(graph.locator("[data-edge='1->2']")).to_have_count(1)
        expect(graph.locator("[data-node='1']")).to_have_class(re.compile("tstate-to_merge"))
        assert "#2 after #1 (to merge)" in (graph.get_attribute("aria-label") or "")
        # a blocker's link takes the keyboard to its card
        link = card(page, "blocked", "2").get_by_role("link", name=re.compile(r"^Task 1: "))
        link.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#task-1")).to_be_focused()

        # task 1's diff: nobody holds it now, so a comment on it is refused and nothing sent
        page.get_by_role("button", name="Diff of task 1").click()
        expect(page.locator("#diff-head")).to_contain_text("no worker holds it now")
        page.get_by_role("button", name=re.compile(r"^Comment on .* line 1$")).first.click()
        page.get_by_role("textbox", name=re.compile(r"^Comment on ")).fill("why this word?")
        page.get_by_role("button", name="Send the comment").click()
        expect(page.locator("#notice")).to_contain_text(
            "task 1 is to_merge: no worker holds it now to read a comment"
        )
        expect(page.locator("#notice")).to_contain_text("[no_task_worker]")
        assert review_comments(root) == []
        page.get_by_role("button", name="Close the diff").click()

        # merge task 1 from the page: it is done, 3 is ready (nobody takes it), 2 is handed out
        # and finished, all without a reload
        page.get_by_role("button", name="Merge task 1").click()
        expect(page.locator("#notice")).to_contain_text("task 1: fast_forward")
        expect(card(page, "done", "1")).to_be_visible()
        expect(card(page, "ready", "3")).to_be_visible()
        expect(card(page, "to_merge", "2")).to_be_visible(timeout=60_000)
        assert listed(root, env)["1"]["state"] == "done"
        assert tasks.read(team, "1")["mergedInto"] == "main"  # type: ignore[index]

        # cancel task 3 by keyboard, with a reason
        page.get_by_role("button", name="Cancel task 3…").focus()
        page.keyboard.press("Enter")
        reason = page.get_by_role("textbox", name=re.compile(r"^Why cancel task 3"))
        expect(reason).to_be_focused()
        page.keyboard.type("not this sprint")
        page.keyboard.press("Enter")
        expect(page.locator("#notice")).to_contain_text("cancelled task 3 (was pending)")
        expect(card(page, "cancelled", "3")).to_be_visible()
        t3 = listed(root, env)["3"]
        assert (t3["state"], t3["result"]) == ("cancelled", "not this sprint")

        # add a task that waits for the cancelled one: it shows as blocked by it
        page.locator("#add-task summary").click()
        page.get_by_label("Title", exact=True).fill("Polish the links")
        page.get_by_label("Blocked by", exact=True).fill("#3")
        page.get_by_label("Priority", exact=True).fill("2")
        page.get_by_role("button", name="Add the task").click()
        expect(page.locator("#notice")).to_contain_text("added task 4 to team t")
        four = card(page, "blocked", "4")
        expect(four.locator(".links.bad")).to_have_text("blocked by cancelled #3")
        t4 = listed(root, env)["4"]
        got = (t4["title"], t4["blockedBy"], t4["priority"], t4["blockedByFailed"])
        assert got == ("Polish the links", ["3"], 2, ["3"])
        shown = run_omp("team", "task", "show", "t", "4", "--json", cwd=root, env=env).json
        assert (shown["task"]["createdBy"], shown["task"]["source"]) == ("leader", "task add")

        # a task the CLI would refuse: its message on the page, nothing written
        before = sorted(p.name for p in team.tasks_dir.iterdir())
        page.get_by_label("Title", exact=True).fill("Waits for nothing real")
        page.get_by_label("Blocked by", exact=True).fill("9")
        page.get_by_role("button", name="Add the task").click()
        expect(page.locator("#notice")).to_contain_text(
            "task add: task 5 is blocked by 9, which no task has as its id [invalid_tasks]"
        )
        assert sorted(p.name for p in team.tasks_dir.iterdir()) == before

        # retry task 3: ready again, and 4 waits for it instead of being stuck
        page.get_by_role("button", name="Retry task 3").click()
        expect(page.locator("#notice")).to_contain_text("task 3 is queued again")
        expect(card(page, "ready", "3")).to_be_visible()
        expect(card(page, "blocked", "4")).to_contain_text("waits for #3")
        assert listed(root, env)["3"]["state"] == "ready"

        # merge task 2: done
        page.get_by_role("button", name="Merge task 2").click()
        expect(card(page, "done", "2")).to_be_visible()
        expect(page.locator("#tasks-summary")).to_contain_text("2 done")
        assert page.evaluate("window.__kept") == "same page"
        assert unnamed_controls(page) == []


def test_a_comment_on_a_tasks_diff_reaches_the_worker_holding_it(
    omp_tmux: Tmux, tmux_env: Path, tmp_path: Path, page: Any
) -> None:
    one = '[[task]]\ntitle = "Write the notes"\n'
    root, env = launch(tmp_path, omp_tmux, tmux_env, one, "600")  # it works on it a long time
    poll(lambda: listed(root, env)["1"]["state"] == "in_progress", timeout=60, what="task 1")
    task = tasks.read(StatePaths(root).team("t"), "1")
    assert task is not None
    wt = Path(task["workspace"]["path"])
    (wt / "notes.md").write_text("the moon\nthe tide\n")
    git(wt, "add", "notes.md")
    git(wt, "-c", "user.name=w", "-c", "user.email=w@w", "commit", "-q", "-m", "notes")
    with board(root, env, "t") as url:
        page.goto(url)
        expect(card(page, "in_progress", "1")).to_contain_text("worker-1")
        page.get_by_role("button", name="Diff of task 1").click()
        expect(page.locator("#diff-head")).to_contain_text("comments go to worker-1")
        page.get_by_role("button", name="Comment on notes.md line 2").press("Enter")
        box = page.get_by_role("textbox", name=re.compile(r"^Comment on notes.md line 2"))
        expect(box).to_be_focused()
        box.fill("and the stars?")
        page.get_by_role("button", name="Send the comment").click()
        expect(page.locator("#notice")).to_contain_text("sent to worker-1")
        assert review_comments(root) == [
            "Review comment on notes.md, line 2 of task 1, omp/t/task-1 (`the tide`):\n"
            "and the stars?"
        ]
        assert unnamed_controls(page) == []
