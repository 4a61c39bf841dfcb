"""π batched: one embedded GGUF model decodes the actions of several episodes together.

`LlamaPolicy` gives each episode (each worker process) its own model and decodes one sequence at a
time; on a small CPU the matrix work of one sequence leaves most of each weight load unused. Here one
`BatchedDecoder` holds the model and a KV memory with `slots` sequences; episodes run in threads, each
with a light `BatchedPolicy` whose `act` hands its prompt and grammar to the decoder thread and waits.
The decoder thread interleaves whatever is pending: one `llama_decode` evaluates the next token of every
generating sequence, or one prompt chunk, then each sequence samples under its own action grammar with the
chain `Llama.create_chat_completion` builds (penalty, grammar, greedy), so greedy actions match
`LlamaPolicy`'s. The model is loaded once, and while one episode's world steps or its context is built,
the others keep the model busy.

Greedy actions must depend on the prompt alone, not on the clock, and so not on which sequences share a
round. `load_model` keeps llama.cpp on CPU kernels whose result for a token does not depend on the
batch (no repacked weights, no tiled K-quant matmul: `lle.policies.llama._batch_invariant_kernels`);
with the defaults, Qwen2.5-Coder-0.5B's greedy text changed for 7 of 16 prompts between alone and
8 at once, which is why rounds once carried one sequence's token each.

Prefix reuse, within an episode only: a step goes back to its episode's slot and only the tokens
after the common prefix with that episode's previous step are evaluated, as `LlamaPolicy` does. An
episode's first step evaluates its whole prompt, whatever the slot held: a prefix evaluated in other
chunks can round differently, and which episode a slot held before depends on which finished first,
i.e. on the clock, which must not decide an action. Each episode thread keeps its slot (a new
episode there clears it), so a live episode's slot is never taken. Each slot has its own KV stream
(`kv_unified=False`): one shared buffer interleaves the sequences' cells and changes the order of the
attention sums, and so, now and then, a greedy token. With `share_prefix` (off by default: it gives
up that guarantee for speed), a first prompt whose prefix (system text, tool signatures) another slot
holds copies that slot's stream (`llama_memory_seq_cp`; llama.cpp copies between streams only whole).

A failed `llama_decode` (KV memory full, a native error) fails the requests in flight with
`PolicyBackendError`; the decoder thread itself never stops on one. If the thread dies anyway, the next
`act` rebuilds the decoder (model and memory) and decodes its step again: the step in flight was not
committed, so the episode goes on from its last committed step (docs/32-batched-decoding.md).
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from lle.actions import from_lean, lean_schema, parse_action
from lle.core import ActionRequest, Context, LLMCall, PolicyInfo
from lle.errors import InvalidInputError, PolicyBackendError
from lle.policies.batched_records import Decoded, DecodeStats, Request, common_prefix
from lle.policies.llama import _llama_cpp, chat_renderer, decoding_schema, gbnf_of, load_model, threads_from_env
from lle.policies.prompt import messages_text

PENALTY_LAST_N = 64
"""`Llama`'s `last_n_tokens_size` default: the window of generated tokens the repetition penalty sees."""
N_BATCH = 512
"""`Llama`'s `n_batch` default: a prompt is evaluated in chunks of this many tokens, as `LlamaPolicy` does."""
SHARE_MIN = 16
"""Share another slot's prefix only when it is this many tokens longer than the slot's own (cheaper to evaluate)."""


def default_slots() -> int:
    """Concurrent episodes by default: 4 a core (batched decode rounds are cheap; worlds and prompts interleave)."""
    return max(2, min(16, 4 * (os.cpu_count() or 1)))


