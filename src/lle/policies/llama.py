"""π embedded: a GGUF model on llama-cpp-python, decoding every action under the tool schema.

The action is sampled under a grammar compiled from `Context.action_schema` (one `anyOf` branch per
tool), so the model cannot write anything but an action of the small world's tool set. `max_tokens`
bounds a step's output, and a mild repetition penalty keeps a small model from looping inside its
`thought` until it hits that bound. A decode that still does not validate (cut at `max_tokens`) is
retried once with another seed, then raises `PolicyBackendError`, which the harness records on the
step. Free-text fields can also be capped in the grammar (`max_text_chars`), but llama.cpp expands
a bound of n characters into n nested optional groups, which slows every token; it is off by default.

llama.cpp keeps the evaluated prompt and reuses its longest common prefix on the next call
(`reuse_prefix`, on by default): an episode's later steps then cost only their new tokens (prompt
evaluation is most of a first step's time on 2 cores: ~110 tokens/s a thread). The price: a prefix
evaluated incrementally gives logits a rounding error apart from one evaluated in one batch, so at
temperature 0 the same context can, rarely, decode differently depending on what was evaluated
before. So the reuse stays inside an episode: `start_episode` (the harness calls it) forgets what the
previous episode left, which in a worker pool depends on which episode finished first, i.e. on the
clock; `reuse_prefix=False` makes each call depend on its context alone.

With `lean`, the action is decoded under `lle.actions.lean_schema` (short keys) in a grammar without
whitespace between JSON tokens (`gbnf_of(compact=True)`), and mapped back (`from_lean`) to the same
`ActionRequest`: fewer generated tokens a step; the completion recorded is the lean text.

Each `LLMCall` records its prompt: the text the GGUF's chat template renders from the messages (the
formatter llama-cpp-python uses, built alike: see `chat_renderer`), or, for a model whose format is
one of llama-cpp-python's built-in ones, the messages as canonical JSON (`lle.policies.prompt`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lle.actions import from_lean, lean_schema, parse_action
from lle.core import ActionRequest, Context, LLMCall, PolicyInfo
from lle.errors import InvalidInputError, ModelError, PolicyBackendError
from lle.policies.prompt import messages_text

DEFAULT_THREADS = 2
_LOAD_LOCK = threading.Lock()
"""Loads silence the process's stdout/stderr file descriptors (dup2 away and back): two threads loading at
once (episode threads each counting tokens, `lle run --slots`) would restore each other's silenced
descriptors, and the process would print nothing more."""

def _llama_cpp() -> Any:
    try:
        import llama_cpp
        import llama_cpp._utils
    except ImportError as err:
        raise ModelError(
            "llama-cpp-python is not installed; install the extra: "
            "CMAKE_ARGS='-DLLAVA_BUILD=OFF' pip install 'lle[llama]' (or `make test`)"
        ) from err
    return llama_cpp


def threads_from_env() -> int:
    raw = os.environ.get("LLE_THREADS", str(DEFAULT_THREADS))
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInputError(f"LLE_THREADS={raw!r} is not a number; set it to a thread count such as 2") from None
    if value < 1:
        raise InvalidInputError(f"LLE_THREADS={value} must be at least 1")
    return value


@contextlib.contextmanager
def _batch_invariant_kernels(llama_cpp: Any) -> Iterator[None]:
    """Loads inside use only llama.cpp's CPU kernels whose result for one token does not depend on how many
    tokens share its `llama_decode`, so a greedy action depends on its prompt alone (docs/32).

    Two paths of llama.cpp's CPU backend change a token's logits with the batch: weights repacked at load
    (`use_extra_bufts`; with AVX2, Q4_0/Q4_K/IQ4_NL/Q8_0 go to 8-row interleaved blocks whose 4-token
    kernel rounded differently from the 1-token one) and the tiled K-quant matmul (`GGML_CPU_TILED_MM`,
    taken from 8 tokens on). With both off, every (weight row, token) is one dot product, whatever the
    batch: Qwen2.5-Coder-0.5B's logits were bit-identical alone and among 2-8 sequences in any order, and
    batching tokens became safe. ggml reads the variable once, at the first matmul of the process: every
    model lle loads comes through here first. `Llama` takes no `use_extra_bufts` argument; it builds its
    params from `llama_model_default_params`, swapped here under the load lock."""
    os.environ["GGML_CPU_TILED_MM"] = "0"
    module = llama_cpp.llama_cpp
    default = module.llama_model_default_params

    def params() -> Any:
        p = default()
        p.use_extra_bufts = False
        return p

    module.llama_model_default_params = params
    try:
        yield
    finally:
        module.llama_model_default_params = default


def load_model(path: Path, **kwargs: Any) -> Any:
    """A `llama_cpp.Llama` of `path`, loaded quietly with batch-invariant kernels (`_batch_invariant_kernels`)."""
    llama_cpp = _llama_cpp()
    if not path.is_file():
        raise ModelError(
            f"model file {path} does not exist; pass an existing PATH.gguf or pull one with `lle models pull`"
        )
    try:
        # verbose=False still lets llama.cpp print context warnings (vocab-only loads warn about
        # n_ctx_train); silence its file descriptors while loading, errors still raise.
        with _LOAD_LOCK, llama_cpp._utils.suppress_stdout_stderr(disable=False), _batch_invariant_kernels(llama_cpp):
            return llama_cpp.Llama(model_path=str(path), verbose=False, **kwargs)
    except (ValueError, RuntimeError, OSError) as err:
        raise ModelError(
            f"llama.cpp cannot load {path}: {err}; is it a GGUF file this llama.cpp version reads?"
        ) from err


def load_token_counter(path: str | Path) -> Callable[[str], int]:
    """The model's own token count, from its vocabulary only (weights are not loaded)."""
    llm = load_model(Path(path), vocab_only=True)
    return lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def cap_strings(schema: Any, max_chars: int | None) -> Any:
    """`schema` with `maxLength` on every string that has none (decoding only)."""
    if max_chars is None:
        return schema
    if isinstance(schema, dict):
        out = {k: cap_strings(v, max_chars) for k, v in schema.items()}
        if out.get("type") == "string" and "maxLength" not in out and "enum" not in out and "const" not in out:
            out["maxLength"] = max_chars
        return out
    if isinstance(schema, list):
        return [cap_strings(v, max_chars) for v in schema]
    return schema


