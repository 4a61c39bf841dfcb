"""TextArena worlds: conformance, reference solvers through the harness, anchors, splits, no leaks."""

from __future__ import annotations

from itertools import permutations

import pytest
from textarena.envs.registration import ENV_REGISTRY

from lle import registry
from lle.core import ActionRequest, Context, Experience, Split, canonical_json
from lle.errors import WorldError
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.worlds import replay, split_of
from lle.worlds.base import check_family, check_world
from lle.worlds.games.arena import (
    GAMES,
    ArenaFamily,
    ArenaWorld,
    Hanoi,
    all_items,
    hanoi_plan,
    split_items,
)
from lle.worlds.games.arena_envs import BASED_ON

IDS = sorted(GAMES)


def family(world_id: str) -> ArenaFamily:
    made = registry.make(world_id)
    assert isinstance(made, ArenaFamily)
    return made


def solver(world_id: str) -> ScriptedPolicy:
    game = GAMES[world_id]

    def act(context: Context) -> ActionRequest:
        return game.solve(context.messages[-1].content)  # the latest observation only

    return ScriptedPolicy(act, name=f"{world_id}-solver")


def reward_info(exp: Experience) -> dict[str, object]:
    content = next(f.content for f in exp.steps[-1].feedback if f.kind == "reward")
    assert isinstance(content, dict)
    return content


def test_the_games_are_textarena_single_player_envs_from_its_registry() -> None:
    for env_id, cls in BASED_ON.items():
        entry = ENV_REGISTRY[env_id].entry_point
        assert entry == f"{cls.__module__}:{cls.__name__}"
    assert {g.env_id for g in GAMES.values()} == set(BASED_ON)


@pytest.mark.parametrize("world_id", IDS)
def test_every_family_passes_check_family_and_check_world(world_id: str) -> None:
    fam = family(world_id)
    report = check_family(fam)
    assert {"family-splits", "family-variety", f"world:{fam.game.project}"} <= set(report.passed)
    sw = fam.small_world(Split.dev, 3)
    assert "determinism" in check_world(lambda: fam.make_world(sw), seeds=(sw.seed,)).passed


@pytest.mark.parametrize("world_id", IDS)
def test_the_reference_solver_wins_through_the_harness_and_replay_agrees(world_id: str) -> None:
    fam = family(world_id)
    small = [fam.small_world(Split.train, s) for s in range(12)] + [fam.small_world(Split.dev, s) for s in range(4)] \
        + [fam.small_world(Split.test, s) for s in range(4)]
    for sw in small:
        exp = run_episode(sw, solver(world_id))
        signal = reward_info(exp)
        assert signal["reward"] == 1.0 and signal["terminated"] is True, (sw.id, exp.steps[-1].effect.observation)
        info = signal["info"]
        assert isinstance(info, dict) and info["success"] is True and info["ended_by"] == "game"
        assert "Solved." in exp.steps[-1].effect.observation
        # The anchor again, on a fresh game fed the executed actions: what counts is the rebuilt state.
        executed = [ActionRequest(tool=s.executed.tool, args=s.executed.args) for s in exp.steps]
        assert replay(sw, executed).success
        assert not replay(sw, executed[:-1]).success


@pytest.mark.parametrize("world_id", IDS)
def test_doing_nothing_scores_zero(world_id: str) -> None:
    fam = family(world_id)
    for seed in range(5):
        sw = fam.small_world(Split.train, seed)
        exp = run_episode(sw, ScriptedPolicy([ActionRequest(tool="submit")]))
        signal = reward_info(exp)
        assert signal["reward"] == 0.0 and signal["terminated"] is True
        info = signal["info"]
        assert isinstance(info, dict) and info["success"] is False and info["ended_by"] == "submit"
        assert not replay(sw, []).success


def test_a_lost_game_scores_zero() -> None:
    # Hanoi: one legal move, then two illegal ones in a row, which end the game (TextArena allows one error).
    fam = family("games/hanoi-v1")
    sw = fam.small_world(Split.train, 1)
    world = fam.make_world(sw)
    world.reset(seed=sw.seed)
    source, target = hanoi_plan(Hanoi.towers(all_items(sw.world)[sw.seed]))[0]
    assert world.step(ActionRequest(tool="move", args={"source": source, "target": target})).reward == 0.0
    towers = world.env.state.game_state["towers"]
    illegal = next((a, b) for a in "ABC" for b in "ABC"
                   if not towers[a] or (towers[b] and towers[b][-1] < towers[a][-1]))
    first = world.step(ActionRequest(tool="move", args={"source": illegal[0], "target": illegal[1]}))
    assert not first.terminated and "invalid move" in first.observation
    last = world.step(ActionRequest(tool="move", args={"source": illegal[0], "target": illegal[1]}))
    assert last.terminated and last.reward == 0.0 and "Not solved." in last.observation
    assert world.env.state.done and not world.verdict().success
    assert last.info["success"] is False and last.info["ended_by"] == "game"
    world.close()