class BatchedDecoder:
    """One model, `slots` sequences, one decoder thread; `decode` is called from many threads."""

    def __init__(self, model_path: str | Path, *, model_id: str | None = None, sha256: str | None = None,
                 slots: int | None = None, n_ctx: int = 2048, n_threads: int | None = None,
                 share_prefix: bool = False, seed: int = 0) -> None:
        self.model_path = Path(model_path)
        self.model_id = model_id or self.model_path.name
        self.sha256 = sha256
        self.slots = slots or default_slots()
        if self.slots < 1:
            raise InvalidInputError(f"slots={self.slots} must be at least 1")
        self.n_ctx = n_ctx
        self.n_threads = n_threads or threads_from_env()
        self.share_prefix = share_prefix
        self.seed = seed
        self.stats = DecodeStats()
        self._cond = threading.Condition()
        self._queue: deque[Request] = deque()
        self._grammars: dict[str, str] = {}
        self._closed = False
        self._thread: threading.Thread | None = None
        self._died: BaseException | None = None
        self._crash_next = False
        self._owner_ids = itertools.count(1)
        self.spec: str | None = None
        """The model spec, when built by `from_spec`: a resumed episode rebuilds an unbatched `LlamaPolicy` from it."""
        self._build()

    @classmethod
    def from_spec(cls, spec: str, *, workspace: str | Path | None = None, **params: Any) -> BatchedDecoder:
        """A decoder for a catalog name (`smollm2-135m`) or `PATH.gguf`, verified as `make_policy` does."""
        from lle.policies import catalog

        if spec in catalog.CATALOG:
            entry = catalog.CATALOG[spec]
            params.setdefault("n_ctx", entry.n_ctx)
            decoder = cls(catalog.locate(spec, workspace), model_id=spec, sha256=entry.sha256, **params)
        elif spec.endswith(".gguf") or os.sep in spec:
            path = Path(spec).expanduser()
            if not path.is_file():
                raise InvalidInputError(f"model file {path} does not exist; pass an existing PATH.gguf")
            decoder = cls(path, model_id=path.name, sha256=catalog.sha256_file(path), **params)
        else:
            catalog.get_spec(spec)  # raises with the list of choices
            raise InvalidInputError(f"{spec!r} is not a model for batched decoding; use a catalog name or PATH.gguf")
        decoder.spec = spec
        return decoder

    # --- building and rebuilding -------------------------------------------------------------------------

    def _build(self) -> None:
        llama_cpp = _llama_cpp()
        # The `Llama` object gives the tokenizer, the chat template and the weights; its own context is
        # tiny and unused. Decoding runs in a context of our own: `slots` sequences, each in its own KV
        # stream of `n_ctx` cells (why not one unified buffer: see the module docstring).
        self.llm = load_model(self.model_path, n_ctx=256, n_threads=self.n_threads, n_threads_batch=self.n_threads,
                         seed=self.seed)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = self.n_ctx * self.slots
        params.n_batch = params.n_ubatch = max(N_BATCH, self.slots)  # a round is one ubatch: never split
        params.n_seq_max = self.slots
        params.n_threads = params.n_threads_batch = self.n_threads
        params.kv_unified = False
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # as `Llama` (and so LlamaPolicy) does
        params.no_perf = True
        from llama_cpp import _internals

        self._ctx = _internals.LlamaContext(model=self.llm._model, params=params, verbose=False)
        self._mem = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._vocab = self.llm._model.vocab
        self._n_vocab = self.llm.n_vocab()
        self._batch = llama_cpp.llama_batch_init(params.n_batch, 0, 1)
        self._generated_last = False
        self._cached: list[list[int]] = [[] for _ in range(self.slots)]
        self._owners: list[int | None] = [None] * self.slots  # whose tokens each slot's cache holds
        self._pinned: dict[int, int] = {}  # episode thread -> its slot
        self._busy: list[Request | None] = [None] * self.slots
        self._render = chat_renderer(self.llm)
        self._died = None
        self._thread = threading.Thread(target=self._loop, name="lle-batched-decoder", daemon=True)
        self._thread.start()

    def _teardown(self) -> None:
        llama_cpp = _llama_cpp()
        if getattr(self, "_batch", None) is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self._ctx.close()  # type: ignore[no-untyped-call]
        self.llm.close()

    def restart(self) -> None:
        """A new model and KV memory after the decoder thread died (requests in flight already failed)."""
        with self._cond:
            if self._died is None or self._closed:
                return  # alive, or another thread restarted it first
            if self._thread is not None:
                self._thread.join()  # it holds no lock any more: it failed its requests, then left
            self.stats.restarts += 1
            self._teardown()
            self._build()

    def crash(self) -> None:
        """Make the decoder thread die at its next round, as a native fault would (a drill for tests)."""
        with self._cond:
            self._crash_next = True
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        """False once the decoder thread died (set under the lock, so no request is queued to a dead thread)."""
        return self._died is None and not self._closed

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._teardown()

    def __enter__(self) -> BatchedDecoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what callers use ----------------------------------------------------------------------------------

    def policy(self, small_world: object = None, **params: Any) -> BatchedPolicy:
        """A policy on this decoder (a `run_many` policy factory: `policy_factory=decoder.policy`)."""
        return BatchedPolicy(self, **params)

    def new_owner(self) -> int:
        """A fresh owner id for an episode's requests: a slot's cached tokens are reused by their owner only."""
        return next(self._owner_ids)

    def tokenize(self, prompt: str) -> list[int]:
        """The prompt's tokens, as `Llama.create_completion` makes them from the chat template's text."""
        tokens: list[int] = self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        bos = self.llm.token_bos()
        if self.llm._model.add_bos_token() and bos != -1:
            tokens = [bos, *tokens]
        return tokens

    def prompt_of(self, messages: list[dict[str, str]]) -> str:
        return self._render(messages) if self._render is not None else messages_text(messages)

    def grammar_text(self, schema: dict[str, Any], max_text_chars: int | None, lean: bool = False) -> str:
        """The GBNF text of `schema` (cached; its lean form with `lean`), refused like `LlamaPolicy.grammar_for`."""
        key = json.dumps([schema, max_text_chars, lean], sort_keys=True)
        if key not in self._grammars:
            try:
                text = gbnf_of(decoding_schema(lean_schema(schema) if lean else schema, max_text_chars), compact=lean)
                _llama_cpp().LlamaGrammar.from_string(text, verbose=False)  # parses: a bad grammar fails here
            except Exception as err:
                raise InvalidInputError(
                    f"the action schema cannot be turned into a decoding grammar: {err}; simplify the tool's "
                    "parameters schema (no $ref to remote documents, no patternProperties)"
                ) from err
            self._grammars[key] = text
        return self._grammars[key]

    def decode(self, tokens: list[int], grammar: str, *, temperature: float = 0.0, seed: int = 0,
               max_tokens: int = 256, repeat_penalty: float = 1.1, affinity: int | None = None,
               reuse_prefix: bool = True, owner: int | None = None) -> Decoded:
        """Generate under `grammar` after `tokens`; blocks until done. Raises `PolicyBackendError`.

        Only tokens that `owner` (an episode, `new_owner`) evaluated before in the slot are reused; a request
        without an owner, or with `reuse_prefix=False`, evaluates its whole prompt (as
        `LlamaPolicy(reuse_prefix=False)`): the action then depends on the context alone."""
        if len(tokens) + 1 > self.n_ctx:
            raise PolicyBackendError(
                f"{self.model_id} cannot take this prompt: Requested tokens ({len(tokens)}) exceed context window "
                f"of {self.n_ctx}; lower the context budget or raise n_ctx"
            )
        request = Request(tokens=list(tokens), grammar=grammar, temperature=temperature, seed=seed,
                           max_tokens=min(max_tokens, self.n_ctx - len(tokens)), repeat_penalty=repeat_penalty,
                           affinity=affinity, reuse=reuse_prefix, owner=owner, thread=threading.get_ident())
        with self._cond:
            if self._closed:
                raise PolicyBackendError(f"the batched decoder of {self.model_id} is closed")
            if not self.alive:
                raise PolicyBackendError(f"the batched decoder of {self.model_id} died: {self._died!r}")
            self._queue.append(request)
            self._cond.notify_all()
        request.done.wait()
        if request.error is not None:
            raise request.error
        text = self.llm.detokenize(request.generated).decode("utf-8", errors="ignore")
        return Decoded(text=text, prompt_tokens=len(tokens), completion_tokens=len(request.generated),
                       finish_reason=request.finish_reason, slot=request.slot)

    # --- the decoder thread --------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._closed and not self._queue and not any(self._busy):
                        self._cond.wait()
                    if self._closed:
                        self._fail_all(PolicyBackendError(f"the batched decoder of {self.model_id} was closed"))
                        return
                    self._admit()
                    if self._crash_next:
                        self._crash_next = False
                        raise RuntimeError("crash drill")
                self._round()
        except BaseException as err:  # the thread is gone: fail everyone waiting, the next act restarts it
            with self._cond:
                self._died = err
                self._fail_all(PolicyBackendError(
                    f"the batched decoder of {self.model_id} died ({type(err).__name__}: {err}); it is rebuilt "
                    "on the next step"))
            raise

    def _fail_all(self, error: Exception) -> None:
        for request in [*self._queue, *(r for r in self._busy if r is not None)]:
            self._finish(request, error)
        self._queue.clear()

    def _admit(self) -> None:
        """Give each waiting request an idle slot: its episode's slot, else its thread's, else one no other
        episode thread holds (so a live episode's slot, idle while its world steps, is not taken).

        With prefix sharing, a request whose prefix another request is still evaluating waits for it
        (episodes that start together would otherwise each evaluate the same system text and tools)."""
        waiting: list[Request] = []
        while self._queue:
            idle = [s for s in range(self.slots) if self._busy[s] is None]
            if not idle:
                break
            request = self._queue.popleft()
            held = {s for t, s in self._pinned.items() if t != request.thread}
            mine = self._pinned.get(request.thread)
            slot = next((s for s in (request.affinity, mine) if s in idle), None)
            if slot is None:
                slot = min((s for s in idle if s not in held), default=idle[0])
            if self.share_prefix and request.reuse and self._evaluating_prefix(request, slot):
                waiting.append(request)
                continue
            self._start(request, slot)
        self._queue.extendleft(reversed(waiting))

    def _evaluating_prefix(self, request: Request, slot: int) -> bool:
        """Whether a request in flight is evaluating a prompt that shares a longer prefix than any cache holds."""
        cached = max(common_prefix(c, request.tokens) for c in self._cached)
        return any(r is not None and not r.generated and r.pending
                   and common_prefix(r.tokens, request.tokens) >= cached + SHARE_MIN for r in self._busy)

    def _start(self, request: Request, slot: int) -> None:
        llama_cpp = _llama_cpp()
        tokens = request.tokens
        mine = request.reuse and request.owner is not None and self._owners[slot] == request.owner
        keep = common_prefix(self._cached[slot], tokens) if mine else 0
        own = keep
        self._owners[slot] = request.owner
        self._pinned = {t: s for t, s in self._pinned.items() if s != slot} | {request.thread: slot}
        if self.share_prefix and request.reuse:
            donor, shared = max(((s, common_prefix(self._cached[s], tokens)) for s in range(self.slots) if s != slot),
                                key=lambda d: d[1], default=(-1, 0))
            if shared >= keep + SHARE_MIN:
                # Each sequence has its own KV stream, and llama.cpp copies between streams only whole:
                # copy the donor's stream, then drop what follows the shared prefix.
                llama_cpp.llama_memory_seq_rm(self._mem, slot, -1, -1)
                llama_cpp.llama_memory_seq_cp(self._mem, donor, slot, -1, -1)
                llama_cpp.llama_memory_seq_rm(self._mem, slot, shared, -1)
                self._cached[slot] = tokens[:shared]
                keep, own = shared, 0
        if keep == len(tokens):
            keep -= 1  # the last prompt token is evaluated again: its logits are what the first sample needs
        if not llama_cpp.llama_memory_seq_rm(self._mem, slot, keep, -1):
            llama_cpp.llama_memory_seq_rm(self._mem, slot, -1, -1)
            keep = 0
        self._cached[slot] = self._cached[slot][:keep]
        self.stats.prompt_tokens_requested += len(tokens)
        self.stats.reused_tokens += min(own, keep)
        self.stats.shared_tokens += keep - min(own, keep)
        request.slot = slot
        request.pending = tokens[keep:]
        request.sampler = self._sampler(request)
        self._busy[slot] = request

    def _sampler(self, request: Request) -> Any:
        """Greedy: the grammar sampler (`_greedy` does the rest). Else the chain `Llama._init_sampler` builds:
        penalties, grammar, top-k, typical, top-p, min-p, temperature, a seeded draw."""
        llama_cpp = _llama_cpp()
        grammar = llama_cpp.llama_sampler_init_grammar(self._vocab, request.grammar.encode(), b"root")
        if not grammar:
            raise PolicyBackendError(f"{self.model_id}: llama.cpp refused the action grammar")
        if request.temperature == 0.0:
            return grammar
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = llama_cpp.llama_sampler_chain_add
        add(chain, llama_cpp.llama_sampler_init_penalties(self._n_vocab, PENALTY_LAST_N, request.repeat_penalty,
                                                          0.0, 0.0))
        add(chain, grammar)
        add(chain, llama_cpp.llama_sampler_init_top_k(40))
        add(chain, llama_cpp.llama_sampler_init_typical(1.0, 1))
        add(chain, llama_cpp.llama_sampler_init_top_p(0.95, 1))
        add(chain, llama_cpp.llama_sampler_init_min_p(0.05, 1))
        add(chain, llama_cpp.llama_sampler_init_temp(request.temperature))
        add(chain, llama_cpp.llama_sampler_init_dist(request.seed))
        return chain

    def _finish(self, request: Request, error: Exception | None = None) -> None:
        if request.sampler is not None:
            _llama_cpp().llama_sampler_free(request.sampler)
            request.sampler = None
        if 0 <= request.slot < self.slots and self._busy[request.slot] is request:
            self._busy[request.slot] = None
        request.error = error
        request.done.set()

    def _round(self) -> None:
        """One `llama_decode`: the next token of every generating sequence, or one prompt chunk, in turns.

        A prompt chunk never shares a round: with a KV stream per sequence llama.cpp splits a batch into
        equal per-sequence parts, which would cut the chunk differently from `LlamaPolicy`'s N_BATCH
        chunks, and a differently cut prompt can round differently (a greedy decode then differs).
        Everything is compute-bound on a CPU, so the separate rounds cost about nothing."""
        llama_cpp = _llama_cpp()
        batch = self._batch
        n = 0
        rows: list[tuple[Request, int]] = []  # (request, batch index) of the rows whose logits are sampled
        n_prompt = 0
        active = [r for r in self._busy if r is not None]
        generating = [r for r in active if r.generated and r.pending]
        prompting = [r for r in active if not r.generated and r.pending]
        prompt_turn = bool(prompting) and (not generating or self._generated_last)
        self._generated_last = not prompt_turn
        for request in prompting[:1] if prompt_turn else generating:
            chunk = request.pending[:N_BATCH]
            cached = self._cached[request.slot]
            for j, token in enumerate(chunk):
                batch.token[n] = token
                batch.pos[n] = len(cached) + j
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = request.slot
                batch.logits[n] = False
                n += 1
            if len(chunk) == len(request.pending):
                batch.logits[n - 1] = True
                rows.append((request, n - 1))
            if not request.generated:
                n_prompt += len(chunk)
            cached.extend(chunk)
            request.pending = request.pending[len(chunk):]
        if n == 0:
            return
        if not prompt_turn:
            self.stats.most_together = max(self.stats.most_together, len(rows))
        batch.n_tokens = n
        start = time.perf_counter()
        code = llama_cpp.llama_decode(self._ctx.ctx, batch)
        elapsed = time.perf_counter() - start
        self.stats.rounds += 1
        self.stats.decode_s += elapsed
        self.stats.prompt_s += elapsed * n_prompt / n
        self.stats.generate_s += elapsed * (n - n_prompt) / n
        self.stats.prompt_tokens += n_prompt
        if code != 0:
            self._decode_failed(code, active)
            return
        start = time.perf_counter()
        with self._cond:
            for request, index in rows:
                self._sample(request, index)
        self.stats.sample_s += time.perf_counter() - start

    def _decode_failed(self, code: int, active: list[Request]) -> None:
        llama_cpp = _llama_cpp()
        why = {1: "no room left in the KV memory (lower the slots or the context budget, or raise n_ctx)",
               2: "aborted", -1: "invalid batch"}.get(code, f"native error {code}")
        with self._cond:
            for request in active:
                # The memory may hold part of what this round evaluated: forget the slot's cache.
                llama_cpp.llama_memory_seq_rm(self._mem, request.slot, -1, -1)
                self._cached[request.slot] = []
                self._finish(request, PolicyBackendError(f"{self.model_id} failed to decode: {why}"))

    def _greedy(self, request: Request, index: int) -> int:
        """The token the chain penalties -> grammar -> greedy picks, without running the grammar over the
        whole vocabulary (the costliest part of a step, ~10 ms a token here): the penalized argmax is
        checked against the grammar alone, and only when the grammar refuses it are all tokens checked.
        The greedy pick under the grammar is the best allowed token, so when the best token is allowed
        it is the pick: the same token, bit for bit (the penalty is llama.cpp's, in float32)."""
        llama_cpp = _llama_cpp()
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx.ctx, index),
                                       shape=(self._n_vocab,)).copy()
        recent = request.generated[-PENALTY_LAST_N:]
        if recent and request.repeat_penalty != 1.0:
            ids = np.unique(np.asarray(recent, dtype=np.int64))
            penalty = np.float32(request.repeat_penalty)
            values = logits[ids]
            logits[ids] = np.where(values <= 0, values * penalty, values / penalty)
        token = int(np.argmax(logits))
        one = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, float(logits[token]), 0.0))
        check = llama_cpp.llama_token_data_array(one, 1, -1, False)
        llama_cpp.llama_sampler_apply(request.sampler, ctypes.byref(check))
        if not np.isfinite(one[0].logit):
            every = np.zeros(self._n_vocab, dtype=[("id", np.int32), ("logit", np.float32), ("p", np.float32)])
            every["id"] = np.arange(self._n_vocab, dtype=np.int32)
            every["logit"] = logits
            data = every.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data))
            full = llama_cpp.llama_token_data_array(data, self._n_vocab, -1, False)
            llama_cpp.llama_sampler_apply(request.sampler, ctypes.byref(full))
            token = int(np.argmax(every["logit"]))
        llama_cpp.llama_sampler_accept(request.sampler, token)
        return token

    def _sample(self, request: Request, index: int) -> None:
        llama_cpp = _llama_cpp()
        if request.temperature == 0.0:
            token = self._greedy(request, index)
        else:
            token = int(llama_cpp.llama_sampler_sample(request.sampler, self._ctx.ctx, index))
        if llama_cpp.llama_vocab_is_eog(self._vocab, token):
            request.finish_reason = "stop"
            self._finish(request)
            return
        request.generated.append(token)
        self.stats.generated_tokens += 1
        if len(request.generated) >= request.max_tokens:
            request.finish_reason = "length"
            self._finish(request)
            return
        request.pending = [token]


