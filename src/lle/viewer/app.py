"""The `lle view` web app: FastAPI routes over the pages, and `serve`.

Reads need nothing; the one write (revoke) needs the token printed at start (or `LLE_VIEW_TOKEN`),
a dry-run preview first and a ticked confirmation. The server binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from urllib.parse import parse_qs, quote

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from lle import workspace as workspaces
from lle.errors import InvalidInputError, LleError, UnknownIdError
from lle.flywheel import loop
from lle.gateway.bounds import BODY_TIMEOUT_S, HEADERS_TIMEOUT_S, MAX_BODY_BYTES, BoundedBody, HeadersInTime
from lle.viewer import data, lookup, pages

TOKEN_ENV = "LLE_VIEW_TOKEN"
LINKS = pages.Links()


def create_app(workspace: str | Path | None = None, token: str | None = None,
               body_timeout_s: float = BODY_TIMEOUT_S) -> FastAPI:
    """The app over `workspace`; `token` guards writes (a fresh random one when not given). A request body
    holds at most 2 MiB and must arrive within `body_timeout_s` of its headers (`BoundedBody`)."""
    secret = token or os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(16)
    app = FastAPI(title="lle view", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BoundedBody, max_bytes=MAX_BODY_BYTES, timeout_s=body_timeout_s)
    app.state.token = secret

    @app.exception_handler(LleError)
    def lle_error(_request: Request, err: LleError) -> Response:
        # The CLI's one-line message, as a page: what was wrong and how to fix it.
        status = 404 if isinstance(err, UnknownIdError) else 400
        return HTMLResponse(pages.render("base.html", LINKS, title=f"error: {' '.join(str(err).split())}"),
                            status_code=status)

    def src(run: str, strategy: str) -> data.Source:
        return data.source(run, None if strategy == "-" else strategy, workspace)

    @app.get("/", response_class=HTMLResponse)
    def runs() -> str:
        return pages.runs_page(loop.list_runs(workspace), workspaces.db_path(workspace).exists(), LINKS, workspace)

    @app.get("/runs/{run}", response_class=HTMLResponse)
    def run_page(run: str) -> Response:
        full = lookup.resolve_run(run, workspace)
        if full != run:  # a prefix or `latest`: the page's address names the run
            return RedirectResponse(f"/runs/{full}", status_code=307)
        return HTMLResponse(pages.run_page(full, LINKS, workspace))

    @app.get("/compare", response_class=HTMLResponse)
    def compare(a: str, b: str) -> str:
        return pages.compare_page(lookup.resolve_run(a, workspace), lookup.resolve_run(b, workspace), LINKS,
                                  workspace)

    @app.get("/runs/{run}/{strategy}/episodes", response_class=HTMLResponse)
    def episodes(run: str, strategy: str) -> str:
        return pages.episodes_page(src(run, strategy), LINKS)

    @app.get("/runs/{run}/{strategy}/episodes/{exp_id}", response_class=HTMLResponse)
    def episode(run: str, strategy: str, exp_id: str) -> str:
        return pages.episode_page(src(run, strategy), exp_id, LINKS)

    @app.get("/runs/{run}/{strategy}/carriers", response_class=HTMLResponse)
    def carriers(run: str, strategy: str, all: int = 0, message: str = "") -> str:
        return pages.carriers_page(src(run, strategy), LINKS, bool(all), message)

    @app.get("/runs/{run}/{strategy}/items/{item_id}", response_class=HTMLResponse)
    def item(run: str, strategy: str, item_id: str) -> str:
        return pages.item_page(src(run, strategy), item_id, LINKS)

    @app.get("/runs/{run}/{strategy}/revoke", response_class=HTMLResponse)
    def revoke_preview(run: str, strategy: str, target: str) -> str:
        found = src(run, strategy)
        full, cascade = data.preview(found, target)
        return pages.revoke_page(found, full, LINKS, cascade)

    @app.post("/runs/{run}/{strategy}/revoke", response_class=HTMLResponse)
    async def revoke(run: str, strategy: str, request: Request) -> Response:
        # The form is parsed here (urlencoded): FastAPI's Form() would need python-multipart, not installed.
        try:  # strict, raw or %-escaped: a byte that is not UTF-8 is refused, never guessed at
            form = parse_qs((await request.body()).decode(), keep_blank_values=True, errors="strict")
        except UnicodeDecodeError as err:
            raise InvalidInputError(f"the revoke form is not UTF-8 ({err.object[err.start:err.end]!r}); send it "
                                    "url-encoded as UTF-8, as a browser does") from None
        fields = {k: v[-1] for k, v in form.items()}
        target, reason, author = fields.get("target", ""), fields.get("reason", ""), fields.get("author", "viewer")
        token, confirm = fields.get("token", ""), fields.get("confirm", "")
        found = src(run, strategy)
        full, cascade = data.preview(found, target)
        problem = ("the token is wrong: use the one `lle view` printed (or LLE_VIEW_TOKEN)"
                   if not hmac.compare_digest(token.encode(), secret.encode()) else
                   "tick the confirmation to revoke" if confirm != "yes" else
                   "give a reason (it is kept with the revocation)" if not reason.strip() else "")
        if problem:
            return HTMLResponse(pages.revoke_page(found, full, LINKS, cascade, error=problem), status_code=403
                                if "token" in problem else 400)
        rev = data.revoke(found, full, reason, author.strip() or "viewer")
        message = f"{rev.id}: revoked {full} and {len(rev.cascade)} derived records"
        return RedirectResponse(f"/runs/{found.run}/{found.strategy}/carriers?message={quote(message)}",
                                status_code=303)

    @app.get("/healthz", response_class=PlainTextResponse)
    def healthz() -> str:
        return "ok"

    return app


def serve(workspace: str | Path | None = None, host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None) -> None:
    import uvicorn

    app = create_app(workspace, token)
    where = workspaces.resolve(workspace).resolve()
    print(f"lle view: http://{host}:{port}/  (workspace {where})", flush=True)
    print(f"token for writes (revoke): {app.state.token}", flush=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: bound to {host}: anyone who can reach it reads every run; writes still need the token",
              flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", http=HeadersInTime,
                timeout_keep_alive=HEADERS_TIMEOUT_S)
