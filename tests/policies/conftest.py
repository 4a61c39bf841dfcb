"""The default model, loaded once per session (SmolLM2-135M: ~100 MB, fast on 2 cores)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def threads() -> int:
    """`LLE_THREADS` when set, else 1 (the policy's own default is 2).

    Two llama.cpp threads spin-wait on each other; on a machine that other jobs keep busy they
    measured 15x slower than one, and a test must not depend on having the machine to itself.
    """
    return int(os.environ.get("LLE_THREADS", "1"))


@pytest.fixture(scope="session")
def smollm_path() -> Path:
    pytest.importorskip("llama_cpp", reason="the llama extra is not installed (make test installs it)")
    from lle.errors import ModelError
    from lle.policies.catalog import DEFAULT_MODEL, locate
    from lle.policies.doctor import check_model

    path = locate(DEFAULT_MODEL)
    # Decode once in a child process first: a llama.cpp build that does not fit this CPU then fails the
    # tests with the reason and the fix instead of killing the whole run with a segmentation fault.
    try:
        check_model(path, tokens=2)
    except ModelError as err:
        pytest.fail(f"the embedded model does not run on this machine: {err}")
    return path


@pytest.fixture(scope="session")
def smollm(smollm_path: Path, threads: int) -> object:
    from lle.policies.catalog import make_policy

    return make_policy("smollm2-135m", n_threads=threads)
