"""`lle run --slots N --lean`: the flywheel's batches through one batched decoder, in threads (no model loaded here)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from lle.config import RunConfig
from lle.core import Split
from lle.flywheel import loop, strategies
from lle.runtime.threaded import ThreadBackend
from lle.worlds.base import open_family


class FakeDecoder:
    def __init__(self) -> None:
        self.closed = False

    def policy(self, small_world: object = None, **params: Any) -> dict[str, Any]:
        return params

    def close(self) -> None:
        self.closed = True


def test_a_run_with_slots_uses_threads_one_decoder_and_its_lean_option(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config = RunConfig(suite="toy", model="smollm2-135m", strategies=["lle"], rounds=1, slots=3, lean=True)
    fw = loop.Flywheel(config, tmp_path)
    decoder = FakeDecoder()
    fw._decoder = decoder
    backend = fw.backend()
    assert isinstance(backend, ThreadBackend) and backend.threads == 3
    sw = open_family("toy/keys-v1").small_worlds(Split.train, 1)[0]
    greedy = fw.policy_factory(tmp_path / "lle.db")
    sampled = fw.policy_factory(tmp_path / "lle.db", attempt=1)
    assert greedy(sw) == {"temperature": 0.0, "seed": config.seed, "lean": True}
    explore = sampled(sw)
    assert explore["temperature"] == config.group_temperature and explore["seed"] != config.seed + 1000
    assert explore == sampled(sw)  # the same seed for the same small world
    monkeypatch.setattr(loop.Flywheel, "_run", lambda self: None)  # nothing to run: only the close is checked
    fw.run()
    assert decoder.closed and fw._decoder is None
    # The stored config says slots and lean, so a resumed run continues alike; a default run stores neither.
    assert loop.load_config(config.id, tmp_path).slots == 3
    assert "slots" not in RunConfig().model_dump(mode="json")


def test_worker_cache_stores_are_per_thread(tmp_path: Path) -> None:
    cache = strategies.WorkerCache()
    db = str(tmp_path / "s.db")
    mine = cache.store(db)
    theirs: list[object] = []
    thread = threading.Thread(target=lambda: theirs.append(cache.store(db)))
    thread.start()
    thread.join()
    assert cache.store(db) is mine and theirs[0] is not mine
