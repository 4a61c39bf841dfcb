"""The paired verdict: is one strategy better than another on the same held-out tasks?

Every strategy of a run is evaluated on the same dev small worlds, so outcomes come in pairs, task by
task. Only the discordant pairs carry information about the difference: `b` tasks solved by the
strategy and not by the baseline, `c` the other way round. The test is the exact McNemar test — under
no difference each discordant pair goes either way with probability 1/2, so the two-sided p-value is
the binomial tail `2 · P(X ≤ min(b, c))`, X ~ Binomial(b + c, 1/2), capped at 1.

The 95 % interval for the difference in success is Newcombe's hybrid score interval for paired
proportions (Newcombe 1998, method 10): the Wilson intervals of both success rates, combined with the
phi correlation of the 2×2 table. It needs no resampling (so no seed) and stays inside [-1, 1] even
for the small held-out sets a flywheel run has.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Below the carriers since a skill's measured use prints its interval too; re-exported here, where callers know them.
from lle.governance.intervals import MINUS as MINUS
from lle.governance.intervals import Z95 as Z95
from lle.governance.intervals import interval as interval
from lle.governance.intervals import wilson as wilson

ALPHA = 0.05
MIN_DECIDABLE = 6
"""Fewer paired tasks than this can never reach p < 0.05 (even 5 discordant pairs one way give p = 0.0625)."""
FULL_VERDICT = "lle run --compare"
"""The command that gives a verdict enough held-out tasks (printed when a run's set is too small)."""
FULL_N = 96
"""Held-out tasks of the full verdict (the starter suite's eval size): a smaller run that shows no difference
says how to get the full one; a full run whose pairs the time cap thinned does not."""


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (1.0 when there are none)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / (1 << n))  # exact integer division: no overflow for large n


def newcombe_paired(both: int, b: int, c: int, neither: int) -> tuple[float, float]:
    """95 % interval of p1 - p2 for paired proportions (Newcombe's method 10); p1 = (both + b) / n."""
    n = both + b + c + neither
    if n == 0:
        return -1.0, 1.0
    p1, p2 = (both + b) / n, (both + c) / n
    l1, u1 = wilson(both + b, n)
    l2, u2 = wilson(both + c, n)
    denominator = (both + b) * (c + neither) * (both + c) * (b + neither)
    phi = (both * neither - b * c) / math.sqrt(denominator) if denominator else 0.0
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    difference = p1 - p2
    return max(-1.0, difference - delta), min(1.0, difference + epsilon)


@dataclass(frozen=True)
class Verdict:
    """`strategy` against `baseline` on `n` held-out tasks both finished within the time cap."""

    strategy: str
    baseline: str
    n: int
    strategy_solved: int
    baseline_solved: int
    b: int
    """Tasks the strategy solved and the baseline did not."""
    c: int
    """Tasks the baseline solved and the strategy did not."""
    p_value: float
    ci95: tuple[float, float]
    """Of the difference in success, in points (percent)."""
    time_capped: int = 0
    """Tasks left out because either side was stopped by the wall-clock cap (no outcome of the agent)."""
    rounds: tuple[int, int] | None = None
    """The rounds compared (strategy's, baseline's) when the run was cut short before evaluating its last round."""

    @property
    def difference(self) -> float:
        """Difference in success, in points (percent of the tasks)."""
        return 100 * (self.b - self.c) / self.n if self.n else 0.0

    @property
    def decidable(self) -> bool:
        return self.n >= MIN_DECIDABLE

    @property
    def sentence(self) -> str:
        if self.rounds is not None:
            return (f"{self._sentence} — {self.strategy} at round {self.rounds[0]}, {self.baseline} at round "
                    f"{self.rounds[1]}: the run has not evaluated its last round (`lle run --resume RUN` goes on)")
        return self._sentence

    @property
    def _sentence(self) -> str:
        if not self.decidable:
            return (f"too few held-out tasks to decide {self.strategy} against {self.baseline}: {self.n} paired "
                    f"(an exact test needs at least {MIN_DECIDABLE}); for the full verdict run `{FULL_VERDICT}`")
        low, high = self.ci95
        numbers = (f"{self.difference:+.1f} points, 95 % CI {interval(low, high)}, "
                   f"McNemar p = {self.p_value:.3g}, b = {self.b}, c = {self.c}")
        if self.p_value < ALPHA:
            better = "better" if self.b > self.c else "worse"
            return f"{self.strategy} is {better} than {self.baseline} on {self.n} held-out tasks ({numbers})"
        held_out = self.n + self.time_capped  # the run's set, before the cap took pairs out of it
        more = f"; for the full verdict run `{FULL_VERDICT}`" if held_out < FULL_N else ""
        return (f"no difference shown between {self.strategy} and {self.baseline} on {self.n} held-out tasks "
                f"({numbers}){more}")

    def row(self) -> dict[str, object]:
        return {"strategy": self.strategy, "baseline": self.baseline, "n": self.n,
                "solved": f"{self.strategy_solved} vs {self.baseline_solved}", "difference_points":
                round(self.difference, 1), "b": self.b, "c": self.c, "p_value": round(self.p_value, 4),
                "ci95_points": [round(self.ci95[0], 1), round(self.ci95[1], 1)], "time_capped": self.time_capped,
                "decidable": self.decidable, "rounds": list(self.rounds) if self.rounds else None,
                "sentence": self.sentence}


def paired_verdict(strategy: str, baseline: str, pairs: Sequence[tuple[bool, bool]], *,
                   time_capped: int = 0, rounds: tuple[int, int] | None = None) -> Verdict:
    """The verdict from (strategy solved, baseline solved) per held-out task."""
    both = sum(1 for s, r in pairs if s and r)
    b = sum(1 for s, r in pairs if s and not r)
    c = sum(1 for s, r in pairs if r and not s)
    neither = len(pairs) - both - b - c
    low, high = newcombe_paired(both, b, c, neither)
    return Verdict(strategy=strategy, baseline=baseline, n=len(pairs), strategy_solved=both + b,
                   baseline_solved=both + c, b=b, c=c, p_value=mcnemar_exact(b, c),
                   ci95=(100 * low, 100 * high), time_capped=time_capped, rounds=rounds)
