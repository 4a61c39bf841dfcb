"""BatchedDecoder: the actions of LlamaPolicy, each sequence under its own grammar, errors and a dead decoder."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from lle.core import Context, Limits, SmallWorld, Split, Step
from lle.errors import EpisodeError, PolicyBackendError
from lle.policies.batched import BatchedDecoder, BatchedPolicy
from lle.policies.catalog import CATALOG
from lle.policies.llama import LlamaPolicy
from lle.runtime.harness import PlainContextBuilder
from lle.runtime.parallel import run_many
from lle.runtime.threaded import ThreadBackend
from lle.store import Store
from lle.worlds.base import open_family, open_world

pytestmark = pytest.mark.slow


def first_context(sw: SmallWorld) -> Context:
    """The context of a small world's first step."""
    w = open_world(sw)
    observation, _ = w.reset(seed=sw.seed)
    context = PlainContextBuilder().build(sw, w.tools, [], observation)
    w.close()
    return context


def first_contexts() -> list[Context]:
    """The first step's context of two small worlds of different worlds (different tools, prompts)."""
    return [first_context(open_family(world).small_worlds(Split.train, 1)[0])
            for world in ("toy/keys-v1", "math/arith-v1")]


def act_together(policies: list[BatchedPolicy], contexts: list[Context]) -> list[Any]:
    """Each context acted on in its own thread at once, so the decoder batches them."""
    results: list[Any] = [None] * len(contexts)

    def one(i: int) -> None:
        results[i] = policies[i].act(contexts[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(contexts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.fixture(scope="module")
def decoder(smollm_path: Path, threads: int) -> Any:
    with BatchedDecoder(smollm_path, model_id="smollm2-135m", sha256=CATALOG["smollm2-135m"].sha256, slots=3,
                        n_ctx=1024, n_threads=threads) as dec:
        yield dec


def test_batched_greedy_actions_and_calls_equal_llama_policy(smollm_path: Path, threads: int,
                                                             decoder: BatchedDecoder) -> None:
    contexts = first_contexts()
    single = LlamaPolicy(smollm_path, model_id="smollm2-135m", sha256=CATALOG["smollm2-135m"].sha256,
                         n_threads=threads, n_ctx=1024, reuse_prefix=False)
    expected = [single.act(c) for c in contexts]
    rounds = decoder.stats.rounds
    # Both evaluate each prompt afresh: with prefix reuse, an action also depends on what the model
    # evaluated before (in the pool, on the episode that ran before in the same worker).
    got = act_together([decoder.policy(reuse_prefix=False) for _ in contexts], contexts)
    for (want, want_call), (action, call) in zip(expected, got, strict=True):
        assert action == want
        assert (call.prompt, call.prompt_tokens, call.completion_tokens, call.model, call.model_sha256) == \
            (want_call.prompt, want_call.prompt_tokens, want_call.completion_tokens, want_call.model,
             want_call.model_sha256)
    generated = sum(call.completion_tokens for _, call in got)
    # Both sequences' tokens shared rounds (fewer rounds than tokens), and that changed no number.
    assert decoder.stats.rounds - rounds < generated


def test_an_episode_decodes_as_if_its_slot_had_held_nothing_before(decoder: BatchedDecoder) -> None:
    # Two tasks of one world: their prompts share the system text and the tools. Which episode a slot held
    # before depends on which finished first (the clock); an episode's first step must not reuse it.
    a, b = [first_context(sw) for sw in open_family("math/arith-v1").small_worlds(Split.train, 2)]
    first = decoder.policy().act(a)
    decoder.policy().act(b)  # this thread's slot now holds b's prompt, whose prefix is a's
    again = decoder.policy().act(a)
    assert again[0] == first[0] and again[1].completion == first[1].completion

    tokens_a, tokens_b = [decoder.tokenize(decoder.prompt_of([m.model_dump() for m in c.messages])) for c in (a, b)]
    stats, one = decoder.stats, 'root ::= "x"'
    decoder.decode(tokens_b, one, max_tokens=1, owner=decoder.new_owner())
    reused, shared = stats.reused_tokens, stats.shared_tokens
    episode = decoder.new_owner()
    decoder.decode(tokens_a, one, max_tokens=1, owner=episode)
    assert (stats.reused_tokens, stats.shared_tokens) == (reused, shared)  # evaluated whole
    decoder.decode(tokens_a, one, max_tokens=1, owner=episode)  # the same episode's next call reuses its own
    assert stats.reused_tokens == reused + len(tokens_a) - 1


def test_each_sequence_in_a_batch_obeys_its_own_grammar(smollm_path: Path, threads: int) -> None:
    # Every generating sequence's next token is in one round, each under its own grammar.
    with BatchedDecoder(smollm_path, model_id="smollm2-135m", slots=3, n_ctx=1024, n_threads=threads) as decoder:
        prompt = decoder.tokenize(decoder.prompt_of([{"role": "user", "content": "Say something."}]))
        grammars = ['root ::= "alpha" | "beta"', 'root ::= "{" [0-9] [0-9] "}"', 'root ::= ("x" | "y") ("x" | "y")']
        out: list[str] = [""] * len(grammars)

        def one(i: int) -> None:
            out[i] = decoder.decode(prompt, grammars[i], max_tokens=8).text

        threads_ = [threading.Thread(target=one, args=(i,)) for i in range(len(grammars))]
        for thread in threads_:
            thread.start()
        for thread in threads_:
            thread.join()
    assert out[0] in ("alpha", "beta")
    assert len(out[1]) == 4 and out[1][0] == "{" and out[1][1:3].isdigit() and out[1][3] == "}"
    assert len(out[2]) == 2 and set(out[2]) <= {"x", "y"}


def test_decode_failures_are_policy_backend_errors(decoder: BatchedDecoder) -> None:
    with pytest.raises(PolicyBackendError, match="exceed context window of 1024"):
        decoder.decode([1] * 1100, 'root ::= "a"')
    decoder.crash()
    with pytest.raises(PolicyBackendError, match="died"):
        decoder.decode(decoder.tokenize("hi"), 'root ::= "a"', max_tokens=2)
    decoder.restart()  # what BatchedPolicy does on its next step
    assert decoder.alive and decoder.decode(decoder.tokenize("hi"), 'root ::= "a"', max_tokens=2).text == "a"


def actions(steps: list[Step]) -> list[str]:
    return [json.dumps([s.request.tool, s.request.args], sort_keys=True) if s.request else "-" for s in steps]


def test_a_dead_decoder_is_rebuilt_and_runs_resume_from_committed_steps(tmp_path: Path,
                                                                        decoder: BatchedDecoder) -> None:
    sw = open_family("toy/keys-v1").small_worlds(Split.train, 2)[1]
    limits = Limits(max_steps=3)
    reference = run_many([sw], decoder.policy, backend=ThreadBackend(1), limits=limits)[0]
    restarts = decoder.stats.restarts

    # The decoder thread dies while step 1 is being decoded: the policy rebuilds it and decodes step 1
    # again (it was never committed), so the episode ends as it would have.
    def crash_after_step_0(episode_id: str, step: Step) -> None:
        if step.index == 0:
            decoder.crash()

    with Store(tmp_path / "a.db") as store:
        done = run_many([sw], decoder.policy, backend=ThreadBackend(1), store=store, limits=limits,
                        on_commit=crash_after_step_0)[0]
        assert store.count("steps") == len(done.steps)
    assert decoder.stats.restarts == restarts + 1
    assert actions(done.steps) == actions(reference.steps)

    # The whole run dies after step 1 is committed: run again with the same batch, it resumes there.
    def interrupt_after_step_1(episode_id: str, step: Step) -> None:
        if step.index == 1:
            raise KeyboardInterrupt

    with Store(tmp_path / "b.db") as store:
        with pytest.raises(KeyboardInterrupt):
            run_many([sw], decoder.policy, backend=ThreadBackend(1), store=store, limits=limits, batch="b",
                     on_commit=interrupt_after_step_1)
        assert store.count("steps") == 2 and store.count("experiences") == 0
        resumed = run_many([sw], decoder.policy, backend=ThreadBackend(1), store=store, limits=limits, batch="b")[0]
        assert actions(resumed.steps) == actions(reference.steps) and store.count("experiences") == 1
    with pytest.raises(EpisodeError):  # a broken world still fails its episode, not the decoder
        broken = sw.model_copy(update={"world": "toy/missing-v1", "id": "toy/missing-v1:x"})
        run_many([broken], decoder.policy, backend=ThreadBackend(1), limits=limits)
