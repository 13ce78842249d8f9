"""Who may talk to the board: the token, the Host and Origin checks, and the headers every answer
carries. A plain ASGI middleware around the whole app, so no route can forget a check.

The board can type into agents' panes and merge branches: anything that reaches it acts as the
leader. So:

- it listens on 127.0.0.1 (another address only when asked, with a warning);
- every request must carry the board's secret token (as Jupyter does): in the query of the URL
  `omp team board` printed (`/?token=...`, answered with a cookie and a redirect that drops the
  token from the address bar), then in that cookie (HttpOnly, SameSite=Strict, named per port:
  cookies are shared by every port of a host);
- a request whose Host is not the board's own address is refused: a page elsewhere cannot make
  its own name resolve to 127.0.0.1 and read the board (DNS rebinding);
- a state-changing request (anything but GET and HEAD) also needs the token in the
  `X-OMP-Board-Token` header, an `Origin` equal to the board's, and a JSON body: a form or a
  script on another site can send none of these (a cross-site request cannot set the header
  without a preflight, which is refused: no CORS header is ever sent);
- every answer forbids framing, caching and referrers, and carries a strict Content Security
  Policy: scripts, styles and connections from the board itself only, nothing inline.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http import cookies
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEADER = "x-omp-board-token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SAFE_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
REFUSED = (
    "omp board: refused: {why}. Open the address `omp team board` printed (it carries the "
    "board's token).\n"
)


def new_token() -> str:
    return secrets.token_urlsafe(32)


class Guard:
    """The checks of the module, around `app`. `hosts`: the Host header values the board
    answers to (`127.0.0.1:PORT`, `localhost:PORT`, and the address it was bound to)."""

    def __init__(self, app: ASGIApp, token: str, port: int, hosts: set[str]) -> None:
        self.app = app
        self.token = token
        self.cookie = f"omp_board_{port}"
        self.hosts = hosts
        self.origins = {f"http://{h}" for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # websockets: the board has none
        headers = _headers(scope)
        why = self._refusal(scope, headers)
        if why is not None:
            await _plain(send, 403, REFUSED.format(why=why))
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if query.get("token") and scope["method"] == "GET":
            # the printed URL: the token moves into the cookie and out of the address bar
            await _redirect(send, scope, self.cookie, self.token)
            return

        async def send_safe(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *(
                        (k, v)
                        for k, v in message.get("headers", [])
                        if not k.lower().startswith(b"access-control-")
                    ),
                    *SAFE_HEADERS,
                ]
            await send(message)

        await self.app(scope, receive, send_safe)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> str | None:
        host = headers.get("host", "")
        if host not in self.hosts:
            return f"Host {host!r} is not this board's address"
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = query.get("token", [""])[0] or _cookie(headers.get("cookie", ""), self.cookie)
        if not given or not secrets.compare_digest(given.encode(), self.token.encode()):
            return "no valid token"
        if scope["method"] in ("GET", "HEAD"):
            return None
        if not secrets.compare_digest(headers.get(HEADER, "").encode(), self.token.encode()):
            return f"a state-changing request needs the {HEADER} header"
        origin = headers.get("origin")
        if origin not in self.origins:
            return f"Origin {origin!r} is not this board's"
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return "a state-changing request must send JSON"
        return None


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers", []):
        key = k.decode("latin-1").lower()
        # a repeated header is refused by taking none of it (a second Host, a second token)
        out[key] = "\x00" if key in out else v.decode("latin-1")
    return out


def _cookie(header: str, name: str) -> str:
    jar: cookies.SimpleCookie = cookies.SimpleCookie()
    try:
        jar.load(header)
    except cookies.CookieError:
        return ""
    morsel = jar.get(name)
    return morsel.value if morsel is not None else ""


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SAFE_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, scope: Scope, cookie: str, token: str) -> None:
    # Keep every query parameter but the token (`?team=x` stays)
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    query.pop("token", None)
    from urllib.parse import urlencode

    rest = urlencode({k: v[0] for k, v in query.items()})
    where = scope.get("path", "/") + (f"?{rest}" if rest else "")
    if not where.startswith("/") or where.startswith("//"):
        where = "/"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", where.encode("latin-1", "replace")),
                (
                    b"set-cookie",
                    f"{cookie}={token}; HttpOnly; SameSite=Strict; Path=/".encode(),
                ),
                (b"content-length", b"0"),
                *SAFE_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
