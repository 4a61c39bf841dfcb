"""A safe calculator: arithmetic over Python's `ast`, never `eval`.

The expression is parsed, then walked by an evaluator that knows only numbers, + - * / // % **,
unary minus and plus, parentheses and a handful of named functions and constants. Anything else
(names, attributes, calls of other things, lambdas, subscripts, strings, comprehensions) is
refused with an error that says what is allowed. Sizes are bounded before they are computed: the
text, the number of nodes, exponents, and the magnitude of every intermediate integer, so no
input can make it spin or fill memory.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

MAX_CHARS = 300
MAX_NODES = 120
MAX_EXPONENT = 1000
MAX_DIGITS = 100
"""Integers may have at most this many digits, intermediate results included."""
_INT_LIMIT = 10**MAX_DIGITS
MAX_ROUND_DIGITS = 15
ALLOWED = ("numbers, + - * / // % ** (powers bounded), unary minus, parentheses, "
           "sqrt, abs, round, floor, ceil, min, max, pi and e")

Number = int | float


class CalculatorError(ValueError):
    """The expression is not allowed or cannot be computed; the message says why and what is allowed."""


def _round(x: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(x)
    if not isinstance(ndigits, int) or abs(ndigits) > MAX_ROUND_DIGITS:
        raise CalculatorError(f"round's second argument must be an integer between -{MAX_ROUND_DIGITS} and "
                              f"{MAX_ROUND_DIGITS}")
    return round(x, ndigits)


def _sqrt(x: Number) -> Number:
    if x < 0:
        raise CalculatorError("sqrt of a negative number")
    root = math.isqrt(x) if isinstance(x, int) else None
    return root if root is not None and root * root == x else math.sqrt(x)


FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    # name -> (function, min args, max args)
    "sqrt": (_sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "min": (min, 1, 20),
    "max": (max, 1, 20),
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def _pow(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {exponent} is too large (at most {MAX_EXPONENT} in absolute value)")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1 \
            and exponent * math.log10(abs(base)) > MAX_DIGITS:
        raise CalculatorError(f"the result would have more than {MAX_DIGITS} digits")
    if base == 0 and exponent < 0:
        raise CalculatorError("zero cannot be raised to a negative power")
    result = base ** exponent
    if isinstance(result, complex):
        raise CalculatorError("a negative number to a fractional power has no real result")
    return result


def _div(a: Number, b: Number) -> Number:
    if b == 0:
        raise CalculatorError("division by zero")
    return a / b


def _floordiv(a: Number, b: Number) -> Number:
    if b == 0:
        raise CalculatorError("division by zero")
    return a // b


def _mod(a: Number, b: Number) -> Number:
    if b == 0:
        raise CalculatorError("modulo by zero")
    return a % b


BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _div,
    ast.FloorDiv: _floordiv, ast.Mod: _mod, ast.Pow: _pow,
}
SYMBOLS = {ast.BitXor: "^ (use ** for powers)", ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>",
           ast.MatMult: "@"}


def _checked(value: Number) -> Number:
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("the result is too large (overflow)")
    if isinstance(value, int) and abs(value) >= _INT_LIMIT:
        raise CalculatorError(f"the result has more than {MAX_DIGITS} digits")
    return value


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError(f"{node.value!r} is not a number; allowed: {ALLOWED}")
        return _checked(node.value)
    if isinstance(node, ast.BinOp):
        op = BINARY.get(type(node.op))
        if op is None:
            raise CalculatorError(f"operator {SYMBOLS.get(type(node.op), type(node.op).__name__)} is not allowed; "
                                  f"allowed: {ALLOWED}")
        left, right = _eval(node.left), _eval(node.right)
        try:
            return _checked(op(left, right))
        except OverflowError as err:
            raise CalculatorError("the result is too large (overflow)") from err
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id!r}; allowed: {ALLOWED}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise CalculatorError(f"only these functions may be called: {', '.join(FUNCTIONS)}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise CalculatorError("call functions with plain positional arguments, e.g. round(2.345, 2)")
        fn, low, high = FUNCTIONS[node.func.id]
        if not low <= len(node.args) <= high:
            raise CalculatorError(f"{node.func.id} takes {low}" + (f" to {high}" if high > low else "") + " arguments")
        args = [_eval(a) for a in node.args]
        try:
            return _checked(fn(*args))
        except (OverflowError, ValueError) as err:
            if isinstance(err, CalculatorError):
                raise
            raise CalculatorError(f"{node.func.id} failed: {err}") from err
    raise CalculatorError(f"{type(node).__name__} is not allowed; allowed: {ALLOWED}")


def evaluate(expression: str) -> Number:
    """The value of `expression`; raise `CalculatorError` for anything not plain arithmetic."""
    text = expression.strip()
    if not text:
        raise CalculatorError(f"the expression is empty; write e.g. (3 + 4) * 2 using {ALLOWED}")
    if len(text) > MAX_CHARS:
        raise CalculatorError(f"the expression is longer than {MAX_CHARS} characters; split the computation")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise CalculatorError(f"cannot parse the expression ({type(err).__name__}); allowed: {ALLOWED}") from err
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculatorError(f"the expression has more than {MAX_NODES} parts; split the computation")
    try:
        return _eval(tree.body)
    except RecursionError as err:
        raise CalculatorError("the expression is nested too deeply") from err


def format_number(value: Number) -> str:
    """Ints exactly; floats with 15 significant digits (so 0.1 + 0.2 shows as 0.3)."""
    if isinstance(value, int):
        return str(value)
    text = format(value, ".15g")
    return text if any(c in text for c in ".en") else text + ".0"
