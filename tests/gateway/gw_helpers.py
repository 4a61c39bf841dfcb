"""What the gateway tests share besides fixtures: tokens and a tool list."""

from __future__ import annotations

TOKEN = "test-token-alice"
OTHER = "test-token-bob"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OTHER_AUTH = {"Authorization": f"Bearer {OTHER}"}
TOOLS = [{"type": "function", "function": {"name": "run_tests", "description": "Run the project's tests.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def stalled_answer(port: int, head: bytes, *, trickle: bool = False, within_s: float = 10.0) -> tuple[bytes, float]:
    """Send `head` (request headers and part of a body) on a raw socket, then stall (or send one byte every
    0.2 s): what the server answers until it closes the connection, and how many seconds that took."""
    import contextlib
    import socket
    import time

    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=within_s) as sock:
        sock.sendall(head)
        started = time.monotonic()
        sock.settimeout(0.2)
        while time.monotonic() - started < within_s:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                if trickle:
                    with contextlib.suppress(OSError):
                        sock.sendall(b" ")
                continue
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        return got, time.monotonic() - started
