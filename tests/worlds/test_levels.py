"""Difficulty levels: every level is solvable through the harness, ordered, deterministic, split-disjoint,
and the unlevelled tasks are exactly as they were."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

import pytest

from lle.cli.worlds import describe, summary
from lle.core import ActionRequest, Context, Experience, SmallWorld, Split
from lle.errors import WorldError
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.worlds.base import TaskFamily, check_family, open_family, open_world
from lle.worlds.games.arena import GAMES, all_items
from lle.worlds.math import reference_actions as math_reference
from lle.worlds.math.levels import level_entry
from lle.worlds.sql.levels import level_task
from lle.worlds.sql.projects import PROJECTS
from lle.worlds.sql.world import reference_actions as sql_reference
from lle.worlds.toy import oracle_actions
from lle.worlds.toy.layout import make_layout

LEVELLED = {"math/arith-v1": 4, "math/equations-v1": 3, "games/guess-number-v1": 3, "games/hanoi-v1": 3,
            "games/mastermind-v1": 3, "toy/keys-v1": 4, "sql/shop-v1": 4,
            "math/gsm-v1": 2}
CASES = [(w, lv) for w, n in LEVELLED.items() for lv in range(n)]


def solver(small_world: SmallWorld) -> ScriptedPolicy:
    """The world's own reference solution for `small_world`."""
    if small_world.family == "math":
        return ScriptedPolicy(math_reference(small_world))
    if small_world.family == "sql":
        return ScriptedPolicy(sql_reference(small_world))
    if small_world.family == "toy":
        return ScriptedPolicy(oracle_actions(small_world))
    game = GAMES[small_world.world]

    def act(context: Context) -> ActionRequest:
        return game.solve(context.messages[-1].content)

    return ScriptedPolicy(act)


NOTHING: dict[str, Callable[[], ActionRequest]] = {
    "math": lambda: ActionRequest(tool="submit", args={"answer": ""}),
    "sql": lambda: ActionRequest(tool="submit", args={"sql": "SELECT 1"}),
}


def reward(exp: Experience) -> float:
    content = next(f.content for f in exp.steps[-1].feedback if f.kind == "reward")
    assert isinstance(content, dict) and isinstance(content["reward"], float)
    return content["reward"]


def seeds_of(family: TaskFamily, split: Split, level: int, most: int) -> list[int]:
    """Up to `most` seeds that exist in `split` at `level` (the smallest levels hold one dev/test task)."""
    found = []
    for seed in range(most):
        try:
            family.small_world(split, seed, level=level)
        except WorldError:
            break
        found.append(seed)
    return found


@pytest.mark.parametrize(("world_id", "level"), CASES)
def test_check_family_passes_at_every_level(world_id: str, level: int) -> None:
    family = open_family(world_id)
    seeds = tuple(seeds_of(family, Split.test, level, 2)) if world_id == "games/hanoi-v1" else (0, 1, 2)
    if world_id == "games/mastermind-v1" or (world_id, level) == ("games/guess-number-v1", 2):
        seeds = (0,)  # one variant per level: only the hidden answer differs, and no first observation shows it
    report = check_family(family, seeds=seeds, level=level)
    assert {"family-metadata", "family-determinism", "family-splits"} <= set(report.passed)


@pytest.mark.parametrize(("world_id", "level"), CASES)
def test_the_reference_solves_each_level_through_the_harness_and_doing_nothing_scores_zero(
        world_id: str, level: int) -> None:
    family = open_family(world_id)
    for split in Split:
        for seed in seeds_of(family, split, level, 2 if split is Split.train else 1):
            sw = family.small_world(split, seed, level=level)
            assert sw.level == level and f":L{level}:" in sw.id
            assert reward(run_episode(sw, solver(sw))) == 1.0, sw.id
            nothing = NOTHING.get(sw.family, lambda: ActionRequest(tool="submit"))()
            assert reward(run_episode(sw, ScriptedPolicy([nothing]))) == 0.0, sw.id


