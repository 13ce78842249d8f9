"""`omp demo`: a whole team on any machine, with the built-in demo agent (no model, no login)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import invocation, run


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


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
    socket: str = typer.Option(
        None,
        "--socket",
        envvar="OMP_TMUX_SOCKET",
        help="tmux server socket name (-L).",
        callback=opt.path_text(),
    ),
    timeout: float = typer.Option(
        60.0, "--timeout", help="Seconds to wait for the team.", callback=opt.seconds(positive=True)
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Launch a demo team in its own tmux session, follow it until done, show the results."""

    def body() -> dict[str, Any]:
        from omp.errors import OmpError
        from omp.record import config as team_config
        from omp.store.paths import StatePaths, find_root
        from omp.team.launch import LaunchRequest, launch
        from omp.views.status import collect, status

        if not 1 <= workers <= 8:
            raise OmpError("invalid_input", f"--workers must be 1-8, got {workers}")
        from omp.cli.output import progress as say

        name = f"demo-{time.strftime('%H%M%S')}"
        res = launch(
            LaunchRequest(
                workers=workers,
                task=task,
                agent="demo",
                name=name,
                socket=socket,
                new_session=True,
                cwd=Path.cwd(),
            ),
            progress=say,
        )
        project = StatePaths(find_root(Path.cwd()))
        seen: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        done = False
        while time.monotonic() < deadline:
            snap = status(project, name)["teams"][0]
            for t in snap["tasks"]:
                if seen.get(t["id"]) != t["status"]:
                    seen[t["id"]] = t["status"]
                    who = t["owner"] or "nobody yet"
                    say(f"task {t['id']}: {t['status']} ({who})")
            if snap["allDone"]:
                done = True
                break
            time.sleep(0.25)
        result = collect(team_config.load(project.team(name)))
        return {**res, "allDone": done, "collect": result}

    def human(r: dict[str, Any]) -> str:
        col = r["collect"]
        omp = invocation()
        lines = [
            "",
            f"team {r['team']}: {col['doneCount']}/{col['total']} workers done"
            + ("" if r["allDone"] else " (still working: the wait timed out)"),
        ]
        from omp.textsafe import inline

        for w in col["workers"]:
            result = inline(str(w["result"])) if w["result"] else "(no result yet)"
            lines.append(f"  {inline(w['name'])}: {w['outcome']} — {result}")
        lines += [
            "",
            "Next:",
            f"  see the panes:     {r['attach']}   (detach again with Ctrl-b d)",
            f"  follow the team:   {omp} team status {r['team']} --watch",
            f"  read the results:  {omp} team collect {r['team']}",
            f"  message a worker:  {omp} team api send-message --input "
            f'\'{{"team_name":"{r["team"]}","from":"leader","to":"worker-1",'
            '"body":"hello"}\'',
            f"  stop the team:     {omp} team shutdown {r['team']}",
        ]
        return "\n".join(lines)

    run(body, as_json=as_json, human=human)
