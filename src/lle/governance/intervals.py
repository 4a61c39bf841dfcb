"""95 % intervals of success rates and of their differences, and how they print.

Below the carriers, so a carrier's gate (a skill's measured use, `lle.carriers.skills`) and the flywheel's verdict
(`lle.flywheel.verdict`, which re-exports these) compute and print them the same way. Score intervals need no
resampling (so no seed) and stay inside their range even for the few episodes a run has.
"""

from __future__ import annotations

import math

Z95 = 1.959964
MINUS = "\u2212"
"""The minus sign intervals print with (U+2212), in the viewer, the report and the verdict's sentence."""


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion; (0, 1) when there is no sample."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_unpaired(passed_1: int, n_1: int, passed_2: int, n_2: int) -> tuple[float, float]:
    """95 % interval of p1 - p2 for two independent proportions (Newcombe 1998, the hybrid score interval from
    the two Wilson intervals); (-1, 1) when either has no sample."""
    if n_1 == 0 or n_2 == 0:
        return -1.0, 1.0
    p1, p2 = passed_1 / n_1, passed_2 / n_2
    l1, u1 = wilson(passed_1, n_1)
    l2, u2 = wilson(passed_2, n_2)
    difference = p1 - p2
    low = difference - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = difference + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


def signed_number(value: float, digits: int = 1) -> str:
    """A signed number as people read it: "+4.4", "\u221228.3" (never "-0.0")."""
    value = round(value, digits) + 0.0
    return f"{value:+.{digits}f}".replace("-", MINUS)


def interval(low: float, high: float, *, signed: bool = True, digits: int = 1) -> str:
    """An interval as people read it: "\u221212.6 to +25.8" (signed, one decimal, the word "to"); `signed=False`
    for rates (0–1), which are never negative: "0.34 to 1.00"."""
    def number(value: float) -> str:
        value = round(value, digits) + 0.0  # no "-0.0"
        text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
        return text.replace("-", MINUS)

    return f"{number(low)} to {number(high)}"
