"""Shared fixtures: real stores in temp folders, and a factory for well-formed experiences."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from factories import build_experience
from lle.core import Experience
from lle.store import Store


@pytest.fixture
def make_experience() -> Callable[..., Experience]:
    return build_experience


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "lle.db") as db:
        yield db
