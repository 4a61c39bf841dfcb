"""Does a greedy action depend on its prompt alone? The batched decoder, each way it can run; prints JSON.

    .venv/bin/python benchmarks/decode_determinism.py [--model qwen2.5-coder-0.5b] [--prompts 16] [--slots 8]

The first-step prompts of `--prompts` small worlds (half the train, half the dev split of `math/arith-v1`
and `math/equations-v1`, as the flywheel's budgeted builder makes them for the model) are decoded greedily,
each as a new episode (nothing reused from another), in three schedules: one at a time in a 1-slot
decoder, all at once on `--slots` slots, and all at once in reversed order. Once with the default (one
sequence's token a round) and once with `batch_tokens=True` (every generating sequence's token in one
round). For each mode: how many prompts decoded to another text in another schedule, and the seconds
of each schedule. Which episodes run beside one another is scheduling, i.e. the clock, which must not
decide an action. Numbers depend on the machine and on what else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from typing import Any

from lle.context.builder import for_policy
from lle.core import Split
from lle.policies.batched import BatchedDecoder
from lle.worlds.base import open_family, open_world


def prompts(decoder: BatchedDecoder, n: int) -> list[tuple[str, list[int], str]]:
    """(small world id, prompt tokens, grammar) of `n` first steps over the two math worlds and two splits."""
    builder = for_policy(decoder.policy())
    per = max(n // 4, 1)
    out = []
    for world in ("math/arith-v1", "math/equations-v1"):
        for split in (Split.train, Split.dev):
            for sw in open_family(world).small_worlds(split, per):
                w = open_world(sw)
                observation, _ = w.reset(seed=sw.seed)
                context = builder.build(sw, w.tools, [], observation)
                w.close()
                tokens = decoder.tokenize(decoder.prompt_of([m.model_dump() for m in context.messages]))
                out.append((sw.id, tokens, decoder.grammar_text(dict(context.action_schema), None)))
    return out[:n]


def schedule(decoder: BatchedDecoder, items: list[tuple[str, list[int], str]], order: list[int]) -> list[str]:
    """Each item decoded as a new episode, started in `order`, at most `decoder.slots` at once."""
    texts = [""] * len(items)
    gate = threading.Semaphore(decoder.slots)

    def one(i: int) -> None:
        with gate:
            texts[i] = decoder.decode(items[i][1], items[i][2], owner=decoder.new_owner()).text

    threads = []
    for i in order:
        thread = threading.Thread(target=one, args=(i,))
        thread.start()
        threads.append(thread)
        time.sleep(0.02)  # start in this order
    for thread in threads:
        thread.join()
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--slots", type=int, default=8)
    args = parser.parse_args()
    out: dict[str, Any] = {"benchmark": "decode_determinism", "model": args.model, "cpus": os.cpu_count(),
                           "slots": args.slots, "modes": {}}
    for mode, batch_tokens in (("one_token_a_round", False), ("batch_tokens", True)):
        runs: dict[str, list[str]] = {}
        seconds: dict[str, float] = {}
        for name, slots, reverse in (("alone", 1, False), ("together", args.slots, False),
                                     ("together_reversed", args.slots, True)):
            with BatchedDecoder.from_spec(args.model, slots=slots, batch_tokens=batch_tokens) as decoder:
                items = prompts(decoder, args.prompts)
                order = list(range(len(items)))[::-1] if reverse else list(range(len(items)))
                start = time.perf_counter()
                runs[name] = schedule(decoder, items, order)
                seconds[name] = round(time.perf_counter() - start, 1)
        pairs = (("alone", "together"), ("together", "together_reversed"), ("alone", "together_reversed"))
        differ = {f"{a}_vs_{b}": sum(x != y for x, y in zip(runs[a], runs[b], strict=True)) for a, b in pairs}
        out["modes"][mode] = {"prompts": len(items), "differing": differ, "seconds": seconds,
                              "differing_ids": [items[i][0] for i in range(len(items))
                                                if len({runs[k][i] for k in runs}) > 1]}
    out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