class BatchedPolicy:
    """One episode's policy on a shared `BatchedDecoder`: `LlamaPolicy.act`'s contract, decoded in batches."""

    def __init__(self, decoder: BatchedDecoder, *, temperature: float = 0.0, seed: int = 0, max_tokens: int = 256,
                 max_text_chars: int | None = None, repeat_penalty: float = 1.1, retries: int = 1,
                 reuse_prefix: bool = True, lean: bool = False) -> None:
        self.decoder = decoder
        self.model_id = decoder.model_id
        self.sha256 = decoder.sha256
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.max_text_chars = max_text_chars
        self.repeat_penalty = repeat_penalty
        self.retries = max(retries, 0)
        self.reuse_prefix = reuse_prefix
        self.lean = lean
        self._slot: int | None = None
        self._owner = decoder.new_owner()
        # `lle episodes resume` rebuilds the policy from this: the same model, greedy, decodes the same actions.
        self.spec = decoder.spec

    @property
    def info(self) -> PolicyInfo:
        return PolicyInfo(model=self.model_id, sha256=self.sha256, params={
            "temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens,
            "n_ctx": self.decoder.n_ctx, "repeat_penalty": self.repeat_penalty,
            "max_text_chars": self.max_text_chars, "reuse_prefix": self.reuse_prefix, "decode": "batched",
        } | ({"lean": True} if self.lean else {}))

    @property
    def n_ctx(self) -> int:
        """The window of one episode (its slot): `for_policy` sizes the context budget from it."""
        return self.decoder.n_ctx

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in the decoder's tokenizer (for `for_policy`'s budgeted context)."""
        return len(self.decoder.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def start_episode(self) -> None:
        """Decode the next episode afresh: nothing this policy evaluated before is reused (the harness calls it)."""
        self._owner = self.decoder.new_owner()
        self._slot = None

    def _decode(self, tokens: list[int], grammar: str, attempt: int) -> Decoded:
        temperature = self.temperature if attempt == 0 else max(self.temperature, 0.7)
        kwargs: dict[str, Any] = {"temperature": temperature, "seed": self.seed + attempt,
                                  "max_tokens": self.max_tokens, "repeat_penalty": self.repeat_penalty,
                                  "reuse_prefix": self.reuse_prefix, "owner": self._owner}
        if not self.decoder.alive:
            self.decoder.restart()
        try:
            return self.decoder.decode(tokens, grammar, affinity=self._slot, **kwargs)
        except PolicyBackendError:
            if self.decoder.alive:
                raise  # a decode error (prompt too long, memory full): the step fails as LlamaPolicy's would
        # The decoder thread died with this step in flight, which was never committed: rebuild it and
        # decode the step again, so the episode goes on from its last committed step.
        self.decoder.restart()
        return self.decoder.decode(tokens, grammar, affinity=None, **kwargs)

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall]:
        schema = dict(context.action_schema)
        grammar = self.decoder.grammar_text(schema, self.max_text_chars, self.lean)
        messages = [{"role": m.role, "content": m.content} for m in context.messages]
        prompt = self.decoder.prompt_of(messages)
        tokens = self.decoder.tokenize(prompt)
        prompt_tokens = completion_tokens = 0
        problem = ""
        start = time.perf_counter()
        for attempt in range(self.retries + 1):
            out = self._decode(tokens, grammar, attempt)
            self._slot = out.slot
            prompt_tokens += out.prompt_tokens
            completion_tokens += out.completion_tokens
            try:
                document = json.loads(out.text)
                request = parse_action(schema, from_lean(document) if self.lean else document)
            except (ValueError, InvalidInputError) as err:
                cut = " (cut at max_tokens)" if out.finish_reason == "length" else ""
                problem = f"{err}{cut}; output ended {out.text[-120:]!r}"
                continue
            return request, LLMCall(
                model=self.model_id, model_sha256=self.sha256, prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens, latency_ms=(time.perf_counter() - start) * 1000, prompt=prompt,
                completion=out.text,
            )
        raise PolicyBackendError(
            f"{self.model_id} gave no valid action in {self.retries + 1} decodes: {problem}; "
            "raise max_tokens, or cap free text with max_text_chars"
        )

