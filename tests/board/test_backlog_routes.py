"""The board's backlog routes as plain ASGI calls through its door (`omp.board.security.Guard`
around `omp.board.app.build`), no server, no browser, no tmux: a value the CLI refuses is
refused with the CLI's code and nothing written; what it takes changes the task store exactly as
`omp team task add|cancel|retry` does; a task's diff and a comment on one of its lines go to the
worker holding the task, or are refused saying why."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from omp.board.app import build
from omp.board.hub import Hub
from omp.board.security import HEADER, Guard
from omp.mail.mailbox import Mailbox
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tasks import tasks
from tests.helpers import isolate, make_project, run_cli, snapshot_tree

TOKEN = "t0ken-t0ken"
PORT = 4242
HOST = f"127.0.0.1:{PORT}"
TASKS = """
[[task]]
title = "Write the notes"

[[task]]
title = "Review the notes"
blocked_by = [1]

[[task]]
title = "Tidy up"
agent = "nobody"
"""


class Reply:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def call(root: Path, method: str, path: str, body: Any = None, query: str = "",
         headers: dict[str, str] | None = None) -> Reply:  # fmt: skip
    """One request to the board of `root`, carrying what the page sends (cookie, header, Origin,
    JSON) unless `headers` says otherwise."""
    project = StatePaths(root)
    app = Guard(build(project, Hub(project), TOKEN, None), TOKEN, PORT, {HOST})
    sent_headers = {
        "host": HOST,
        "cookie": f"omp_board_{PORT}={TOKEN}",
        HEADER: TOKEN,
        "origin": f"http://{HOST}",
        "content-type": "application/json",
        **(headers or {}),
    }
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(k.encode(), v.encode()) for k, v in sent_headers.items()],
        "server": ("127.0.0.1", PORT),
        "client": ("127.0.0.1", 50000),
    }
    out: list[MutableMapping[str, Any]] = []
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if given:
            await asyncio.sleep(3600)
        given = True
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        out.append(message)

    asyncio.run(app(scope, receive, send))
    return Reply(out[0]["status"], b"".join(m.get("body", b"") for m in out[1:]))


def post(root: Path, path: str, body: Any, **kw: Any) -> Reply:
    return call(root, "POST", path, body, **kw)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    proj = make_project(tmp_path / "proj")
    (proj / "tasks.toml").write_text(TASKS)
    for team in ("a", "b"):  # the board acts on a, the CLI on b: they must end up the same
        made = run_cli("team", "create", team, "--workers", "2", "--tasks", "tasks.toml",
                       "--json", cwd=proj)  # fmt: skip
        assert made.rc == 0, made
    return proj


def cli(root: Path, *args: str) -> Any:
    return run_cli(*args, "--json", cwd=root)


def state(root: Path) -> Any:
    return snapshot_tree(root / ".omp")


# (the page's request, the CLI's command with the same values, the code both answer)
REFUSED: list[tuple[str, dict[str, Any], list[str], str]] = [
    ("add", {"title": ""}, ["team", "task", "add", "{team}", ""], "invalid_tasks"),
    ("add", {"title": "x", "blockedBy": ["9"]},
     ["team", "task", "add", "{team}", "x", "--blocked-by", "9"], "invalid_tasks"),
    ("add", {"title": "x", "blockedBy": ["a b"]},
     ["team", "task", "add", "{team}", "x", "--blocked-by", "a b"], "invalid_tasks"),
    ("add", {"title": "x", "blockedBy": ["1" * 65]},
     ["team", "task", "add", "{team}", "x", "--blocked-by", "1" * 65], "invalid_input"),
    ("add", {"title": "x", "priority": 9_999_999},
     ["team", "task", "add", "{team}", "x", "--priority", "9999999"], "invalid_input"),
    ("add", {"title": "x", "agent": "a b"},
     ["team", "task", "add", "{team}", "x", "--agent", "a b"], "invalid_tasks"),
    ("add", {"title": "x\x00y"}, ["team", "task", "add", "{team}", "x\x00y"], "invalid_input"),
    ("add", {"title": "x" * 201}, ["team", "task", "add", "{team}", "x" * 201], "invalid_tasks"),
    ("add", {"team": "no-such", "title": "x"}, ["team", "task", "add", "no-such", "x"],
     "unknown_team"),
    ("add", {"team": "bad name", "title": "x"}, ["team", "task", "add", "bad name", "x"],
     "invalid_team_name"),
    ("cancel", {"task": "a b"}, ["team", "task", "cancel", "{team}", "a b"], "invalid_task_id"),
    ("cancel", {"task": "99"}, ["team", "task", "cancel", "{team}", "99"], "task_not_found"),
    ("retry", {"task": "1"}, ["team", "task", "retry", "{team}", "1"], "invalid_transition"),
    ("retry", {"task": ""}, ["team", "task", "retry", "{team}", ""], "invalid_task_id"),
    ("merge", {"task": "1" * 65}, ["team", "merge", "{team}", "--task", "1" * 65],
     "invalid_input"),
    ("merge", {"task": "a b"}, ["team", "merge", "{team}", "--task", "a b"], "invalid_task_id"),
]  # fmt: skip
ROUTES = {"add": "/api/task/add", "cancel": "/api/task/cancel", "retry": "/api/task/retry",
          "merge": "/api/merge"}  # fmt: skip


@pytest.mark.parametrize(("action", "fields", "argv", "code"), REFUSED)
def test_what_the_cli_refuses_the_board_refuses_with_its_code_and_writes_nothing(
    root: Path, action: str, fields: dict[str, Any], argv: list[str], code: str
) -> None:
    before = state(root)
    got = post(root, ROUTES[action], {"team": "a", **fields})
    assert got.json["error"] == code, got.json
    assert got.status == (400 if code in ("invalid_input", "invalid_tasks", "invalid_task_id",
                                          "invalid_team_name") else 409)  # fmt: skip
    assert state(root) == before
    by_cli = cli(root, *[a.replace("{team}", "b") for a in argv])
    assert by_cli.json["error"] == code, by_cli
    assert got.json["message"] == by_cli.json["message"].replace("team b", "team a")
    assert state(root) == before


@pytest.mark.parametrize(
    ("action", "fields"),
    [
        ("add", {"title": 5}),
        ("add", {"title": "x", "blockedBy": "1"}),
        ("add", {"title": "x", "blockedBy": [1]}),
        ("add", {"title": "x", "priority": "high"}),
        ("add", {"title": "x", "priority": True}),
        ("add", {}),
        ("cancel", {"task": 1}),
        ("cancel", {"task": "1", "reason": ["no"]}),
        ("retry", {}),
        ("merge", {"task": None, "worker": None}),
    ],
)
def test_a_value_no_command_line_could_hold_is_invalid_input(
    root: Path, action: str, fields: dict[str, Any]
) -> None:
    before = state(root)
    got = post(root, ROUTES[action], {"team": "a", **fields})
    assert (got.status, got.json["error"]) == (400, "invalid_input"), got.json
    assert state(root) == before


def test_a_request_the_page_could_not_have_sent_is_refused_at_the_door(root: Path) -> None:
    before = state(root)
    for headers in ({HEADER: "wrong"}, {"origin": "http://evil.example"},
                    {"content-type": "text/plain"}):  # fmt: skip
        got = post(root, "/api/task/add", {"team": "a", "title": "sneaky"}, headers=headers)
        assert got.status == 403
    assert state(root) == before


VOLATILE = {"createdAt", "finishedAt", "claimToken", "startedAt", "handedOverAt"}


def steady(obj: Any) -> Any:
    """`obj` without what differs between two runs of the same change (times, tokens)."""
    if isinstance(obj, dict):
        return {k: steady(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [steady(v) for v in obj]
    return obj


def records(root: Path, team: str) -> dict[str, Any]:
    return {str(t["id"]): steady(t) for t in tasks.list_all(StatePaths(root).team(team))}


def test_add_cancel_retry_change_the_store_as_the_cli_does(root: Path) -> None:
    steps: list[tuple[str, dict[str, Any], list[str]]] = [
        ("add", {"title": "Polish", "description": "the rough edges", "blockedBy": ["3"],
                 "agent": "nobody", "priority": 2},
         ["team", "task", "add", "b", "Polish", "--description", "the rough edges",
          "--blocked-by", "3", "--agent", "nobody", "--priority", "2"]),
        ("cancel", {"task": "3", "reason": "not now"},
         ["team", "task", "cancel", "b", "3", "--reason", "not now"]),
        ("retry", {"task": "3"}, ["team", "task", "retry", "b", "3"]),
        ("cancel", {"task": "4"}, ["team", "task", "cancel", "b", "4"]),
    ]  # fmt: skip
    for action, fields, argv in steps:
        got = post(root, ROUTES[action], {"team": "a", **fields})
        assert got.status == 200, got.json
        by_cli = cli(root, *argv)
        assert by_cli.rc == 0, by_cli
        assert steady(got.json["task"]) == steady(by_cli.json["task"])
        assert records(root, "a") == records(root, "b")
    listed = {t["id"]: t for t in cli(root, "team", "task", "list", "a").json["tasks"]}
    assert listed["4"]["state"] == "cancelled"
    assert listed["3"]["state"] == "ready"
    assert listed["4"]["blockedBy"] == ["3"] and listed["4"]["title"] == "Polish"


def test_the_feed_links_each_task_to_what_waits_for_it(root: Path) -> None:
    from omp.board.feed import TeamFeed

    status = TeamFeed(StatePaths(root), "a").tick()["status"]
    rows = {t["id"]: t for t in status["tasks"]}
    assert rows["1"]["dependents"] == ["2"] and rows["2"]["state"] == "blocked"
    assert rows["2"]["waitingFor"] == ["1"] and "dependents" not in rows["2"]
    # the states are status's own: the feed adds links, never a state of its own
    by_status = cli(root, "team", "status", "a").json["teams"][0]["tasks"]
    assert [r["state"] for r in status["tasks"]] == [r["state"] for r in by_status]


# ---- a task's diff and a comment on it ---------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with a backlog team `t` (a worktree per task): task 1 handed to
    worker-1, which committed `notes.md` on its branch; task 2 waits for it."""
    from omp.backlog import handover, settings
    from omp.cli.demo import make_repo
    from omp.workspace.git import git

    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    top, is_git = make_repo(tmp_path)
    if not is_git:
        pytest.skip("git is not installed")
    (tmp_path / "tasks.toml").write_text(TASKS)
    made = run_cli("team", "create", "t", "--workers", "1", "--tasks", str(tmp_path / "tasks.toml"),
                   "--json", cwd=top)  # fmt: skip
    assert made.rc == 0, made
    # what `omp team launch --tasks` records in a git repository: a worktree per task
    tp = StatePaths(top).team("t")
    raw = team_config.load(tp).raw
    where = settings.tasks_dir_for(top, "t", None)
    raw["backlog"] = settings.Backlog("manual", "main", True, str(where)).to_config()
    team_config.write(tp, raw)
    cfg = team_config.load(tp)
    given = handover.run(cfg)
    assert [(a["worker"], a["taskId"]) for a in given] == [("worker-1", "1")], given
    task = tasks.read(cfg.paths, "1")
    assert task is not None
    wt = Path(task["workspace"]["path"])
    (wt / "notes.md").write_text("first line\nsecond line\n")
    git(wt, "add", "notes.md")
    git(wt, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "notes")
    return top


