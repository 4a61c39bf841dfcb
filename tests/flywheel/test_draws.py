"""The draw: train draws spread over the whole train split, never touch dev or test, and are pure."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import pytest

from lle import registry
from lle.core import SmallWorld, Split
from lle.errors import InvalidInputError
from lle.flywheel.suite import Suite, SuiteWorld, draw, draw_for_skill, draw_watch, family, load_suite
from lle.worlds.base import BaseWorld, TaskFamily, split_of
from lle.worlds.sql.world import split_seeds

GRID_ID = "drawtest/grid-v1"
TRAIN_SIZE = 1000


def _items() -> dict[Split, list[int]]:
    """Items numbered 0, 1, …, each in the split its stable hash gives, until the train split holds 1,000."""
    out: dict[Split, list[int]] = {s: [] for s in Split}
    item = 0
    while len(out[Split.train]) < TRAIN_SIZE:
        out[split_of(f"grid:{item}")].append(item)
        item += 1
    return out


ITEMS = _items()


class GridFamily(TaskFamily):
    """A family with exactly 1,000 train tasks, split by the same stable hash real worlds use."""

    id: ClassVar[str] = GRID_ID
    family: ClassVar[str] = "drawtest"
    projects: ClassVar[tuple[str, ...]] = ("grid",)

    @classmethod
    def split_sizes(cls) -> dict[Split, int | None]:
        return {s: len(ITEMS[s]) for s in Split}

    def small_world(self, split: Split, seed: int, *, project: str | None = None) -> SmallWorld:
        item = ITEMS[split][seed]  # an IndexError here would be a draw past the split's real size
        return SmallWorld(id=f"{GRID_ID}:{split.value}:{seed}", world=GRID_ID, family=self.family, project="grid",
                          split=split, seed=item, goal=f"task {item}", tools=["submit"])

    def make_world(self, small_world: SmallWorld) -> BaseWorld:
        raise NotImplementedError("the draw never builds a world")


registry.register(GRID_ID, GridFamily, replace=True)


def one_world(world: str, projects: tuple[str, ...] = ()) -> Suite:
    return Suite("one", (SuiteWorld(world, projects),), max_steps=5)


def test_train_draws_cover_the_whole_train_split() -> None:
    suite = one_world(GRID_ID)
    assert family(GRID_ID).split_sizes()[Split.train] == TRAIN_SIZE
    seen: Counter[int] = Counter()
    for round_ in range(1, 1001):
        drawn = draw(suite, Split.train, 4, seed=7, round_=round_)
        assert len({sw.id for sw in drawn}) == 4  # without replacement within a round
        seen.update(sw.seed for sw in drawn)
    covered = len(set(seen) & set(ITEMS[Split.train]))
    assert covered >= 0.9 * TRAIN_SIZE, covered
    assert max(seen.values()) - min(seen.values()) <= 1  # a walk through the split, not a lottery
    # One draw a round, too: the first 1,000 rounds see 1,000 different tasks.
    assert len({draw(suite, Split.train, 1, seed=3, round_=r)[0].id for r in range(1, 1001)}) == TRAIN_SIZE


def test_train_draws_never_hold_a_dev_or_test_task() -> None:
    held_out = set(ITEMS[Split.dev]) | set(ITEMS[Split.test])
    grid = [sw for r in range(1, 301) for sw in draw(one_world(GRID_ID), Split.train, 8, seed=1, round_=r)]
    assert all(sw.split is Split.train and split_of(f"grid:{sw.seed}") is Split.train for sw in grid)
    assert not {sw.seed for sw in grid} & held_out
    # A real world with its own split assignment: sql's database seeds per split.
    shop = [sw for r in range(1, 51) for sw in draw(one_world("sql/shop-v1"), Split.train, 8, seed=2, round_=r)]
    forbidden = set(split_seeds("shop", Split.dev)) | set(split_seeds("shop", Split.test))
    assert len({sw.seed for sw in shop}) == len(shop) and not {sw.seed for sw in shop} & forbidden
    # Past the old 97-task fallback: the draws reach deep into sql's ~8,000 train tasks.
    assert max(int(sw.id.rsplit(":", 1)[1]) for sw in shop) > 1000


def test_the_draw_is_a_pure_function_of_suite_seed_round_and_split() -> None:
    suite = load_suite("toy")
    first = draw(suite, Split.train, 6, seed=5, round_=2)
    assert [sw.id for sw in first] == [sw.id for sw in draw(suite, Split.train, 6, seed=5, round_=2)]
    assert [sw.id for sw in first] != [sw.id for sw in draw(suite, Split.train, 6, seed=6, round_=2)]
    assert [sw.id for sw in first] != [sw.id for sw in draw(suite, Split.train, 6, seed=5, round_=3)]
    dev = [sw.id for sw in draw(suite, Split.dev, 6, seed=5, round_=0)]
    assert dev == [sw.id for sw in draw(suite, Split.dev, 6, seed=9, round_=4)]  # the same held-out tasks always
    with pytest.raises(InvalidInputError, match="release evaluation"):
        draw(suite, Split.test, 2, seed=0, round_=0)


def test_held_out_sets_are_stratified_over_worlds_and_projects() -> None:
    suite = Suite("mixed", (SuiteWorld("toy/keys-v1"), SuiteWorld(GRID_ID), SuiteWorld("sql/shop-v1")), max_steps=5)
    dev = draw(suite, Split.dev, 12, seed=0, round_=0)
    assert Counter(sw.world for sw in dev) == {"toy/keys-v1": 4, GRID_ID: 4, "sql/shop-v1": 4}
    assert Counter(sw.project for sw in dev if sw.world == "toy/keys-v1") == {"manor": 2, "cellar": 2}
    assert all(sw.split is Split.dev for sw in dev) and len({sw.id for sw in dev}) == 12
    only_cellar = draw(one_world("toy/keys-v1", ("cellar",)), Split.train, 10, seed=0, round_=1)
    assert {sw.project for sw in only_cellar} == {"cellar"}


def test_the_starter_suite_takes_one_world_of_each_family_first() -> None:
    starter = load_suite("starter")
    families = Counter(family(w).family for w in starter.worlds)
    assert all(n >= 2 for n in families.values())  # two projects per family: skills can be mined at all
    first = draw(starter, Split.dev, 4, seed=0, round_=0)  # the quick run's held-out set
    assert sorted(sw.family for sw in first) == sorted(families)
    replay = draw_for_skill(starter, "sql", 4, seed=0, round_=1)
    assert {sw.world for sw in replay} == {"sql/shop-v1", "sql/library-v1"}
    assert all(sw.limits.max_steps == starter.max_steps for sw in replay)
    assert draw_for_skill(starter, "toy", 4, seed=0, round_=1) == []


def test_the_monitors_watch_set_is_train_stratified_like_the_held_out_set_and_fixed() -> None:
    suite = Suite("mixed", (SuiteWorld("toy/keys-v1"), SuiteWorld(GRID_ID), SuiteWorld("sql/shop-v1")), max_steps=5)
    watch = draw_watch(suite, 12, seed=0)
    assert all(sw.split is Split.train for sw in watch) and len({sw.id for sw in watch}) == 12
    assert Counter(sw.world for sw in watch) == {"toy/keys-v1": 4, GRID_ID: 4, "sql/shop-v1": 4}
    assert Counter(sw.project for sw in watch if sw.world == "toy/keys-v1") == {"manor": 2, "cellar": 2}
    assert [sw.id for sw in watch] == [sw.id for sw in draw_watch(suite, 12, seed=0)]  # the same every round
    assert [sw.id for sw in watch] != [sw.id for sw in draw_watch(suite, 12, seed=1)]
    held_out = {sw.id for sw in draw(suite, Split.dev, 12, seed=0, round_=0)}
    assert not held_out & {sw.id for sw in watch}
