"""The safe calculator: arithmetic works, everything else is refused with a clear error, fast."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lle.worlds.math.calculator import MAX_CHARS, CalculatorError, evaluate, format_number


@pytest.mark.parametrize(("expression", "value"), [
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("7 / 2", 3.5), ("7 // 2", 3), ("-7 % 3", 2), ("2 ** 10", 1024),
    ("-(3 - 5)", 2), ("+4", 4), ("sqrt(16)", 4), ("sqrt(2) ** 2", pytest.approx(2.0)), ("abs(-3.5)", 3.5),
    ("round(2.675, 1)", 2.7), ("round(7.5)", 8), ("floor(-1.5)", -2), ("ceil(1.2)", 2), ("min(3, 1, 2)", 1),
    ("max(3, 1, 2)", 3), ("2 * pi", pytest.approx(6.283185307)), ("1e3 + 1", 1001.0), ("561 - -1480 * 5370", 7948161),
    ("( 56 + -33 ) - 84", -61), ("10 ** 99", 10 ** 99), ("2 ** -2", 0.25),
])
def test_arithmetic(expression: str, value: object) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(("expression", "says"), [
    ("__import__('os').system('touch /tmp/lle-calculator-pwned')", "only these functions"),
    ("().__class__.__bases__[0].__subclasses__()", "only these functions"),
    ("().__class__", "Attribute is not allowed"),
    ("(1).__class__", "Attribute is not allowed"),
    ("pi.real", "Attribute is not allowed"),
    ("lambda: 1", "Lambda is not allowed"),
    ("(lambda x: x)(1)", "only these functions"),
    ("[1] * 10", "List is not allowed"),
    ("'a' * 10", "is not a number"),
    ("open('/etc/passwd')", "only these functions"),
    ("eval('1')", "only these functions"),
    ("x + 1", "unknown name 'x'"),
    ("True + 1", "is not a number"),
    ("1j * 2", "is not a number"),
    ("[x for x in range(9)]", "ListComp is not allowed"),
    ("sqrt(x=4)", "plain positional arguments"),
    ("max(*[1, 2])", "plain positional arguments"),
    ("2 ^ 3", "use ** for powers"),
    ("1 if 1 else 2", "IfExp is not allowed"),
    ("(a := 3)", "NamedExpr is not allowed"),
    ("1 < 2", "Compare is not allowed"),
    ("1; 2", "cannot parse"),
    ("import os", "cannot parse"),
    ("", "empty"),
    ("sqrt(-1)", "negative"),
    ("1 / 0", "division by zero"),
    ("5 % 0", "modulo by zero"),
    ("0 ** -1", "negative power"),
    ("(-8) ** (1 / 3)", "no real result"),
    ("round(1.5, 99)", "between"),
    ("sqrt(1, 2)", "takes 1 arguments"),
])
def test_everything_else_is_refused_with_a_reason(expression: str, says: str) -> None:
    with pytest.raises(CalculatorError) as err:
        evaluate(expression)
    assert says in str(err.value)
    assert not Path("/tmp/lle-calculator-pwned").exists()


@pytest.mark.parametrize("expression", [
    "9 ** 9 ** 9", "2 ** 10 ** 10", "10 ** 100", "(10 ** 99) ** 1000", "10 ** 99 * 10 ** 99 * 10",
    "1e308 * 10", "2.0 ** 5000", "floor(1e300)", "99999999999 ** 99999",
])
def test_huge_values_are_refused_before_they_are_computed(expression: str) -> None:
    started = time.perf_counter()
    with pytest.raises(CalculatorError):
        evaluate(expression)
    assert time.perf_counter() - started < 0.5


def test_size_and_nesting_are_bounded() -> None:
    with pytest.raises(CalculatorError, match="longer than"):
        evaluate("1 + " * (MAX_CHARS // 4 + 1) + "1")
    with pytest.raises(CalculatorError, match="more than"):
        evaluate("+".join(["1"] * 100))
    with pytest.raises(CalculatorError, match="more than"):
        evaluate("-" * 200 + "1")
    assert evaluate("(" * 149 + "1" + ")" * 149) == 1  # as deep as the length allows: no recursion trouble


def test_numbers_are_formatted_plainly() -> None:
    assert format_number(evaluate("0.1 + 0.2")) == "0.3"
    assert format_number(evaluate("6 / 3")) == "2.0"
    assert format_number(evaluate("7948161")) == "7948161"
    assert format_number(evaluate("1e20 * 3")) == "3e+20"


@settings(max_examples=150, deadline=None)
@given(st.recursive(
    st.integers(-10_000, 10_000).map(str),
    lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    max_leaves=12,
))
def test_integer_arithmetic_agrees_with_python(expression: str) -> None:
    expected = eval(expression, {"__builtins__": {}})  # the test's oracle: generated text of ints and + - * only
    if abs(expected) >= 10 ** 100:
        with pytest.raises(CalculatorError):
            evaluate(expression)
    else:
        assert evaluate(expression) == expected
