"""Where the gateway sends a call: the embedded llama.cpp model, or any OpenAI-compatible URL.

Both answer with OpenAI's JSON (a completion, or SSE lines when streaming); the gateway records what
came back and passes it on unchanged. The embedded model runs on one thread of its own (llama.cpp is
not thread-safe; calls queue), so the event loop keeps serving while it decodes.
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import json
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpcore2
import jinja2

from lle.errors import InvalidInputError

# What llama.cpp's create_chat_completion accepts from an OpenAI body; anything else is left out.
_LLAMA_KEYS = ("messages", "tools", "tool_choice", "temperature", "top_p", "stop", "seed", "response_format",
               "max_tokens", "presence_penalty", "frequency_penalty", "logit_bias")


class UpstreamError(Exception):
    """The upstream refused or failed: `status` is passed on (4xx as is, anything else as 502)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Upstream(Protocol):
    name: str
    """The model name reported in `/v1/models` and recorded with each step."""

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def stream(self, body: dict[str, Any]) -> AsyncIterator[str]:
        """SSE lines (without newline) as the upstream sent them; raises `UpstreamError` before the first."""
        ...

    async def models(self) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


def sse_events(lines: list[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                try:
                    event = json.loads(data)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    yield event


def merge_chunks(lines: list[str]) -> dict[str, Any]:
    """The completion a stream amounts to: content and tool-call deltas joined, usage when sent."""
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    calls: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {"object": "chat.completion"}
    finish = None
    logprobs: list[Any] = []
    for event in sse_events(lines):
        out.setdefault("id", event.get("id"))
        out.setdefault("model", event.get("model"))
        if isinstance(event.get("usage"), dict):
            out["usage"] = event["usage"]
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            message["content"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(call.get("index", 0)), {"id": "", "type": "function",
                                                                      "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if isinstance(choice.get("logprobs"), dict):
                logprobs += choice["logprobs"].get("content") or []
            finish = choice.get("finish_reason") or finish
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    choice_out: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if logprobs:
        choice_out["logprobs"] = {"content": logprobs}
    out["choices"] = [choice_out]
    return out


class KeepAlivePool:
    """Plain-http POSTs over kept-alive HTTP/1.1 connections: one write per request, the answer read by
    its Content-Length or chunks. The proxied call is the gateway's hot path, and a general client
    (httpx, even httpcore alone) spent 1-2 ms of CPU per call there; this is a few hundred microseconds."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, head: bytes, body: bytes) -> tuple[int, bytes]:
        request = b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s" % (path.encode(), head, len(body), body)
        for attempt in (0, 1):
            reused = bool(self.idle)
            conn = self.idle.pop() if reused else await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 24), 10.0)
            try:
                status, data, keep = await asyncio.wait_for(self._exchange(conn, request), self.timeout)
            except TimeoutError:  # the server is slow, not gone: no second try
                conn[1].close()
                raise
            except (ConnectionError, asyncio.IncompleteReadError, OSError, ValueError):
                conn[1].close()
                if reused and attempt == 0:
                    continue  # a kept-alive connection the server had closed meanwhile: once more, on a new one
                raise
            except BaseException:  # a timeout or a cancelled call: the connection is mid-answer, never reused
                conn[1].close()
                raise
            if keep and len(self.idle) < 128:
                self.idle.append(conn)
            else:
                conn[1].close()
            return status, data
        raise ConnectionError("unreachable")

    @staticmethod
    async def _exchange(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                        request: bytes) -> tuple[int, bytes, bool]:
        reader, writer = conn
        writer.write(request)
        await writer.drain()
        status_line, *lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        version, status = status_line.split(" ", 2)[:2]
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
                pass
            return int(status), b"".join(parts), keep
        if "content-length" in headers:
            return int(status), await reader.readexactly(int(headers["content-length"])), keep
        return int(status), await reader.read(), False  # delimited by the end of the connection

    def close(self) -> None:
        while self.idle:
            self.idle.pop()[1].close()


class HttpUpstream:
    """Any OpenAI-compatible server: plain http through `KeepAlivePool`, https and streams through httpcore
    (httpx's client layers on top of it, auth, redirects, cookies, cost about 1.5 ms a call more)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 300.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.name = model
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidInputError(f"--upstream {base_url!r} is not an http(s) URL; pass e.g. http://127.0.0.1:8080/v1")
        self.headers = [(b"host", parts.netloc.encode()), (b"content-type", b"application/json")]
        if api_key:
            self.headers.append((b"authorization", f"Bearer {api_key}".encode()))
        self.timeout = {"connect": 10.0, "read": timeout, "write": timeout, "pool": timeout}
        self.pool = httpcore2.AsyncConnectionPool(max_connections=512, max_keepalive_connections=128)
        self.fast = KeepAlivePool(parts.hostname or "127.0.0.1", parts.port or 80, timeout) \
            if parts.scheme == "http" else None
        self.path = (parts.path or "") + "/chat/completions"
        self.head = b"".join(b"%s: %s\r\n" % (k, v) for k, v in self.headers)

    def _fail(self, err: Exception) -> UpstreamError:
        return UpstreamError(502, f"upstream {self.base_url} cannot be reached ({type(err).__name__}: {err}); "
                                  "start it or fix --upstream")

    def _body(self, body: dict[str, Any]) -> bytes:
        return json.dumps({"model": self.name, **body}, ensure_ascii=False).encode()

    async def _post(self, body: dict[str, Any]) -> tuple[int, bytes]:
        if self.fast is not None:
            try:
                return await self.fast.post(self.path, self.head, self._body(body))
            except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as err:
                raise self._fail(err) from err
        try:
            r = await self.pool.request("POST", f"{self.base_url}/chat/completions", headers=self.headers,
                                        content=self._body(body), extensions={"timeout": self.timeout})
        except (httpcore2.NetworkError, httpcore2.TimeoutException, httpcore2.ProtocolError) as err:
            raise self._fail(err) from err
        return r.status, r.content

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        status, content = await self._post(body)
        text = content.decode(errors="replace")
        if status >= 400:
            raise UpstreamError(status, f"upstream answered HTTP {status}: {text[:500]}")
        try:
            data = json.loads(text)
        except ValueError as err:
            raise UpstreamError(502, f"upstream answered something that is not JSON: {text[:200]!r}") from err
        if not isinstance(data, dict):
            raise UpstreamError(502, "upstream answered JSON that is not a completion object")
        return data

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[str]:
        try:
            async with self.pool.stream("POST", f"{self.base_url}/chat/completions", headers=self.headers,
                                        content=self._body(body), extensions={"timeout": self.timeout}) as r:
                if r.status >= 400:
                    text = (await r.aread()).decode(errors="replace")
                    raise UpstreamError(r.status, f"upstream answered HTTP {r.status}: {text[:500]}")
                pending = ""
                decode = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character may straddle chunks
                async for chunk in r.aiter_stream():
                    pending += decode.decode(chunk)
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        yield line.rstrip("\r")
                if pending:
                    yield pending
        except (httpcore2.NetworkError, httpcore2.TimeoutException, httpcore2.ProtocolError) as err:
            raise self._fail(err) from err

    async def models(self) -> dict[str, Any]:
        try:
            r = await self.pool.request("GET", f"{self.base_url}/models", headers=self.headers,
                                        extensions={"timeout": self.timeout})
            if r.status < 400 and isinstance(data := json.loads(r.content), dict):
                return data
        except (httpcore2.NetworkError, httpcore2.TimeoutException, httpcore2.ProtocolError, ValueError):
            pass
        return {"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "upstream"}]}

    async def aclose(self) -> None:
        if self.fast is not None:
            self.fast.close()
        await self.pool.aclose()


class EmbeddedUpstream:
    """llama.cpp in this process (default: SmolLM2 from the catalog), one call at a time.

    `adapters` names LoRA adapters (GGUF files, `lle weights`) as models of their own: a request whose `model`
    is one of those names decodes with the base plus that adapter, and its reply and recorded step carry the
    adapter's name. Any other `model` is answered by the base, as before adapters existed.
    """

    def __init__(self, model: str = "smollm2-135m", *, n_ctx: int = 4096, n_threads: int | None = None,
                 llm: Any = None, adapters: Mapping[str, Path] | None = None) -> None:
        self.name = Path(model).stem if model.endswith(".gguf") else model
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lle-llama")
        self.llm = llm if llm is not None else _load(model, n_ctx, n_threads)
        self.adapters = dict(adapters or {})
        for name, path in self.adapters.items():
            if not Path(path).is_file():
                raise InvalidInputError(f"adapter {name}: file {path} does not exist; list adapters with "
                                        "`lle weights list`")
        # One llama.cpp instance per served adapter, loaded at its first request (llama-cpp-python binds a LoRA
        # when the model is loaded); only the decode thread touches them.
        self._spec = (model, n_ctx, n_threads)
        self._loaded: dict[str, Any] = {}

    def _pick(self, body: dict[str, Any]) -> str:
        asked = body.get("model")
        return asked if isinstance(asked, str) and asked in self.adapters else self.name

    def _llm(self, name: str) -> Any:
        if name == self.name:
            return self.llm
        if name not in self._loaded:
            model, n_ctx, n_threads = self._spec
            self._loaded[name] = _load(model, n_ctx, n_threads, lora_path=self.adapters[name])
        return self._loaded[name]

    def _kwargs(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("logprobs"):
            # llama.cpp gives log-probs only with logits kept for every position (GBs at this n_ctx).
            raise UpstreamError(400, "logprobs: the embedded upstream does not return log-probabilities; "
                                     "drop `logprobs` or serve with --upstream URL of a server that does")
        if body.get("n", 1) != 1:
            raise UpstreamError(400, "n: the embedded upstream makes one choice per call; drop `n` or set it to 1")
        kwargs = {k: body[k] for k in _LLAMA_KEYS if k in body and body[k] is not None}
        # OpenAI lets an assistant message with tool calls leave `content` out and a user message send a list
        # of parts; llama.cpp's chat templates read `content` as a string on every message.
        kwargs["messages"] = [{**m, "content": _text(m.get("content"))} if isinstance(m, dict) else m
                              for m in body["messages"]]
        if "max_completion_tokens" in body and "max_tokens" not in kwargs:
            kwargs["max_tokens"] = body["max_completion_tokens"]
        return kwargs

    def _call(self, kwargs: dict[str, Any], stream: bool, name: str) -> Any:
        import llama_cpp.llama_chat_format as chat_format

        try:
            llm = self._llm(name)
            if kwargs.get("tools") and kwargs.get("tool_choice") != "none":
                # The GGUF's own template ignores tools; this handler (ChatML, as SmolLM2 speaks) grammar-constrains
                # the call to the tools' schemas and answers OpenAI-style `tool_calls`.
                handler = chat_format.get_chat_completion_handler("chatml-function-calling")
                return handler(llama=llm, stream=stream, **kwargs)
            kwargs.pop("tools", None)
            kwargs.pop("tool_choice", None)
            return llm.create_chat_completion(stream=stream, **kwargs)
        except (ValueError, TypeError, KeyError, jinja2.TemplateError) as err:  # the request does not fit the model
            raise UpstreamError(400, f"the embedded model cannot answer this request: {type(err).__name__}: {err}") \
                from err
        except RuntimeError as err:
            raise UpstreamError(502, f"the embedded model failed: {err}") from err

    @staticmethod
    def _named(data: dict[str, Any], name: str) -> dict[str, Any]:
        data["model"] = name  # llama.cpp reports the file path
        return data

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        kwargs, name = self._kwargs(body), self._pick(body)
        loop = asyncio.get_running_loop()
        data = await loop.run_in_executor(self.pool, self._call, kwargs, False, name)
        return self._named(dict(data), name)

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[str]:
        kwargs, name = self._kwargs(body), self._pick(body)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | BaseException | None] = asyncio.Queue()

        def produce() -> None:
            try:
                for chunk in self._call(kwargs, True, name):
                    line = "data: " + json.dumps(self._named(dict(chunk), name), ensure_ascii=False)
                    loop.call_soon_threadsafe(queue.put_nowait, line)
                    loop.call_soon_threadsafe(queue.put_nowait, "")
                loop.call_soon_threadsafe(queue.put_nowait, "data: [DONE]")
                loop.call_soon_threadsafe(queue.put_nowait, "")
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except BaseException as err:  # handed to the event loop, raised there
                loop.call_soon_threadsafe(queue.put_nowait, err)

        loop.run_in_executor(self.pool, produce)
        while True:
            item = await queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                if isinstance(item, UpstreamError):
                    raise item
                raise UpstreamError(502, f"the embedded model failed: {item}") from item
            yield item

    async def models(self) -> dict[str, Any]:
        now = int(time.time())
        listed = [{"id": self.name, "object": "model", "owned_by": "lle-embedded", "created": now}]
        listed += [{"id": name, "object": "model", "owned_by": "lle-weights", "created": now, "parent": self.name}
                   for name in self.adapters]
        return {"object": "list", "data": listed}

    async def aclose(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _load(model: str, n_ctx: int, n_threads: int | None, *, lora_path: Path | None = None) -> Any:
    from lle.errors import ModelError
    from lle.policies.catalog import locate
    from lle.policies.llama import load_model

    try:
        import llama_cpp  # noqa: F401
    except ImportError as err:
        raise ModelError("the embedded upstream needs llama-cpp-python: pip install 'lle[llama]', "
                         "or pass --upstream URL") from err
    path = Path(model) if model.endswith(".gguf") else locate(model)
    if not path.is_file():
        raise ModelError(f"model file {path} does not exist; pass a catalog model or an existing .gguf")
    threads = n_threads or int(os.environ.get("LLE_THREADS", "2"))
    return load_model(path, n_ctx=n_ctx, n_threads=threads, lora_path=None if lora_path is None else str(lora_path))


def make_upstream(spec: str, model: str, *, api_key: str | None = None, n_ctx: int = 4096,
                  n_threads: int | None = None, adapters: Mapping[str, Path] | None = None) -> Upstream:
    if spec == "embedded":
        return EmbeddedUpstream(model, n_ctx=n_ctx, n_threads=n_threads, adapters=adapters)
    if adapters:
        raise InvalidInputError("--adapter: adapters are served by the embedded upstream only; drop --adapter or "
                                "use --upstream embedded")
    if not spec.startswith(("http://", "https://")):
        raise InvalidInputError(f"--upstream {spec!r}: use `embedded` or the base URL of an OpenAI-compatible "
                                "server, e.g. http://127.0.0.1:8080/v1")
    return HttpUpstream(spec, model, api_key)
