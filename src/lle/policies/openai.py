"""π over any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama, hosted APIs).

Servers differ in how they constrain output, so the policy tries, in order, and remembers the first
mode the server accepts:

1. `json_schema` — `response_format={"type": "json_schema", …}` (OpenAI, vLLM);
2. `json_object` — llama.cpp's dialect, `{"type": "json_object", "schema": …}`;
3. `tools` — one function per tool, `tool_choice="required"`;
4. `prompt` — no constraint: the first JSON object in the reply is parsed.

A server that rejects a mode (HTTP 400/422, or any error status whose message names the parameter
the mode added) moves the policy to the next one. Whatever the mode,
the reply is validated with `parse_action`; an invalid reply is retried at most `parse_retries` times
with the validation error shown to the model. Network failures are retried by the `openai` client
(`max_retries`, exponential backoff with jitter) under a per-request `timeout`. Every failure ends
as `PolicyBackendError` naming the server and the fix — the harness records it on the step — so a
call never hangs and never fails silently.

Each `LLMCall` records the messages of the accepted request as canonical JSON (`lle.policies.prompt`):
the server renders its own chat template, out of sight; a re-ask's messages include the invalid reply
and the correction, as sent.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Literal

import openai

from lle.actions import parse_action
from lle.core import ActionRequest, Context, LLMCall, PolicyInfo
from lle.errors import InvalidInputError, PolicyBackendError
from lle.policies.prompt import messages_text

Mode = Literal["json_schema", "json_object", "tools", "prompt"]
MODES: tuple[Mode, ...] = ("json_schema", "json_object", "tools", "prompt")


_MODE_WORDS: dict[Mode, tuple[str, ...]] = {
    "json_schema": ("response_format", "json_schema"),
    "json_object": ("response_format", "json_object"),
    "tools": ("tool_choice", "tools", "function"),
    "prompt": (),
}


class _Rejected(Exception):
    """The server refused the request's shape (not its content): try the next mode."""


