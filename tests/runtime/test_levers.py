"""The levers in the real harness: recorded interventions, masks that hold, the last-step schema, resume."""

from __future__ import annotations

import contextlib

from pydantic import JsonValue

from lle.config import Levers
from lle.core import ActionRequest, Context, LLMCall, Split
from lle.policies import ScriptedPolicy
from lle.runtime.harness import Episode, Submitted, run_episode
from lle.runtime.recorder import StoreRecorder
from lle.runtime.resume import resume
from lle.store import Store
from lle.store.episodes import get_episode, is_finished
from lle.worlds.base import open_family, open_world
from lle.worlds.games.twx import GAMES, TwxWorld

LEVERS = Levers(stuck="mask", submit_discipline=True, working_memory=True)


def interventions(step: object) -> list[dict[str, JsonValue]]:
    return [fb.content for fb in step.feedback if fb.kind == "intervention"]  # type: ignore[attr-defined, misc]


class Repeater:
    """Qwen's loop: calculate the goal's expression forever, unless the schema leaves only submit.

    Like a model decoding under the grammar, it can only pick what the context's schema offers.
    """

    def __init__(self) -> None:
        self.seen: list[Context] = []

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        self.seen.append(context)
        names = [b["properties"]["tool"]["const"] for b in context.action_schema["anyOf"]]  # type: ignore[index, union-attr]
        if "calculate" in names:
            return ActionRequest(tool="calculate", args={"expression": "2 + 3"}), None
        return ActionRequest(tool="submit", args={"answer": "5"}), None


def math_world():  # type: ignore[no-untyped-def]
    return open_family("math/arith-v1").small_world(Split.train, 0)


def test_without_levers_the_loop_runs_out_of_steps() -> None:
    exp = run_episode(math_world(), Repeater(), limits=math_world().limits.model_copy(update={"max_steps": 6}))
    assert [s.request.tool for s in exp.steps] == ["calculate"] * 6
    assert all(interventions(s) == [] for s in exp.steps)


def test_with_levers_the_loop_is_noted_masked_and_submitted(store: Store) -> None:
    sw = math_world()
    policy = Repeater()
    episode = Episode(sw, policy, limits=sw.limits.model_copy(update={"max_steps": 6}), levers=LEVERS,
                      recorder=StoreRecorder(store))
    exp = episode.run()
    tools = [s.request.tool for s in exp.steps]
    assert tools == ["calculate", "calculate", "calculate", "submit"]  # noted at 3, masked at 4
    assert isinstance(episode.stop, Submitted)
    stuck = [i for s in exp.steps for i in interventions(s) if i["lever"] == "stuck"]
    assert [i["masked"] for i in stuck] == [[], ["calculate"]]
    assert "you already ran calculate" in policy.seen[2].messages[-1].content
    assert "Budget: this is step 3 of 6" in policy.seen[2].messages[-1].content
    assert "## What you have done so far" in policy.seen[1].messages[-1].content
    assert get_episode(store, exp.id).levers == LEVERS
    assert [interventions(s) for s in store.steps_of(exp.id)] == [interventions(s) for s in exp.steps]


def test_the_last_step_offers_only_submit() -> None:
    sw = math_world()
    policy = Repeater()
    levers = Levers(submit_discipline=True)
    exp = run_episode(sw, policy, limits=sw.limits.model_copy(update={"max_steps": 3}), levers=levers)
    assert [s.request.tool for s in exp.steps] == ["calculate", "calculate", "submit"]
    assert interventions(exp.steps[-1]) == [{"lever": "submit_only", "tools": ["submit"]}]


def test_a_masked_tool_asked_for_anyway_is_denied_not_run() -> None:
    sw = math_world()
    script = [ActionRequest(tool="calculate", args={"expression": "1 + 1"})] * 4
    exp = run_episode(sw, ScriptedPolicy(script), limits=sw.limits.model_copy(update={"max_steps": 4}),
                      levers=Levers(stuck="mask"))
    last = exp.steps[-1]  # the second detection masked calculate; a policy that ignores the schema is denied
    assert not last.executed.allowed and "masked by the runtime" in str(last.executed.denied_reason)


def test_resume_rederives_the_levers_and_matches_an_unkilled_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sw = math_world()
    limits = sw.limits.model_copy(update={"max_steps": 6})
    with Store(tmp_path / "a.db") as full_store:
        full = Episode(sw, Repeater(), limits=limits, levers=LEVERS, recorder=StoreRecorder(full_store)).run()
    with Store(tmp_path / "b.db") as store:
        killed = Episode(sw, Repeater(), limits=limits, levers=LEVERS, recorder=StoreRecorder(store))

        class Kill(Exception):
            pass

        commits = {"n": 0}

        def on_commit(_id: str, _step: object) -> None:
            commits["n"] += 1
            if commits["n"] == 3:
                raise Kill

        killed.recorder = StoreRecorder(store, on_commit=on_commit)
        with contextlib.suppress(Kill):
            killed.run()
        assert len(store.steps_of(killed.id)) == 3 and not is_finished(store, killed.id)
        again = resume(store, killed.id, policy=Repeater())
    strip = [(s.request.tool, interventions(s)) for s in full.steps]
    assert [(s.request.tool, interventions(s)) for s in again.steps] == strip