def comments(root: Path, worker: str) -> list[str]:
    msgs, _, _ = Mailbox(StatePaths(root).team("t"), worker).listing(
        undelivered_only=False, limit=50
    )
    return [m["body"] for m in msgs if m["from"] == "leader" and "Review comment" in m["body"]]


def test_a_comment_on_a_tasks_line_goes_to_the_worker_holding_it(repo: Path) -> None:
    got = call(repo, "GET", "/api/diff", query="team=t&task=1")
    assert got.status == 200, got.json
    d = got.json
    shown = (d["task"], d["state"], d["commentTo"], d["branch"])
    assert shown == ("1", "in_progress", "worker-1", "omp/t/task-1")
    assert [f["path"] for f in d["files"]] == ["notes.md"]
    where = {"team": "t", "task": "1", "path": "notes.md"}
    sent = post(repo, "/api/comment", {**where, "line": 2, "text": "say more"})
    assert sent.status == 200, sent.json
    assert sent.json["worker"] == "worker-1"
    assert comments(repo, "worker-1") == [
        "Review comment on notes.md, line 2 of task 1, omp/t/task-1 (`second line`):\nsay more"
    ]


def test_a_comment_nobody_can_read_is_refused_and_nothing_sent(repo: Path) -> None:
    before = state(repo)
    # a line the diff does not show
    got = post(repo, "/api/comment",
               {"team": "t", "task": "1", "path": "notes.md", "line": 9, "text": "x"})  # fmt: skip
    assert (got.status, got.json["error"]) == (400, "invalid_input"), got.json
    # a task no worker holds: blocked, so nobody would read it
    got = post(repo, "/api/comment",
               {"team": "t", "task": "2", "path": "notes.md", "line": 1, "text": "x"})  # fmt: skip
    assert (got.status, got.json["error"]) == (409, "no_task_worker"), got.json
    assert got.json["message"].startswith("task 2 is blocked: no worker holds it now")
    got = post(repo, "/api/comment",
               {"team": "t", "task": "7", "path": "notes.md", "line": 1, "text": "x"})  # fmt: skip
    assert got.json["error"] == "task_not_found"
    assert state(repo) == before
    assert comments(repo, "worker-1") == []
    # a diff of a task with no branch of its own says so, as `omp team diff --task` does
    got = call(repo, "GET", "/api/diff", query="team=t&task=2")
    by_cli = cli(repo, "team", "diff", "t", "--task", "2")
    assert got.json["error"] == by_cli.json["error"] == "invalid_input"
    assert got.json["message"] == by_cli.json["message"]


@pytest.mark.parametrize(
    ("tid", "code"),
    [("1", "invalid_input"), ("2", "invalid_input"), ("99", "task_not_found")],
)
def test_merging_a_task_is_omp_team_merge_task(repo: Path, tid: str, code: str) -> None:
    """Task 1 is still in progress, task 2 has no branch yet, 99 is none: refused alike."""

    def kept() -> Any:  # `omp team merge --task` takes its landing lock first, even to refuse
        return {k: v for k, v in state(repo).items() if not k.endswith(("/.land", "/tasks"))}

    before = kept()
    got = post(repo, "/api/merge", {"team": "t", "task": tid})
    by_cli = cli(repo, "team", "merge", "t", "--task", tid)
    assert got.json["error"] == by_cli.json["error"] == code
    assert got.json["message"] == by_cli.json["message"]
    assert kept() == before
