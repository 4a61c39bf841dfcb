"""`math/<dataset>-v1`: answer a reasoning-gym question, with a safe calculator.

One registered world per dataset, as in `sql/` one per project: the dataset is the project, so
what is learned about one dataset's answer format stays its project rule, and the family `math`
groups them. Registered: `math/arith-v1` (basic_arithmetic), `math/equations-v1`
(simple_equations), `math/gsm-v1` (gsm_symbolic). A small world's seed is the dataset index of
its item; the dataset's answer stays inside the world and the anchor.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import JsonValue

from lle.core import ActionRequest, CarrierKind, Limits, Scope, ScopeLevel, SmallWorld, Split, ToolSpec, WorldStep
from lle.errors import WorldError
from lle.worlds.base import AnchorResult, BaseWorld, TaskFamily
from lle.worlds.levels import levelled_id
from lle.worlds.math.anchor import ANCHOR, check_answer
from lle.worlds.math.calculator import CalculatorError, evaluate, format_number
from lle.worlds.math.levels import ARITH_LEVELS, EQUATION_LEVELS, WORD_LEVELS, level_entry, level_index

DATASETS = {"math/arith-v1": "basic_arithmetic", "math/equations-v1": "simple_equations",
            "math/gsm-v1": "gsm_symbolic"}
TOOL_NAMES = ["calculate", "submit"]
TOOLS = [
    ToolSpec(name="calculate",
             description="Evaluate arithmetic: numbers, + - * / // % **, parentheses, sqrt abs round floor ceil "
                         "min max.",
             permissions=[],
             parameters={"type": "object", "properties": {"expression": {"type": "string", "maxLength": 1000}},
                         "required": ["expression"], "additionalProperties": False}),
    ToolSpec(name="submit", description="Submit the final answer (just the value, e.g. 42); ends the episode.",
             permissions=[],
             parameters={"type": "object", "properties": {"answer": {"type": "string", "maxLength": 1000}},
                         "required": ["answer"], "additionalProperties": False}),
]


class MathWorld(BaseWorld):
    """One math world instance; `reset(seed=…)` loads item `seed` of the dataset (or of `level`'s generator)."""

    version = "1"

    def __init__(self, dataset: str, *, seed: int = 0, level: int | None = None) -> None:
        if dataset not in DATASETS.values():
            raise WorldError(f"math has no dataset {dataset!r}; use one of {', '.join(DATASETS.values())}")
        self.tools = list(TOOLS)
        self.dataset = dataset
        self.default_seed = seed
        self.level = level
        self._item: dict[str, Any] | None = None
        self.done = False
        self.calculations = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        index = self.default_seed if seed is None else seed
        self._item = level_entry(self.dataset, self.level, index)
        self.done = False
        self.calculations = 0
        text = (f"{self._item['question']}\n\nUse `calculate` for arithmetic if you like, then `submit` the final "
                "answer.")
        return text, {"dataset": self.dataset, "index": index, **({} if self.level is None else {"level": self.level})}

    def step(self, action: ActionRequest) -> WorldStep:
        if self._item is None or self.done:
            raise WorldError(f"math/{self.dataset}: step() before reset() or after the episode ended; call reset()")
        if action.tool == "calculate":
            return self._calculate(str(action.args.get("expression", "")))
        if action.tool == "submit":
            return self._submit(str(action.args.get("answer", "")))
        raise WorldError(f"math/{self.dataset} has no tool {action.tool!r}; tools: {', '.join(TOOL_NAMES)}")

    def state(self) -> dict[str, JsonValue]:
        if self._item is None:
            return {}
        return {"calculations": self.calculations, "submitted": self.done}

    def _calculate(self, expression: str) -> WorldStep:
        self.calculations += 1
        try:
            text = f"{expression.strip()} = {format_number(evaluate(expression))}"
        except CalculatorError as err:
            text = f"error: {err}"
        return WorldStep(text, 0.0, False, False, {})

    def _submit(self, answer: str) -> WorldStep:
        verdict = self.anchor(answer)
        self.done = True
        text = "Submitted. Correct." if verdict.passed else f"Submitted. Not correct: {verdict.reason}."
        return WorldStep(text, 1.0 if verdict.passed else 0.0, True, False, verdict.info())

    def anchor(self, answer: str) -> AnchorResult:
        """Judge `answer` against this episode's item."""
        assert self._item is not None
        return check_answer(answer, self._item, self.dataset)


class MathFamily(TaskFamily):
    """A math task family over one reasoning-gym dataset; subclasses fix the dataset and the id."""

    family = "math"
    version = "1"
    quick_reset = True
    tools = tuple(TOOL_NAMES)
    anchor = ANCHOR
    dataset: ClassVar[str]

    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        split = Split(split)
        level = self.check_level(level)
        if project not in (None, self.dataset):
            raise WorldError(f"{self.id} has only the project {self.dataset!r}; "
                             f"open one of {', '.join(DATASETS)} for another dataset")
        index = level_index(self.dataset, level, split, seed)
        question = level_entry(self.dataset, level, index)["question"]
        return SmallWorld(
            id=levelled_id(self.id, split, seed, level), world=self.id, family=self.family, project=self.dataset,
            level=level,
            split=split, seed=index, goal=f"{question}\n\nSubmit only the final answer (a number) with `submit`.",
            tools=list(TOOL_NAMES),
            inherits=[Scope(level=ScopeLevel.family, family=self.family),
                      Scope(level=ScopeLevel.project, family=self.family, project=self.dataset)],
            # Dev and test never feed carriers (DESIGN §1).
            writeback=[CarrierKind.memory, CarrierKind.rules, CarrierKind.skills, CarrierKind.verifier_cases,
                       CarrierKind.dataset] if split is Split.train else [],
            limits=Limits(max_steps=12, max_seconds=60.0),
        )

    def make_world(self, small_world: SmallWorld) -> MathWorld:
        self.check_small_world(small_world)
        return MathWorld(self.dataset, seed=small_world.seed, level=self.check_level(small_world.level))


class ArithFamily(MathFamily):
    """`math/arith-v1`: reasoning-gym's basic_arithmetic."""

    id = "math/arith-v1"
    dataset = "basic_arithmetic"
    projects = ("basic_arithmetic",)
    levels = ARITH_LEVELS


class EquationsFamily(MathFamily):
    """`math/equations-v1`: reasoning-gym's simple_equations."""

    id = "math/equations-v1"
    dataset = "simple_equations"
    projects = ("simple_equations",)
    levels = EQUATION_LEVELS


class GsmFamily(MathFamily):
    """`math/gsm-v1`: reasoning-gym's gsm_symbolic (grade-school word problems)."""

    id = "math/gsm-v1"
    dataset = "gsm_symbolic"
    projects = ("gsm_symbolic",)
    levels = WORD_LEVELS


def reference_actions(small_world: SmallWorld) -> list[ActionRequest]:
    """A solving script (tests and demos): compute the expression when there is one, submit the dataset's answer."""
    item = level_entry(small_world.project, small_world.level, small_world.seed)
    actions = []
    expression = item.get("metadata", {}).get("expression")
    if isinstance(expression, str):
        actions.append(ActionRequest(tool="calculate", args={"expression": expression}, expect="the value"))
    actions.append(ActionRequest(tool="submit", args={"answer": str(item["answer"])}, expect="success"))
    return actions
