"""A bound on every request body, shared by the gateway and the viewer: its size, and the time it takes to arrive.

uvicorn closes an idle kept-alive connection but sets no time for a body: a client that sends its headers and
then stalls, or trickles a byte now and then, would hold its request open for ever. `BoundedBody` wraps the
ASGI `receive`: the whole body must arrive within `timeout_s` of the headers (else 408, and the connection is
closed) and hold at most `max_bytes` (else 413: a larger Content-Length is refused before any byte is read).
Both are raised as HTTPException inside the app's own read, so each app answers in its own error shape. A
client gone before its body ends is a 400 nobody reads (no traceback in the server's log). Only Python's
standard library and Starlette: the viewer imports it beside the gateway.
"""

from __future__ import annotations

import asyncio

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 2 * 1024 * 1024
BODY_TIMEOUT_S = 30.0


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
