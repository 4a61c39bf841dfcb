"""Bug injection: each family changes exactly what it names, deterministically, and the catalog still matches."""

from __future__ import annotations

import ast
import random

import pytest

from lle.worlds.code.bugs import FAMILIES, inject, sites
from lle.worlds.code.catalog import dataset_path, load_catalog, load_problems, source_hash

SOURCE = '''def f(xs, k):
    """Docstring with 1 and < inside, never mutated."""
    # a comment that must survive
    if not xs:
        return 0
    total = 0
    for i in range(len(xs)):
        if xs[i] < k and xs[i] != 3:
            total = total + max(xs[i], k) - 2
    return total
'''

_LINE = "            total = total + max(xs[i], k) - 2"
EXPECTED_CHANGE = {
    # family -> (site, line of the original that changed, the new text of that line)
    "off_by_one": (0, "        return 0", "        return 1"),
    "wrong_comparison": (0, "        if xs[i] < k and xs[i] != 3:", "        if xs[i] <= k and xs[i] != 3:"),
    "wrong_operator": (1, _LINE, "            total = total + max(xs[i], k) + 2"),
    "swapped_arguments": (1, _LINE, "            total = total + max(k, xs[i]) - 2"),
    "wrong_return_value": (0, "        return 0", "        return 1"),
}


def _diff(before: str, after: str) -> list[tuple[str, str]]:
    return [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=False) if a != b]


@pytest.mark.parametrize("family", sorted(EXPECTED_CHANGE))
def test_each_family_changes_one_line_as_named(family: str) -> None:
    site, old, new = EXPECTED_CHANGE[family]
    injection = inject(SOURCE, "f", family, site)
    assert injection is not None and injection.family == family
    assert _diff(SOURCE, injection.source) == [(old, new)]
    assert "# a comment that must survive" in injection.source
    assert '"""Docstring with 1 and < inside, never mutated."""' in injection.source


def test_site_order_is_fixed() -> None:
    # Site indices are stored in the catalog: their order must never change silently.
    assert [s.what for s in sites(SOURCE, "f", "wrong_operator")] == ["And -> Or", "Sub -> Add", "Add -> Sub"]
    assert [s.what for s in sites(SOURCE, "f", "dropped_edge_case")] == [
        "guard clause removed", "condition 0 of And dropped", "condition 1 of And dropped"]
    assert [s.what for s in sites(SOURCE, "f", "wrong_return_value")] == [
        "return 0 -> 1", "return total -> xs", "return total -> k"]


def test_dropped_edge_case_removes_the_guard_clause() -> None:
    injection = inject(SOURCE, "f", "dropped_edge_case", 0)
    assert injection is not None and injection.what == "guard clause removed"
    assert "if not xs:" not in injection.source and "return 0" not in injection.source
    assert ast.parse(injection.source)  # still a valid module


def test_sites_are_deterministic_and_every_site_parses_to_a_different_module() -> None:
    for family in FAMILIES:
        found = sites(SOURCE, "f", family)
        assert [s.what for s in found] == [s.what for s in sites(SOURCE, "f", family)]
        texts = [inject(SOURCE, "f", family, i) for i in range(len(found))]
        assert all(t is not None and t.source != SOURCE for t in texts), family
        assert all(ast.dump(ast.parse(t.source)) != ast.dump(ast.parse(SOURCE)) for t in texts if t)
    assert inject(SOURCE, "f", "off_by_one", 10_000) is None
    with pytest.raises(ValueError, match="unknown bug family"):
        sites(SOURCE, "f", "typo")


def test_negative_constants_and_precedence_are_spliced_faithfully() -> None:
    src = "def g(a, b):\n    return a - b * 2 + 0\n"
    for family in FAMILIES:
        for i in range(len(sites(src, "g", family))):
            injection = inject(src, "g", family, i)
            assert injection is not None, (family, i)
            compile(injection.source, "g", "exec")
    wrong = inject(src, "g", "wrong_operator", 2)  # `b * 2` becomes `b + 2`: parentheses keep the meaning
    assert wrong is not None and "a - (b + 2) + 0" in wrong.source


def test_catalogued_injections_still_hash_the_same() -> None:
    catalog = load_catalog()
    problems = load_problems()
    assert len(problems) == 164 and dataset_path().name == "HumanEval.jsonl.gz"
    entries = [(t, f, s, d) for t, e in sorted(catalog["problems"].items())
               for f, pairs in sorted(e["injections"].items()) for s, d in pairs]
    assert len(entries) > 1000
    for task_id, family, site, digest in random.Random(7).sample(entries, 60):
        p = problems[task_id]
        injection = inject(p.source, p.entry_point, family, site)
        assert injection is not None and source_hash(injection.source) == digest, (task_id, family, site)
