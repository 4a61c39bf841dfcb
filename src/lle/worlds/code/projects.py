"""The projects of `code/quirks-v1`, their conventions, and the task templates they share.

Every project has the same kind of code (small money functions) and differs in exactly one
convention, its *quirk*, which its tests enforce:

| project    | quirk                                                                               |
|------------|-------------------------------------------------------------------------------------|
| ledger     | money is `Decimal`, rounded to cents with `ledger.money.cents` (ROUND_HALF_UP)       |
| storefront | results rounded to the digits in the `STOREFRONT_DIGITS` env var the runner sets     |
| gateway    | rates, thresholds and fees come from the config file `gateway.json` (`setting(name)`) |
| legacy     | public functions are named in camelCase                                              |

A quirk is a project rule, not a skill: the same rule applied in another project breaks that
project's tests (a Decimal where floats are expected, an env var or config file that is not there,
a name the tests do not import). `render` writes a template's function under any `Rules`, so the
tests can check exactly that.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from typing import Any, Literal

Money = Literal["decimal", "float", "digits_env"]


@dataclass(frozen=True)
class Rules:
    money: Money = "float"
    """decimal: Decimal in and out, cents ROUND_HALF_UP; float: round(x, 2); digits_env: round(x, $DIGITS_VAR)."""
    params: Literal["literal", "config"] = "literal"
    """Business parameters written as literals, or read from the config file at call time."""
    naming: Literal["snake", "camel"] = "snake"
    helpers: bool = True
    """Use the project's helper modules (inside the project) or self-contained code (a rule carried elsewhere)."""


@dataclass(frozen=True)
class Project:
    name: str
    package: str
    module: str
    """The module tasks edit, e.g. `billing` (the file is `<package>/<module>.py`)."""
    rules: Rules
    quirk: str
    """The convention in one line."""
    conventions: str
    """CONVENTIONS.md."""
    helper: tuple[str, str] | None = None
    """(file name inside the package, text) of the helper the convention uses."""


DEFAULT_RULES = Rules()
DIGITS_VAR = "STOREFRONT_DIGITS"
CONFIG_VAR = "GATEWAY_CONFIG"

_LEDGER_MONEY = '''"""Money helpers: every amount the ledger returns goes through `cents`."""

from decimal import ROUND_HALF_UP, Decimal


def cents(amount):
    """`amount` as a Decimal with exactly two places, halves rounded up."""
    return Decimal(amount).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
'''
_STOREFRONT_SETTINGS = f'''"""Runtime settings of the storefront."""

import os


def digits():
    """Digits to round amounts to, for the currency being served (from ${DIGITS_VAR}, read at call time)."""
    return int(os.environ["{DIGITS_VAR}"])
'''
_GATEWAY_CONFIG = f'''"""Configuration of the gateway: business parameters live in gateway.json, never in code."""

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setting(name):
    """The value of `name` in the active config (${CONFIG_VAR}, else gateway.json), read at call time."""
    path = ROOT / os.environ.get("{CONFIG_VAR}", "gateway.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)[name]
'''

_SNAKE = "Function names are snake_case."
PROJECTS: dict[str, Project] = {p.name: p for p in (
    Project("ledger", "ledger", "billing", Rules(money="decimal"), "money is Decimal, rounded to cents via cents()",
            "# Conventions\n\n- Money is `decimal.Decimal`, never float: arguments arrive as Decimal and every "
            "amount a function returns goes through `ledger.money.cents()` (two places, halves rounded up).\n"
            f"- {_SNAKE}\n- Rates and thresholds are the values the task states.\n",
            ("money.py", _LEDGER_MONEY)),
    Project("storefront", "storefront", "checkout", Rules(money="digits_env"),
            f"results are rounded to the digits in ${DIGITS_VAR}",
            "# Conventions\n\n- Amounts are floats. Every amount a function returns is rounded with "
            "`round(x, storefront.settings.digits())`: the number of digits depends on the currency and comes "
            f"from the `{DIGITS_VAR}` environment variable, which the test runner sets. Read it at call time; "
            f"never hard-code the digits.\n- {_SNAKE}\n- Rates and thresholds are the values the task states.\n",
            ("settings.py", _STOREFRONT_SETTINGS)),
    Project("gateway", "gateway", "pricing", Rules(params="config"),
            "business parameters are read from gateway.json via setting()",
            "# Conventions\n\n- Amounts are floats rounded to 2 places with `round(x, 2)`.\n"
            "- Business parameters (rates, thresholds, fees) live in `gateway.json`; read them with "
            "`gateway.config.setting(name)` at call time and never hard-code them: the test runner points "
            f"`{CONFIG_VAR}` at other config files.\n- {_SNAKE}\n",
            ("config.py", _GATEWAY_CONFIG)),
    Project("legacy", "legacy", "orders", Rules(naming="camel"), "public functions are named in camelCase",
            "# Conventions\n\n- Amounts are floats rounded to 2 places with `round(x, 2)`.\n"
            "- Public functions are named in camelCase (`orderTotal`, not `order_total`), a rule kept from the "
            "old system that still calls them; the tests import them by that name.\n"
            "- Rates and thresholds are the values the task states.\n"),
)}


