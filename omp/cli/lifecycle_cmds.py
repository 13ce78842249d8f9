"""A team's life after launch: `add-worker`, `remove-worker`, `resume`, `delete`, `prune`,
`events`, added to the `team` app by `register`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from omp.cli import options as opt
from omp.cli.grammar import EVENTS
from omp.cli.options import JsonOpt
from omp.cli.output import run

if TYPE_CHECKING:
    from omp.cli.replies import (
        AddWorkerReply,
        DeleteReply,
        PruneReply,
        RemoveWorkerReply,
        ResumeReply,
    )
    from omp.store.paths import StatePaths


def _project() -> StatePaths:
    from omp.store.paths import StatePaths, find_root

    return StatePaths(find_root(Path.cwd()))


def _config(team: str) -> Any:
    from omp.record import config as team_config

    return team_config.load(_project().team(team))


def register(team_app: typer.Typer) -> None:
    @team_app.command("add-worker")
    def add_worker(
        team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
        count_or_task: str = typer.Argument(
            None, metavar="[N]", help="How many workers (default 1).", callback=opt.text()
        ),
        task: str = typer.Argument(
            None, metavar="[TASK]", help="A task for them (split in N).", callback=opt.text()
        ),
        agent: str = typer.Option(
            None,
            "--agent",
            "-a",
            help="Agent profile (default: the team's).",
            callback=opt.text(max_len=256),
        ),
        ready_timeout: float = opt.ReadyTimeoutOpt,
        workspace: str = opt.WorkspaceOpt,
        carry_changes: bool = opt.CarryOpt,
        host: list[str] = opt.AddHostOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Add workers to a running team, in its window, with the next free names."""
        from omp.cli.output import progress
        from omp.cli.team_text import add_text

        def body() -> AddWorkerReply:
            from omp.errors import OmpError
            from omp.team.grow import add_workers

            hosts: list[tuple[str, int]] = []
            if host:
                from omp.team.hosts import parse_host

                hosts = [parse_host(h) for h in host]
            # N defaults to the workers --host places (else 1)
            n, text = max(1, sum(c for _, c in hosts)), task or ""
            if count_or_task is not None:
                if (given := opt.small_int(count_or_task)) is not None:
                    n = given
                elif count_or_task.isascii() and count_or_task.isdigit():
                    raise OmpError("invalid_input", f"N is far too many workers: {count_or_task}")
                elif task is None:
                    text = count_or_task
                else:
                    raise OmpError("usage", f"N must be a number, got {count_or_task!r}")
            return cast(
                "AddWorkerReply",
                add_workers(
                    _config(team),
                    n,
                    agent=agent,
                    task=text,
                    ready_timeout=ready_timeout,
                    progress=progress,
                    workspace=workspace,
                    carry_changes=carry_changes,
                    hosts=hosts,
                ),
            )

        run(body, as_json=as_json, human=add_text)

    @team_app.command("remove-worker")
    def remove_worker(
        team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
        name: str = typer.Argument(
            ..., help="The worker to remove, e.g. worker-2.", callback=opt.text()
        ),
        force: bool = typer.Option(False, "--force", help="Close its pane if it is still alive."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Take a worker off a running team; its work is interrupted, its mail kept."""
        from omp.cli.team_text import remove_text

        def body() -> RemoveWorkerReply:
            from omp.team.membership import remove_worker as do_remove

            return cast("RemoveWorkerReply", do_remove(_config(team), name, force=force))

        run(body, as_json=as_json, human=remove_text)

    @team_app.command("resume")
    def resume(
        team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
        worker: Annotated[
            list[str] | None,
            typer.Option(
                "--worker",
                "-w",
                help="Only this worker (repeatable; default: every member).",
                callback=opt.text(max_len=256),
            ),
        ] = None,
        socket: str | None = opt.SocketOpt,
        new_session: bool = opt.NewSessionOpt,
        ready_timeout: float = opt.ReadyTimeoutOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Start again every member whose pane died (all of them after a reboot).

        Each comes back in its worktree and, where its CLI allows, its own conversation; its
        task stays its own. When the team's tmux server is gone, on --socket's server."""
        from omp.cli.output import progress
        from omp.cli.team_text import resume_text

        def body() -> ResumeReply:
            from omp.team.resume import resume as do_resume

            reply = do_resume(
                _config(team),
                worker or None,
                socket=socket,
                new_session=new_session,
                ready_timeout=ready_timeout,
                progress=progress,
            )
            return cast("ResumeReply", reply)

        run(body, as_json=as_json, human=resume_text)

    @team_app.command("delete")
    def delete(
        team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
        force: bool = typer.Option(
            False,
            "--force",
            help="Delete even with unread mail or unmerged work in its worktrees (listed as lost).",
        ),
        as_json: bool = JsonOpt,
    ) -> None:
        """Remove a team's whole directory. Refused while a pane is alive or mail is unread."""
        from omp.cli.team_text import delete_text

        def body() -> DeleteReply:
            from omp.team.removal import delete as do_delete

            return cast("DeleteReply", do_delete(_project(), team, force=force))

        run(body, as_json=as_json, human=delete_text)

    @team_app.command("prune")
    def prune(
        older_than: str = typer.Option(
            "7d",
            "--older-than",
            metavar="DURATION",
            help="Only what ended this long ago (0: all).",
            callback=opt.duration(),
        ),
        dry_run: bool = typer.Option(False, "--dry-run", help="Say what would go; remove nothing."),
        force: bool = typer.Option(
            False,
            "--force",
            help="Also remove shut-down teams holding unread mail or unmerged work in worktrees.",
        ),
        as_json: bool = JsonOpt,
    ) -> None:
        """Remove archived runs and shut-down teams older than DURATION; keeps unread mail."""
        from omp.cli.team_text import prune_text

        def body() -> PruneReply:
            from omp.team.removal import parse_duration
            from omp.team.removal import prune as do_prune

            bound = parse_duration(older_than)
            return cast(
                "PruneReply", do_prune(_project(), older_than=bound, dry_run=dry_run, force=force)
            )

        run(body, as_json=as_json, human=prune_text)

    @team_app.command("events")
    def events(
        team: str = opt.declared(EVENTS, "team"),
        since: str = opt.declared(EVENTS, "since"),
        follow: bool = opt.declared(EVENTS, "follow"),
        as_json: bool = opt.declared(EVENTS, "as_json"),
    ) -> None:
        """The team's history: task moves, the leader's messages, members, loops. Read-only."""
        from omp.cli.events_cmd import events_loop

        events_loop(_project(), team, since=since, follow=follow, as_json=as_json)
