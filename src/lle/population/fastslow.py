"""A fast/slow agent: a small model acts every step; a bigger one is consulted when it matters.

    each step: stuck (lle.runtime.stuck.detect on the committed steps)? ── slow model acts
               else fast model proposes ── a `submit`? ── slow model decides the step instead
               else the fast model's action

The policy sees the committed steps through `HistoryTap`, a context builder that hands them over
before delegating (a policy's `act` sees only the context). A step keeps one `LLMCall`: the call
whose action was taken (the slow one when consulted); the other call, and why the slow model was
asked, go on the step as `Feedback(source="policy", kind="fast_slow")` (the harness records a
policy's `step_notes()`). The counters give the share of slow calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from lle.core import (
    ActionRequest,
    Context,
    ContextBuilder,
    Feedback,
    LLMCall,
    Policy,
    PolicyInfo,
    SmallWorld,
    Step,
    ToolSpec,
)
from lle.policies import policy_info, start_episode
from lle.runtime.stuck import detect

FAST_SLOW = "fast_slow"
"""Feedback kind of the note on each step of a fast/slow agent."""


class FastSlowPolicy:
    """Implements `Policy`: `fast` acts; `slow` is consulted when stuck or before `submit`."""

    def __init__(self, fast: Policy, slow: Policy, *, submit_tools: Sequence[str] = ("submit",),
                 consult_on_submit: bool = True) -> None:
        self.fast, self.slow = fast, slow
        self.submit_tools, self.consult_on_submit = frozenset(submit_tools), consult_on_submit
        self.history: list[Step] = []
        self.fast_calls = self.slow_calls = 0
        self._note: Feedback | None = None
        fast_info, slow_info = policy_info(fast), policy_info(slow)
        self.info = PolicyInfo(model=f"{fast_info.model}+{slow_info.model}",
                               params={"fast": fast_info.model_dump(mode="json"),
                                       "slow": slow_info.model_dump(mode="json"), "consult": "stuck,submit"})

    @property
    def slow_share(self) -> float:
        """Slow calls over all model calls made so far (0 when none was made)."""
        total = self.fast_calls + self.slow_calls
        return self.slow_calls / total if total else 0.0

    def observe(self, history: Sequence[Step]) -> None:
        """The committed steps of the current episode (`HistoryTap` calls this before every step)."""
        self.history = list(history)

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        signal = detect(self.history)
        if signal is not None:
            request, call = self._slow(context)
            self._note = _note("slow", f"stuck:{signal.kind.value}", None, call)
            return request, call
        request, fast_call = self.fast.act(context)
        self.fast_calls += 1
        if self.consult_on_submit and request.tool in self.submit_tools:
            slow_request, slow_call = self._slow(context)
            self._note = _note("slow", "submit", fast_call, slow_call, proposed=request)
            return slow_request, slow_call
        self._note = _note("fast", None, fast_call, None)
        return request, fast_call

    def _slow(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        self.slow_calls += 1
        return self.slow.act(context)

    def step_notes(self) -> list[Feedback]:
        """The note for the step just decided (the harness puts it on the step)."""
        note, self._note = self._note, None
        return [note] if note is not None else []

    def start_episode(self) -> None:
        start_episode(self.fast)
        start_episode(self.slow)

    def resume_from(self, history: Sequence[Step]) -> None:
        self.history = list(history)


def _note(used: str, why: str | None, fast: LLMCall | None, slow: LLMCall | None, *,
          proposed: ActionRequest | None = None) -> Feedback:
    return Feedback(source="policy", kind=FAST_SLOW, content={
        "used": used, "why": why,
        "fast": None if fast is None else fast.model_dump(mode="json", exclude={"prompt", "token_ids", "logprobs"}),
        "slow": None if slow is None else slow.model_dump(mode="json", exclude={"prompt", "token_ids", "logprobs"}),
        "fast_proposed": None if proposed is None else {"tool": proposed.tool, "args": proposed.args},
    })


class HistoryTap:
    """A context builder that shows `policy` the committed steps, then builds with `inner`."""

    def __init__(self, inner: ContextBuilder, policy: FastSlowPolicy) -> None:
        self.inner, self.policy = inner, policy

    def __getattr__(self, name: str) -> object:  # the harness reads and sets e.g. `max_items` on its builder
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: object) -> None:
        if name in ("inner", "policy"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def build(self, small_world: SmallWorld, tools: list[ToolSpec], history: list[Step],
              observation: str) -> Context:
        self.policy.observe(history)
        return self.inner.build(small_world, tools, history, observation)


def calls_of(steps: Sequence[Step]) -> tuple[int, int]:
    """(fast, slow) model calls recorded on stored steps of a fast/slow agent."""
    fast = slow = 0
    for step in steps:
        for fb in step.feedback:
            if fb.source == "policy" and fb.kind == FAST_SLOW and isinstance(fb.content, dict):
                fast += fb.content.get("fast") is not None
                slow += fb.content.get("slow") is not None
    return fast, slow
