"""What a person can do from the board, each through the code the CLI runs, as the leader:

- a message or a broadcast: `omp team api send-message` / `broadcast` (`omp.api.operations`: the
  send pipeline with its authorization, limits and nudge), from `leader`;
- a comment on a line of a worker's diff: the same send, its body naming the file and the line,
  and only for a line the worker's diff shows (`omp.views.worktrees.diff`, as `omp team diff`);
- an answer to a prompt: `omp team answer` (`omp.mail.answer`);
- a merge: `omp team merge TEAM WORKER` (`omp.team.merging.merge_team`);
- a backlog's tasks: add, cancel, retry, a task's merge, diff and line comments
  (`omp.board.backlog`).

The board process carries no worker identity (`omp team board` refuses to run in a worker's pane,
like every command that changes a team), so `omp.api.authorize.fence` takes it at its word:
`leader`, exactly what a leader's shell is.

Input comes from the page as JSON: every field is checked here, then by the code it is handed to.
"""

from __future__ import annotations

from typing import Any

from omp.errors import OmpError
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store.names import LEADER, team_name
from omp.store.paths import StatePaths

COMMENT_MAX = 8000


def text_field(data: dict[str, Any], key: str, *, required: bool = True, most: int = 1000) -> str:
    val = data.get(key)
    if val is None and not required:
        return ""
    if not isinstance(val, str) or (required and not val.strip()):
        raise OmpError("invalid_input", f"{key!r} must be a non-empty string", field=key)
    if len(val) > most:
        raise OmpError("invalid_input", f"{key!r} is over {most} characters", field=key)
    return val


def int_field(data: dict[str, Any], key: str) -> int:
    val = data.get(key)
    if isinstance(val, bool) or not isinstance(val, int) or val < 1:
        raise OmpError("invalid_input", f"{key!r} must be a positive integer", field=key)
    return val


def config(project: StatePaths, data: dict[str, Any]) -> TeamConfig:
    return team_config.load(project.team(team_name(text_field(data, "team", most=64))))


def api(op: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run one `omp team api` operation as the CLI does: checked input, then what follows its
    answer (the monitor kept running)."""
    from omp.api.operations import OPERATIONS

    reply = OPERATIONS[op](payload)
    for fn in reply.after:
        fn()
    return dict(reply.result)


def send(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, to, body}`: a message from the leader; `to` "*" is a broadcast."""
    cfg = config(project, data)
    to = text_field(data, "to", most=64)
    body = text_field(data, "body", most=64 * 1024)
    base = {"team_name": cfg.name, "cwd": str(project.root), "from": LEADER, "body": body}
    if to == "*":
        return api("broadcast", base)
    return api("send-message", {**base, "to": to})


def comment_body(path: str, line: int, code: str, text: str, where: str = "") -> str:
    """The mail a line comment becomes: the file and line first, so the worker can find it;
    `where`: the task whose diff it is on (`task 3, omp/t/task-3`)."""
    quoted = code.strip()
    return (
        f"Review comment on {path}, line {line}"
        + (f" of {where}" if where else "")
        + (f" (`{quoted[:200]}`)" if quoted else "")
        + f":\n{text.strip()}"
    )


def comment(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, worker, path, line, text}`: a comment on a line of the worker's diff (a line its
    branch has, numbered as in its checkout), mailed to it from the leader and nudged (with
    `task` instead of `worker`: `omp.board.backlog.comment`)."""
    from omp.board import diffs
    from omp.views.worktrees import diff

    cfg = config(project, data)
    worker = text_field(data, "worker", most=64)
    path = text_field(data, "path", most=4096)
    line = int_field(data, "line")
    text = text_field(data, "text", most=COMMENT_MAX)
    rows = diff(cfg, worker)["workers"]
    files = diffs.split(rows[0].get("diff") or "") if rows else []
    found = diffs.line_of(files, path, line)
    if found is None:
        raise OmpError(
            "invalid_input",
            f"{worker}'s diff shows no line {line} in {path}: comment on a line the diff shows",
            field="line",
        )
    body = comment_body(path, line, found["text"], text)
    sent = api(
        "send-message",
        {
            "team_name": cfg.name,
            "cwd": str(project.root),
            "from": LEADER,
            "to": worker,
            "body": body,
        },
    )
    return {**sent, "body": body}


def answer(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, worker, choice, prompt}`: choose an option of the prompt the page showed."""
    from omp.mail.answer import answer as do_answer

    cfg = config(project, data)
    worker = text_field(data, "worker", most=64)
    choice = data.get("choice")
    if isinstance(choice, int) and not isinstance(choice, bool):
        choice = str(choice)
    if not isinstance(choice, str) or not choice.strip():
        raise OmpError("invalid_input", "'choice' must be an option's number or label")
    prompt = text_field(data, "prompt", most=64)
    return do_answer(cfg, worker, choice, prompt_id=prompt)


def merge(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, worker}`: `omp team merge TEAM WORKER` (its check first, a conflict changes
    nothing and tells the worker). A refused merge answers with its report (with `task`
    instead of `worker`: `omp.board.backlog.merge`)."""
    from omp.team.merging import merge_team

    cfg = config(project, data)
    worker = text_field(data, "worker", most=64)
    if worker not in cfg.worker_names:
        raise OmpError("unknown_worker", f"{worker!r} is not a worker of team {cfg.name}")
    return merge_team(cfg, [worker])


def diff(project: StatePaths, team: str, worker: str) -> dict[str, Any]:
    """One worker's branch and its diff, file by file (`omp team diff TEAM WORKER`)."""
    from omp.views.worktrees import diff as do_diff

    cfg = team_config.load(project.team(team_name(team)))
    return diff_reply(cfg, do_diff(cfg, worker), worker)


def diff_reply(cfg: TeamConfig, rep: dict[str, Any], worker: str) -> dict[str, Any]:
    """What the page shows of a diff report's first row (`omp team diff --json`)."""
    from omp.board import diffs
    from omp.textsafe import inline

    row = rep["workers"][0] if rep["workers"] else {}
    text = row.pop("diff", "") or ""
    return {
        "ok": True,
        "team": cfg.name,
        "worker": worker,
        "target": rep.get("target"),
        "branch": row.get("branch"),
        "stat": row.get("stat"),
        "commitsAhead": row.get("commitsAhead"),
        "merged": row.get("merged"),
        "error": row.get("error"),
        "commits": [
            {"sha": c["sha"][:10], "subject": inline(c["subject"])}
            for c in row.get("commits") or []
        ],
        "uncommitted": [inline(f) for f in row.get("uncommitted") or []],
        "files": diffs.split(text),
    }
