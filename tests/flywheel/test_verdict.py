"""The paired verdict: exact McNemar on the discordant pairs, Newcombe's paired interval, the sentence."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from lle.flywheel.evaluate import shown_round
from lle.flywheel.verdict import MIN_DECIDABLE, mcnemar_exact, newcombe_paired, paired_verdict


def exact_two_sided(b: int, c: int) -> float:
    """Independently: the two-sided exact binomial test of b successes in b + c trials at 1/2, summing every
    outcome no more likely than the observed one (for p = 1/2 that is the doubled smaller tail)."""
    n = b + c
    if n == 0:
        return 1.0
    observed = Fraction(math.comb(n, b), 2**n)
    total = sum(Fraction(math.comb(n, k), 2**n) for k in range(n + 1) if Fraction(math.comb(n, k), 2**n) <= observed)
    return float(min(Fraction(1), total))


def pairs(both: int, b: int, c: int, neither: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * both + [(True, False)] * b + [(False, True)] * c + [(False, False)] * neither


@pytest.mark.parametrize(("b", "c"), [(0, 0), (1, 0), (0, 1), (3, 3), (5, 0), (6, 0), (0, 9), (7, 2), (2, 11),
                                      (15, 14), (40, 22)])
def test_the_p_value_is_the_exact_mcnemar_test(b: int, c: int) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(exact_two_sided(b, c), abs=1e-12)
    verdict = paired_verdict("lle", "none", pairs(4, b, c, 5))
    assert (verdict.b, verdict.c, verdict.n) == (b, c, 9 + b + c)
    assert verdict.p_value == pytest.approx(exact_two_sided(b, c), abs=1e-12)


def test_edge_cases_no_discordant_pairs_and_all_one_way() -> None:
    same = paired_verdict("lle", "none", pairs(3, 0, 0, 7))
    assert same.p_value == 1.0 and same.difference == 0.0
    assert same.sentence.startswith("no difference shown between lle and none on 10 held-out tasks")
    better = paired_verdict("lle", "none", pairs(0, 10, 0, 0))
    assert better.p_value == pytest.approx(2 / 2**10)
    assert better.difference == 100.0
    assert better.sentence.startswith("lle is better than none on 10 held-out tasks (+100.0 points, 95 % CI ")
    worse = paired_verdict("lle", "raw", pairs(2, 0, 8, 2))
    assert worse.p_value == pytest.approx(2 / 2**8)
    assert worse.sentence.startswith("lle is worse than raw on 12 held-out tasks (-66.7 points")
    assert mcnemar_exact(600, 0) == pytest.approx(2 / 2**600)  # huge counts: exact integers, no overflow


def test_too_few_tasks_say_so_and_name_the_full_verdict() -> None:
    quick = paired_verdict("lle", "none", pairs(0, 4, 0, 0))  # the quick run's 4 held-out tasks
    assert not quick.decidable and MIN_DECIDABLE == 6
    assert mcnemar_exact(5, 0) > 0.05 and mcnemar_exact(6, 0) < 0.05  # why 6 is the least that can decide
    assert "too few held-out tasks" in quick.sentence and "lle run --compare" in quick.sentence
    assert paired_verdict("lle", "none", []).n == 0
    small = paired_verdict("lle", "none", pairs(5, 0, 4, 50))  # 59 held-out tasks: no difference, say how
    assert small.sentence.endswith("for the full verdict run `lle run --compare`")
    thinned = paired_verdict("lle", "none", pairs(11, 0, 4, 76), time_capped=5)  # a full run less 5 capped
    assert "full verdict" not in thinned.sentence


def test_the_interval_is_newcombes_paired_interval() -> None:
    # Newcombe (1998), Statistics in Medicine 17:2635, example (a): 36, 12, 2, 0 -> method 10: 0.0569 to 0.3404.
    low, high = newcombe_paired(36, 12, 2, 0)
    assert (round(low, 4), round(high, 4)) == (0.0569, 0.3404)
    for table in [(0, 0, 0, 10), (10, 0, 0, 0), (0, 10, 0, 0), (0, 0, 10, 0), (3, 4, 1, 2), (1, 1, 1, 1)]:
        low, high = newcombe_paired(*table)
        n = sum(table)
        difference = (table[1] - table[2]) / n
        assert -1.0 <= low <= difference <= high <= 1.0, table
    narrow = newcombe_paired(30, 20, 10, 40)
    wide = newcombe_paired(3, 2, 1, 4)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]  # ten times the tasks, a narrower interval
    verdict = paired_verdict("raw", "none", pairs(36, 12, 2, 0), time_capped=3)
    assert verdict.ci95 == pytest.approx((5.69, 34.04), abs=0.01)
    assert verdict.row()["time_capped"] == 3 and verdict.row()["solved"] == "48 vs 38"


@pytest.mark.parametrize(("finished", "shown"), [({1: 96, 2: 96}, 2), ({1: 96, 2: 10}, 1), ({1: 96}, 1),
                                                 ({1: 10}, 1), ({}, 2), ({1: 90, 2: 96}, 2)])
def test_a_run_cut_short_is_read_at_its_latest_whole_evaluation(finished: dict[int, int], shown: int) -> None:
    """Finished held-out episodes per round of a 2-round run -> the round its results are read at."""
    assert shown_round(finished, 2) == shown
