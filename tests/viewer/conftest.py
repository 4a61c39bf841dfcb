"""One finished toy run (oracle policy: fast) shared by the viewer's tests, and the viewer served over it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from lle.config import RunConfig
from lle.flywheel import loop
from lle.viewer.app import create_app
from viewer.served_app import TOKEN, Served, free_port


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    workspace = tmp_path_factory.mktemp("viewer") / "ws"
    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=1, train_per_round=4, eval_tasks=2,
                       workers=1, monitor_watch=2)
    loop.Flywheel(config, workspace).run()
    return workspace, config.id


@pytest.fixture(scope="session")
def served(toy_run: tuple[Path, str]) -> Iterator[Served]:
    """`lle view` over the toy run, in a thread of this process, on a free port of 127.0.0.1."""
    workspace, run = toy_run
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(workspace, TOKEN), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the viewer did not start within 20 s")
        time.sleep(0.05)
    yield Served(workspace, run, f"http://127.0.0.1:{port}")
    server.should_exit = True
    thread.join(timeout=10)
