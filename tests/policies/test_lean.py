"""Lean actions: short keys and no whitespace in the decoded JSON, mapped back to the same ActionRequest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lle.actions import LEAN_KEYS, action_schema, cap_free_text, from_lean, lean_schema, parse_action
from lle.context.builder import BudgetedContextBuilder, for_policy
from lle.core import ActionRequest, Split, ToolSpec
from lle.errors import InvalidInputError
from lle.policies.llama import gbnf_of
from lle.runtime.harness import PlainContextBuilder
from lle.worlds.base import open_family, open_world

TOOLS = [ToolSpec(name="submit", description="answer", parameters={
             "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}),
         ToolSpec(name="look", description="look around", parameters={})]


def test_lean_schema_renames_the_keys_and_keeps_order_caps_and_args() -> None:
    schema = cap_free_text(action_schema(TOOLS), thought_chars=40, expect_chars=30)
    lean = lean_schema(schema)
    for full, short in zip(schema["anyOf"], lean["anyOf"], strict=True):
        assert list(short["properties"]) == [LEAN_KEYS[k] for k in full["properties"]]
        assert short["required"] == [LEAN_KEYS[k] for k in full["required"]]
        assert short["properties"]["args"] == full["properties"]["args"]
        assert short["properties"]["why"]["maxLength"] == 40 and short["properties"]["exp"]["maxLength"] == 30
    assert len(set(LEAN_KEYS.values())) == len(LEAN_KEYS)


def test_a_lean_document_maps_back_to_the_same_action_request() -> None:
    schema = action_schema(TOOLS)
    full = {"thought": "add them", "tool": "submit", "args": {"answer": "4"}, "expect": "solved"}
    lean = {LEAN_KEYS[k]: v for k, v in full.items()}
    assert parse_action(schema, from_lean(lean)) == parse_action(schema, full) == \
        ActionRequest(tool="submit", args={"answer": "4"}, thought="add them", expect="solved")
    with pytest.raises(InvalidInputError, match="action does not match"):
        parse_action(schema, from_lean({"why": "x", "tool": "submit", "args": {}, "exp": "y"}))
    assert from_lean([1]) == [1]  # not an object: validation says what is wrong


def test_the_lean_grammar_allows_no_whitespace_between_json_tokens() -> None:
    pytest.importorskip("llama_cpp")
    plain, compact = gbnf_of(lean_schema(action_schema(TOOLS))), gbnf_of(lean_schema(action_schema(TOOLS)),
                                                                         compact=True)
    assert 'space ::= " "?' in plain.splitlines()
    rules = dict(line.split(" ::= ", 1) for line in compact.splitlines() if " ::= " in line)
    assert rules["space"] == '""'
    assert '"\\"why\\""' in compact and '"\\"thought\\""' not in compact


def test_the_prompt_shows_the_lean_keys_only_when_lean() -> None:
    sw = open_family("math/arith-v1").small_worlds(Split.train, 1)[0]
    world = open_world(sw)
    observation, _ = world.reset(seed=sw.seed)
    tools = world.tools
    world.close()
    for builder in (BudgetedContextBuilder(lean=True), PlainContextBuilder(lean=True)):
        system = builder.build(sw, tools, [], observation).messages[0].content
        assert '{"why":"' in system and '"exp":"' in system and '"thought"' not in system
    for builder in (BudgetedContextBuilder(), PlainContextBuilder()):
        system = builder.build(sw, tools, [], observation).messages[0].content
        assert '"thought"' in system and '"why"' not in system

    class Lean:
        lean = True

    assert for_policy(Lean()).lean and not for_policy(object()).lean


@pytest.mark.slow
def test_a_lean_decode_has_no_whitespace_and_no_more_tokens(smollm_path: Path, threads: int) -> None:
    from lle.policies.batched import BatchedDecoder
    from lle.policies.catalog import CATALOG
    from lle.policies.llama import LlamaPolicy

    sw = open_family("math/arith-v1").small_worlds(Split.train, 1)[0]
    world = open_world(sw)
    observation, _ = world.reset(seed=sw.seed)
    tools = world.tools
    world.close()
    calls = {}
    for lean in (False, True):
        policy = LlamaPolicy(smollm_path, n_threads=threads, n_ctx=1024, lean=lean, reuse_prefix=False)
        context = PlainContextBuilder(lean=lean).build(sw, tools, [], observation)
        request, call = policy.act(context)
        calls[lean] = (request, call, context)
        policy.llm.close()
    request, call, context = calls[True]
    document = json.loads(call.completion)
    assert list(document) == [LEAN_KEYS[k] for k in ("thought", "tool", "args", "expect")]
    assert call.completion == json.dumps(document, ensure_ascii=False, separators=(",", ":"))  # no layout spaces
    assert request == parse_action(context.action_schema, from_lean(document))
    assert call.completion_tokens <= calls[False][1].completion_tokens
    # The batched decoder decodes the same lean action (greedy, each prompt evaluated afresh).
    with BatchedDecoder(smollm_path, model_id="m", sha256=CATALOG["smollm2-135m"].sha256, slots=1, n_ctx=1024,
                        n_threads=threads) as decoder:
        batched, batched_call = decoder.policy(lean=True, reuse_prefix=False).act(context)
    assert (batched, batched_call.completion) == (request, call.completion)


@pytest.mark.slow
def test_lle_episodes_run_with_slots_and_lean_stores_every_episode(tmp_path: Path, smollm_path: Path,
                                                                     threads: int) -> None:
    import os
    import subprocess
    import sys

    from lle.store import Store

    result = subprocess.run(
        [sys.executable, "-m", "lle.cli.main", "--workspace", str(tmp_path), "episodes", "run", "math/arith-v1",
         "--policy", "smollm2-135m", "--slots", "2", "--count", "2", "--lean", "--max-steps", "2"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "LLE_THREADS": str(threads)})
    assert result.returncode == 0, result.stderr
    ids = result.stdout.split()
    assert len(ids) == 2 and all(i.startswith("exp_") for i in ids)
    with Store(tmp_path / "lle.db") as db:
        for exp_id in ids:
            exp = db.get_experience(exp_id)
            assert exp.policy.params.get("decode") == "batched" and exp.policy.params.get("lean") is True
            completions = [s.llm.completion for s in exp.steps if s.llm is not None and s.llm.completion]
            assert completions and all(c.startswith('{"why":"') for c in completions)


@pytest.mark.slow
def test_loads_in_threads_leave_stdout_and_stderr_where_they_were(smollm_path: Path) -> None:
    """Each load silences fds 1 and 2 and restores them; concurrent loads (episode threads of `lle run --slots`,
    each counting tokens) once left them pointing at /dev/null, and the run printed nothing more."""
    import os
    import threading

    from lle.policies.llama import load_token_counter

    before = [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]
    threads = [threading.Thread(target=load_token_counter, args=(smollm_path,)) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)] == before
