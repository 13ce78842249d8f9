"""`omp demo`: a whole team on any machine, with the built-in demo agent (no model, no login).

It runs in a throwaway git repository of its own (under the system's temporary directory, never
the user's project, whatever the working directory or OMP_ROOT): each worker gets a worktree of
it, writes its part into a file there and commits it; every completion is verified; then `omp
team merge` brings every branch onto the demo repository's `main`. Without git it falls back to
a throwaway directory the workers share.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import invocation, run

if TYPE_CHECKING:
    from omp.cli.replies import DemoReply

# What each completion must pass, in the worker's worktree, and the merged result before `main`
# moves: the worker's file is there.
DEMO_VERIFY = "ls work/*.md"
# `omp demo --backlog`: six tasks, one waiting for two others (docs/backlog.md).
DEMO_BACKLOG = """\
[[task]]
title = "Write the tokenizer"

[[task]]
title = "Write the CLI skeleton"

[[task]]
title = "Fix the README"
priority = 5

[[task]]
title = "Parse numbers"
blocked_by = [1]

[[task]]
title = "Add a --version flag"

[[task]]
title = "Document the parser"
blocked_by = [4, 5]
"""
DEMO_FILES = {
    "README.md": "# omp demo\n\nA throwaway repository made by `omp demo`.\n",
    "work/.keep": "",
}


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def make_repo(where: Path) -> tuple[Path, bool]:
    """The demo's repository under `where`, with one commit on `main`: (its path, a git one).
    An identity is set in the repository itself only when git has none, so its commits work
    on a machine never set up for git, and the user's own configuration is never touched."""
    repo = where / "repo"
    repo.mkdir()
    for rel, text in DEMO_FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    if shutil.which("git") is None:
        return repo, False
    from omp.demo_agent import identity_args
    from omp.workspace.git import git

    git(repo, "init", "-q")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/main")
    for arg in identity_args(repo)[1::2]:  # ["-c", "user.name=omp-demo", ...]
        key, _, value = arg.partition("=")
        git(repo, "config", key, value)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "omp demo: the start")
    return repo, True


