"""Episodes per hour with the embedded model: today's process pool against batched decoding; prints JSON.

    .venv/bin/python benchmarks/episode_profile.py [--quick] [--episodes 16] [--steps 6] [--slots 1,2,4,8]
        [--lean-slots 4] [--no-shared] [--model smollm2-135m]

The same train small worlds (half `math/arith-v1`, half `toy/keys-v1`), the default model
(SmolLM2-135M), greedy, each run into a fresh SQLite store with the CLI's assessment:
- `pool`: `run_many(workers=2)`, each worker process with its own `LlamaPolicy` on one thread;
- `batched/N`: `run_many(backend=ThreadBackend(N))` with one `BatchedDecoder` of N slots (two threads),
  every generating sequence's token in one round, prefix sharing off; once more at the largest N with
  prefix sharing on (unless `--no-shared`);
- `batched/N+lean` (N = `--lean-slots`, 0: none): the same with lean actions (`lle.actions.lean_schema`:
  short keys, no whitespace, the prompt's output format and past turns in that form); its actions are
  compared with the pool's and with `batched/N`'s (the prompt differs, so greedy outcomes may too).

For each batched run, the model's own rates on this machine (`model_rates`: llama-bench's pp512 and tg at 1
and N sequences a round, through the decoder's context) beside the prompt and generated tokens per second
the episodes got. For each run: episodes/hour, steps, prompt and generated tokens per step, and where the time went:
`model` (time inside `act`, summed over episodes), split into prompt evaluation and generation
(llama.cpp's timers in the pool; the decoder's own clock when batched), `world` (world steps), `commit`
(store writes), `assess` (verifiers); `share` divides each by wall time x lanes (the pool's 2 workers;
the batched decoder is one lane, its episode threads mostly wait for it). `lle_ms_per_step` is the
time a model lane waited on lle per step: the pool's lanes' time outside `act` and the world (context
building, harness, commits, worker start-up and the idle tail), the decoder's idle time when batched.
Actions are compared with the pool's, step by step: `steps_differing` counts steps whose action differs
(after a first difference an episode goes elsewhere, so `episodes_differing` is the better count).
Routing is not run (no carriers here). Numbers depend on the machine and on what else runs.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import llama_cpp

from lle.context.plain import PlainContextBuilder
from lle.core import ActionRequest, Context, Experience, Limits, LLMCall, SmallWorld, Split
from lle.evidence import assess_experience
from lle.policies.batched import BatchedDecoder
from lle.policies.catalog import CATALOG, DEFAULT_MODEL, locate
from lle.policies.llama import LlamaPolicy
from lle.runtime.parallel import Backend, LocalBackend, run_many
from lle.runtime.threaded import ThreadBackend
from lle.store import Store
from lle.worlds.base import open_family


class _TimedLlama(LlamaPolicy):
    """`LlamaPolicy` that appends llama.cpp's prompt/generation timers of each `act` to a file."""

    log: Path

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall]:
        llama_cpp.llama_perf_context_reset(self.llm._ctx.ctx)
        out = super().act(context)
        perf = llama_cpp.llama_perf_context(self.llm._ctx.ctx)
        with self.log.open("a") as f:
            f.write(json.dumps({"prompt_ms": perf.t_p_eval_ms, "eval_ms": perf.t_eval_ms,
                                "prompt_evaluated": perf.n_p_eval, "act_ms": out[1].latency_ms}) + "\n")
        return out


class TimedFactory:
    """Picklable policy factory for the pool's workers (one model per worker, reused across its episodes)."""

    def __init__(self, path: str, folder: str, model: str = DEFAULT_MODEL) -> None:
        self.path, self.folder, self.model = path, folder, model
        self._policy: _TimedLlama | None = None

    def __call__(self, small_world: SmallWorld) -> LlamaPolicy:
        if self._policy is None:
            self._policy = _TimedLlama(self.path, model_id=self.model, sha256=CATALOG[self.model].sha256,
                                       n_threads=1)
            self._policy.log = Path(self.folder) / f"{os.getpid()}.jsonl"
        return self._policy


def worlds(n: int) -> list[SmallWorld]:
    half = n // 2
    return (open_family("math/arith-v1").small_worlds(Split.train, half)
            + open_family("toy/keys-v1").small_worlds(Split.train, n - half))


