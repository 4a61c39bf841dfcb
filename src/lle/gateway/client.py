"""For agent authors: one episode through `lle serve`, its feedback and its end, in a few lines.

    from lle.gateway.client import GatewayEpisode
    ep = GatewayEpisode("http://127.0.0.1:8770", token="…")
    llm = openai.OpenAI(base_url=ep.base_url, api_key=ep.token)   # every call is recorded as a step
    ... run the agent ...
    ep.feedback("test_result", tests=[{"name": "test_add", "passed": True}])
    print(ep.end(goal="make the tests pass"))                      # outcome, evidence, what was routed

Only the standard library and httpx2 (which the `openai` client already brings) are needed.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx2

from lle.errors import InvalidInputError


class GatewayEpisode:
    """One episode: `base_url` for any OpenAI-compatible client, then `feedback` and `end`."""

    def __init__(self, gateway: str, token: str, episode: str | None = None, *, project: str | None = None,
                 serve: bool | None = None, timeout: float = 600.0) -> None:
        self.root = gateway.rstrip("/").removesuffix("/v1")
        self.token = token
        self.episode = episode or f"ep-{uuid.uuid4().hex[:16]}"
        headers = {"Authorization": f"Bearer {token}"}
        if project:
            headers["X-LLE-Project"] = project
        if serve is not None:
            headers["X-LLE-Serve"] = "1" if serve else "0"
        self.headers = headers
        self.http = httpx2.Client(base_url=self.root, headers=headers, timeout=timeout)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL whose calls all belong to this episode."""
        return f"{self.root}/episodes/{self.episode}/v1"

    @property
    def default_headers(self) -> dict[str, str]:
        """Headers to give an OpenAI client (`default_headers=`): the project and serve choice."""
        return {k: v for k, v in self.headers.items() if k != "Authorization"}

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self.http.post(f"/v1/lle/episodes/{self.episode}/{path}", json=body)
        data = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        if r.status_code >= 400:
            message = data.get("error", {}).get("message") if isinstance(data, dict) else None
            raise InvalidInputError(f"gateway answered {r.status_code} to {path}: {message or r.text[:300]}")
        return dict(data)

    def feedback(self, kind: str, *, passed: bool | None = None, tests: list[dict[str, Any]] | None = None,
                 score: float | None = None, remark: str = "", anchor: str | None = None, step: int | None = None,
                 source: str = "client") -> dict[str, Any]:
        """Record a test result, a score or a remark (its anchor kind: test, human, model_judge, …)."""
        body: dict[str, Any] = {"kind": kind, "source": source, "tests": tests or [], "remark": remark}
        for key, value in (("passed", passed), ("score", score), ("anchor", anchor), ("step", step)):
            if value is not None:
                body[key] = value
        return self._post("feedback", body)

    def end(self, *, goal: str | None = None, project: str | None = None, split: str = "train",
            writeback: list[str] | None = None) -> dict[str, Any]:
        """End the episode: assessed, scrubbed, stored and routed; returns outcome, evidence and updates."""
        body: dict[str, Any] = {"split": split}
        for key, value in (("goal", goal), ("project", project), ("writeback", writeback)):
            if value is not None:
                body[key] = value
        return self._post("end", body)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GatewayEpisode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
