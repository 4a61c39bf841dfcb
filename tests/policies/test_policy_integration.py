"""Real episodes of `toy/keys-v1` through the real harness and store, with the real model:
through a real llama.cpp OpenAI-compatible server (`policies/openai.py`) and embedded (`policies/llama.py`)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lle.actions import NO_ACTION, action_schema, parse_action
from lle.context import BudgetedContextBuilder
from lle.core import Experience, Limits, Split
from lle.policies.llama import LlamaPolicy, load_token_counter
from lle.policies.openai import OpenAIPolicy
from lle.runtime.harness import run_episode, stop_of
from lle.store import Store
from lle.worlds.base import open_family, open_world

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(smollm_path: Path, threads: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("uvicorn", reason="llama-cpp-python[server] extras missing (make test installs them)")
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm_path), "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", "2048", "--n_threads", str(threads), "--n_threads_batch", str(threads),
             "--logits_all", "False",
             "--verbose", "False"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not come up in 90 s: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def assert_all_actions_valid(exp: Experience, stored: Experience) -> None:
    tools = open_world(exp.small_world).tools
    schema = action_schema(tools)
    assert stored.steps == exp.steps and exp.steps
    for step in stored.steps:
        assert step.request.tool != NO_ACTION, step.effect.error
        assert step.llm is not None and step.llm.completion_tokens > 0
        parse_action(schema, step.request.model_dump(include={"thought", "tool", "args", "expect"}))
    stop = stop_of(stored.steps[-1])
    assert stop is not None and stop.reason != "PolicyFailed", stop.detail if stop else None


def keys_world(seed: int, project: str | None = None) -> Any:
    return open_family("toy/keys-v1").small_world(Split.train, seed, project=project)


@pytest.mark.timeout(600)
def test_episode_through_llama_cpp_server(server_url: str, smollm_path: Path, tmp_path: Path) -> None:
    policy = OpenAIPolicy("smollm2-135m", base_url=server_url, timeout=60, seed=1)
    builder = BudgetedContextBuilder(count_tokens=load_token_counter(smollm_path), budget_tokens=1536)
    with Store(tmp_path / "lle.db") as store:
        exp = run_episode(keys_world(1), policy, builder, Limits(max_steps=5, max_seconds=300), store=store)
        stored = store.get_experience(exp.id)
    assert_all_actions_valid(exp, stored)
    assert policy.mode == "json_object"  # llama.cpp's schema-constrained dialect, not the unconstrained fallback
    assert stored.policy.model == "openai:smollm2-135m"


@pytest.mark.timeout(600)
def test_episode_embedded(smollm: LlamaPolicy, tmp_path: Path) -> None:
    builder = BudgetedContextBuilder(count_tokens=smollm.count_tokens)
    with Store(tmp_path / "lle.db") as store:
        exp = run_episode(keys_world(1), smollm, builder, Limits(max_steps=5, max_seconds=300), store=store)
        stored = store.get_experience(exp.id)
    assert_all_actions_valid(exp, stored)
    assert stored.policy.model == "smollm2-135m" and stored.policy.sha256 == smollm.sha256


@pytest.mark.timeout(900)  # bounded by max_steps x max_tokens; generous for a loaded machine
def test_fifty_steps_all_parse(smollm_path: Path, threads: int) -> None:
    # sampled (temperature 0.8, a seed per episode) so the actions vary across tools and arguments
    policy = LlamaPolicy(smollm_path, model_id="smollm2-135m", temperature=0.8, max_tokens=160, n_threads=threads)
    builder = BudgetedContextBuilder(count_tokens=policy.count_tokens, budget_tokens=1024)
    steps = 0
    tools_used: set[str] = set()
    episode = 0
    while steps < 50:
        policy.seed = episode
        sw = keys_world(episode, ("manor", "cellar")[episode % 2])
        exp = run_episode(sw, policy, builder, Limits(max_steps=10, max_seconds=600))
        schema = action_schema(open_world(sw).tools)
        for step in exp.steps:
            assert step.request.tool != NO_ACTION, step.effect.error
            parse_action(schema, step.request.model_dump(include={"thought", "tool", "args", "expect"}))
            tools_used.add(step.request.tool)
        steps += len(exp.steps)
        episode += 1
    assert steps >= 50 and len(tools_used) >= 2
