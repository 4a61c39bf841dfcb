"""Difficulty levels of the math worlds: easy questions generated here, the dataset itself on top.

Each generated level is a seeded generator (world seed -> question); the answer is computed by the
world's own calculator (`evaluate`), so the anchor stays real. The hardest level of a family is its
reasoning-gym dataset as before (same items, same split), under a levelled id. Every question's split
is the stable hash of its normalized text with the datasets' salt, so a generated question that equals
a dataset question is in the same split.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from lle.core import Split
from lle.errors import WorldError
from lle.worlds.levels import level_pool
from lle.worlds.math.calculator import evaluate, format_number
from lle.worlds.math.items import SPLIT_SALT, entry, normalize, split_index

ARITH_LEVELS = (
    "one operation (+ - * /) on one-digit numbers, e.g. 7 + 5",
    "one operation (+ - * /) on two-digit numbers, e.g. 47 * 23",
    "two operations on numbers up to 20, with precedence, e.g. 12 + 3 * 4",
    "reasoning-gym basic_arithmetic as unlevelled: 2-6 terms of 1-4 digits, parentheses, negation",
)
EQUATION_LEVELS = (
    "one step: x + a = b or x - a = b, numbers up to 20",
    "two steps: a*x + b = c, a from 2 to 9",
    "reasoning-gym simple_equations as unlevelled: 2-4 terms, values up to 100",
)
WORD_LEVELS = (
    "one-step word problem: one operation (+ - * /) on numbers up to 12, e.g. Mia has 7 apples and gets 5 more",
    "reasoning-gym gsm_symbolic as unlevelled: multi-step grade-school word problems",
)
NAMES = ("Mia", "Leo", "Ava", "Sam", "Noah", "Zoe", "Omar", "Lily", "Ben", "Ruth")
THINGS = ("apples", "pencils", "marbles", "stickers", "cookies", "books", "coins", "shells")
WORDINGS = {
    "+": "{name} has {a} {things} and gets {b} more. How many {things} does {name} have now?",
    "-": "{name} has {a} {things} and gives {b} of them away. How many {things} does {name} have left?",
    "*": "{name} has {a} bags with {b} {things} in each bag. How many {things} does {name} have in all?",
    "/": "{name} shares {a} {things} equally among {b} friends. How many {things} does each friend get?",
}
VARIABLES = "abcdefghkmnpqrstuvwxyz"
POOL_CANDIDATES = 50_000
"""World seeds tried per generated level; the one-digit level has only a few hundred distinct questions."""


def _one_op(rng: random.Random, lo: int, hi: int) -> str:
    op = rng.choice("+-*/")
    if op == "/":
        # Exact division only: the quotient is a whole number and both shown numbers stay in [lo, hi].
        pairs = [(b * q, b) for b in range(max(lo, 2), hi + 1) for q in range(2, hi + 1) if lo <= b * q <= hi]
        a, b = rng.choice(pairs)
    else:
        a, b = rng.randint(lo, hi), rng.randint(lo, hi)
        if op == "-" and a < b:
            a, b = b, a  # no negative answers at the easy levels
    return f"{a} {op} {b}"


def _two_ops(rng: random.Random) -> str:
    a, b, c = (rng.randint(1, 20) for _ in range(3))
    return f"{a} {rng.choice('+-*')} {b} {rng.choice('+-*')} {c}"


def _arith(level: int, rng: random.Random) -> dict[str, Any]:
    expression = _one_op(rng, 1, 9) if level == 0 else _one_op(rng, 10, 99) if level == 1 else _two_ops(rng)
    answer = format_number(evaluate(expression))
    return {"question": f"Calculate {expression}.", "answer": answer,
            "metadata": {"expression": expression, "operations": 1 if level < 2 else 2}}


def _equation(level: int, rng: random.Random) -> dict[str, Any]:
    var, x = rng.choice(VARIABLES), rng.randint(1, 20)
    if level == 0:
        a = rng.randint(1, 20)
        equation = f"{var} + {a} = {x + a}" if rng.random() < 0.5 else f"{var} - {a} = {x - a}"
        steps = 1
    else:
        a, b = rng.randint(2, 9), rng.randint(1, 50)
        equation = f"{a}*{var} + {b} = {a * x + b}"
        steps = 2
    return {"question": f"Solve for {var}: {equation}", "answer": str(x),
            "metadata": {"equation": equation, "variable": var, "steps": steps}}


def _word(level: int, rng: random.Random) -> dict[str, Any]:
    # The story's numbers in the order the expression uses them; the answer is the calculator's.
    expression = _one_op(rng, 2, 12)
    a, op, b = expression.split()
    question = WORDINGS[op].format(name=rng.choice(NAMES), things=rng.choice(THINGS), a=a, b=b)
    return {"question": question, "answer": format_number(evaluate(expression)),
            "metadata": {"expression": expression, "operations": 1}}


GENERATORS: dict[str, tuple[Callable[[int, random.Random], dict[str, Any]], int]] = {
    "basic_arithmetic": (_arith, len(ARITH_LEVELS) - 1),
    "simple_equations": (_equation, len(EQUATION_LEVELS) - 1),
    "gsm_symbolic": (_word, len(WORD_LEVELS) - 1),
}
"""dataset -> (generator of its easy levels, how many easy levels); the level after them is the dataset."""


def is_generated(dataset: str, level: int | None) -> bool:
    return level is not None and dataset in GENERATORS and level < GENERATORS[dataset][1]


def generated_item(dataset: str, level: int, world_seed: int) -> dict[str, Any]:
    """The question of `world_seed` at a generated `level` of `dataset` (a pure function of the three)."""
    if not is_generated(dataset, level):
        raise WorldError(f"math/{dataset}: level {level} is not generated; ask a level below "
                         f"{GENERATORS.get(dataset, (None, 0))[1]}")
    make = GENERATORS[dataset][0]
    return make(level, random.Random(f"lle-math-level:{dataset}:L{level}:{world_seed}"))


def level_entry(dataset: str, level: int | None, index: int) -> dict[str, Any]:
    """The item a small world's (project, level, seed) names: generated, or the dataset's item `index`."""
    return generated_item(dataset, level, index) if is_generated(dataset, level) and level is not None \
        else entry(dataset, index)


def level_index(dataset: str, level: int | None, split: Split, seed: int) -> int:
    """The world seed of the `seed`-th distinct question of `split` at `level` (None: the dataset)."""
    if level is None or not is_generated(dataset, level):
        return split_index(dataset, split, seed)
    pool = level_pool(f"math/{dataset} level {level}",
                      lambda ws: normalize(generated_item(dataset, level, ws)["question"]), SPLIT_SALT,
                      POOL_CANDIDATES)
    return pool.world_seed(split, seed)