def test_admissible_commands_become_an_enum_in_a_text_game() -> None:
    game = GAMES["coin"]
    sw = open_family(game.world_id).small_world(Split.train, 0)
    seen: list[Context] = []

    def look(context: Context) -> ActionRequest:
        seen.append(context)
        return ActionRequest(tool="act", args={"command": "look around"})

    world = open_world(sw)
    assert isinstance(world, TwxWorld)
    exp = run_episode(sw, ScriptedPolicy(look), world=world, limits=sw.limits.model_copy(update={"max_steps": 2}),
                      levers=Levers(admissible_masks=True))
    branch = next(b for b in seen[0].action_schema["anyOf"] if b["properties"]["tool"]["const"] == "act")  # type: ignore[index, union-attr]
    enum = branch["properties"]["args"]["properties"]["command"]["enum"]  # type: ignore[index]
    assert "look around" in enum and len(enum) > 1
    assert interventions(exp.steps[0])[0]["lever"] == "admissible_masks"


def test_a_sql_table_name_is_decoded_from_the_tables_the_world_showed() -> None:
    sw = open_family("sql/shop-v1").small_world(Split.train, 0, level=0)
    seen: list[Context] = []

    def describe(context: Context) -> ActionRequest:
        seen.append(context)
        branch = next(b for b in context.action_schema["anyOf"]  # type: ignore[union-attr]
                      if b["properties"]["tool"]["const"] == "describe_table")  # type: ignore[index]
        first = branch["properties"]["args"]["properties"]["table"]["enum"][0]  # type: ignore[index]
        return ActionRequest(tool="describe_table", args={"table": first})

    exp = run_episode(sw, ScriptedPolicy(describe), limits=sw.limits.model_copy(update={"max_steps": 1}),
                      levers=Levers(admissible_masks=True))
    tables = exp.steps[0].effect.observation
    branch = next(b for b in seen[0].action_schema["anyOf"]  # type: ignore[union-attr]
                  if b["properties"]["tool"]["const"] == "describe_table")  # type: ignore[index]
    enum = branch["properties"]["args"]["properties"]["table"]["enum"]  # type: ignore[index]
    world = open_world(sw)
    first_observation, _ = world.reset(seed=sw.seed)
    world.close()
    shown = first_observation.split("Tables: ", 1)[1].split(".", 1)[0].split(", ")
    assert enum == shown and "CREATE TABLE" in tables  # exactly the tables the first observation named
    assert interventions(exp.steps[0])[0]["lever"] == "admissible_masks"
    plain: list[Context] = []
    run_episode(sw, ScriptedPolicy(lambda c: plain.append(c) or ActionRequest(tool="list_tables", args={})),
                limits=sw.limits.model_copy(update={"max_steps": 1}))
    assert "enum" not in str(plain[0].action_schema)  # without the lever the schema is the world's own


def test_experiences_show_prints_each_steps_interventions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    sw = math_world()
    with Store(tmp_path / "lle.db") as store:
        exp = Episode(sw, Repeater(), limits=sw.limits.model_copy(update={"max_steps": 6}), levers=LEVERS,
                      recorder=StoreRecorder(store)).run()
        store.append_experiences([exp]) if not is_finished(store, exp.id) else None
    out = subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(tmp_path), "experiences", "show",
                          exp.id], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    out = out.stdout  # type: ignore[assignment]
    assert "runtime    stuck (repeat), told the model: you already ran calculate" in out
    assert "masked calculate for this step" in out and "working memory shown" in out


def test_thought_and_expect_are_capped_in_the_decoding_schema() -> None:
    from lle.actions import action_schema, cap_free_text
    from lle.core import ToolSpec

    schema = action_schema([ToolSpec(name="submit", description="Answer.")])
    capped = cap_free_text(schema, thought_chars=40, expect_chars=24)
    props = capped["anyOf"][0]["properties"]
    assert props["thought"]["maxLength"] == 40 and props["expect"]["maxLength"] == 24
    assert cap_free_text(schema, thought_chars=None, expect_chars=None) == schema
    sw = math_world()
    policy = Repeater()
    run_episode(sw, policy, limits=sw.limits.model_copy(update={"max_steps": 1}),
                levers=Levers(thought_chars=40, expect_chars=24))
    branch = policy.seen[0].action_schema["anyOf"][0]  # type: ignore[index]
    assert branch["properties"]["thought"]["maxLength"] == 40  # type: ignore[index]


def test_a_copied_placeholder_is_flagged_and_predicts_nothing() -> None:
    from lle.actions import EXPECT_SLOT, THOUGHT_SLOT, copies_placeholder
    from lle.evidence.calibration import calibration

    assert copies_placeholder(THOUGHT_SLOT) and copies_placeholder("What you predict it will return.")
    assert copies_placeholder("Why this tool now") and not copies_placeholder("the sum of the two numbers")
    copying = ScriptedPolicy([ActionRequest(tool="calculate", args={"expression": "2 + 3"},
                                            thought="Why this tool now", expect=EXPECT_SLOT)])
    sw = math_world()
    exp = run_episode(sw, copying, limits=sw.limits.model_copy(update={"max_steps": 1}))
    flags = [fb.content for fb in exp.steps[0].feedback if fb.kind == "placeholder_copy"]
    assert flags == [{"fields": ["thought", "expect"]}]
    assert calibration(exp.steps[0]) is None