# --- templates --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    key: str
    """snake_case name; the camelCase one is derived."""
    args: tuple[str, ...]
    choices: dict[str, tuple[int, ...]]
    """Business parameters and the values a seed picks from."""
    summary: str
    """Docstring of the function (no parameter values: in gateway they live in the config)."""
    describe: Callable[[dict[str, int]], str]
    body: Callable[[Callable[[str], str], Callable[[str], str]], list[str]]
    """Lines of the function body, given p(param) -> expression and fin(expr) -> returned expression."""
    compute: Callable[[dict[str, int], tuple[Any, ...]], Fraction]
    """Exact result before rounding, from exact inputs."""
    inputs: Callable[[random.Random], tuple[Any, ...]]
    """Arguments as exact values: int, or str holding a decimal number (made Decimal or float per project)."""
    branch: Callable[[dict[str, int], tuple[Any, ...]], bool] | None = None
    """Which side of the template's condition the arguments take (tests cover both)."""

    @property
    def words(self) -> str:
        return self.key.replace("_", " ")


def _money(rng: random.Random, low: int, high: int) -> str:
    return f"{rng.randint(low * 100, high * 100) / 100:.2f}"


def _f(x: Any) -> Fraction:
    return Fraction(x) if isinstance(x, int) else Fraction(str(x))


def _total(p: dict[str, int], a: tuple[Any, ...]) -> Fraction:
    sub = sum((q * _f(price) for q, price in a[0]), Fraction(0))
    return sub * (100 - p["discount_rate"]) / 100 if sub > p["discount_threshold"] else sub


def _tax(p: dict[str, int], a: tuple[Any, ...]) -> Fraction:
    amount = _f(a[0])
    return (amount - p["tax_allowance"]) * p["tax_rate"] / 100 if amount > p["tax_allowance"] else Fraction(0)


def _shipping(p: dict[str, int], a: tuple[Any, ...]) -> Fraction:
    weight, total = _f(a[0]), _f(a[1])
    return Fraction(0) if total >= p["free_shipping_over"] else p["base_fee"] + p["per_kg_fee"] * weight


def _total_body(p: Callable[[str], str], fin: Callable[[str], str]) -> list[str]:
    return ["subtotal = sum(quantity * price for quantity, price in items)",
            f"if subtotal > {p('discount_threshold')}:",
            f"    subtotal = subtotal * (100 - {p('discount_rate')}) / 100",
            f"return {fin('subtotal')}"]


def _tax_body(p: Callable[[str], str], fin: Callable[[str], str]) -> list[str]:
    due = f"(amount - {p('tax_allowance')}) * {p('tax_rate')} / 100"
    return [f"if amount <= {p('tax_allowance')}:", f"    return {fin('amount * 0')}", f"return {fin(due)}"]


def _split_body(p: Callable[[str], str], fin: Callable[[str], str]) -> list[str]:
    share = f"amount * (100 + {p('tip_rate')}) / 100 / people"
    return [f"return {fin(share)}"]


def _shipping_body(p: Callable[[str], str], fin: Callable[[str], str]) -> list[str]:
    cost = f"{p('base_fee')} + {p('per_kg_fee')} * weight"
    return [f"if order_total >= {p('free_shipping_over')}:", f"    return {fin('weight * 0')}", f"return {fin(cost)}"]


