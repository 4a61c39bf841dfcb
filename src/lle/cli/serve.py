"""`lle serve`: the OpenAI-compatible gateway (lle.gateway) in front of the embedded model or a URL."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from lle import workspace
from lle.cli.common import console, settings
from lle.errors import InvalidInputError

TOKEN_ENV = "LLE_GATEWAY_TOKEN"


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)."),
    port: int = typer.Option(8770, "--port", min=1, max=65535, help="Port to listen on."),
    upstream: str = typer.Option("embedded", "--upstream",
                                 help="`embedded` (llama.cpp in-process) or an OpenAI-compatible base URL (…/v1)."),
    model: str = typer.Option("smollm2-135m", "--model",
                              help="Catalog model or .gguf for embedded; the default model name for a URL."),
    token: str = typer.Option(None, "--token", envvar=TOKEN_ENV, show_envvar=True,
                              help="Bearer token clients must send (one client, `default`)."),
    clients: Path = typer.Option(None, "--clients", exists=True, dir_okay=False,
                                 help='JSON {"clients": {"TOKEN": {"name", "family", "project", "serve", '
                                      '"writeback"}}} for several clients and scopes.'),
    serve_back: bool = typer.Option(False, "--serve-experience",
                                    help="Serve the scope's rules, skills and memories back to the --token client."),
    upstream_key_env: str = typer.Option("LLE_UPSTREAM_API_KEY", "--upstream-key-env",
                                         help="Environment variable holding the upstream URL's API key."),
    max_body: int = typer.Option(2 * 1024 * 1024, "--max-body", min=1024, help="Largest request body, in bytes."),
    body_timeout: float = typer.Option(30.0, "--body-timeout", min=0.1,
                                       help="Seconds a request body may take to arrive after its headers (408)."),
    rate: float = typer.Option(20.0, "--rate", min=0.01, help="Requests per second per client (sustained)."),
    burst: int = typer.Option(64, "--burst", min=1, help="Requests a client may send at once."),
    fsync: bool = typer.Option(False, "--fsync", help="fsync each journal line (survives a power cut)."),
    adapter: list[str] = typer.Option([], "--adapter", metavar="ID|active",
                                      help="Also serve a LoRA adapter (`lle weights list`) as the model BASE:ID; "
                                           "`active` is the one the weights gate activated. Repeatable."),
) -> None:
    """Serve an OpenAI-compatible endpoint that records episodes, takes feedback and serves experience back."""
    from lle.gateway.config import ClientConfig, GatewayConfig, load_clients

    known = load_clients(clients) if clients else {}
    if token:
        known[token] = ClientConfig(name="default", serve=serve_back)
    if not known:
        raise InvalidInputError(f"no client token: pass --token TOKEN, set {TOKEN_ENV}, or --clients FILE "
                                "(the gateway never runs open)")
    if host not in ("127.0.0.1", "localhost", "::1"):
        console.print(f"note: binding {host}: the gateway is reachable from other machines (tokens still apply)",
                      highlight=False)
    config = GatewayConfig(workspace=workspace.resolve(settings.workspace), clients=known, upstream=upstream,
                           model=model, upstream_key=os.environ.get(upstream_key_env), max_body_bytes=max_body,
                           body_timeout_s=body_timeout, rate_per_s=rate, burst=burst, fsync=fsync)
    import uvicorn

    from lle.gateway.app import create_app
    from lle.gateway.bounds import HEADERS_TIMEOUT_S, HeadersInTime
    from lle.gateway.upstream import make_upstream

    # The store's thread (serving, ends) and llama.cpp's (its sampling loop is Python) share the GIL with
    # the event loop; a shorter switch interval (default 5 ms) keeps them from holding other calls up.
    sys.setswitchinterval(0.0005)
    backend = make_upstream(upstream, model, api_key=config.upstream_key, n_ctx=config.n_ctx,
                            adapters=_adapters(adapter, model))
    names = ", ".join([model, *getattr(backend, "adapters", {})]) if upstream == "embedded" else upstream
    console.print(f"lle serve: http://{host}:{port}/v1 → {names}; "
                  f"episodes at /episodes/ID/v1; store {config.workspace}", highlight=False)
    uvicorn.run(create_app(config, backend), host=host, port=port, log_level="warning", http=HeadersInTime,
                timeout_keep_alive=HEADERS_TIMEOUT_S)


def _adapters(refs: list[str], model: str) -> dict[str, Path]:
    """`--adapter` references -> {served model name: adapter file}; each must be live and trained on `model`."""
    if not refs:
        return {}
    from lle.carriers.weights import WeightsCarrier, served_name
    from lle.cli.common import open_store
    from lle.policies.catalog import locate, sha256_file

    out: dict[str, Path] = {}
    with open_store() as db:
        carrier = WeightsCarrier(db)
        for ref in refs:
            found = carrier.active() if ref == "active" else carrier.get(ref)
            if found is None:
                raise InvalidInputError("--adapter active: no adapter is active; name one with --adapter ID "
                                        "(`lle weights list`)")
            if found.state in ("revoked", "rejected", "retired"):
                raise InvalidInputError(f"--adapter {ref}: adapter {found.id} is {found.state}; serve a live one "
                                        "(`lle weights list`)")
            card = found.card
            if card.base_model != model and card.base_sha256 != sha256_file(locate(model, settings.workspace)):
                raise InvalidInputError(f"--adapter {ref}: adapter {found.id} was trained on {card.base_model}, not "
                                        f"{model}; pass --model {card.base_model}")
            out[served_name(found)] = found.path
    return out
