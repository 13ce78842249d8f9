"""`omp skills install`: the skills omp ships, copied into a project for the agent CLI to load."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import run

app = typer.Typer(
    help="Agent skills that teach a leader agent to use omp.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def register(root_app: typer.Typer) -> None:
    root_app.add_typer(app, name="skills")


@app.command("install")
def install(
    target: Annotated[
        Path | None,
        typer.Option(
            "--target",
            help="Directory, relative to the project root (default .github/skills; "
            "Claude Code reads .claude/skills).",
            callback=opt.path_text(),
        ),
    ] = None,
    force: bool = typer.Option(False, "--force", help="Overwrite files that differ from omp's."),
    as_json: bool = JsonOpt,
) -> None:
    """Copy omp's skills into the project; a changed file is kept unless --force."""

    def body() -> dict[str, Any]:
        from omp.skills import install as do_install
        from omp.store.paths import find_root

        return do_install(find_root(Path.cwd()), target, force=force)

    run(body, as_json=as_json, human=install_text)


def install_text(r: dict[str, Any]) -> str:
    from omp.textsafe import inline

    lines = [f"{f['action']:<9}  {inline(str(f['path']))}" for f in r["files"]]
    lines.append(
        f"skills {inline(', '.join(r['skills']))} in {inline(str(r['target']))}: "
        f"{r['created']} created, "
        f"{r['updated']} updated, {r['unchanged']} unchanged"
    )
    return "\n".join(lines)
