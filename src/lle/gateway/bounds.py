"""A bound on every request body, shared by the gateway and the viewer: its size, and the time it takes to arrive.

uvicorn closes an idle kept-alive connection but sets no time for a body: a client that sends its headers and
then stalls, or trickles a byte now and then, would hold its request open for ever. `BoundedBody` wraps the
ASGI `receive`: the whole body must arrive within `timeout_s` of the headers (else 408, and the connection is
closed) and hold at most `max_bytes` (else 413: a larger Content-Length is refused before any byte is read).
Both are raised as HTTPException inside the app's own read, so each app answers in its own error shape. A
client gone before its body ends is a 400 nobody reads (no traceback in the server's log). Headers come
before any app runs: `HeadersInTime`, the HTTP protocol both servers run uvicorn with, closes a connection
whose request headers have not all arrived within `HEADERS_TIMEOUT_S` of it opening (or of the last answer).
"""

from __future__ import annotations

import asyncio

import h11
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_BODY_BYTES = 2 * 1024 * 1024
BODY_TIMEOUT_S = 30.0
HEADERS_TIMEOUT_S = 10
"""Run as uvicorn's `timeout_keep_alive` with `HeadersInTime`: idle kept-alive connections and late headers."""


class HeadersInTime(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, whose keep-alive timer also runs from the connection's start and is not
    reset by header bytes: a client that sends nothing, or trickles its headers, is closed at the timeout."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def data_received(self, data: bytes) -> None:
        pending, self.timeout_keep_alive_task = self.timeout_keep_alive_task, None  # the base would cancel it
        super().data_received(data)
        if pending is not None and self.conn.their_state is h11.IDLE and self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = pending  # a request is not under way yet: its deadline holds
        elif pending is not None:
            pending.cancel()


class BoundedBody:
    """ASGI middleware: a request body arrives within `timeout_s` of its headers and holds at most `max_bytes`;
    `fix` ends both messages (how to raise the bound)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES, timeout_s: float = BODY_TIMEOUT_S,
                 fix: str = "") -> None:
        self.app, self.max_bytes, self.timeout_s, self.fix = app, max_bytes, timeout_s, fix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline, size, done = loop.time() + self.timeout_s, 0, False
        declared = dict(scope["headers"]).get(b"content-length", b"")
        close = {"Connection": "close"}  # the rest of the body is never read: the connection cannot serve another
        too_big = HTTPException(413, f"request body is over the limit of {self.max_bytes} bytes; send less{self.fix}",
                                headers=close)

        async def bounded() -> Message:
            nonlocal size, done
            if done:  # the body is in: what follows is the wait for a disconnect, unbounded
                return await receive()
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise too_big
            try:
                message = await asyncio.wait_for(receive(), deadline - loop.time())
            except TimeoutError:
                raise HTTPException(408, f"request body did not arrive within {self.timeout_s:g} s of its headers; "
                                         f"send it whole and at once{self.fix}",
                                    headers=close) from None
            if message["type"] == "http.disconnect":
                raise HTTPException(400, "the client closed the connection before its request body ended")
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                raise too_big
            done = not message.get("more_body", False)
            return message

        await self.app(scope, bounded, send)
