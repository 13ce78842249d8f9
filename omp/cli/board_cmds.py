"""`omp team board` (the live page, the `omp[board]` extra) and `omp team answer` (a worker's
prompt answered from the shell), added to the `team` app by `register`. See docs/board.md.

Neither imports the board at module level: `omp team answer` is core and never loads it, and
`omp team board` imports `omp.board.serve` (and with it the web framework) only in its body, once
`omp.board.require` found the extra installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import run
from omp.textsafe import inline

if TYPE_CHECKING:
    from omp.cli.replies import AnswerReply
    from omp.store.paths import StatePaths


def _project() -> StatePaths:
    from omp.store.paths import StatePaths, find_root

    return StatePaths(find_root(Path.cwd()))


def prompt_text(p: dict[str, Any] | None, worker: str) -> list[str]:
    if not p:
        return [f"{inline(worker)}'s screen asks nothing of a person now"]
    out = [f"{inline(worker)} needs you: {inline(p['what'])} (prompt {p['promptId']})"]
    out += [f"  {inline(ln)}" for ln in p["lines"]]
    for o in p["options"]:
        out.append(f"  {'>' if o['selected'] else ' '} {o['number']}. {inline(o['label'])}")
    if not p["options"]:
        out.append("  (no options omp can choose: attach to its pane)")
    return out


def answer_text(r: dict[str, Any]) -> str:
    if "choice" not in r:
        return "\n".join(prompt_text(r.get("prompt"), r["worker"]))
    c = r["choice"]
    out = [
        f"{inline(r['worker'])}: chose {c['number']}. {inline(c['label'])} on its "
        f"{inline(r['what'])} ({' '.join(r['keys'])}); the prompt is gone"
    ]
    if r.get("next"):
        out += ["it asks next:", *prompt_text(r["next"], r["worker"])[1:]]
    return "\n".join(out)


def register(team_app: typer.Typer) -> None:
    @team_app.command("answer")
    def answer(
        team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
        worker: str = typer.Argument(
            ..., help="The worker whose prompt to answer.", callback=opt.text()
        ),
        choice: str = typer.Argument(
            None,
            help="The option: its number or its label. Without it: show the prompt's options.",
            callback=opt.text(max_len=256),
        ),
        prompt: str = typer.Option(
            None,
            "--prompt",
            metavar="ID",
            help="Answer only the prompt with this id (as shown without CHOICE): another prompt "
            "on the screen by then is refused.",
            callback=opt.text(max_len=64),
        ),
        as_json: bool = JsonOpt,
    ) -> None:
        """Answer a worker's "needs you" prompt with one of the options on its screen.

        Typed only while that same prompt is still on the screen, then checked gone; without
        CHOICE, the prompt and its options are shown and nothing is typed."""

        def body() -> AnswerReply:
            from omp.mail import answer as answering
            from omp.record import config as team_config

            cfg = team_config.load(_project().team(team))
            if choice is None:
                return cast("AnswerReply", answering.show(cfg, worker))
            return cast("AnswerReply", answering.answer(cfg, worker, choice, prompt_id=prompt))

        run(body, as_json=as_json, human=answer_text)

    @team_app.command("board")
    def board(
        team: str = typer.Argument(
            None, help="The team shown first (default: the first live one).", callback=opt.text()
        ),
        port: int = typer.Option(
            0,
            "--port",
            help="The port to listen on (default: a free one).",
            callback=opt.count(least=0, most=65535),
        ),
        host: str = typer.Option(
            "127.0.0.1",
            "--host",
            metavar="ADDR",
            help="The address to listen on. Anything but a loopback address lets other machines "
            "reach the board (with its token): omp warns.",
            callback=opt.text(max_len=64),
        ),
        open_browser: bool = typer.Option(False, "--open", help="Open the page in a browser."),
    ) -> None:
        """A live web page of the project's teams, to watch and steer them (omp\\[board]).

        Workers, screens, tasks, mail, tokens, diffs; message a worker, comment on a line of its
        diff, answer its prompt and merge its branch from the page. Prints the page's URL (with
        its secret token) on the first line; serves until Ctrl-C. Needs the extra:
        pip install 'omp\\[board]'."""
        from omp.cli import output

        def body() -> None:
            from omp import board as board_pkg
            from omp.store.names import team_name

            board_pkg.require()
            project = _project()
            if team is not None:
                team_name(team)
            from omp.board.serve import serve

            serve(
                project,
                team,
                host=host,
                port=port,
                open_browser=open_browser,
                say=lambda line: output.write_text(line + "\n"),
                warn=lambda line: output.write_err(line + "\n"),
            )

        output.guarded(body, False)
