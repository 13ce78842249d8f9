"""The board's web application (Starlette): the page, its static files, the live stream and the
actions. Every route sits behind `omp.board.security.Guard` (see `omp.board.serve`).

- `GET /`: the page (the token for its actions in a meta tag; everything else arrives by stream);
- `GET /static/...`: its script, style and icon, shipped in the package (the page works offline);
- `GET /api/stream?team=NAME`: Server-Sent Events: `reset` (every section) first, then `update`
  (the sections that changed), from `omp.board.hub`;
- `GET /api/diff?team=&worker=` (or `&task=`): a worker's (or a backlog task's) diff, file by
  file;
- `POST /api/send|comment|answer|merge`: the actions (`omp.board.actions`; `comment` and `merge`
  take a `task` instead of a `worker`), JSON in and out;
- `POST /api/task/add|cancel|retry`: the backlog's (`omp.board.backlog`).

An action's refusal is its `OmpError` as JSON (`{"ok": false, "error", "message"}`): 400 for bad
input, 409 for a refusal; a bug is 500 with its type only (no traceback leaves the process).
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from omp.board import actions, backlog
from omp.board.hub import Hub
from omp.errors import EXIT_USAGE, OmpError
from omp.store.names import is_valid_name
from omp.store.paths import StatePaths
from omp.textsafe import json_safe

STATIC = Path(__file__).resolve().parent / "static"
KEEP_ALIVE = 15.0
MAX_BODY = 128 * 1024


def dumps(obj: Any) -> str:
    return json_safe(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False))


class Json(JSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content).encode("utf-8")


def _error(err: OmpError) -> Response:
    return Json(err.to_json(), status_code=400 if err.exit_code == EXIT_USAGE else 409)


Action = Callable[[StatePaths, dict[str, Any]], dict[str, Any]]


def on_task(worker: Action, task: Action) -> Action:
    """A worker's action, or a backlog task's when the request names a `task`."""

    def either(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
        return (task if "task" in data else worker)(project, data)

    return either


def build(project: StatePaths, hub: Hub, token: str, team: str | None) -> Starlette:
    page = (STATIC / "index.html").read_text(encoding="utf-8")

    async def index(request: Request) -> Response:
        chosen = request.query_params.get("team") or team or ""
        body = page.replace("{{TOKEN}}", html.escape(token, quote=True))
        body = body.replace("{{TEAM}}", html.escape(chosen, quote=True))
        body = body.replace("{{ROOT}}", html.escape(str(project.root), quote=True))
        return HTMLResponse(body)

    async def stream(request: Request) -> Response:
        name = request.query_params.get("team") or None
        if name is not None and not is_valid_name(name):
            return Json({"ok": False, "error": "invalid_team_name"}, status_code=400)
        wid, w = hub.watch(name)

        async def events() -> AsyncIterator[bytes]:
            try:
                yield b"retry: 1000\n\n"
                while True:
                    try:
                        kind, data = await asyncio.wait_for(w.queue.get(), KEEP_ALIVE)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    w.size -= 1
                    yield f"event: {kind}\ndata: {dumps(data)}\n\n".encode()
            finally:
                hub.unwatch(wid)

        return StreamingResponse(events(), media_type="text/event-stream")

    def diff(request: Request) -> Response:
        q = request.query_params
        try:
            if "task" in q:
                return Json(backlog.diff(project, q.get("team", ""), q["task"]))
            return Json(actions.diff(project, q.get("team", ""), q.get("worker", "")))
        except OmpError as err:
            return _error(err)

    def act(fn: Action) -> Any:
        async def endpoint(request: Request) -> Response:
            raw = await request.body()
            if len(raw) > MAX_BODY:
                return _error(OmpError("invalid_input", "the request is too large"))
            try:
                data = json.loads(raw)
            except ValueError:
                return _error(OmpError("invalid_json", "the request is not JSON"))
            if not isinstance(data, dict):
                return _error(OmpError("invalid_json", "the request must be a JSON object"))

            def run() -> Response:
                try:
                    out = fn(project, data)
                except OmpError as err:
                    return _error(err)
                except Exception as exc:  # a bug: said, never a traceback on the page
                    from omp.cli.output import write_err  # the one door to a terminal

                    write_err(f"omp board: internal error: {type(exc).__name__}: {exc}\n")
                    return Json(
                        {"ok": False, "error": "internal", "message": type(exc).__name__},
                        status_code=500,
                    )
                finally:
                    hub.poke(
                        data.get("team") if isinstance(data.get("team"), str) else None,
                        data.get("worker") if isinstance(data.get("worker"), str) else None,
                    )
                return Json(out)

            from starlette.concurrency import run_in_threadpool

            return await run_in_threadpool(run)

        return endpoint

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/api/stream", stream, methods=["GET"]),
        Route("/api/diff", diff, methods=["GET"]),
        Route("/api/send", act(actions.send), methods=["POST"]),
        Route("/api/comment", act(on_task(actions.comment, backlog.comment)), methods=["POST"]),
        Route("/api/answer", act(actions.answer), methods=["POST"]),
        Route("/api/merge", act(on_task(actions.merge, backlog.merge)), methods=["POST"]),
        Route("/api/task/add", act(backlog.add), methods=["POST"]),
        Route("/api/task/cancel", act(backlog.cancel), methods=["POST"]),
        Route("/api/task/retry", act(backlog.retry), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes)