def _train(world_id: str, level: int, n: int = 12) -> list[SmallWorld]:
    family = open_family(world_id)
    return [family.small_world(Split.train, s, level=level) for s in seeds_of(family, Split.train, level, n)]


def _arith_size(sw: SmallWorld) -> tuple[int, int]:
    expression = str(level_entry(sw.project, sw.level, sw.seed)["metadata"]["expression"])
    return len(re.findall(r"[-+*/]", expression.replace("- ", "-").lstrip("-")) or "x"), \
        max(len(n) for n in re.findall(r"\d+", expression))


def test_levels_are_really_ordered() -> None:
    # math/arith: digits grow from level 0 to 1, operations from 1 to 2 and more.
    sizes = [[_arith_size(sw) for sw in _train("math/arith-v1", lv)] for lv in range(4)]
    assert max(d for _, d in sizes[0]) == 1 and min(d for _, d in sizes[1]) == 2
    assert all(ops == 1 for ops, _ in sizes[0] + sizes[1]) and max(ops for ops, _ in sizes[2]) == 2
    assert max(ops for ops, _ in sizes[3]) > 2 and max(d for _, d in sizes[3]) > 2
    steps = [{level_entry(sw.project, sw.level, sw.seed)["metadata"].get("steps") for sw in _train(
        "math/equations-v1", lv)} for lv in range(2)]
    assert steps == [{1}, {2}]
    # games: the range widens, the disks and the code length grow.
    widths = [{all_items("games/guess-number-v1", lv)[sw.seed].data[1] - all_items(
        "games/guess-number-v1", lv)[sw.seed].data[0] + 1 for sw in _train("games/guess-number-v1", lv)}
        for lv in range(3)]
    assert widths == [{10}, {30}, {100}]
    disks = [{len(all_items("games/hanoi-v1", lv)[sw.seed].data) for sw in _train("games/hanoi-v1", lv)}
             for lv in range(3)]
    assert disks == [{2}, {3}, {4}]
    lengths = [{len(all_items("games/mastermind-v1", lv)[sw.seed].data) - 1 for sw in _train(
        "games/mastermind-v1", lv)} for lv in range(3)]
    assert lengths == [{2}, {3}, {4}]
    # toy/keys: rooms 1, 2, 3, then 3 to 5; the shortest solution never gets shorter on average.
    rooms = [{len(make_layout(sw.project, sw.seed, level=lv).rooms) for sw in _train("toy/keys-v1", lv, 30)}
             for lv in range(4)]
    assert rooms[:3] == [{1}, {2}, {3}] and rooms[3] <= {3, 4, 5} and max(rooms[3]) > 3
    # sql/shop: one table, a join, an aggregate, then the quirk questions (the naive query is wrong there).
    for lv in range(4):
        for sw in _train("sql/shop-v1", lv, 6):
            question = level_task(PROJECTS["shop"], lv, sw.seed).question
            if lv < 3:
                assert question.template.startswith(f"L{lv}:") and question.naive_sql == question.gold_sql
                assert (" JOIN " in question.gold_sql) == (lv == 1) or lv == 2
            else:
                assert question.naive_sql != question.gold_sql


@pytest.mark.parametrize("world_id", sorted(LEVELLED))
def test_same_inputs_give_the_same_task_and_open_world_rebuilds_it(world_id: str) -> None:
    family = open_family(world_id)
    for level in range(LEVELLED[world_id]):
        sw = family.small_world(Split.train, 1, level=level)
        assert sw == family.small_world(Split.train, 1, level=level)
        stored = SmallWorld.model_validate_json(sw.model_dump_json())  # as a store keeps it
        assert stored.level == level
        first, again = family.make_world(sw), open_world(stored)
        try:
            assert first.reset(seed=sw.seed)[0] == again.reset(seed=stored.seed)[0]
        finally:
            first.close()
            again.close()