TEMPLATES: dict[str, Template] = {t.key: t for t in (
    Template(
        "total_price", ("items",), {"discount_rate": (5, 10, 15, 20, 25), "discount_threshold": (50, 100, 150, 200)},
        "Order total of (quantity, unit price) pairs, after the volume discount.",
        lambda p: (f"`items` is a list of (quantity, unit price) pairs; return the order total, taking "
                   f"{p['discount_rate']}% off when the subtotal exceeds {p['discount_threshold']}"),
        _total_body, _total,
        lambda rng: ([(rng.randint(1, 5), _money(rng, 2, 60)) for _ in range(rng.randint(1, 4))],),
        lambda p, a: sum(q * _f(price) for q, price in a[0]) > p["discount_threshold"],
    ),
    Template(
        "tax_due", ("amount",), {"tax_rate": (8, 12, 19, 21, 25), "tax_allowance": (100, 250, 500)},
        "Tax due on an amount above the allowance.",
        lambda p: (f"return the tax due on `amount`: nothing up to an allowance of {p['tax_allowance']}, "
                   f"and {p['tax_rate']}% of the part above it"),
        _tax_body, _tax,
        lambda rng: (_money(rng, 20, 1500),),
        lambda p, a: _f(a[0]) > p["tax_allowance"],
    ),
    Template(
        "split_bill", ("amount", "people"), {"tip_rate": (10, 12, 15, 18, 20)},
        "Each person's share of a bill, tip included.",
        lambda p: (f"return each person's share of a bill: `amount` plus a {p['tip_rate']}% tip, divided evenly "
                   "among `people`"),
        _split_body,
        lambda p, a: _f(a[0]) * (100 + p["tip_rate"]) / 100 / a[1],
        lambda rng: (_money(rng, 10, 400), rng.randint(2, 7)),
    ),
    Template(
        "shipping_cost", ("weight", "order_total"),
        {"base_fee": (3, 4, 5, 6), "per_kg_fee": (1, 2, 3), "free_shipping_over": (50, 75, 100, 150)},
        "Shipping cost of a parcel, free above the order threshold.",
        lambda p: (f"return the cost of shipping a parcel of `weight` kg for an order worth `order_total`: free "
                   f"when the order total is at least {p['free_shipping_over']}, otherwise {p['base_fee']} plus "
                   f"{p['per_kg_fee']} per kg"),
        _shipping_body, _shipping,
        lambda rng: (f"{rng.randint(10, 2000) / 100:.2f}", _money(rng, 10, 200)),
        lambda p, a: _f(a[1]) >= p["free_shipping_over"],
    ),
)}


def function_name(template: Template, rules: Rules) -> str:
    if rules.naming == "snake":
        return template.key
    head, *rest = template.key.split("_")
    return head + "".join(w.capitalize() for w in rest)


def digits_for(rules: Rules, env: dict[str, str]) -> int:
    return int(env[DIGITS_VAR]) if rules.money == "digits_env" else 2


def render(template: Template, params: dict[str, int], rules: Rules, package: str) -> tuple[list[str], str]:
    """(import lines, function source) of `template` written under `rules`."""
    imports: list[str] = []

    def p(key: str) -> str:
        if rules.params == "literal":
            return str(params[key])
        if rules.helpers:
            imports.append(f"from {package}.config import setting")
            return f'setting("{key}")'
        imports.extend(["import json", "import os"])
        return (f'json.load(open(os.environ.get("{CONFIG_VAR}", "gateway.json"), encoding="utf-8"))["{key}"]')

    def fin(expr: str) -> str:
        if rules.money == "decimal":
            if rules.helpers:
                imports.append(f"from {package}.money import cents")
                return f"cents({expr})"
            imports.append("from decimal import ROUND_HALF_UP, Decimal")
            return f'Decimal({expr}).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)'
        if rules.money == "digits_env":
            if rules.helpers:
                imports.append(f"from {package}.settings import digits")
                return f"round(float({expr}), digits())"
            imports.append("import os")
            return f'round(float({expr}), int(os.environ["{DIGITS_VAR}"]))'
        return f"round(float({expr}), 2)"

    lines = template.body(p, fin)
    text = (f"def {function_name(template, rules)}({', '.join(template.args)}):\n"
            f'    """{template.summary}"""\n' + "".join(f"    {line}\n" for line in lines))
    return sorted(set(imports)), text


def module_text(project: Project, functions: list[tuple[list[str], str]]) -> str:
    imports = sorted({line for imps, _ in functions for line in imps}, key=lambda s: (s.startswith("from"), s))
    head = f'"""{project.package}.{project.module}: money functions of the {project.name} project."""\n\n'
    return head + ("\n".join(imports) + "\n\n\n" if imports else "\n") + "\n\n".join(t for _, t in functions)


def convert(value: Any, rules: Rules) -> Any:
    """An exact input (int or decimal string, nested in lists and tuples) as the project passes it."""
    if isinstance(value, str):
        return Decimal(value) if rules.money == "decimal" else float(value)
    if isinstance(value, list | tuple):
        return type(value)(convert(v, rules) for v in value)
    return value


def expected(exact: Fraction, rules: Rules, digits: int) -> Decimal | float:
    if rules.money == "decimal":
        with localcontext() as ctx:
            ctx.prec = 50
            value = Decimal(exact.numerator) / Decimal(exact.denominator)
        return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return round(float(exact), digits)


def near_tie(exact: Fraction, digits: int) -> bool:
    """Whether rounding `exact` to `digits` places is within a hair of a half (then float order could flip it)."""
    scaled = exact * 10**digits
    return bool(abs(scaled - (scaled.numerator // scaled.denominator) - Fraction(1, 2)) < Fraction(1, 10**6))


def rules_with_quirk_of(project: str, host: str) -> Rules:
    """`host`'s rules with `project`'s quirk carried over (self-contained code: the helpers stay home)."""
    quirk, base = PROJECTS[project].rules, PROJECTS[host].rules
    changed = {f: getattr(quirk, f) for f in ("money", "params", "naming") if getattr(quirk, f) != getattr(
        DEFAULT_RULES, f)}
    return replace(base, helpers=False, **changed)
