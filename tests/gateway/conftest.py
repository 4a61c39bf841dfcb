"""Gateway fixtures: a stub upstream on localhost, and gateways over a temp workspace (in-process or on a port)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gateway.gw_helpers import OTHER, TOKEN
from lle.gateway.app import create_app
from lle.gateway.config import ClientConfig, GatewayConfig
from lle.gateway.stub import StubUpstream
from lle.gateway.upstream import HttpUpstream, Upstream


@pytest.fixture(scope="module")
def stub() -> Iterator[StubUpstream]:
    server = StubUpstream().start()
    yield server
    server.stop()


def config(workspace: Path, **kwargs: Any) -> GatewayConfig:
    clients = {TOKEN: ClientConfig(name="alice"), OTHER: ClientConfig(name="bob")}
    return GatewayConfig(workspace=workspace, clients=kwargs.pop("clients", clients), **kwargs)


@pytest.fixture
def gateway(tmp_path: Path, stub: StubUpstream) -> Callable[..., Any]:
    """`with gateway(**config) as client:` a TestClient of a gateway in front of the stub."""

    @contextmanager
    def make(upstream: Upstream | None = None, **kwargs: Any) -> Iterator[TestClient]:
        cfg = config(tmp_path / "ws", upstream=stub.base_url, model="stub", **kwargs)
        with TestClient(create_app(cfg, upstream or HttpUpstream(stub.base_url, "stub"))) as client:
            yield client

    return make
