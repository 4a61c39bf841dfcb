"""TextWorldExpress worlds on the real simulator: folds, conformance, gold paths, anchors, the JVM's life."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import jsonschema
import pytest

from lle import registry
from lle.actions import action_schema
from lle.core import ActionRequest, Experience, Split, canonical_json
from lle.errors import WorldError
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.worlds import replay
from lle.worlds.base import check_family
from lle.worlds.games.twx import FOLD_BASE, GAMES, SEEDS_PER_FOLD, TwxFamily, TwxWorld, fold_of
from lle.worlds.games.twx_jvm import Simulator, running_pid

IDS = sorted(g.world_id for g in GAMES.values())


@pytest.fixture(scope="module", autouse=True)
def jvm() -> Iterator[Simulator]:
    """Holds the shared JVM open for the module, so worlds opened and closed by tests reuse it."""
    sim = Simulator()
    yield sim
    sim.close()
    assert running_pid() is None


def family(world_id: str) -> TwxFamily:
    made = registry.make(world_id)
    assert isinstance(made, TwxFamily)
    return made


def reward_info(exp: Experience) -> dict[str, object]:
    content = next(f.content for f in exp.steps[-1].feedback if f.kind == "reward")
    assert isinstance(content, dict)
    return content


def test_lle_folds_are_the_simulators_own_seed_lists(jvm: Simulator) -> None:
    jvm.load("coin", GAMES["coin"].params)
    seeds = jvm.seeds()
    for split, base in FOLD_BASE.items():
        assert seeds[split.value] == list(range(base, base + SEEDS_PER_FOLD))
    assert fold_of(10_999) == Split.dev and fold_of(20_000) == Split.test
    with pytest.raises(WorldError, match="in no fold"):
        fold_of(5000)
    fam = family("games/coin-v1")
    # Hard-coded: a change of the split layout shows up here.
    assert [fam.small_world(s, 7).seed for s in Split] == [7, 10_007, 20_007]
    assert fam.small_world(Split.test, 7).id == "games/coin-v1:test:7"
    with pytest.raises(WorldError, match="use a seed in 0-999"):
        fam.small_world(Split.train, 1000)


@pytest.mark.parametrize("world_id", IDS)
def test_every_family_passes_check_family(world_id: str) -> None:
    fam = family(world_id)
    report = check_family(fam)
    assert {"family-determinism", "family-splits", "family-variety", f"world:{fam.game.project}"} <= set(report.passed)
    assert report.steps_probed >= 2


@pytest.mark.parametrize("world_id", IDS)
def test_the_gold_path_wins_through_the_harness_and_replay_agrees(world_id: str) -> None:
    fam = family(world_id)
    for sw in [fam.small_world(Split.train, s) for s in range(3)] + [fam.small_world(Split.dev, 0),
                                                                       fam.small_world(Split.test, 0)]:
        world = fam.make_world(sw)
        world.reset(seed=sw.seed)
        gold = [ActionRequest(tool="act", args={"command": c}) for c in world.gold_actions()]
        exp = run_episode(sw, ScriptedPolicy(gold), world=world)  # the harness resets and closes it
        signal = reward_info(exp)
        assert signal["reward"] == 1.0 and signal["terminated"] is True, exp.steps[-1].effect.observation
        info = signal["info"]
        assert isinstance(info, dict) and info["success"] is True and info["anchor"] == "textworld-express:tasksuccess"
        assert len(exp.steps) == len(gold) <= sw.limits.max_steps
        assert any(c.target == "score" for s in exp.steps for c in s.effect.changes)
        assert replay(sw, gold).success and not replay(sw, gold[:-1]).success


@pytest.mark.parametrize("world_id", IDS)
def test_doing_nothing_scores_zero(world_id: str) -> None:
    fam = family(world_id)
    sw = fam.small_world(Split.train, 4)
    for script in ([ActionRequest(tool="submit")],
                   [ActionRequest(tool="act", args={"command": "look around"}), ActionRequest(tool="submit")]):
        signal = reward_info(run_episode(sw, ScriptedPolicy(script)))
        info = signal["info"]
        assert signal["reward"] == 0.0 and isinstance(info, dict) and info["success"] is False
        assert info["ended_by"] == "submit"


def test_no_observation_info_or_state_carries_the_gold_path() -> None:
    for game in GAMES.values():
        world = TwxWorld(game, seed=0)
        for seed in (*range(8), 10_000, 10_001, 20_000, 20_001):
            obs, info = world.reset(seed=seed)
            gold = world.gold_actions()
            texts = [obs, canonical_json(info), canonical_json(world.state())]
            for command in gold:
                step = world.step(ActionRequest(tool="act", args={"command": command}))
                texts += [step.observation, canonical_json(step.info), canonical_json(world.state())]
            assert step.terminated and step.reward == 1.0
            blob = "\n".join(texts)
            assert canonical_json(gold) not in blob and "gold" not in blob.lower()
            if len(gold) > 2:
                assert ", ".join(gold) not in blob and "\n".join(gold) not in blob
        world.close()


def test_valid_actions_constrain_the_schema_and_unknown_commands_are_answered() -> None:
    world = TwxWorld(GAMES["twc"], seed=0)
    obs, _ = world.reset(seed=3)
    valid = world.valid_actions()
    assert valid == sorted(valid) and "look around" in valid and f"Valid commands: {', '.join(valid)}." in obs
    schema = action_schema(world.tools_now())
    for command in valid:
        jsonschema.validate({"thought": "", "tool": "act", "args": {"command": command}, "expect": ""}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"thought": "", "tool": "act", "args": {"command": "fly away"}, "expect": ""}, schema)
    step = world.step(ActionRequest(tool="act", args={"command": "fly away"}))
    assert not step.terminated and "not sure what you mean" in step.observation
    world.step(ActionRequest(tool="submit"))
    with pytest.raises(WorldError, match="after the episode ended"):
        world.step(ActionRequest(tool="act", args={"command": "look around"}))
    world.close()
    world.close()  # closing twice is harmless


def test_worlds_share_one_jvm_and_keep_their_own_games(jvm: Simulator) -> None:
    pid = running_pid()
    a, b = TwxWorld(GAMES["coin"], seed=0), TwxWorld(GAMES["cooking"], seed=0)
    first_a = a.reset(seed=5)[0]
    b.reset(seed=6)
    assert running_pid() == pid  # no second JVM
    a.step(ActionRequest(tool="act", args={"command": "look around"}))
    b.step(ActionRequest(tool="act", args={"command": "take cookbook"}))
    assert a.reset(seed=5)[0] == first_a and "cookbook" in str(b.state()["inventory"])
    a.close()
    b.close()
    assert running_pid() == pid  # the module's fixture still holds it


def test_closing_the_last_world_leaves_no_java_process() -> None:
    # In a fresh interpreter: the JVM starts with the first world and is gone after the last close.
    script = (
        "import os\n"
        "from lle.worlds.games.twx import GAMES, TwxWorld\n"
        "from lle.worlds.games.twx_jvm import running_pid\n"
        "w = TwxWorld(GAMES['coin'], seed=0); w.reset(); pid = running_pid(); assert pid\n"
        "w.close(); assert running_pid() is None\n"
        "try:\n    os.kill(pid, 0); print('alive')\nexcept ProcessLookupError:\n    print('gone')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "gone"
