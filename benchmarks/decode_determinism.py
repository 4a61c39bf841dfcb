"""Does a greedy action depend on its prompt alone? The batched decoder in four schedules; prints JSON.

    .venv/bin/python benchmarks/decode_determinism.py [--model qwen2.5-coder-0.5b] [--prompts 16] [--slots 8]

The first-step prompts of `--prompts` small worlds (half the train, half the dev split of `math/arith-v1`
and `math/equations-v1`, as the flywheel's budgeted builder makes them for the model) are decoded greedily,
each as a new episode (nothing reused from another), in four schedules: one at a time in a 1-slot
decoder, all at once on `--slots` slots, all at once in reversed order, and interleaved with as many
first steps of other worlds (`sql/shop-v1`, `toy/keys-v1`, `games/guess-number-v1`). How many prompts
decoded to another text in another schedule, and the seconds of each schedule. Which episodes run
beside one another is scheduling, i.e. the clock, which must not decide an action. Before the kernels
were pinned (`lle.policies.llama._batch_invariant_kernels`), batching tokens changed 7, 6 and 8 of 16
Qwen2.5-Coder-0.5B texts (benchmarks/results/decode_determinism/, the `batch_tokens` mode). Seconds
depend on the machine and on what else runs.
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

MATH = ("math/arith-v1", "math/equations-v1")
OTHERS = ("sql/shop-v1", "toy/keys-v1", "games/guess-number-v1")


def prompts(decoder: BatchedDecoder, n: int, worlds: tuple[str, ...] = MATH) -> list[tuple[str, list[int], str]]:
    """(small world id, prompt tokens, grammar) of `n` first steps over `worlds` and the train and dev splits."""
    builder = for_policy(decoder.policy())
    per = max(-(-n // (2 * len(worlds))), 1)
    out = []
    for world in worlds:
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
    runs: dict[str, list[str]] = {}
    ids: list[str] = []
    seconds: dict[str, float] = {}
    for name, slots in (("alone", 1), ("together", args.slots), ("together_reversed", args.slots),
                        ("interleaved", args.slots)):
        with BatchedDecoder.from_spec(args.model, slots=slots) as decoder:
            items = prompts(decoder, args.prompts)
            ids = [item[0] for item in items]
            order = list(range(len(items)))
            if name == "together_reversed":
                order.reverse()
            if name == "interleaved":  # each math prompt beside another world's first step
                others = prompts(decoder, len(items), OTHERS)
                order = [i for pair in zip(order, range(len(items), 2 * len(items)), strict=False) for i in pair]
                items = items + others
            start = time.perf_counter()
            runs[name] = schedule(decoder, items, order)[: args.prompts]
            seconds[name] = round(time.perf_counter() - start, 1)
            stats = decoder.stats
    differ = {f"alone_vs_{b}": sum(x != y for x, y in zip(runs["alone"], runs[b], strict=True))
              for b in ("together", "together_reversed", "interleaved")}
    out: dict[str, Any] = {
        "benchmark": "decode_determinism", "model": args.model, "cpus": os.cpu_count(), "slots": args.slots,
        "prompts": args.prompts, "differing": differ, "seconds": seconds,
        "differing_ids": [ids[i] for i in range(args.prompts) if len({runs[k][i] for k in runs}) > 1],
        "rounds_last_schedule": stats.rounds, "generated_tokens_last_schedule": stats.generated_tokens,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
