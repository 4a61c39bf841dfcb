"""The FastAPI app: an OpenAI-compatible front that records episodes and serves experience back.

    POST /v1/chat/completions                      proxied; recorded when an episode is named
    POST /episodes/{id}/v1/chat/completions        the same, the episode named by the path
    GET  /v1/models, /episodes/{id}/v1/models
    POST /v1/lle/episodes/{id}/feedback            test results, a score, a remark
    POST /v1/lle/episodes/{id}/end                 assess → hygiene → store → router
    GET  /v1/lle/episodes/{id}                     an open episode's state

Every route needs `Authorization: Bearer TOKEN`; the token names the client and its scope. Bad
input is a 4xx whose one-line message names the input and the fix, and nothing is recorded. The
store is used from one thread of its own (SQLite's single writer); journal lines are written on
another, after the response is on its way, so recording adds little to a call's latency.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from lle.carriers.memory import MemoryCarrier
from lle.core import new_id
from lle.gateway import finish as finishing
from lle.gateway import serving
from lle.gateway.bounds import BoundedBody
from lle.gateway.capture import (
    EPISODE_ID,
    WRITEBACK_ALLOWED,
    CallRecord,
    EndBody,
    FeedbackBody,
    link_results,
    redact_json,
)
from lle.gateway.config import NAME, ClientConfig, GatewayConfig
from lle.gateway.journal import Journal, OpenEpisode
from lle.gateway.upstream import Upstream, UpstreamError, merge_chunks
from lle.router.router import UpdateRouter
from lle.store import Store
from lle.store.episodes import is_finished
from lle.workspace import db_path

MAX_DEPTH = 64
"""Arrays and objects nest at most this deep in a request body (a chat call with tool schemas needs ~10)."""
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class GatewayError(Exception):
    """An HTTP error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(self, status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.headers = status, message, param, kind, headers

    def response(self) -> JSONResponse:
        return JSONResponse({"error": {"message": self.message, "type": self.kind, "param": self.param,
                                       "code": self.status}}, status_code=self.status, headers=self.headers)


@dataclass
class Bucket:
    tokens: float
    at: float


class Gateway:
    """State of one running gateway: open episodes, the store's thread, the journal, the rate buckets."""

    def __init__(self, config: GatewayConfig, upstream: Upstream) -> None:
        self.config, self.upstream = config, upstream
        self.journal = Journal(config.workspace, fsync=config.fsync)
        self.episodes: dict[tuple[str, str], OpenEpisode] = {}
        self.ended: set[tuple[str, str]] = set()  # ended in this process: a late call must not reopen one
        self.buckets: dict[str, Bucket] = {}
        self._store_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lle-store")
        self._pending: list[tuple[OpenEpisode, dict[str, Any]]] = []  # journal lines not yet written, in order
        self._store: Store | None = None
        self._memory: MemoryCarrier | None = None
        self._router: UpdateRouter | None = None

    # --- the store, on its own thread ------------------------------------------------------------

    def _db(self) -> Store:
        if self._store is None:
            self.config.workspace.mkdir(parents=True, exist_ok=True)
            self._store = Store(db_path(self.config.workspace))
        return self._store

    def memory(self) -> MemoryCarrier:
        if self._memory is None:
            self._memory = MemoryCarrier(self._db())
        return self._memory

    def router(self) -> UpdateRouter:
        if self._router is None:  # ~3 s once (the contamination index), then reused
            self._router = UpdateRouter(self._db(), memory=self.memory(), actor="gateway")
        return self._router

    async def in_store(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._store_pool, fn)

    def recover(self) -> int:
        """Read the open episodes back from their journals (store thread); returns how many are open."""
        for ep in self.journal.load():
            if is_finished(self._db(), ep.experience_id):
                self.journal.remove(ep)
            else:
                self.episodes[(ep.client, ep.episode)] = ep
        return len(self.episodes)

    def close(self) -> None:
        self.flush()
        self.journal.close()
        self._store_pool.submit(lambda: self._store.close() if self._store else None).result()
        self._store_pool.shutdown(wait=True)

    # --- journal, off the response path ----------------------------------------------------------

    def write(self, ep: OpenEpisode, event: dict[str, Any]) -> None:
        """Queue a journal line; `flush` writes it once the answer is on its way (see `flush`)."""
        self._pending.append((ep, event))

    def flush(self) -> None:
        """Write every queued journal line, in order, on the event loop, after the response was sent.

        Not on a thread: a writer thread took the GIL from the event loop in the middle of sending
        answers (0.5-1 ms a call measured); run here, between answers, it costs a call nothing unless
        calls queue. Bodies are redacted before they touch the disk; the open event's ids are kept as
        they are (a long random episode id would read as a secret, and replay must find it again)."""
        pending, self._pending = self._pending, []
        counts: Counter[str] = Counter()
        for ep, event in pending:
            self.journal.append(ep, event if event["kind"] == "open" else redact_json(event, counts))

    async def flush_later(self) -> None:
        self.flush()

    # --- requests ------------------------------------------------------------------------------------

    def client(self, request: Request) -> ClientConfig:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        client = self.config.client_for(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if client is None:
            why = "is missing" if not header else "is not a known gateway token"
            raise GatewayError(401, f"Authorization {why}; send `Authorization: Bearer TOKEN` with the token "
                                    "`lle serve` was started with (--token or LLE_GATEWAY_TOKEN)",
                               kind="authentication_error", headers={"WWW-Authenticate": "Bearer"})
        now = time.monotonic()
        bucket = self.buckets.setdefault(client.name, Bucket(float(self.config.burst), now))
        bucket.tokens = min(float(self.config.burst), bucket.tokens + (now - bucket.at) * self.config.rate_per_s)
        bucket.at = now
        if bucket.tokens < 1.0:
            wait = (1.0 - bucket.tokens) / self.config.rate_per_s
            raise GatewayError(429, f"client {client.name} is over its rate of {self.config.rate_per_s:g} requests/s; "
                                    f"retry after {wait:.2f} s or start lle serve with a higher --rate",
                               kind="rate_limit_error", headers={"Retry-After": str(max(1, round(wait)))})
        bucket.tokens -= 1.0
        return client

    async def body(self, request: Request) -> Any:
        """The body as JSON (its size and the time it takes are bounded by `BoundedBody`): UTF-8, at most
        MAX_DEPTH arrays and objects deep, no lone surrogate (upstream cannot encode one)."""
        raw = await request.body()
        try:
            data = json.loads(raw.decode("utf-8") or "null")  # strict: json.loads(bytes) lets surrogates through
            deep = too_deep(data)
        except UnicodeDecodeError as err:
            raise GatewayError(400, f"request body is not UTF-8 (byte {err.start}: {raw[err.start:err.end]!r}); "
                                    "send JSON encoded as UTF-8") from None
        except RecursionError:
            deep = True
        except ValueError as err:
            raise GatewayError(400, f"request body is not valid JSON ({err}); send a JSON object "
                                    "with Content-Type: application/json") from None
        if deep:
            raise GatewayError(400, f"request body nests arrays and objects more than {MAX_DEPTH} deep; "
                                    "send a flatter body (a deep value can travel as a JSON string)")
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as err:
            raise GatewayError(400, f"request body has a lone surrogate ({err.object[err.start]!r}, an unpaired "
                                    "half of \\ud800-\\udfff) in a string; send text as UTF-8 or as complete "
                                    "\\uXXXX pairs") from None
        return data

    async def parsed(self, request: Request, model: type[M]) -> M:
        data = await self.body(request)
        try:
            return model.model_validate({} if data is None else data)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            raise GatewayError(400, f"{where}: {first['msg']}; see docs/75-gateway.md for the body's fields",
                               param=where) from err

    def episode(self, client: ClientConfig, episode: str) -> OpenEpisode:
        found = self.episodes.get((client.name, episode))
        if found is None and (client.name, episode) in self.ended:
            raise GatewayError(409, f"episode {episode!r} has ended; its experience is stored (use a new id)",
                               param="episode")
        if found is None:
            raise GatewayError(404, f"episode {episode!r} is not open for client {client.name}; open it with a "
                                    f"chat call to /episodes/{episode}/v1/chat/completions first", param="episode")
        return found


def too_deep(data: Any) -> bool:
    """Whether arrays and objects nest more than MAX_DEPTH deep in `data` (level by level: no recursion)."""
    level = [data] if isinstance(data, dict | list) else []
    for _ in range(MAX_DEPTH):
        if not level:
            return False
        level = [c for v in level for c in (v.values() if isinstance(v, dict) else v) if isinstance(c, dict | list)]
    return bool(level)


def check_chat(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise GatewayError(400, "request body must be a JSON object with `messages`, as in OpenAI's chat API")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GatewayError(400, "messages: must be a non-empty list of {role, content} objects", param="messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise GatewayError(400, f"messages.{i}: each message must be an object with a string `role`",
                               param=f"messages.{i}")
    if "tools" in body and not isinstance(body["tools"], list):
        raise GatewayError(400, "tools: must be a list of {type: function, function: {...}}", param="tools")
    return body


def check_episode(episode: str) -> str:
    if not EPISODE_ID.match(episode):
        raise GatewayError(400, f"episode id {episode[:80]!r}: use 1-128 letters, digits, `_`, `.`, `:` or `-`, "
                                "starting with a letter or digit", param="episode")
    return episode


def create_app(config: GatewayConfig, upstream: Upstream) -> FastAPI:
    gw = Gateway(config, upstream)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await gw.in_store(gw.recover)
        yield
        await upstream.aclose()
        gw.close()

    app = FastAPI(title="lle gateway", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.gateway = gw
    app.add_middleware(BoundedBody, max_bytes=config.max_body_bytes, timeout_s=config.body_timeout_s,
                       fix=" (fewer or shorter messages), or start lle serve with higher --max-body or --body-timeout")

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, err: GatewayError) -> JSONResponse:
        return err.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        if err.status_code == 404:
            return GatewayError(404, f"no route {request.method} {request.url.path}; the gateway serves "
                                     "/v1/chat/completions, /episodes/ID/v1/chat/completions, /v1/models and "
                                     "/v1/lle/episodes/ID/(feedback|end)").response()
        return GatewayError(err.status_code, f"{request.method} {request.url.path}: {err.detail}",
                            headers=dict(err.headers or {})).response()

    @app.exception_handler(UpstreamError)
    async def _upstream_error(request: Request, err: UpstreamError) -> JSONResponse:
        status = err.status if 400 <= err.status < 500 else 502
        return GatewayError(status, err.message, kind="upstream_error").response()

    async def chat(request: Request, episode: str | None) -> Response:
        client = gw.client(request)
        if episode is None:
            episode = request.headers.get("x-lle-episode") or None
        if episode is not None:
            check_episode(episode)
        body = check_chat(await gw.body(request))
        project = request.headers.get("x-lle-project") or client.project
        if not NAME.match(project):
            raise GatewayError(400, f"X-LLE-Project {project[:80]!r}: use 1-80 letters, digits, _ . -")
        ep = gw.episodes.get((client.name, episode)) if episode else None
        if (ep is not None and ep.ended) or (client.name, episode) in gw.ended:
            raise GatewayError(409, f"episode {episode!r} is ending or has ended; use a new episode id")
        asked = request.headers.get("x-lle-serve", "").strip().lower()  # per request: on (1) or off (0)
        serve = asked in ("1", "true", "yes") or (client.serve and asked not in ("0", "false", "no"))
        served = serving.Served([])
        if serve:
            query = serving.query_of(body["messages"])
            scope_project = ep.project if ep else project
            served = await gw.in_store(lambda: serving.find(gw._db(), gw.memory(), family=client.family,
                                                            project=scope_project, query=query, k=config.served_k))
        sent = serving.inject(body, served)
        params = {k: v for k, v in sent.items() if k not in ("messages", "stream")}
        started = time.perf_counter()

        def record(response: dict[str, Any]) -> tuple[OpenEpisode | None, int]:
            if episode is None:
                return None, -1
            latency = (time.perf_counter() - started) * 1000
            target = gw.episodes.get((client.name, episode))
            if (client.name, episode) in gw.ended or (target is not None and target.ended):
                return None, -1  # ended while this call was upstream: the answer goes back, the record cannot
            if target is None:  # the first call opens the episode
                target = OpenEpisode(client.name, episode, new_id("exp"), project)
                gw.episodes[(client.name, episode)] = target
                gw.write(target, {"kind": "open", "client": client.name, "episode": episode,
                                  "experience_id": target.experience_id, "project": project})
            for step, results in link_results(target.calls, sent["messages"]).items():
                target.calls[step].results.update(results)
                gw.write(target, {"kind": "effect", "step": step, "results": results})
            call = CallRecord(index=len(target.calls), messages=sent["messages"], params=params, response=response,
                              model=str(response.get("model") or upstream.name), latency_ms=latency,
                              served=served.refs)
            target.calls.append(call)
            gw.write(target, {"kind": "call", "call": {**call.__dict__, "results": {}}})  # results: effect events
            return target, call.index

        headers = {"X-LLE-Served": ",".join(served.refs)} if served.refs else {}
        if body.get("stream"):
            lines = upstream.stream(sent)
            first = await anext(lines, None)  # an upstream refusal is a proper HTTP error, before any byte

            async def relay() -> AsyncIterator[bytes]:
                # One line held back: the call is recorded before the client can see its stream end, so a
                # feedback or an end sent right after it finds the step (a loaded machine showed the race).
                seen = [] if first is None else [first]
                held = first
                async for line in lines:
                    seen.append(line)
                    if held is not None:
                        yield (held + "\n").encode()
                    held = line
                record(merge_chunks(seen))
                gw.flush()
                if held is not None:
                    yield (held + "\n").encode()

            if episode:
                headers["X-LLE-Episode"] = episode
            return StreamingResponse(relay(), media_type="text/event-stream", headers=headers)
        response = await upstream.complete(sent)
        target, index = record(response)
        if target is not None:
            headers.update({"X-LLE-Episode": target.episode, "X-LLE-Step": str(index)})
        return JSONResponse(response, headers=headers, background=BackgroundTask(gw.flush_later))

    @app.post("/v1/chat/completions")
    async def chat_plain(request: Request) -> Response:
        return await chat(request, None)

    @app.post("/episodes/{episode}/v1/chat/completions")
    async def chat_episode(episode: str, request: Request) -> Response:
        return await chat(request, episode)

    @app.get("/v1/models")
    @app.get("/episodes/{episode}/v1/models")
    async def models(request: Request) -> JSONResponse:
        gw.client(request)
        return JSONResponse(await upstream.models())

    @app.get("/v1/lle/episodes/{episode}")
    async def show(episode: str, request: Request) -> JSONResponse:
        client = gw.client(request)
        ep = gw.episode(client, check_episode(episode))
        return JSONResponse({"episode": ep.episode, "experience_id": ep.experience_id, "project": ep.project,
                             "steps": len(ep.calls), "feedback": len(ep.feedback), "ended": ep.ended,
                             "tool_calls_answered": sum(len(c.results) for c in ep.calls)})

    @app.post("/v1/lle/episodes/{episode}/feedback")
    async def feedback(episode: str, request: Request) -> JSONResponse:
        client = gw.client(request)
        check_episode(episode)
        body = await gw.parsed(request, FeedbackBody)
        ep = gw.episode(client, episode)
        if ep.ended:
            raise GatewayError(409, f"episode {episode!r} has ended; feedback must come before `end`")
        step = len(ep.calls) - 1 if body.step is None else body.step
        if step >= len(ep.calls):
            raise GatewayError(400, f"step: episode {episode!r} has steps 0..{len(ep.calls) - 1}; "
                                    "name one of them or leave `step` out (the last)", param="step")
        ep.feedback.append((step, body))
        gw.write(ep, {"kind": "feedback", "step": step, "body": body.model_dump(mode="json")})
        gw.flush()  # feedback is rare and small: durable before the answer
        return JSONResponse({"episode": episode, "step": step, "feedback": len(ep.feedback)})

    @app.post("/v1/lle/episodes/{episode}/end")
    async def end(episode: str, request: Request) -> JSONResponse:
        client = gw.client(request)
        check_episode(episode)
        body = await gw.parsed(request, EndBody)
        ep = gw.episode(client, episode)
        if body.family is not None and body.family != client.family:
            raise GatewayError(403, f"family: this token's scope is the family {client.family!r}; leave `family` "
                                    "out or use that one (a client never writes another's scope)", param="family")
        if body.writeback is not None:
            outside = [c.value for c in body.writeback if c not in WRITEBACK_ALLOWED or c not in client.writeback]
            if outside:
                raise GatewayError(403, f"writeback: {outside} is not allowed for client {client.name}; choose from "
                                        f"{', '.join(c.value for c in client.writeback)}", param="writeback")
        if ep.ended:
            raise GatewayError(409, f"episode {episode!r} is already ending; wait for that call's answer")
        if not ep.calls:
            raise GatewayError(409, f"episode {episode!r} has no recorded call yet; end it after its calls")
        for fb in body.feedback:
            step = len(ep.calls) - 1 if fb.step is None else fb.step
            if step >= len(ep.calls):
                raise GatewayError(400, f"feedback.step: episode {episode!r} has steps 0..{len(ep.calls) - 1}",
                                   param="feedback.step")
        ep.ended = True
        for fb in body.feedback:
            step = len(ep.calls) - 1 if fb.step is None else fb.step
            ep.feedback.append((step, fb))
            gw.write(ep, {"kind": "feedback", "step": step, "body": fb.model_dump(mode="json")})
        gw.flush()
        try:
            exp, updates = await gw.in_store(lambda: finishing.finish(
                gw._db(), gw.router(), ep, client, body, model=upstream.name, upstream=config.upstream))
        except Exception:
            ep.ended = False  # still open: the caller may end it again
            raise
        gw.episodes.pop((client.name, episode), None)
        gw.ended.add((client.name, episode))
        gw.journal.remove(ep)  # a crash before this line: recover() finds the experience stored and removes it
        return JSONResponse(finishing.summary(exp, updates))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, err: Exception) -> JSONResponse:
        # One line, never a traceback to the client; the episode stays open and nothing half-written is kept.
        return GatewayError(500, f"the gateway failed: {type(err).__name__}: {err}", kind="server_error").response()

    return app