def extract_json(text: str) -> Any:
    """The first JSON object in `text` (models like to wrap it in prose or code fences)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise ValueError("the reply holds no JSON object")


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    branches = schema.get("anyOf", [schema])
    return [b for b in branches if isinstance(b, dict)]


def _tool_functions(schema: dict[str, Any]) -> list[dict[str, Any]]:
    functions = []
    for branch in _branches(schema):
        props = branch.get("properties", {})
        name = props.get("tool", {}).get("const")
        if not isinstance(name, str):
            continue
        functions.append({
            "type": "function",
            "function": {
                "name": name,
                "parameters": {
                    "type": "object",
                    "properties": {"thought": {"type": "string"}, "args": props.get("args", {"type": "object"}),
                                   "expect": {"type": "string"}},
                    "required": ["thought", "args", "expect"],
                },
            },
        })
    return functions


class OpenAIPolicy:
    """A policy that asks an OpenAI-compatible server for one action per step."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        seed: int | None = 0,
        max_tokens: int = 384,
        timeout: float | None = None,
        max_retries: int = 2,
        parse_retries: int = 2,
        mode: Mode | Literal["auto"] = "auto",
        logprobs: bool = False,
    ) -> None:
        self.model = model
        self.base_url = base_url or os.environ.get("LLE_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        key = api_key or os.environ.get("OPENAI_API_KEY") or os.environ.get("LLE_API_KEY")
        if key is None:
            if self.base_url is None:
                raise InvalidInputError(
                    f"openai:{model} needs a server: set OPENAI_API_KEY (or LLE_API_KEY) for api.openai.com, "
                    "or pass base_url / set LLE_BASE_URL for a local server"
                )
            key = "no-key"  # local servers (llama.cpp, vLLM, Ollama) accept any key
        if mode != "auto" and mode not in MODES:
            raise InvalidInputError(f"mode {mode!r} is not one of auto, {', '.join(MODES)}")
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.timeout = timeout if timeout is not None else float(os.environ.get("LLE_TIMEOUT", "30"))
        self.parse_retries = max(parse_retries, 0)
        self.logprobs = logprobs
        self._modes: list[Mode] = list(MODES) if mode == "auto" else [mode]
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout,
                                    max_retries=max_retries)

    @property
    def where(self) -> str:
        return self.base_url or "api.openai.com"

    @property
    def mode(self) -> Mode:
        """The mode in use (the first the server has not rejected)."""
        return self._modes[0]

    @property
    def info(self) -> PolicyInfo:
        return PolicyInfo(model=f"openai:{self.model}", params={
            "base_url": self.where, "temperature": self.temperature, "seed": self.seed,
            "max_tokens": self.max_tokens, "mode": self.mode,
        })

    def write(self, prompt: str, max_tokens: int = 96, *, temperature: float = 0.0, seed: int | None = None) -> str:
        """Free text for `prompt` (the `reflect` baseline's lesson at temperature 0; an extractor's program)."""
        try:
            kwargs: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                                      "temperature": temperature, "max_tokens": max_tokens}
            if (seed if seed is not None else self.seed) is not None:
                kwargs["seed"] = seed if seed is not None else self.seed
            response = self.client.chat.completions.create(**kwargs)
            usage = getattr(response, "usage", None)
            self.last_completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
            return str(response.choices[0].message.content or "").strip()
        except (openai.OpenAIError, IndexError, AttributeError) as err:
            raise PolicyBackendError(f"server {self.where} could not write: {err}; check the server") from err

    # -- one request ---------------------------------------------------------------------------

    def _request(self, messages: list[dict[str, str]], schema: dict[str, Any], mode: Mode) -> Any:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                  "max_tokens": self.max_tokens}
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.logprobs:
            kwargs["logprobs"] = True
        if mode == "json_schema":
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "action", "schema": schema, "strict": False}}
        elif mode == "json_object":
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        elif mode == "tools":
            kwargs["tools"] = _tool_functions(schema)
            kwargs["tool_choice"] = "required"
        try:
            return self.client.chat.completions.create(**kwargs)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as err:
            if mode != "prompt":
                raise _Rejected(str(err)) from err
            raise PolicyBackendError(f"server {self.where} rejected the request for {self.model}: {err}") from err
        except openai.APITimeoutError as err:
            raise PolicyBackendError(
                f"server {self.where} did not answer within {self.timeout}s (after retries); "
                "check that it is up and not overloaded, or raise timeout"
            ) from err
        except openai.APIConnectionError as err:
            raise PolicyBackendError(
                f"cannot reach {self.where}: {err.__cause__ or err}; start the server or fix base_url"
            ) from err
        except openai.AuthenticationError as err:
            raise PolicyBackendError(
                f"server {self.where} refused the API key; set OPENAI_API_KEY or LLE_API_KEY"
            ) from err
        except openai.APIStatusError as err:
            # Some servers (llama-cpp-python's among them) answer a request-validation failure with
            # HTTP 500; when the complaint names the parameter this mode added, it is a rejection.
            if mode != "prompt" and any(word in str(err.message) for word in _MODE_WORDS[mode]):
                raise _Rejected(str(err)) from err
            raise PolicyBackendError(f"server {self.where} answered HTTP {err.status_code}: {err.message}") from err
        except (openai.OpenAIError, ValueError, TypeError) as err:
            raise PolicyBackendError(f"server {self.where} answered something unusable: {err}") from err

    def _reply(self, response: Any, mode: Mode) -> tuple[Any, str, int, int, list[float] | None]:
        """(document, raw text, prompt tokens, completion tokens, logprobs) from a completion."""
        try:
            choice = response.choices[0]
            message = choice.message
            usage = response.usage
            prompt_tokens = int(usage.prompt_tokens) if usage is not None else 0
            completion_tokens = int(usage.completion_tokens) if usage is not None else 0
            logprobs = None
            if self.logprobs and choice.logprobs is not None and choice.logprobs.content is not None:
                logprobs = [float(t.logprob) for t in choice.logprobs.content]
            if mode == "tools" and message.tool_calls:
                call = message.tool_calls[0]
                raw = call.function.arguments
                body = json.loads(raw)
                doc: Any = {"thought": body.get("thought", ""), "tool": call.function.name,
                            "args": body.get("args", {}), "expect": body.get("expect", "")}
                return doc, raw, prompt_tokens, completion_tokens, logprobs
            raw = message.content
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as err:
            preview = str(response)[:200]
            raise PolicyBackendError(
                f"server {self.where} answered something that is not a chat completion ({preview!r}); "
                "check that base_url points at an OpenAI-compatible /v1 endpoint"
            ) from err
        if not isinstance(raw, str):
            raise PolicyBackendError(f"server {self.where} returned no message content; check the model name")
        try:
            return extract_json(raw), raw, prompt_tokens, completion_tokens, logprobs
        except ValueError:
            return None, raw, prompt_tokens, completion_tokens, logprobs

    # -- the policy ----------------------------------------------------------------------------

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall]:
        schema: dict[str, Any] = dict(context.action_schema)
        messages = [{"role": m.role, "content": m.content} for m in context.messages]
        prompt_tokens = completion_tokens = 0
        start = time.perf_counter()
        problem = ""
        for _attempt in range(self.parse_retries + 1):
            while True:
                mode = self._modes[0]
                try:
                    response = self._request(messages, schema, mode)
                    break
                except _Rejected as err:
                    if len(self._modes) == 1:
                        raise PolicyBackendError(f"server {self.where} rejected every output mode: {err}") from err
                    self._modes.pop(0)
            doc, raw, p_tok, c_tok, logprobs = self._reply(response, mode)
            prompt_tokens += p_tok
            completion_tokens += c_tok
            if doc is None:
                problem = "the reply holds no JSON object"
            else:
                try:
                    request = parse_action(schema, doc)
                except InvalidInputError as err:
                    problem = str(err)
                else:
                    return request, LLMCall(
                        model=f"openai:{self.model}", prompt_tokens=prompt_tokens,
                        completion_tokens=completion_tokens, latency_ms=(time.perf_counter() - start) * 1000,
                        logprobs=logprobs, prompt=messages_text(messages),  # the server renders them: what we sent
                    )
            messages = [*messages, {"role": "assistant", "content": raw[:2000]},
                        {"role": "user", "content": f"That reply was invalid: {problem}. Reply with exactly one JSON "
                                                    "object with keys thought, tool, args, expect."}]
        raise PolicyBackendError(
            f"{self.model} at {self.where} gave no valid action in {self.parse_retries + 1} tries "
            f"(mode {self.mode}): {problem}"
        )