def timed_store(store: Store, clock: dict[str, float]) -> None:
    """Count the seconds the writer spends in the store's writes (instance attributes: this run only)."""
    for name in ("append_step", "append_experience"):
        method = getattr(store, name)

        def timed(*args: Any, _method: Callable[..., Any] = method, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                clock["commit"] += time.perf_counter() - start

        setattr(store, name, timed)


def profile(small_worlds: list[SmallWorld], factory: Callable[[SmallWorld], Any], backend: Backend, lanes: int,
            limits: Limits, folder: Path, lean: bool = False) -> tuple[dict[str, Any], list[Experience]]:
    clock = {"commit": 0.0, "assess": 0.0}

    def assess(experience: Experience) -> Experience:
        start = time.perf_counter()
        try:
            return assess_experience(experience)
        finally:
            clock["assess"] += time.perf_counter() - start

    with Store(folder / f"{time.monotonic_ns()}.db") as store:
        timed_store(store, clock)
        start = time.perf_counter()
        # The harness's default builder (plain), in its lean form for a lean policy.
        builder = (lambda: PlainContextBuilder(lean=True)) if lean else None
        done = run_many(small_worlds, factory, store=store, backend=backend, limits=limits, assess=assess,
                        context_builder_factory=builder)
        wall = time.perf_counter() - start
    steps = [s for e in done for s in e.steps]
    calls = [s.llm for s in steps if s.llm is not None]
    model = sum(c.latency_ms for c in calls) / 1000
    world = sum(s.executed.duration_ms for s in steps) / 1000
    n = max(len(steps), 1)
    report = {
        "episodes": len(done), "steps": len(steps), "wall_s": round(wall, 1),
        "episodes_per_hour": round(len(done) * 3600 / wall, 1),
        "solved": sum(1 for e in done if e.outcome == "pass"),
        "prompt_tokens_per_step": round(sum(c.prompt_tokens for c in calls) / n, 1),
        "generated_tokens_per_step": round(sum(c.completion_tokens for c in calls) / n, 1),
        "lanes": lanes,
        "time_s": {"model": round(model, 1), "world": round(world, 2), "commit": round(clock["commit"], 2),
                   "assess": round(clock["assess"], 2)},
        "lle_ms_per_step": round(1000 * (lanes * wall - model - world) / n, 1),
    }
    report["share"] = {k: round(v / (wall * lanes), 3) for k, v in report["time_s"].items()}
    return report, done


def model_rates(decoder: BatchedDecoder, rounds: int = 32) -> dict[str, float]:
    """The model's own rates on this machine, llama-bench's measures through the decoder's context (the
    physical limit of what episodes can get): `pp512` prompt tokens/s evaluating 512 tokens in one batch,
    `tg{N}` generated tokens/s with N sequences' tokens a round (N = 1 and the slots)."""
    ctx, batch = decoder._ctx.ctx, decoder._batch

    def decode(rows: list[tuple[int, int, int, bool]]) -> float:
        for n, (seq, pos, token, logits) in enumerate(rows):
            batch.token[n], batch.pos[n], batch.n_seq_id[n], batch.logits[n] = token, pos, 1, logits
            batch.seq_id[n][0] = seq
        batch.n_tokens = len(rows)
        start = time.perf_counter()
        assert llama_cpp.llama_decode(ctx, batch) == 0
        return time.perf_counter() - start

    def forget() -> None:
        for s in range(decoder.slots):
            llama_cpp.llama_memory_seq_rm(decoder._mem, s, -1, -1)
            decoder._cached[s], decoder._owners[s] = [], None

    token = decoder.tokenize("Hello")[-1]
    with decoder._cond:  # the decoder thread is idle between arms: hold it off while timing its context
        forget()
        rates = {"pp512": round(512 / decode([(0, j, token, j == 511) for j in range(512)]), 1)}
        for width in sorted({1, decoder.slots}):
            forget()
            seconds = sum(decode([(s, r, token, True) for s in range(width)]) for r in range(rounds))
            rates[f"tg{width}"] = round(width * rounds / seconds, 1)
        forget()
    return rates


def tokens_by_field(done: list[Experience], count: Callable[[str], int]) -> dict[str, float]:
    """Where a step's generated tokens go, per step: the `thought` and `expect` texts, the tool name, the
    arguments (as JSON) and the rest (keys, quotes, braces: the JSON framing the grammar forces)."""
    from lle.actions import LEAN_KEYS

    fields = {"thought": 0, "expect": 0, "tool": 0, "args": 0, "framing": 0}
    calls = [s.llm for e in done for s in e.steps if s.llm is not None and s.llm.completion]
    for call in calls:
        try:
            document = json.loads(call.completion or "")
        except ValueError:
            continue
        keys = LEAN_KEYS if "why" in document or "exp" in document else {name: name for name in LEAN_KEYS}
        parts = {name: document.get(key, "") for name, key in keys.items()}
        counted = {name: count(value if isinstance(value, str) else json.dumps(value)) for name, value in parts.items()}
        for name, n in counted.items():
            fields[name] += n
        fields["framing"] += max(call.completion_tokens - sum(counted.values()), 0)
    return {name: round(n / max(len(calls), 1), 1) for name, n in fields.items()}


def actions(done: list[Experience]) -> list[list[str]]:
    return [[json.dumps([s.request.tool, s.request.args], sort_keys=True) if s.request else "-" for s in e.steps]
            for e in done]


def compare(reference: list[list[str]], other: list[list[str]]) -> dict[str, int]:
    steps = sum(sum(1 for a, b in zip(x, y, strict=False) if a != b) + abs(len(x) - len(y))
                for x, y in zip(reference, other, strict=True))
    return {"episodes_differing": sum(1 for x, y in zip(reference, other, strict=True) if x != y),
            "steps_differing": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="8 episodes of at most 4 steps")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6, help="step limit of each episode")
    parser.add_argument("--slots", default="1,2,4,8")
    parser.add_argument("--threads", type=int, default=2, help="threads of the batched decoder")
    parser.add_argument("--lean-slots", type=int, default=4, help="slots of the lean arm (0: no lean arm)")
    parser.add_argument("--no-shared", action="store_true", help="no prefix-sharing arm")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a catalog model (default: the default model)")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.steps = 8, 4
    counts = [int(x) for x in args.slots.split(",")]
    path = str(locate(args.model))
    sws = worlds(args.episodes)
    limits = Limits(max_steps=args.steps)
    out: dict[str, Any] = {"benchmark": "episode_profile", "model": args.model, "cpus": os.cpu_count(),
                           "episodes": args.episodes, "max_steps": args.steps,
                           "worlds": ["math/arith-v1", "toy/keys-v1"], "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        report, done = profile(sws, TimedFactory(path, tmp, args.model), LocalBackend(2), 2, limits, folder)
        perf = [json.loads(line) for log in folder.glob("*.jsonl") for line in log.read_text().splitlines()]
        prompt_s = sum(p["prompt_ms"] for p in perf) / 1000
        model_s = report["time_s"]["model"]
        report["time_s"] |= {"prompt_eval": round(prompt_s, 1), "generation": round(model_s - prompt_s, 1)}
        report["share"] = {k: round(v / (report["wall_s"] * 2), 3) for k, v in report["time_s"].items()}
        evaluated = sum(p["prompt_evaluated"] for p in perf)
        report["prompt_tokens_evaluated_per_step"] = round(evaluated / report["steps"], 1)
        out["runs"]["pool/2"] = report
        reference = actions(done)
        plans = [(n, False, False) for n in counts]
        plans += [] if args.no_shared else [(max(counts), True, False)]
        plans += [(args.lean_slots, False, True)] if args.lean_slots > 0 else []
        by_arm: dict[str, list[list[str]]] = {}
        for slots, share, lean in plans:
            with BatchedDecoder(path, model_id=args.model, sha256=CATALOG[args.model].sha256, slots=slots,
                                n_threads=args.threads, share_prefix=share) as decoder:
                report, done = profile(sws, functools.partial(decoder.policy, lean=lean), ThreadBackend(slots), 1,
                                       limits, folder, lean=lean)
                st = decoder.stats
                rates = model_rates(decoder)
                by_field = tokens_by_field(done, decoder.policy().count_tokens)
            report["time_s"] |= {"prompt_eval": round(st.prompt_s, 1),
                                 "generation": round(st.generate_s + st.sample_s, 1),
                                 "decoder_busy": round(st.decode_s + st.sample_s, 1)}
            report["share"] = {k: round(v / report["wall_s"], 3) for k, v in report["time_s"].items()
                               if k in ("prompt_eval", "generation", "decoder_busy", "world", "commit", "assess")}
            # The decoder is the one model lane: the time it sat idle, waiting on episodes, per step.
            idle = report["wall_s"] - report["time_s"]["decoder_busy"]
            report["lle_ms_per_step"] = round(1000 * max(idle, 0.0) / max(report["steps"], 1), 1)
            report["prompt_tokens_evaluated_per_step"] = round(st.prompt_tokens / max(report["steps"], 1), 1)
            report["prefix_tokens_shared_per_step"] = round(st.shared_tokens / max(report["steps"], 1), 1)
            report["speedup"] = round(report["episodes_per_hour"] / out["runs"]["pool/2"]["episodes_per_hour"], 2)
            # What the episodes got of the model's own rates (measured after the arm, on the same decoder).
            report["achieved_tokens_per_s"] = {"prompt": round(st.prompt_tokens / max(st.prompt_s, 1e-9), 1),
                                               "generated": round(st.generated_tokens / max(st.generate_s, 1e-9), 1)}
            report["model_rates"] = rates
            report["generated_tokens_by_field"] = by_field
            report["actions_vs_pool"] = compare(reference, actions(done))
            name = f"batched/{slots}" + ("+shared_prefix" if share else "") + ("+lean" if lean else "")
            if lean and f"batched/{slots}" in by_arm:
                report["actions_vs_unlean"] = compare(by_arm[f"batched/{slots}"], actions(done))
            by_arm[name] = actions(done)
            out["runs"][name] = report
    out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