def test_guess_number_observations_do_not_depend_on_the_hidden_number() -> None:
    # Guessing 1..10 against any target above 10 gets "higher" ten times and hits the turn limit. If any
    # observation, info or state carried the target (TextArena's own turn-limit message does), they would differ.
    world_id = "games/guess-number-v1"
    items = [i for i, it in enumerate(all_items(world_id)) if it.data[1] == 100 and it.data[2] > 10]
    script = [ActionRequest(tool="guess", args={"number": n}) for n in range(1, 11)]
    seen: set[str] = set()
    for index in items[:40]:
        world = ArenaWorld(GAMES[world_id], seed=index)
        trace = [world.reset(seed=index)[0]]
        for action in script:
            step = world.step(action)
            trace.append(canonical_json([step.observation, step.info, world.state()]))
        assert step.terminated and step.reward == 0.0 and step.info["ended_by"] == "turn-limit"
        seen.add("\n".join(trace))
    assert len(seen) == 1


def test_mastermind_never_shows_the_code() -> None:
    world_id = "games/mastermind-v1"
    openings: dict[str, set[str]] = {}
    for index, item in enumerate(all_items(world_id)[:80]):
        code = list(item.data[1:])
        world = ArenaWorld(GAMES[world_id], seed=index)
        obs, info = world.reset(seed=index)
        # The opening is the same for every code of a variant, so it cannot carry the code.
        openings.setdefault(item.group, set()).add(obs + canonical_json(info))
        texts = []
        wrong = [list(c) for c in permutations(range(1, item.data[0] + 1), len(code)) if list(c) != code][:12]
        for guess in wrong:
            step = world.step(ActionRequest(tool="guess", args={"code": guess}))
            texts += [step.observation, canonical_json(step.info), canonical_json(world.state())]
            if step.terminated:
                break
        assert step.terminated and step.reward == 0.0 and step.info["ended_by"] == "turn-limit"
        blob = "\n".join(texts)
        for shown in (" ".join(map(str, code)), "".join(map(str, code)), canonical_json(code), str(code)):
            assert shown not in blob, (item.key, shown)
    assert all(len(v) == 1 for v in openings.values()) and len(openings) == 2


def test_hanoi_reference_plan_is_never_shown_and_is_optimal_from_the_classic_start() -> None:
    world_id = "games/hanoi-v1"
    for index, item in enumerate(all_items(world_id)):
        plan = hanoi_plan(Hanoi.towers(item))
        assert 0 < len(plan) <= 2 ** len(item.data) - 1
        obs, info = ArenaWorld(GAMES[world_id], seed=index).reset(seed=index)
        rendered = " ".join(f"[{a} {b}]" for a, b in plan)
        assert (rendered not in obs and canonical_json(plan) not in obs) or len(plan) == 1
        assert canonical_json(plan) not in canonical_json(info)
    assert len(hanoi_plan({"A": [4, 3, 2, 1], "B": [], "C": []})) == 15


def test_splits_are_disjoint_complete_and_stable() -> None:
    # Computed once; a change of the hash, the salt or the item lists shows up here.
    expected = {
        "games/guess-number-v1": ({"train": 132, "dev": 19, "test": 19}, ["1-100:70", "1-100:22", "1-100:57"]),
        "games/hanoi-v1": ({"train": 87, "dev": 10, "test": 9}, ["3:BAB", "3:ABB", "3:ACB"]),
        "games/mastermind-v1": ({"train": 334, "dev": 45, "test": 41}, ["3of5:352", "3of5:253", "3of5:453"]),
    }
    for world_id, (sizes, firsts) in expected.items():
        fam = family(world_id)
        assert {k.value: v for k, v in fam.split_sizes().items()} == sizes
        assert [all_items(world_id)[fam.small_world(s, 0).seed].key for s in Split] == firsts
        keys = {s: {all_items(world_id)[i].key for i in split_items(world_id, s)} for s in Split}
        assert not (keys[Split.train] & keys[Split.dev] or keys[Split.train] & keys[Split.test]
                    or keys[Split.dev] & keys[Split.test])
        assert set().union(*keys.values()) == {it.key for it in all_items(world_id)}
        assert all(split_of(f"{world_id}:{k}") == s for s, ks in keys.items() for k in ks)
    assert [split_of(k) for k in ("a", "b", "c", "d", "e", "f")] == [Split.train] * 5 + [Split.dev]


def test_seeds_past_a_split_and_foreign_projects_are_refused_with_the_fix() -> None:
    fam = family("games/hanoi-v1")
    with pytest.raises(WorldError, match="has 10 dev tasks; use a seed in 0-9"):
        fam.small_world(Split.dev, 10)
    with pytest.raises(WorldError, match="no project 'cellar'"):
        fam.small_world(Split.train, 0, project="cellar")
    with pytest.raises(WorldError, match="items 0-"):
        ArenaWorld(GAMES["games/hanoi-v1"], seed=0).reset(seed=10_000)


def test_textarenas_own_turn_limit_message_is_redacted() -> None:
    # Played on the game's env directly (the world ends a turn earlier): its message names the target.
    game = GAMES["games/guess-number-v1"]
    item = next(it for it in all_items(game.world_id) if it.data == (1, 100, 77))
    env = game.make_env(item)
    env.reset(num_players=1, seed=None)
    for n in range(1, 12):
        done, _ = env.step(f"[{n}]")
    reason = str(env.state.game_info[0]["reason"])
    assert done and "Target: 77" in reason
    assert "77" not in game.public_reason(reason) and "turn limit" in game.public_reason(reason)
