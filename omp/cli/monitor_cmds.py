"""`omp team wait` and the hidden `omp team monitor-run`, added to the `team` app by `register`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import run

if TYPE_CHECKING:
    from omp.cli.replies import WaitReply


def register(team_app: typer.Typer) -> None:
    """Add `wait` and the hidden `monitor-run` to `omp team`."""

    @team_app.command("wait")
    def wait(
        team: str = typer.Argument(..., help="Team name.", callback=opt.text(max_len=256)),
        timeout: float = typer.Option(
            600.0,
            "--timeout",
            "-t",
            help="Give up after this many seconds (0: never).",
            callback=opt.seconds(),
        ),
        since: str = typer.Option(
            None,
            "--since",
            metavar="CURSOR",
            help="Compare with this cursor (printed by the last wait), not with now.",
            callback=opt.text(max_len=1 << 16),
        ),
        exit_codes: bool = typer.Option(
            False,
            "--exit-codes",
            help="Exit 10 all done, 11 timeout, 12 shut down, 14 a worker needs you or a token "
            "budget was crossed (default: 0 unless the team is gone).",
        ),
        as_json: bool = JsonOpt,
    ) -> None:
        """Block until a worker needs you, the leader has mail, a task moves, or all are done.

        Every wait prints a cursor; `--since CURSOR` reports what moved after that wait, so a
        task that moved between two waits is reported by the second.

        Exit 0 for every outcome (the JSON's `event` says which), but 13 when the team's tmux
        server or every worker pane is gone (said at once, with why): an agent's shell shows a
        non-zero exit as a failed call. With --exit-codes: 0 mail or a task moved, 10 all tasks
        done, 11 timeout, 12 team shut down, 13 gone, 14 a worker needs you (event `attention`:
        a permission prompt, a sign-in, stuck; it names the worker, what its screen shows and how
        to attach) or a token budget was crossed (1, 2 and 3 are errors, as everywhere in omp).
        Writes nothing.
        """
        from omp.cli.team_text import wait_text

        def body() -> WaitReply:
            from omp.record import config as team_config
            from omp.store.paths import StatePaths, find_root
            from omp.views.wait import wait as do_wait

            project = StatePaths(find_root(Path.cwd()))
            cfg = team_config.load(project.team(team))
            return cast(
                "WaitReply",
                do_wait(cfg, since=since, timeout=timeout or None, exit_codes=exit_codes),
            )

        run(body, as_json=as_json, human=wait_text, exit_code=lambda r: int(r["exitCode"]))

    @team_app.command("monitor-run", hidden=True)
    def monitor_run(
        root: Annotated[
            Path, typer.Option("--root", help="Project root.", callback=opt.path_text())
        ],
        token: Annotated[
            str,
            typer.Option("--token", help="Owner-lock token to adopt.", callback=opt.text()),
        ],
    ) -> None:
        """The project monitor's process (started by `omp team launch` and loop starts)."""
        from omp.monitor.loop import serve

        raise SystemExit(serve(root, token))
