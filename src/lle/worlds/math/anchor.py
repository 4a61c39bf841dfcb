"""The math anchor: math-verify's symbolic equivalence with the dataset's answer.

Two pieces of evidence, both reported: reasoning-gym's own scorer (`score_answer`) and
math-verify (`parse` + `verify`), a symbolic checker that accepts `13`, `13.0`, `x = 13` or
`\\frac{1}{2}` for `0.5`. Success is math-verify's verdict. Answers are screened first: at most
100 characters, no powers, products-by-star, factorials or subscripts, and only plain LaTeX
commands, so the value of any accepted answer stays small enough for sympy to settle at once
(math-verify's own timeout needs SIGALRM, which works only on the main thread).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from math_verify import parse
from math_verify import verify as symbolic_equal
from pydantic import JsonValue

from lle.core import Outcome, SmallWorld
from lle.errors import WorldError
from lle.worlds.base import AnchorResult
from lle.worlds.math.items import dataset
from lle.worlds.math.levels import level_entry

ANCHOR = "symbolic"
"""The kind of independent check (lle.core.Evidence.anchor)."""
CHECKER = "math-verify"
MAX_ANSWER_CHARS = 100
TIMEOUT_S = 5
FORBIDDEN = re.compile(r"[\^*!_]|[A-Za-z]\s*\(")
OPERATION = re.compile(r"[\d)]\s*[-+/]\s*[-+]?\s*[\d(]")
"""A binary operation between numbers: `9 + 3` or `8/2` is still a question, not the final value. These datasets'
answers are whole or decimal numbers, so no right answer has one (a negative number's sign is unary)."""
LATEX_OK = frozenset({"frac", "dfrac", "tfrac", "boxed", "text", "mathrm", "mathbf", "left", "right", "sqrt", "cdot",
                      "times", "div", "pm"})


def verdict(outcome: Outcome, reason: str, detail: dict[str, JsonValue]) -> AnchorResult:
    """This anchor's `AnchorResult` (its kind and checker filled in)."""
    return AnchorResult(outcome, reason, detail, anchor=ANCHOR, checker=CHECKER)


def screen(answer: str) -> str | None:
    """Why `answer` is refused before any symbolic work, or None when it may be checked."""
    if len(answer) > MAX_ANSWER_CHARS:
        return f"the answer is longer than {MAX_ANSWER_CHARS} characters; submit only the final value"
    if FORBIDDEN.search(answer):
        return "the answer contains an expression (^, *, !, _ or a function call); submit only the final value"
    if OPERATION.search(answer):
        return "the answer is still an expression (an operation between numbers); submit only its value"
    bad = sorted(set(re.findall(r"\\([A-Za-z]+)", answer)) - LATEX_OK)
    if bad:
        return f"the answer uses LaTeX commands that are not accepted ({', '.join(bad)}); submit only the final value"
    return None


def check_answer(answer: str, item: dict[str, Any], dataset_name: str) -> AnchorResult:
    """Judge `answer` against `item` (a reasoning-gym entry with its private `answer`)."""
    text = answer.strip()
    detail: dict[str, JsonValue] = {"dataset": dataset_name}
    try:
        detail["reasoning_gym_score"] = float(dataset(dataset_name).score_answer(text, item))
    except Exception as err:  # the scorer is second evidence; its failure must not hide the anchor's verdict
        detail["reasoning_gym_score"] = None
        detail["reasoning_gym_error"] = type(err).__name__
    if not text:
        detail["math_verify"] = False
        return verdict(Outcome.failed, "empty answer", detail)
    refused = screen(text)
    if refused is not None:
        detail["math_verify"] = False
        return verdict(Outcome.failed, refused, detail)
    timeout = TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    gold = parse(str(item["answer"]), parsing_timeout=timeout)
    if not gold:
        return verdict(Outcome.unknown, "the reference answer did not parse; the world is broken", detail)
    got = parse(text, parsing_timeout=timeout)
    if not got:
        detail["math_verify"] = False
        return verdict(Outcome.failed, "no mathematical value found in the answer", detail)
    equal = bool(symbolic_equal(gold, got, timeout_seconds=timeout))
    detail["math_verify"] = equal
    if equal:
        return verdict(Outcome.passed, "the answer is symbolically equal to the expected one", detail)
    return verdict(Outcome.failed, "the answer is not equal to the expected one", detail)


def verify(small_world: SmallWorld, answer: str) -> AnchorResult:
    """Judge `answer` for `small_world` from scratch (the project is the dataset, the seed its index, or the
    world seed of its level's generator)."""
    if small_world.family != "math":
        raise WorldError(f"{small_world.id} is not a math small world; pass one cut by a math/* family")
    return check_answer(answer, level_entry(small_world.project, small_world.level, small_world.seed),
                        small_world.project)