GRAMMAR_MAX_LENGTH = 64
"""llama.cpp's schema converter unrolls `maxLength: n` into n nested optional rules; a large n (a file
world allows 200 000 characters) overflows its stack. Longer bounds are left to `max_tokens` and to
the validation of the decoded action against the original schema."""


def _drop_long_bounds(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _drop_long_bounds(v) for k, v in schema.items()}
        for key in ("maxLength", "minLength"):
            if isinstance(out.get(key), int) and out[key] > GRAMMAR_MAX_LENGTH:
                del out[key]
        return out
    if isinstance(schema, list):
        return [_drop_long_bounds(v) for v in schema]
    return schema


def decoding_schema(schema: dict[str, Any], max_text_chars: int | None) -> dict[str, Any]:
    """The schema the grammar is built from: the action schema, with every free-text string capped
    at `max_text_chars` when set (a tighter schema still validates against the original), and
    length bounds the grammar cannot hold left to validation."""
    capped = cap_strings(copy.deepcopy(schema), max_text_chars)
    return _drop_long_bounds(capped)  # type: ignore[no-any-return]

def chat_renderer(llm: Any) -> Callable[[list[dict[str, str]]], str] | None:
    """How `llm.create_chat_completion` turns messages into the text it tokenizes, when it uses a chat
    template from the GGUF's metadata (`chat_template.default` or `chat_template.NAME`, as llama-cpp-python
    names them): the same `Jinja2ChatFormatter` over the same template and special tokens, so the prompt
    recorded is the prompt decoded. None for a built-in format (chatml, llama-2, …) or a custom handler."""
    name = getattr(llm, "chat_format", None)
    if getattr(llm, "chat_handler", None) is not None or not isinstance(name, str) \
            or not name.startswith("chat_template."):
        return None
    template = llm.metadata.get("tokenizer.chat_template" if name == "chat_template.default" else f"tokenizer.{name}")
    if not template:
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    eos_id, bos_id = int(llm.token_eos()), int(llm.token_bos())
    # As `Llama.__init__` builds its handlers: the token texts, "" for a model without one.
    eos = llm._model.token_get_text(eos_id) if eos_id != -1 else ""
    bos = llm._model.token_get_text(bos_id) if bos_id != -1 else ""
    formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos, stop_token_ids=[eos_id])
    return lambda messages: str(formatter(messages=messages).prompt)  # type: ignore[arg-type]  # plain dicts


JSON_CHAR_RULE = r'char ::= [^"\\] |'
"""llama-cpp-python's converter lets any character but a quote or backslash into a JSON string, a raw
newline included, which `json.loads` then refuses ("Invalid control character"): an episode lost to
the grammar, not the model. The rule below is llama.cpp's own (C++ converter): no control characters."""
STRICT_JSON_CHAR_RULE = r'char ::= [^"\\\x7F\x00-\x1F] |'


