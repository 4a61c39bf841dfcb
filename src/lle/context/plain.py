"""The harness's default context: plain, cheap and deterministic.

system (tools + output format) -> user (goal, then the first observation) -> the recent steps as
assistant (the action as JSON) / tool (what came back) pairs -> the current observation when it is
not already the last tool message. No token budget: `lle.context.BudgetedContextBuilder` is the budgeted
builder for real models; this one is for scripted runs, tests and benchmarks where the cost of
counting tokens would only be noise.
"""

from __future__ import annotations

import json
from typing import Any

from lle.actions import LEAN_KEYS, action_schema, output_format
from lle.core import Context, Message, SmallWorld, Step, ToolSpec


class PlainContextBuilder:
    """Implements `lle.core.ContextBuilder`; shows at most `max_history` recent steps."""

    def __init__(self, *, max_history: int = 8, max_observation_chars: int = 4000, lean: bool = False) -> None:
        self.max_history = max_history
        self.lean = lean
        """Show the lean action (`lle.actions.lean_schema`) in the format and past turns, as a lean policy writes it."""
        self.max_observation_chars = max_observation_chars
        self._cache: tuple[list[ToolSpec], dict[str, Any], str] | None = None
        self._steps: dict[int, tuple[Step, Message, Message]] = {}

    def _tools(self, tools: list[ToolSpec]) -> tuple[dict[str, Any], str]:
        # The tool set is fixed for an episode: build its schema and system text once. The cache holds
        # the tools themselves, so comparing by identity is safe (ids are not reused while alive).
        if self._cache is None or [id(t) for t in self._cache[0]] != [id(t) for t in tools]:
            listing = "\n".join(f"- {t.name}: {t.description} args: {json.dumps(t.parameters, sort_keys=True)}"
                                for t in tools)
            example = output_format(lean=True) if self.lean else '{"thought": …, "tool": …, "args": {…}, "expect": …}'
            system = ("You act in a small world through tools, one tool call per turn.\n\nTools:\n" + listing +
                      "\n\nReply with one JSON object: " + example + ".")
            self._cache = (list(tools), action_schema(tools), system)
        return self._cache[1], self._cache[2]

    def _cut(self, text: str) -> str:
        limit = self.max_observation_chars
        return text if len(text) <= limit else text[: limit // 2] + "\n…\n" + text[-limit // 2:]

    def build(self, small_world: SmallWorld, tools: list[ToolSpec], history: list[Step], observation: str) -> Context:
        schema, system = self._tools(tools)
        messages = [Message(role="system", content=system), Message(role="user", content=f"Goal: {small_world.goal}")]
        recent = history[-self.max_history:] if self.max_history > 0 else []
        if len(recent) < len(history):
            messages.append(Message(role="user", content=f"({len(history) - len(recent)} earlier steps omitted)"))
        shown: dict[int, tuple[Step, Message, Message]] = {}
        for step in recent:
            # Steps are immutable and reappear in the next builds: render each once.
            cached = self._steps.get(id(step))
            if cached is None or cached[0] is not step:
                action = {"thought": step.request.thought, "tool": step.request.tool, "args": step.request.args,
                          "expect": step.request.expect}
                # A past turn reads as the policy wrote it: lean keys and no spaces for a lean policy.
                text = json.dumps({LEAN_KEYS[k]: v for k, v in action.items()}, ensure_ascii=False,
                                  separators=(",", ":")) if self.lean else json.dumps(action, ensure_ascii=False)
                cached = (step, Message(role="assistant", content=text),
                          Message(role="tool", content=self._cut(step.effect.observation)))
            shown[id(step)] = cached
            messages += cached[1:]
        self._steps = shown
        if not recent or recent[-1].effect.observation != observation:
            messages.append(Message(role="user", content="Observation: " + self._cut(observation)))
        return Context(messages=messages, action_schema=schema)
