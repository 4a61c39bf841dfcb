"""The gateway's own HTTP/1.1 client for plain-http upstreams: Content-Length and chunked answers, a kept-alive
connection reused, one the server closed meanwhile retried once on a new one, a server that is gone named."""

from __future__ import annotations

import asyncio

import pytest

from lle.gateway.upstream import HttpUpstream, KeepAlivePool, UpstreamError

ANSWERS = {
    "length": b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"a\": \"ok\"}",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=1\r\n{\"a\"\r\n7\r\n: \"ok\"}\r\n0\r\n\r\n",
}


async def serve(kind: str, *, close_after_each: bool = False) -> tuple[asyncio.Server, list[int]]:
    """A server answering every POST the same way; `connections` counts the connections it accepted."""
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                              if h.lower().startswith(b"content-length"))
                await reader.readexactly(length)
                writer.write(ANSWERS[kind])
                await writer.drain()
                if close_after_each:  # without saying so: the client finds out on its next request
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, connections


@pytest.mark.parametrize("kind", ["length", "chunked"])
def test_answers_by_length_and_by_chunks_on_one_kept_connection(kind: str) -> None:
    async def main() -> None:
        server, connections = await serve(kind)
        port = server.sockets[0].getsockname()[1]
        upstream = HttpUpstream(f"http://127.0.0.1:{port}/v1", "m")
        for _ in range(3):
            assert await upstream.complete({"messages": []}) == {"a": "ok"}
        assert len(connections) == 1
        await upstream.aclose()
        server.close()

    asyncio.run(main())


def test_a_connection_closed_by_the_server_is_retried_once_on_a_new_one() -> None:
    async def main() -> None:
        server, connections = await serve("length", close_after_each=True)
        pool = KeepAlivePool("127.0.0.1", server.sockets[0].getsockname()[1], timeout=5)
        for _ in range(3):
            assert await pool.post("/v1/chat/completions", b"Host: x\r\n", b"{}") == (200, b"{\"a\": \"ok\"}")
            await asyncio.sleep(0.05)  # the server's close reaches the client's side
        assert len(connections) == 3
        pool.close()
        server.close()

    asyncio.run(main())


def test_a_server_that_is_gone_is_a_502_naming_the_upstream() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        upstream = HttpUpstream(f"http://127.0.0.1:{port}/v1", "m")
        with pytest.raises(UpstreamError) as err:
            await upstream.complete({"messages": []})
        message = err.value.message
        assert err.value.status == 502 and f"127.0.0.1:{port}" in message and "--upstream" in message

    asyncio.run(main())
