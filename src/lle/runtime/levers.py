"""Harness levers for small models: what the runtime changes in the next step's observation and tools.

At 135M-0.5B parameters the harness is the cheapest lever there is: the failures it removes are not
the model's (it found the answer and never submitted; it repeated one call for eight steps). Each
lever is switched by `lle.config.Levers` (part of a family's context recipe), and everything it does
to a step is recorded on that step as `Feedback(source="runtime", kind="intervention")`, never hidden:

- **stuck** (`lle.runtime.stuck`): a detection puts a plain note into the next observation; with
  `stuck="mask"`, a second detection also removes the repeated tools from the next decode, and when
  nothing would be left the episode stops (`Stuck`).
- **submit discipline**: the remaining budget is in every observation; on the last step the action
  schema allows only the world's answer-bearing tools (`submit`), so a found answer is handed in.
- **working memory** (`lle.runtime.working_memory`): a compact state section before the observation.
- **admissible masks**: a world that knows its admissible commands (`tools_now()`, e.g. the text
  games) gets them as an enum in the action schema for that step.
- **skills first**: the skills an episode is offered (`skill_<name>`, verified by replay) come first among
  the tools, and the first observation names them with what they do: a small model picks what it reads
  first and copies from the observation; the choice stays the model's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from lle.config import Levers
from lle.context.builder import signature
from lle.context.compress import clip_end
from lle.core import Feedback, Step, ToolSpec
from lle.runtime.stuck import StuckSignal, detect
from lle.runtime.working_memory import working_memory

SKILL_PREFIX = "skill_"
"""How the harness names an offered skill's tool (`lle.runtime.grounding`)."""
ANSWER_TOOLS = ("submit",)
"""Tools that hand in an answer; a world may name others with `answer_tools`."""


@runtime_checkable
class AdmissibleTools(Protocol):
    """A world that can say which commands it accepts right now (as tools with enum arguments)."""

    def tools_now(self) -> list[ToolSpec]: ...


class NothingLeft(Exception):
    """Masks removed every tool: the episode cannot go on (the harness stops it with `Stuck`)."""


class LeverState:
    """The levers' memory for one episode: detections so far, and what to do before each step."""

    def __init__(self, levers: Levers, max_steps: int, world: object, answer_tools: Sequence[str] = ANSWER_TOOLS):
        self.levers = levers
        self.max_steps = max_steps
        self.world = world
        self.answer_tools = tuple(answer_tools)
        self.detections = 0

    def prepare(self, history: Sequence[Step], tools: list[ToolSpec],
                observation: str) -> tuple[list[ToolSpec], str, list[Feedback]]:
        """The tools and observation the model gets for the next step, and the interventions made."""
        lv = self.levers
        index = len(history)
        notes: list[str] = []
        done: list[Feedback] = []
        if lv.admissible_masks and isinstance(self.world, AdmissibleTools):
            now = {t.name: t for t in self.world.tools_now()}
            tools = [now.get(t.name, t) for t in tools]
            done.append(_intervention("admissible_masks", tools=list[JsonValue](sorted(now))))
        signal = detect(history) if lv.stuck != "off" else None
        if signal is not None:
            self.detections += 1
            notes.append(f"Note from the runtime: {signal.note}")
            masked: list[str] = []
            if lv.stuck == "mask" and self.detections >= 2:
                masked = [t.name for t in tools if t.name in signal.tools]
                tools = [t for t in tools if t.name not in signal.tools]
            done.append(_stuck_feedback(signal, masked))
            if not tools:
                raise NothingLeft(f"{signal.kind}: every tool was masked after {signal.note}")
        skills = [t for t in tools if t.name.startswith(SKILL_PREFIX)] if lv.skills_first else []
        if skills:
            tools = skills + [t for t in tools if not t.name.startswith(SKILL_PREFIX)]
            if index == 0:
                notes.append(skills_note(skills))
            done.append(_intervention("skills_first", tools=[t.name for t in skills]))
        if lv.submit_discipline:
            left = self.max_steps - index
            after = "this is the last step: hand in your answer now." if left <= 1 else f"{left - 1} more after it."
            notes.append(f"Budget: this is step {index + 1} of {self.max_steps}; {after}")
            answering = [t for t in tools if t.name in self.answer_tools]
            if left <= 1 and answering and len(answering) < len(tools):
                done.append(_intervention("submit_only", tools=[t.name for t in answering]))
                tools = answering
        if lv.working_memory and history:
            state = working_memory(history, self.world)
            if state:
                observation = f"{state}\n\n{observation}"
                done.append(_intervention("working_memory", chars=len(state)))
        if notes:
            observation = observation.rstrip() + "\n\n" + "\n".join(notes)
        return tools, observation, done


def skills_note(skills: list[ToolSpec]) -> str:
    """The first observation's line on the offered skills. A skill that needs no argument is named as a whole
    call to copy: a 135M model shown only the long description called it in 2 of 12 train episodes."""
    whole = [t for t in skills if not t.parameters.get("required")]
    if whole:
        call = json.dumps({"tool": whole[0].name, "args": {}})
        return (f"A learned skill solves tasks like this one in a single call (verified on earlier tasks): {call}. "
                "It fills in its arguments from the task by itself.")
    return "Learned skills you may call (each verified on earlier tasks): " + "; ".join(
        f"{signature(t)}: {clip_end(t.description, 160)}" for t in skills)


def _intervention(lever: str, **detail: JsonValue) -> Feedback:
    return Feedback(source="runtime", kind="intervention", content={"lever": lever, **detail})


def _stuck_feedback(signal: StuckSignal, masked: list[str]) -> Feedback:
    steps: list[JsonValue] = list(signal.steps)
    names: list[JsonValue] = list(masked)
    return _intervention("stuck", pattern=str(signal.kind), steps=steps, note=signal.note, masked=names)
