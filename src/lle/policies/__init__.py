"""π: policies that turn a `Context` into an `ActionRequest` (see README.md in this folder)."""

from __future__ import annotations

import contextlib

from lle.core import Policy, PolicyInfo
from lle.errors import InvalidInputError
from lle.policies.scripted import ScriptedPolicy

__all__ = ["ScriptedPolicy", "load_policy", "policy_info", "policy_spec", "start_episode"]


def load_policy(spec: str) -> Policy:
    """A policy from its spec: `scripted:PATH` (JSON/JSONL actions), or any model spec of
    `lle.policies.catalog.make_policy` (a catalog name, `PATH.gguf`, `openai:NAME`)."""
    kind, sep, arg = spec.partition(":")
    if kind == "scripted":
        if not (sep and arg):
            raise InvalidInputError(f"policy {spec!r} names no file; write scripted:PATH (a JSON or JSONL of actions)")
        return ScriptedPolicy.from_file(arg)
    from lle.policies import catalog  # model backends load heavy optional packages only when asked for

    policy = catalog.make_policy(spec)
    if getattr(policy, "spec", None) is None:
        with contextlib.suppress(AttributeError):  # lets resume rebuild it
            policy.spec = spec  # type: ignore[attr-defined]
    return policy


def policy_info(policy: Policy) -> PolicyInfo:
    """What the experience records about the policy: its own `info`, else its class name."""
    info = getattr(policy, "info", None)
    return info if isinstance(info, PolicyInfo) else PolicyInfo(model=type(policy).__qualname__)


def policy_spec(policy: Policy) -> str | None:
    """The spec that rebuilds `policy` for resume, when it has one."""
    spec = getattr(policy, "spec", None)
    return spec if isinstance(spec, str) else None


def start_episode(policy: object) -> None:
    """Tell `policy` that a new episode starts, when it keeps state between calls (`start_episode()`): a model
    forgets the prompt it evaluated for the episode before, so one episode's actions do not depend on another's."""
    start = getattr(policy, "start_episode", None)
    if callable(start):
        start()
