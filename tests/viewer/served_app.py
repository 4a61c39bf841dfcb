"""What the viewer's tests share besides fixtures: the served app's address and its write token."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

TOKEN = "test-token"


@dataclass(frozen=True)
class Served:
    workspace: Path
    run: str
    url: str
    token: str = TOKEN


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
