"""The board: `omp team board`, a local web page that shows a project's teams live and acts on
them as the leader.

Owns: the web server (Starlette on uvicorn, the `omp[board]` extra), the feed that turns the
views' answers into changes pushed to the page (Server-Sent Events), the page's static files, and
the actions the page asks for. Imports: the views (`omp.views`: status, usage, worktrees), the
`omp team api` operations (`omp.api.operations`: every message goes through the send pipeline
and its authorization), merging (`omp.team.merging`), answering a prompt (`omp.mail.answer`).

Nothing in omp imports this package but `omp team board`'s command body: the per-call commands
agents run never load it or its web framework. This module itself imports neither: the command
asks `require()` first, so a missing extra is one clear error, never a traceback.
"""

from __future__ import annotations

# The extra's import names (pyproject.toml: [project.optional-dependencies] board).
REQUIRES: tuple[str, ...] = ("starlette", "uvicorn")
INSTALL = "pip install 'omp[board]'"


def missing(names: tuple[str, ...] | None = None) -> list[str]:
    """The extra's modules that cannot be imported here (found, not imported)."""
    from importlib.util import find_spec

    out = []
    for name in REQUIRES if names is None else names:
        try:
            if find_spec(name) is None:
                out.append(name)
        except (ImportError, ValueError):
            out.append(name)
    return out


def require(names: tuple[str, ...] | None = None) -> None:
    """Raise `board_not_installed`, saying how to install the extra, unless it is installed."""
    gone = missing(names)
    if gone:
        import sys

        from omp.errors import OmpError
        from omp.invocation import quote

        raise OmpError(
            "board_not_installed",
            f"the board needs the extra omp[board] ({', '.join(gone)} missing): install it with "
            f"{INSTALL}, into the Python omp runs from: "
            f"{quote(sys.executable)} -m {INSTALL}",
            missing=gone,
            install=INSTALL,
        )
