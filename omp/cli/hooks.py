"""`omp hooks install`: omp's stop hook in each agent CLI's project hook file (omp/stophook)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import run

if TYPE_CHECKING:
    from omp.cli.replies import HooksReply

app = typer.Typer(
    help="The stop hook that keeps an agent working while a loop is active.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def register(root_app: typer.Typer) -> None:
    root_app.add_typer(app, name="hooks")
    root_app.add_typer(hook_app, name="hook")


@app.command("install")
def install(
    agent: Annotated[
        str,
        typer.Option(
            "--agent",
            help="copilot (default, omp's default agent), claude, codex, gemini, pi (an "
            "extension), or all (the four hook files).",
            callback=opt.text(max_len=256),
        ),
    ] = "copilot",
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove omp's entries only."),
    force: bool = typer.Option(False, "--force", help="Replace an omp entry that was changed."),
    as_json: bool = JsonOpt,
) -> None:
    """Write `omp hook stop` into each agent CLI's hook file, keeping everything else."""

    def body() -> HooksReply:
        from omp.stophook.install import install as do_install
        from omp.store.paths import find_root

        return cast(
            "HooksReply", do_install(find_root(Path.cwd()), agent, uninstall=uninstall, force=force)
        )

    run(body, as_json=as_json, human=install_text)


hook_app = typer.Typer(
    help="What agent CLIs run at every stop: `omp hook stop` (see `omp hooks install`).",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@hook_app.command("stop")
def stop() -> None:
    """Read a stop hook's JSON on stdin; print the CLI's block or allow (never fails closed).

    Reached through typer only in odd spellings: `omp hook stop` itself takes the fast path in
    omp/cli/__init__.py.
    """
    from omp.cli.hook_stop import main

    raise SystemExit(main([]))


NEXT_STEPS = {
    "copilot": "Copilot loads it in a trusted folder (answer its folder-trust dialog once)",
    "claude": "Claude Code loads it at its next start (Copilot CLI reads this file too)",
    "codex": "Codex runs it only once the project is trusted and the hook reviewed (/hooks)",
    "gemini": "Gemini runs project hooks only in a trusted folder",
    "pi": "pi loads the extension at its next start (or /reload)",
}


def install_text(r: dict[str, Any]) -> str:
    from omp.textsafe import inline

    lines = [f"{h['action']:<9}  {h['agent']:<8} {inline(h['path'])}" for h in r["hooks"]]
    if not r["uninstall"]:
        lines.append(f"hook command: {inline(r['command'])}")
        for h in r["hooks"]:
            if h["action"] in ("created", "added", "updated"):
                lines.append(f"  {h['agent']}: {NEXT_STEPS[h['agent']]}")
    shown = ", ".join(f"{n} {a}" for a, n in r["counts"].items())
    lines.append(f"omp stop hooks in {inline(r['root'])}: {shown}")
    return "\n".join(lines)