def task_key(sw: SmallWorld) -> str:
    """What makes a task the task: the question, the layout, the hidden item; for sql, the database."""
    if sw.family == "toy":
        return repr(make_layout(sw.project, sw.seed, level=sw.level))
    if sw.family == "games":
        return all_items(sw.world, sw.level)[sw.seed].key
    return sw.goal if sw.family == "math" else f"database {sw.seed}"


@pytest.mark.parametrize("world_id", sorted(LEVELLED))
def test_train_dev_and_test_of_a_level_are_disjoint(world_id: str) -> None:
    family = open_family(world_id)
    for level in range(LEVELLED[world_id]):
        by_split = {split: [family.small_world(split, s, level=level)
                            for s in seeds_of(family, split, level, 40 if split is Split.train else 8)]
                    for split in Split}
        assert all(by_split.values())
        for a in Split:
            for b in Split:
                if a is b:
                    continue
                assert not {sw.seed for sw in by_split[a]} & {sw.seed for sw in by_split[b]}
                assert not {task_key(sw) for sw in by_split[a]} & {task_key(sw) for sw in by_split[b]}
        ids = [sw.id for ws in by_split.values() for sw in ws]
        assert len(ids) == len(set(ids))


PINNED = [  # unlevelled small worlds, as they were before levels existed: (id, world seed, sha256 of the goal)
    ("math/arith-v1", Split.train, 0, "math/arith-v1:train:0", 1, "611774452e1b30b9"),
    ("math/equations-v1", Split.dev, 2, "math/equations-v1:dev:2", 28, "55dfae59997339bd"),
    ("games/guess-number-v1", Split.train, 0, "games/guess-number-v1:train:0", 85, "a2b6e9822029b261"),
    ("games/hanoi-v1", Split.dev, 1, "games/hanoi-v1:dev:1", 81, "2793c45565e58fc3"),
    ("games/mastermind-v1", Split.test, 0, "games/mastermind-v1:test:0", 126, "a14b853aa075c3bb"),
    ("toy/keys-v1", Split.train, 3, "toy/keys-v1:cellar:train:3", 9, "7c5dca1cb3bb11c0"),
    ("sql/shop-v1", Split.test, 1, "sql/shop-v1:test:1", 14, "665b158ec15bb5e0"),
]


@pytest.mark.parametrize(("world_id", "split", "seed", "id_", "world_seed", "goal_hash"), PINNED)
def test_unlevelled_tasks_are_unchanged(world_id: str, split: Split, seed: int, id_: str, world_seed: int,
                                        goal_hash: str) -> None:
    sw = open_family(world_id).small_world(split, seed)
    assert (sw.id, sw.seed, sw.level) == (id_, world_seed, None)
    assert hashlib.sha256(sw.goal.encode()).hexdigest()[:16] == goal_hash
    assert "level" not in sw.model_dump(mode="json")  # old records and their hashes stay as they were


def test_levels_are_refused_where_they_do_not_exist_with_the_fix() -> None:
    with pytest.raises(WorldError, match=r"code/humaneval-v1 has no difficulty levels; leave level unset"):
        open_family("code/humaneval-v1").small_world(Split.train, 0, level=0)
    with pytest.raises(WorldError, match=r"toy/keys-v1 has no level 4; use 0..3"):
        open_family("toy/keys-v1").small_world(Split.train, 0, level=4)
    with pytest.raises(WorldError, match=r"has 1 dev tasks at level 0; use a seed in 0-0"):
        open_family("games/hanoi-v1").small_world(Split.dev, 1, level=0)


def test_the_metadata_and_the_cli_list_the_levels_with_their_meanings() -> None:
    for world_id, count in LEVELLED.items():
        info = open_family(world_id).info()
        assert len(info.levels) == count and all(info.levels)
    assert summary(open_family("code/humaneval-v1"))["level_count"] == 0
    shown = describe("games/hanoi-v1")
    assert shown["level_count"] == 3 and shown["levels"][0].startswith("2 disks")
