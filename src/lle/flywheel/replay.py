"""Skill replays: the A/B episodes that decide whether a candidate skill helps (the carrier only judges them).

    validate_skill(library, skill, train small worlds, policy factory)
        each small world twice, without the skill and with it offered ─ library.decide(pairs)

The skills carrier stores and retrieves and never runs an episode; the replay runs them here,
above the runtime, and hands the stored pairs to `SkillLibrary.decide`. The flywheel's rounds run
the same pairs as resumable batches (`loop.py`). `SkillAwarePolicy` is the deterministic player
the oracle and the tests use: it follows a plan and calls an offered skill where it fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import JsonValue

from lle.carriers.skill_mining import SKILL_FEEDBACK, match, offered_tools
from lle.carriers.skills import Skill, SkillLibrary, Validation, next_state
from lle.config import Levers
from lle.core import (
    ActionRequest,
    Context,
    ContextBuilder,
    Experience,
    Limits,
    LLMCall,
    PolicyInfo,
    SmallWorld,
    Split,
    Step,
    UpdateOp,
)
from lle.errors import InvalidInputError
from lle.evidence import assess_experience
from lle.runtime.harness import run_episode
from lle.runtime.parallel import PolicyFactory


def validate_skill(library: SkillLibrary, ref: str, small_worlds: Sequence[SmallWorld],
                   policy_factory: PolicyFactory, *, activate: bool = True, actor: str | None = None,
                   assess: Callable[[Experience], Experience] = assess_experience, levers: Levers | None = None,
                   max_steps: int | None = None, builder: Callable[[Any], ContextBuilder] | None = None) -> Validation:
    """Replay a candidate: each small world without the skill and with it offered, same policy factory,
    then `library.decide`. Every episode is real (harness, grounding, verifiers) and stored in the
    library's store. `levers`, `max_steps` and `builder` (the context builder for an episode's policy) make
    both arms play as the agent does elsewhere: a replay without its levers measures another agent."""
    skill = library.get(ref)
    next_state(skill.state, UpdateOp.admit, f"skill {skill.name} ({skill.item_id})")
    held = [sw.id for sw in small_worlds if sw.split is not Split.train]
    if held or not small_worlds:
        raise InvalidInputError(f"validate a skill on train small worlds only (got {held or 'none'}); dev and "
                                "test are for evaluation")
    store = library.store

    def play(sw: SmallWorld, skills: list[Skill]) -> Experience:
        policy = policy_factory(sw)
        limits = None if max_steps is None else Limits(max_steps=max_steps, max_seconds=sw.limits.max_seconds)
        return run_episode(sw, policy, builder(policy) if builder else None, limits, store=store, assess=assess,
                           skills=skills, levers=levers)

    pairs = [(play(sw, []), play(sw, [skill])) for sw in small_worlds]
    return library.decide(skill.item_id, pairs, activate=activate, actor=actor)


class SkillAwarePolicy:
    """Plays `plan`; where an offered skill fits the plan ahead, calls the skill instead (deterministic).

    `trust="full"`: the skill's whole macro must be the next plan steps. `trust="first"`: only its first
    call must be (like a model choosing a skill by its description); the plan then skips as many
    steps as the macro has, whatever the macro did.
    """

    def __init__(self, plan: Sequence[ActionRequest], skills: Sequence[Skill], *,
                 trust: Literal["full", "first"] = "full", name: str = "skill-aware") -> None:
        self.plan, self.position, self.trust = list(plan), 0, trust
        # A program skill is the runtime's to run (first, by the fast path); this player calls macros.
        self.skills = sorted((s for s in skills if s.program is None), key=lambda s: (-len(s.descriptor.calls), s.name))
        self.info = PolicyInfo(model=name, params={"trust": trust, "skills": [s.item_id for s in self.skills]})

    def _bind(self, skill: Skill) -> dict[str, JsonValue] | None:
        calls = skill.descriptor.calls
        acts = [(a.tool, dict(a.args)) for a in self.plan[self.position:]]
        if self.trust == "full":
            return match(calls, acts)
        if not acts or match(calls[:1], acts[:1]) is None:
            return None
        bound = {s.name: s.examples[0] if s.examples else "" for s in skill.descriptor.slots}
        for call, (tool, args) in zip(calls, acts, strict=False):
            if tool == call.tool:
                bound.update({slot: args[k] for k, slot in call.slots.items() if k in args})
        return bound

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        offered = offered_tools(context)
        for skill in self.skills:
            if skill.spec.name in offered and (args := self._bind(skill)) is not None:
                self.position += len(skill.descriptor.calls)
                asked = {s.name for s in skill.descriptor.slots if s.bind is None}  # the runtime reads the rest
                return ActionRequest(tool=skill.spec.name, args={k: v for k, v in args.items() if k in asked},
                                     thought=f"use skill {skill.name}"), None
        if self.position >= len(self.plan):
            raise InvalidInputError(f"the plan has {len(self.plan)} actions and none is left; end it with submit")
        self.position += 1
        return self.plan[self.position - 1], None

    def resume_from(self, history: Sequence[Step]) -> None:
        """Continue after the committed `history`: a skill call moved the plan by its whole macro."""
        position = 0
        for step in history:
            notes = [f.content for f in step.feedback if f.source == "runtime" and f.kind == SKILL_FEEDBACK
                     and isinstance(f.content, dict)]
            if not notes:
                position += 1
            elif notes[0].get("call") == 1:
                macro = notes[0].get("of")
                position += macro if isinstance(macro, int) else 1
        self.position = position
