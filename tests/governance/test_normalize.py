"""Normalization before hashing (a property), and the near-copy threshold on the project's own trajectories."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lle.core import Experience, Split
from lle.governance import normalize
from lle.governance.lineage import denylist, revoke
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy.keys import KeysFamily, oracle_actions

INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u202a\u202e\u2066\u2069\u00ad"
SPACES = [" ", "  ", "\t", "\n", "\u00a0", "\u3000", " \u2003 "]


@st.composite
def disguised(draw: st.DrawFn) -> tuple[str, str]:
    """A text and a copy with format characters inserted, case changed and whitespace re-spaced."""
    words = draw(st.lists(st.text(st.characters(exclude_categories=["Cs", "Zs", "Zl", "Zp", "Cc"]), min_size=1,
                                  max_size=8), max_size=6))
    out = []
    for word in words:
        chars = [c.upper() if draw(st.booleans()) else c.lower() if draw(st.booleans()) else c for c in word]
        chars = [c + (draw(st.sampled_from(INVISIBLE)) if draw(st.booleans()) else "") for c in chars]
        out.append("".join(chars))
    spaced = draw(st.sampled_from(SPACES)).join(out)
    return " ".join(words), draw(st.sampled_from(["", *SPACES])) + spaced + draw(st.sampled_from(["", *SPACES]))


@settings(max_examples=500, deadline=None)
@given(pair=disguised(), args=st.dictionaries(st.text(max_size=5).filter(lambda k: k != "note"),
                                              st.integers() | st.text(max_size=5), max_size=4))
def test_text_equal_after_normalization_hashes_the_same(pair: tuple[str, str], args: dict[str, object]) -> None:
    plain, copy = pair
    assert normalize.text(copy) == normalize.text(plain)
    assert normalize.digest("w", [normalize.text(copy)]) == normalize.digest("w", [normalize.text(plain)])
    assert normalize.text(normalize.text(copy)) == normalize.text(copy)  # idempotent
    shuffled = {**dict(reversed(list(args.items()))), "note": None}  # keys reordered, a null argument added
    assert normalize.value(shuffled) == normalize.value(args)  # type: ignore[arg-type]


def test_what_is_folded() -> None:
    fold = normalize.text
    assert fold("\ufeffYou take the k\u200bey.  ") == fold("you take the key") == "you take the key"
    assert fold("Yоu tаke the kеy") == "you take the key"  # Cyrillic о, а, е
    assert fold("ΚΕΥ") == "key" and fold("ＫＥＹ １２") == "key 12"  # Greek capitals, fullwidth (NFKC)
    assert normalize.value({"a": 1, "b": None, "C": ["X\u200d"]}) == {"a": 1, "c": ["x"]}


def distinct_trajectories(seeds: range) -> dict[str, Experience]:
    """Oracle successes on train small worlds of the toy world, one per normalized trajectory."""
    out: dict[str, Experience] = {}
    for seed in seeds:
        sw = KeysFamily().small_world(Split.train, seed)
        exp = run_episode(sw, ScriptedPolicy(oracle_actions(sw)))
        out.setdefault(normalize.digest(sw.world, normalize.step_fields(exp.steps)), exp)
    return out


def test_no_distinct_train_trajectory_reads_as_a_near_copy_of_another(tmp_path: Path) -> None:
    exps = list(distinct_trajectories(range(400)).values())
    assert len(exps) >= 350
    sets = [normalize.shingles(normalize.step_fields(e.steps)) for e in exps]
    closest = max(normalize.containment(a, b) for a, b in itertools.permutations(sets, 2))
    print(f"{len(exps)} distinct trajectories: closest containment {closest:.3f} < threshold {normalize.THRESHOLD}")
    assert closest < normalize.THRESHOLD
    with Store(tmp_path / "lle.db") as store:  # through the denylist: revoke three, refuse only those
        revoked = [store.append_experience(e) for e in exps[:3]]
        for exp in revoked:
            revoke(store, exp.id, "world bug", "test")
        denied = denylist(store)
        assert [denied.blocks_experience(e) for e in exps[3:]] == [None] * (len(exps) - 3)
        assert [denied.blocks_experience(e.model_copy(update={"id": "exp_copy"})) for e in exps[:3]] == \
            [e.id for e in revoked]
