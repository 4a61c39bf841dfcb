"""Speed of the default embedded policy and of the context builder; prints JSON.

    .venv/bin/python benchmarks/policy_speed.py [--steps 12] [--model smollm2-135m]

Measures, for realistic `toy/keys-v1` contexts: prompt and generation tokens/s (from llama.cpp's
own timers), actions/s and the share of replies that validate, with the schema-constrained decode
(what `LlamaPolicy.act` does) and without it (the same prompt, free text, parsed afterwards); and the
time `BudgetedContextBuilder.build` takes per step with the model's tokenizer and with the default estimate.
Threads come from `LLE_THREADS` (default 2). Numbers depend on the machine and on what else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Any

import llama_cpp

from lle.actions import parse_action
from lle.context import BudgetedContextBuilder
from lle.core import (
    ActionRequest,
    CarrierItem,
    CarrierKind,
    Context,
    Effect,
    ExecutedAction,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    Step,
    ToolSpec,
)
from lle.errors import InvalidInputError
from lle.policies.catalog import DEFAULT_MODEL, make_policy
from lle.policies.llama import LlamaPolicy
from lle.policies.openai import extract_json
from lle.worlds.base import open_family, open_world


def contexts(builder: BudgetedContextBuilder, sw: SmallWorld, tools: list[ToolSpec], n: int) -> list[Context]:
    """n contexts of one growing episode (history grows by one step each)."""
    rooms = ["hall", "kitchen", "cellar", "library", "vault antechamber"]
    history: list[Step] = []
    out = []
    for i in range(n):
        obs = f"You are in the {rooms[i % len(rooms)]}. Exits: north, east. You see: a candle, a chest."
        out.append(builder.build(sw, tools, history, obs))
        history.append(Step(index=i, request=ActionRequest(tool="go", args={"direction": "north"}),
                            executed=ExecutedAction(tool="go", args={"direction": "north"}, allowed=True),
                            effect=Effect(observation=obs)))
    return out


def run(policy: LlamaPolicy, ctxs: list[Context], *, schema: bool) -> dict[str, Any]:
    ctx_ptr = policy.llm._ctx.ctx
    llama_cpp.llama_perf_context_reset(ctx_ptr)
    valid = 0
    start = time.perf_counter()
    for ctx in ctxs:
        if schema:
            policy.act(ctx)
            valid += 1  # act raises unless the action validates
            continue
        messages: Any = [{"role": m.role, "content": m.content} for m in ctx.messages]
        out = policy.llm.create_chat_completion(messages=messages, temperature=0.0, seed=0,
                                                max_tokens=policy.max_tokens)
        try:
            parse_action(dict(ctx.action_schema), extract_json(out["choices"][0]["message"]["content"] or ""))
            valid += 1
        except (ValueError, InvalidInputError):
            pass
    elapsed = time.perf_counter() - start
    perf = llama_cpp.llama_perf_context(ctx_ptr)
    return {
        "actions_per_s": round(len(ctxs) / elapsed, 3),
        "valid_share": round(valid / len(ctxs), 3),
        "prompt_tokens_per_s": round(perf.n_p_eval / (perf.t_p_eval_ms / 1000), 1) if perf.t_p_eval_ms else None,
        "gen_tokens_per_s": round(perf.n_eval / (perf.t_eval_ms / 1000), 1) if perf.t_eval_ms else None,
        "prompt_tokens_evaluated": perf.n_p_eval,
        "tokens_generated": perf.n_eval,
        "seconds": round(elapsed, 2),
    }


def build_times(builder: BudgetedContextBuilder, sw: SmallWorld, tools: list[ToolSpec],
                repeats: int = 30) -> dict[str, float]:
    history = [Step(index=i, request=ActionRequest(tool="look"), executed=ExecutedAction(tool="look", allowed=True),
                    effect=Effect(observation=f"room {i % 3}: " + "dust " * 40)) for i in range(30)]
    obs = "You see: " + ", ".join(f"item {k}" for k in range(300))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        builder.build(sw, tools, history, obs)
        times.append((time.perf_counter() - start) * 1000)
    return {"median_ms": round(statistics.median(times), 2), "max_ms": round(max(times), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=12, help="actions per measurement")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()

    load_start = time.perf_counter()
    policy = make_policy(args.model)
    assert isinstance(policy, LlamaPolicy)
    load_s = time.perf_counter() - load_start
    sw = open_family("toy/keys-v1").small_world(Split.train, 0)
    tools = open_world(sw).tools
    ctxs = contexts(BudgetedContextBuilder(count_tokens=policy.count_tokens), sw, tools, args.steps)
    run(policy, ctxs[:1], schema=True)  # warm-up: compiles the grammar once, as a real episode does

    items = [CarrierItem(carrier=CarrierKind.memory, scope=Scope(level=ScopeLevel.project, project="manor"),
                         content="the key is often in the kitchen " * 4) for _ in range(8)]
    result = {
        "model": policy.model_id,
        "threads": policy.n_threads,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "load_s": round(load_s, 2),
        "steps": args.steps,
        "with_schema": run(policy, ctxs, schema=True),
        "without_schema": run(policy, ctxs, schema=False),
        "context_build": {
            "model_tokenizer": build_times(BudgetedContextBuilder(count_tokens=policy.count_tokens, items=items),
                                           sw, tools),
            "estimate": build_times(BudgetedContextBuilder(items=items), sw, tools),
            "note": "30-step history, 8 carrier items, 300-item observation, budget 1536 tokens",
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