SPACE_RULE = 'space ::= " "?'
"""The converter's one whitespace rule, used after every JSON token: an optional space."""
NO_SPACE_RULE = 'space ::= ""'
"""A lean action's: no whitespace between JSON tokens, so no generated token is spent on layout."""


def gbnf_of(schema: dict[str, Any], *, compact: bool = False) -> str:
    """The GBNF grammar of `schema`, whose strings hold only what a strict JSON parser accepts; with
    `compact`, one that allows no whitespace between JSON tokens (spaces inside strings stay)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    grammar: str = json_schema_to_gbnf(json.dumps(schema))
    if JSON_CHAR_RULE not in grammar and "string ::=" in grammar:
        raise InvalidInputError("llama-cpp-python's JSON string rule changed; update lle.policies.llama.gbnf_of")
    grammar = grammar.replace(JSON_CHAR_RULE, STRICT_JSON_CHAR_RULE)
    if compact:
        lines = grammar.splitlines()
        if SPACE_RULE not in lines:  # else a "lean" decode would silently allow spaces
            raise InvalidInputError("llama-cpp-python's JSON space rule changed; update lle.policies.llama.gbnf_of")
        grammar = "\n".join(NO_SPACE_RULE if line == SPACE_RULE else line for line in lines) + "\n"
    return grammar


class LlamaPolicy:
    """Embedded GGUF policy. `act` is serialized by a lock: one llama context is not re-entrant."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        model_id: str | None = None,
        sha256: str | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        max_tokens: int = 256,
        max_text_chars: int | None = None,
        repeat_penalty: float = 1.1,
        logprobs: bool = False,
        retries: int = 1,
        reuse_prefix: bool = True,
        lora_path: str | Path | None = None,
        adapter_id: str | None = None,
        lean: bool = False,
    ) -> None:
        self.model_path = Path(model_path)
        self.model_id = model_id or self.model_path.name
        self.sha256 = sha256
        self.temperature = temperature
        self.seed = seed
        self.last_completion_tokens = 0
        self.n_ctx = n_ctx
        self.n_threads = n_threads or threads_from_env()
        self.max_tokens = max_tokens
        self.max_text_chars = max_text_chars
        self.repeat_penalty = repeat_penalty
        self.logprobs = logprobs
        self.retries = max(retries, 0)
        self.reuse_prefix = reuse_prefix
        self.lean = lean
        """Decode lean actions (`lle.actions.lean_schema`: short keys, no whitespace); the same `ActionRequest`."""
        self._lock = threading.Lock()
        self._grammars: dict[str, Any] = {}
        # A LoRA adapter (GGUF, `lle.train`) is applied on the base at load; `adapter_id` names it on every
        # experience this policy records, so revoking the adapter finds what ran with it.
        self.lora_path = Path(lora_path) if lora_path is not None else None
        self.adapter_id = adapter_id or (self.lora_path.name if self.lora_path is not None else None)
        extra: dict[str, Any] = {"lora_path": str(self.lora_path)} if self.lora_path is not None else {}
        self.llm = load_model(
            self.model_path, n_ctx=n_ctx, n_threads=self.n_threads, n_threads_batch=self.n_threads, seed=seed,
            logits_all=logprobs, **extra,
        )
        self._render = chat_renderer(self.llm)

    @property
    def info(self) -> PolicyInfo:
        return PolicyInfo(model=self.model_id, sha256=self.sha256, params={
            "temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens, "n_ctx": self.n_ctx,
            "repeat_penalty": self.repeat_penalty, "max_text_chars": self.max_text_chars,
            "reuse_prefix": self.reuse_prefix,
        } | ({"adapter": self.adapter_id} if self.adapter_id else {}) | ({"lean": True} if self.lean else {}))

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in this model's tokenizer (for `BudgetedContextBuilder(count_tokens=…)`)."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def grammar_for(self, schema: dict[str, Any]) -> Any:
        """The compiled grammar of `schema` (cached: compiling costs more than a short decode).

        This is what `response_format={"type": "json_object", "schema": …}` does inside
        llama-cpp-python, except that there a schema the converter cannot handle silently falls
        back to free-form JSON; here it is an error, so "decoded under the schema" always holds.
        """
        key = json.dumps([schema, self.lean], sort_keys=True)
        if key not in self._grammars:
            decode = decoding_schema(lean_schema(schema) if self.lean else schema, self.max_text_chars)
            try:
                grammar = gbnf_of(decode, compact=self.lean)
                self._grammars[key] = _llama_cpp().LlamaGrammar.from_string(grammar, verbose=False)
            except Exception as err:  # the converter raises bare Exceptions / ValueErrors on unsupported keywords
                raise InvalidInputError(
                    f"the action schema cannot be turned into a decoding grammar: {err}; simplify the tool's "
                    "parameters schema (no $ref to remote documents, no patternProperties)"
                ) from err
        return self._grammars[key]

    def _complete(self, messages: list[dict[str, str]], grammar: Any, attempt: int) -> dict[str, Any]:
        # A retry at temperature 0 would repeat the same decode, so it samples with a new seed.
        temperature = self.temperature if attempt == 0 else max(self.temperature, 0.7)
        kwargs: dict[str, Any] = {
            "messages": messages,
            "grammar": grammar,
            "temperature": temperature,
            "seed": self.seed + attempt,
            "max_tokens": self.max_tokens,
            "repeat_penalty": self.repeat_penalty,
        }
        if self.logprobs:
            kwargs |= {"logprobs": True, "top_logprobs": 1}
        if not self.reuse_prefix:
            self.llm.reset()  # evaluate the whole prompt afresh: the same context gives the same action
        try:
            result: dict[str, Any] = self.llm.create_chat_completion(**kwargs)
        except ValueError as err:  # llama.cpp says "Requested tokens (…) exceed context window" this way
            raise PolicyBackendError(
                f"{self.model_id} cannot take this prompt: {err}; lower the context budget or raise n_ctx"
            ) from err
        except RuntimeError as err:  # a failed llama_decode (e.g. out of memory for the KV cache)
            raise PolicyBackendError(f"{self.model_id} failed to decode: {err}; lower n_ctx or free memory") from err
        return result

    def start_episode(self) -> None:
        """Evaluate the next episode's first prompt afresh: an episode's actions do not depend on the one before."""
        with self._lock:
            self.llm.reset()

    def prompt_of(self, messages: list[dict[str, str]]) -> str:
        """The prompt `act` records for `messages`: the chat template's text, else the messages as JSON."""
        return self._render(messages) if self._render is not None else messages_text(messages)

    def write(self, prompt: str, max_tokens: int = 96, *, temperature: float = 0.0, seed: int | None = None) -> str:
        """Free text for `prompt`: no grammar, no action (the `reflect` baseline's lesson, greedy; an extractor's
        program, sampled at `temperature` with `seed`). `last_completion_tokens` counts what it cost."""
        with self._lock:
            if not self.reuse_prefix:
                self.llm.reset()
            try:
                result = self.llm.create_chat_completion(messages=[{"role": "user", "content": prompt}],
                                                         temperature=temperature,
                                                         seed=self.seed if seed is None else seed,
                                                         max_tokens=max_tokens, repeat_penalty=self.repeat_penalty)
            except (ValueError, RuntimeError) as err:
                raise PolicyBackendError(f"{self.model_id} could not write: {err}; shorten the prompt") from err
        self.last_completion_tokens = int(result.get("usage", {}).get("completion_tokens", 0))
        return str(result["choices"][0]["message"].get("content") or "").strip()

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall]:
        schema = dict(context.action_schema)
        grammar = self.grammar_for(schema)
        messages = [{"role": m.role, "content": m.content} for m in context.messages]
        prompt_tokens = completion_tokens = 0
        problem = ""
        start = time.perf_counter()
        with self._lock:
            for attempt in range(self.retries + 1):
                result = self._complete(messages, grammar, attempt)
                choice = result["choices"][0]
                usage = result.get("usage") or {}
                prompt_tokens += int(usage.get("prompt_tokens", 0))
                completion_tokens += int(usage.get("completion_tokens", 0))
                text = choice["message"].get("content") or ""
                try:
                    document = json.loads(text)
                    request = parse_action(schema, from_lean(document) if self.lean else document)
                except (ValueError, InvalidInputError) as err:
                    cut = " (cut at max_tokens)" if choice.get("finish_reason") == "length" else ""
                    problem = f"{err}{cut}; output ended {text[-120:]!r}"
                    continue
                logprobs = None
                if self.logprobs and choice.get("logprobs"):
                    logprobs = [float(t["logprob"]) for t in choice["logprobs"].get("content") or []]
                return request, LLMCall(
                    model=self.model_id, model_sha256=self.sha256, prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, latency_ms=(time.perf_counter() - start) * 1000,
                    logprobs=logprobs, prompt=self.prompt_of(messages), completion=text,
                )
        raise PolicyBackendError(
            f"{self.model_id} gave no valid action in {self.retries + 1} decodes: {problem}; "
            "raise max_tokens, or cap free text with max_text_chars"
        )
