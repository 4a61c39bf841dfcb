"""The gateway's settings: clients (token → name and scope), the upstream, the limits.

A client's scope is its task family: every episode it records and every item served back to it
lies in that family (`gw-NAME` unless configured), so no client reads another's experience. The
caller picks the project inside it (header `X-LLE-Project`, or the end body).
"""

from __future__ import annotations

import hmac
import json
import re
from dataclasses import dataclass
from pathlib import Path

from lle.core import CarrierKind
from lle.errors import InvalidInputError
from lle.gateway.capture import WRITEBACK_ALLOWED

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")


@dataclass(frozen=True)
class ClientConfig:
    name: str
    """Who: part of every small-world id and the router's actor."""
    family: str = ""
    """Task family of its episodes and of what it is served (default `gw-NAME`)."""
    project: str = "default"
    """Project when the caller names none."""
    serve: bool = False
    """Add the scope's active rules, skills and memories to its requests (opt-in; also per request
    with the header `X-LLE-Serve: 1`)."""
    writeback: tuple[CarrierKind, ...] = (CarrierKind.memory, CarrierKind.rules)
    """Carriers its experience may reach by default (the end body may narrow it)."""

    def __post_init__(self) -> None:
        if not NAME.match(self.name):
            raise InvalidInputError(f"client name {self.name!r}: use 1-80 letters, digits, `_`, `.` or `-`")
        if not self.family:
            object.__setattr__(self, "family", f"gw-{self.name}")
        for value, what in ((self.family, "family"), (self.project, "project")):
            if not NAME.match(value):
                raise InvalidInputError(f"client {self.name}: {what} {value!r} must be 1-80 letters, digits, _ . -")
        bad = [c.value for c in self.writeback if c not in WRITEBACK_ALLOWED]
        if bad:
            raise InvalidInputError(f"client {self.name}: writeback {bad} is not possible through the gateway; "
                                    f"use {', '.join(c.value for c in WRITEBACK_ALLOWED)}")


@dataclass
class GatewayConfig:
    workspace: Path
    """The workspace whose store receives the experience (`.lle` by default)."""
    clients: dict[str, ClientConfig]
    """Bearer token → client."""
    upstream: str = "embedded"
    """`embedded` (llama.cpp in-process) or the base URL of an OpenAI-compatible server (…/v1)."""
    model: str = "smollm2-135m"
    """Catalog model or .gguf path for `embedded`; the default model name sent to a URL upstream."""
    upstream_key: str | None = None
    """API key sent to a URL upstream (never the client's gateway token)."""
    max_body_bytes: int = 2 * 1024 * 1024
    """Largest request body (413 above it)."""
    body_timeout_s: float = 30.0
    """A request body must arrive within this many seconds of its headers (408 after)."""
    rate_per_s: float = 20.0
    """Sustained requests per second per client (a token bucket)."""
    burst: int = 64
    """Requests a client may send at once before the rate applies."""
    served_k: int = 3
    """At most this many items of each carrier are served back per request."""
    fsync: bool = False
    """fsync every journal line (survives a power cut; a process crash is survived without it)."""
    n_threads: int | None = None
    n_ctx: int = 4096

    def client_for(self, token: str) -> ClientConfig | None:
        for known, client in self.clients.items():
            if hmac.compare_digest(known.encode(), token.encode()):  # no timing hint about the token
                return client
        return None


def load_clients(path: Path) -> dict[str, ClientConfig]:
    """Clients from a JSON file: `{"clients": {"TOKEN": {"name": …, "family": …, "serve": true, …}}}`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        clients = data["clients"]
        out = {}
        for token, spec in clients.items():
            spec = dict(spec)
            if "writeback" in spec:
                spec["writeback"] = tuple(CarrierKind(c) for c in spec["writeback"])
            out[str(token)] = ClientConfig(**spec)
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        example = '{"clients": {"TOKEN": {"name": "me"}}}'
        raise InvalidInputError(f"--clients {path}: {err}; write it as {example}") from err
