"""Helpers for the code-world tests: play a script through the real harness, lay out a repo on disk."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from lle.core import ActionRequest, Experience, SmallWorld
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.worlds.code.repo import RepoSpec


def _reward_and_info(exp: Experience) -> tuple[float, dict[str, Any]]:
    """The world's reward and info on the last step that reported one (the submit)."""
    for step in reversed(exp.steps):
        for fb in step.feedback:
            if fb.kind == "reward" and isinstance(fb.content, dict):
                info = fb.content.get("info")
                return float(fb.content["reward"]), dict(info) if isinstance(info, dict) else {}  # type: ignore[arg-type]
    return 0.0, {}


def _play(small_world: SmallWorld, actions: Sequence[ActionRequest | Mapping[str, Any]]) -> Experience:
    return run_episode(small_world, ScriptedPolicy(list(actions)))


@pytest.fixture
def play() -> Callable[[SmallWorld, Sequence[ActionRequest | Mapping[str, Any]]], Experience]:
    """play(small_world, actions) -> the experience of a scripted episode through the real harness."""
    return _play


@pytest.fixture
def reward_and_info() -> Callable[[Experience], tuple[float, dict[str, Any]]]:
    """reward_and_info(experience) -> the reward and info the world gave on submit."""
    return _reward_and_info


@pytest.fixture
def repo_dir(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """lay(spec, overrides) -> a fresh folder holding the spec's files with `overrides` written over them."""
    count = 0

    def lay(spec: RepoSpec, overrides: Mapping[str, str] | None = None) -> Path:
        nonlocal count
        count += 1
        root = tmp_path / f"repo{count}"
        for rel, text in {**spec.files, **(overrides or {})}.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return root

    yield lay
