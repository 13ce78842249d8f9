"""The board's door (`omp.board.security.Guard`), as plain ASGI calls: the token (query, then
cookie), the Host check, what a state-changing request must carry, and the headers every answer
has. No server, no framework: the guard stands in front of any app."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest

from omp.board.security import CSP, HEADER, Guard

TOKEN = "t0ken-t0ken"
PORT = 4242
HOST = f"127.0.0.1:{PORT}"


async def inner(scope: Any, receive: Any, send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"access-control-allow-origin", b"*"), (b"content-type", b"text/plain")],
        }
    )
    await send({"type": "http.response.body", "body": b"inside"})


def call(
    method: str = "GET",
    path: str = "/",
    query: str = "",
    headers: dict[str, str] | None = None,
    extra: list[tuple[str, str]] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    guard = Guard(inner, TOKEN, PORT, {HOST, f"localhost:{PORT}"})
    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": HOST, **(headers or {})}.items()]
    raw += [(k.encode(), v.encode()) for k, v in extra or []]
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query.encode(),
        "headers": raw,
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    asyncio.run(guard(scope, receive, send))
    start = sent[0]
    hdrs = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], hdrs, b"".join(m.get("body", b"") for m in sent[1:])


COOKIE = {"cookie": f"omp_board_{PORT}={TOKEN}"}
POST_OK = {
    **COOKIE,
    HEADER: TOKEN,
    "origin": f"http://{HOST}",
    "content-type": "application/json",
}


def test_no_token_is_refused_and_says_how_to_get_in() -> None:
    status, headers, body = call()
    assert status == 403
    assert b"omp team board" in body and b"inside" not in body
    assert headers["content-security-policy"] == CSP


@pytest.mark.parametrize("query", ["token=wrong", "token=", "tok=" + TOKEN])
def test_a_wrong_token_is_refused(query: str) -> None:
    assert call(query=query)[0] == 403


def test_the_printed_url_sets_the_cookie_and_drops_the_token_from_the_address() -> None:
    status, headers, _ = call(query=f"token={TOKEN}&team=demo")
    assert status == 303
    assert headers["location"] == "/?team=demo"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"omp_board_{PORT}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_the_cookie_lets_a_read_in_with_every_safe_header_and_no_cors() -> None:
    status, headers, body = call(headers=COOKIE)
    assert (status, body) == (200, b"inside")
    assert headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "'unsafe-inline'" not in CSP
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-content-type-options"] == "nosniff"
    assert not any(k.startswith("access-control-") for k in headers)


@pytest.mark.parametrize(
    "host", ["evil.example", f"evil.example:{PORT}", "127.0.0.1:1", f"0.0.0.0:{PORT}"]
)
def test_another_host_is_refused_even_with_the_token(host: str) -> None:
    assert call(headers={**COOKIE, "host": host})[0] == 403


def test_two_host_headers_are_refused() -> None:
    assert call(headers=COOKIE, extra=[("host", "evil.example")])[0] == 403


def test_a_state_changing_request_needs_header_origin_and_json() -> None:
    assert call("POST", "/api/send", headers=POST_OK)[0] == 200
    for drop in (HEADER, "origin", "content-type"):
        headers = {k: v for k, v in POST_OK.items() if k != drop}
        assert call("POST", "/api/send", headers=headers)[0] == 403, drop
    for key, bad in (
        (HEADER, "wrong"),
        ("origin", "http://evil.example"),
        ("origin", "null"),
        ("content-type", "text/plain"),
        ("content-type", "application/x-www-form-urlencoded"),
    ):
        assert call("POST", "/api/send", headers={**POST_OK, key: bad})[0] == 403, (key, bad)
    # the token in the query does not stand in for the header
    no_header = {k: v for k, v in POST_OK.items() if k != HEADER}
    assert call("POST", "/api/send", query=f"token={TOKEN}", headers=no_header)[0] == 403
    assert call("OPTIONS", "/api/send", headers={"origin": "http://evil.example"})[0] == 403