def demo(
    workers: int = typer.Option(
        3, "--workers", "-w", help="How many demo workers (1-8).", callback=opt.count(most=8)
    ),
    task: str = typer.Option(
        "write a haiku about tmux",
        "--task",
        "-t",
        help="The task the team splits.",
        callback=opt.text(),
    ),
    socket: str | None = opt.SocketOpt,
    timeout: float = typer.Option(
        60.0, "--timeout", help="Seconds to wait for the team.", callback=opt.seconds(positive=True)
    ),
    backlog: bool = typer.Option(
        False,
        "--backlog",
        help="A backlog instead of one task: six tasks (one waits for two others), a worktree "
        "each, each merged once verified (docs/backlog.md).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Launch a demo team in a throwaway git repository and follow it to the merge.

    Each worker works in its own worktree; omp follows them until done, merges the branches
    and shows the results."""

    def body() -> DemoReply:
        from omp.errors import OmpError
        from omp.record import config as team_config
        from omp.store.paths import StatePaths
        from omp.team.launch import LaunchRequest, launch
        from omp.views.status import collect, status

        if not 1 <= workers <= 8:
            raise OmpError("invalid_input", f"--workers must be 1-8, got {workers}")
        from omp.cli.output import progress as say

        if shutil.which("tmux") is None:  # before anything is made
            raise OmpError(
                "tmux_not_found", "tmux is not installed; install it (apt-get install tmux)"
            )
        where = Path(tempfile.mkdtemp(prefix="omp-demo-")).resolve()
        try:
            repo, is_git = make_repo(where)
            os.environ["OMP_ROOT"] = str(repo)  # the demo's state lives in its repository only
            say(f"demo repository: {repo}" + ("" if is_git else " (no git: workers share it)"))
            name = f"demo-{time.strftime('%H%M%S')}"
            tasks_file = None
            if backlog:  # beside the repository: nothing of it in the demo's commits
                tasks_file = where / "tasks.toml"
                tasks_file.write_text(DEMO_BACKLOG, encoding="utf-8")
            res = launch(
                LaunchRequest(
                    workers=workers,
                    task="" if backlog else task,
                    tasks_file=tasks_file,
                    merge=("auto" if is_git else "manual") if backlog else None,
                    agent="demo",
                    name=name,
                    socket=socket,
                    new_session=True,
                    cwd=repo,
                    workspace="worktree" if is_git else "shared",
                    verify=DEMO_VERIFY if is_git else "",
                    worktrees_under=where / "worktrees",
                ),
                progress=say,
            )
        except BaseException:
            shutil.rmtree(where, ignore_errors=True)  # no team: nothing there to look at
            raise
        project = StatePaths(repo)
        seen: dict[str, str] = {}
        snap: dict[str, Any] = {}
        deadline = time.monotonic() + timeout
        done = False
        while time.monotonic() < deadline:
            snap = status(project, name)["teams"][0]
            for t in snap["tasks"]:
                now = str(t.get("state") or t["status"])
                if seen.get(t["id"]) != now:
                    seen[t["id"]] = now
                    who = t["owner"] or "nobody yet"
                    say(f"task {t['id']}: {now} ({who})")
            if backlog and all(t.get("state") == "done" for t in snap["tasks"]):
                done = True  # a backlog is done once each task is merged (or, shared, done)
                break
            if snap["allDone"] and not backlog:
                done = True
                break
            time.sleep(0.25)
        cfg = team_config.load(project.team(name))
        merged: dict[str, Any] | None = None
        if is_git and done and not backlog:  # (a backlog merged each task as it passed)
            from omp.team.merging import merge_team

            try:
                merged = merge_team(cfg)
            except OmpError as exc:
                merged = {"ok": False, "error": exc.code, "message": exc.message}
        result = collect(team_config.load(project.team(name)))
        return cast(
            "DemoReply",
            {
                **res,
                "allDone": done,
                "collect": result,
                "repo": str(repo),
                "demoDir": str(where),
                "merge": merged,
                **({"tasks": snap.get("tasks") or []} if backlog else {}),
            },
        )

    def human(r: dict[str, Any]) -> str:
        from omp.textsafe import inline

        col = r["collect"]
        omp = invocation()
        team = r["team"]
        lines = [
            "",
            f"team {team}: {col['doneCount']}/{col['total']} workers done"
            + ("" if r["allDone"] else " (still working: the wait timed out)"),
        ]
        if "tasks" in r:  # a backlog: each task, who did it, where it went
            done = sum(1 for t in r["tasks"] if t.get("state") == "done")
            lines[-1] = f"team {team}: {done}/{len(r['tasks'])} tasks done" + (
                "" if r["allDone"] else " (still working: the wait timed out)"
            )
            for t in r["tasks"]:
                into = (
                    f", merged into {inline(str(t['mergedInto']))}" if t.get("mergedInto") else ""
                )
                lines.append(
                    f"  task {inline(str(t['id']))} {inline(str(t.get('title') or ''))}: "
                    f"{t.get('state')} by {inline(str(t.get('owner') or '-'))}{into}"
                )
        for w in col["workers"] if "tasks" not in r else []:
            result = inline(str(w["result"])) if w["result"] else "(no result yet)"
            check = " (verified)" if (w.get("verify") or {}).get("status") == "passed" else ""
            lines.append(f"  {inline(w['name'])}: {w['outcome']}{check} — {result}")
        m = r.get("merge")
        if isinstance(m, dict) and m.get("ok"):
            lines.append("")
            lines.append(f"merged into {inline(m['target'])} of {inline(r['repo'])}:")
            for row in m["results"]:
                commit = str(row.get("commit") or "")[:10]
                lines.append(f"  {inline(row['worker'])}: {row['status']} -> {commit}")
        elif isinstance(m, dict):
            lines.append(f"\nmerge: {inline(str(m.get('message')))} [{m.get('error')}]")
        repo = shlex.quote(r["repo"])
        lines += [
            "",
            f"Next (in the demo repository, {inline(r['repo'])}):",
            f"  go there:          cd {repo}",
            f"  see the panes:     {r['attach']}   (detach again with Ctrl-b d)",
            f"  follow the team:   {omp} team status {team} --watch",
            f"  on a web page:     {omp} team board {team}   (pip install 'omp[board]')",
            f"  review the work:   {omp} team diff {team}",
            f"  merge again:       {omp} team merge {team}   (merged branches are skipped)",
            "  see the history:   git log --oneline --graph",
            f"  read the results:  {omp} team collect {team}",
            f"  message a worker:  {omp} team api send-message --input "
            f'\'{{"team_name":"{team}","from":"leader","to":"worker-1",'
            '"body":"hello"}\'',
            f"  stop the team:     {omp} team shutdown {team}",
            f"  then throw it away: rm -rf {shlex.quote(r['demoDir'])}",
        ]
        return "\n".join(lines)

    run(body, as_json=as_json, human=human)
