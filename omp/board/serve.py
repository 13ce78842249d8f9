"""Starting the board: bind the address, print the URL, serve until Ctrl-C (uvicorn).

The socket is bound here, before uvicorn runs, so the URL printed on the first line names the
port that is really listening (a free one unless `port` is given), and nothing else can take it
in between.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import NamedTuple

from omp.errors import OmpError
from omp.store.paths import StatePaths

LOOPBACK = "127.0.0.1"


class Bound(NamedTuple):
    sock: socket.socket
    host: str
    port: int
    url_host: str  # the host as a URL writes it ([::1] for an IPv6 address)


def bind(host: str, port: int) -> Bound:
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        raise OmpError("invalid_input", f"--host must be an IP address, got {host!r}") from None
    if not 0 <= port <= 65535:
        raise OmpError("invalid_input", f"--port must be 0-65535, got {port}")
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        raise OmpError(
            "board_unavailable", f"cannot listen on {host} port {port}: {exc.strerror or exc}"
        ) from None
    sock.set_inheritable(True)
    url_host = f"[{host}]" if family == socket.AF_INET6 else host
    return Bound(sock, host, sock.getsockname()[1], url_host)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    project: StatePaths,
    team: str | None,
    *,
    host: str = LOOPBACK,
    port: int = 0,
    open_browser: bool = False,
    say: Callable[[str], None],
    warn: Callable[[str], None],
    tick: float | None = None,
) -> None:
    """Serve the board of `project` until interrupted; `say` gets the URL first."""
    import uvicorn

    from omp.board.app import build
    from omp.board.hub import TICK, Hub
    from omp.board.security import Guard, new_token

    bound = bind(host, port)
    token = new_token()
    query = f"?token={token}"
    if team:
        query += f"&team={team}"
    url = f"http://{bound.url_host}:{bound.port}/{query}"
    hosts = {
        f"{LOOPBACK}:{bound.port}",
        f"localhost:{bound.port}",
        f"{bound.url_host}:{bound.port}",
    }
    hub = Hub(project, tick=TICK if tick is None else tick)
    app = Guard(build(project, hub, token, team), token, bound.port, hosts)
    say(url)
    if not is_loopback(host):
        warn(
            f"omp board: WARNING: listening on {host}, not only this machine: anyone who can "
            "reach it and learns the URL acts as the leader of your teams (types into their "
            "panes, merges their work)"
        )
    say(f"omp board of {project.root}: open the URL above; Ctrl-C stops it")
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
        server_header=False,
        date_header=False,
    )
    server = uvicorn.Server(config)
    hub.start()
    try:
        if open_browser:
            import webbrowser

            webbrowser.open(url)
        server.run(sockets=[bound.sock])
    finally:
        hub.stop()
        bound.sock.close()
