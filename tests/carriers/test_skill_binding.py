"""Slots the runtime fills, on real math worlds: a mined skill reads the goal's expression and the
calculator's result, so a model that only names the skill solves the task.

The supporting episodes are scripted (the expression a solver would write, then the answer), run through
the real harness and verifiers; mining, binding and expansion are the project's own.
"""

from __future__ import annotations

from collections.abc import Sequence

from lle.carriers.skills import Skill, SkillLibrary
from lle.context import binding as skill_binding
from lle.context.binding import SlotBinding
from lle.core import ActionRequest, ActionStatus, Experience, Outcome, SmallWorld, Split
from lle.evidence import assess_experience
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.math import ArithFamily, EquationsFamily
from lle.worlds.math.world import reference_actions

ARITH, EQUATIONS = ArithFamily(), EquationsFamily()


def solving_script(sw: SmallWorld) -> list[ActionRequest]:
    """calculate, then submit what it returned: arithmetic computes the goal's expression; an equation's
    solver writes an expression of its own (here the answer times one)."""
    plan = reference_actions(sw)
    answer = str(plan[-1].args["answer"])
    expression = plan[0].args["expression"] if len(plan) == 2 else f"{answer} * 1"
    return [ActionRequest(tool="calculate", args={"expression": expression}),
            ActionRequest(tool="submit", args={"answer": answer})]


def record(store: Store, library: SkillLibrary, worlds: Sequence[SmallWorld]) -> list[Experience]:
    out = []
    for sw in worlds:
        exp = run_episode(sw, ScriptedPolicy(solving_script(sw)), store=store, assess=assess_experience)
        library.observe(exp)
        out.append(exp)
    return out


def level0(family: ArithFamily | EquationsFamily, seeds: Sequence[int]) -> list[SmallWorld]:
    return [family.small_world(Split.train, seed, level=0) for seed in seeds]


def test_a_binding_is_kept_only_where_it_reads_back_every_value() -> None:
    goals = ["Calculate 6 + 7.\n\nSubmit only the final answer.", "Calculate 8 * 1.\n\nSubmit only the final answer."]
    binding = skill_binding.find(["6 + 7", "8 * 1"], {"goal": goals})
    assert binding == SlotBinding(source="goal", left="Calculate ", right=".\n\nSubmit only t")
    assert skill_binding.read(binding, "Calculate 12 - 5.\n\nSubmit only the final answer.") == "12 - 5"
    # A result is the last thing the calculator says; the first "8" of "8 * 1 = 8" would be the wrong one.
    result = skill_binding.find(["13", "8"], {"observation:1": ["6 + 7 = 13", "8 * 1 = 8"]})
    assert result is not None and result.occurrence == "last" and skill_binding.read(result, "2 * 9 = 18") == "18"
    # A value that is not in the text is not bound: the model is asked for it, as before.
    assert skill_binding.find(["11", "3"], {"goal": ["Solve for b: b - 15 = -4", "Solve for x: x + 1 = 4"]}) is None
    # Where only some texts carry it: bound there if it reads the value in enough worlds and never a wrong one.
    texts = [*goals, "Calculate 2 + 2.\n\nSubmit only the final answer.", "Solve for b: b - 15 = -4"]
    values = ["6 + 7", "8 * 1", "2 + 2", "-4 + 15"]
    partial = skill_binding.find(values, {"goal": texts}, worlds=["a", "b", "c", "d"], min_reads=3)
    assert partial is not None and not partial.always and partial.left == "Calculate "
    assert skill_binding.read(partial, texts[-1]) is None
    assert skill_binding.find(values, {"goal": texts}, worlds=["a", "a", "c", "d"], min_reads=3) is None
    assert skill_binding.typed("18", "integer") == 18 and skill_binding.typed("x", "integer") is None
    # One word before a worded right anchor reads the door's exit wherever it stands in the list.
    exits = ["Exits: north, east through a locked blue door.", "Exits: west through a locked red door, south."]
    door = skill_binding.find(["east", "west"], {"observation:0": exits})
    assert door == SlotBinding(source="observation:0", right=" through a locke", occurrence="word_before")
    assert skill_binding.read(door, "Exits: south, north, up through a locked door.") == "up"


def test_a_mined_math_skill_reads_its_arguments_so_the_model_only_names_it(store: Store) -> None:
    library = SkillLibrary(store)
    exps = record(store, library, level0(ARITH, range(4)) + level0(EQUATIONS, range(3)))
    assert all(e.outcome is Outcome.passed for e in exps)
    skill = next(s for s in library.skills() if [c.tool for c in s.descriptor.calls] == ["calculate", "submit"])
    slots = {s.name: s.bind for s in skill.descriptor.slots}
    assert slots["answer"] == SlotBinding(source="observation:1", left=" = ", occurrence="last")
    expression = slots["expression"]
    assert expression is not None and expression.source == "goal" and expression.left == "Calculate "
    assert not expression.always  # the equations' goals do not spell out their expression
    assert skill.spec.parameters["required"] == [] and list(skill.spec.parameters["properties"]) == ["expression"]
    assert ("it reads $expression from the goal where it says 'Calculate ', $answer from the result of call 1"
            in skill.descriptor.description)

    # A new arithmetic task: the model names the skill with no argument, the runtime does the copying.
    new = ARITH.small_world(Split.train, 40, level=0)
    assert new.id not in {e.small_world.id for e in exps} and library.offered(new) == []  # still a candidate
    exp = run_episode(new, ScriptedPolicy([ActionRequest(tool=skill.spec.name, args={})]), store=store,
                      assess=assess_experience, skills=[skill])
    assert exp.outcome is Outcome.passed
    calculate, submit = exp.steps
    assert calculate.executed.args == {"expression": reference_actions(new)[0].args["expression"]}
    assert calculate.effect.observation.endswith(f"= {submit.executed.args['answer']}")

    # An equation: the goal has no expression to read, so a call without one is refused, with the reason.
    equation = EQUATIONS.small_world(Split.train, 40, level=0)
    refused = run_episode(equation, ScriptedPolicy([ActionRequest(tool=skill.spec.name, args={}),
                                                    *solving_script(equation)]), store=store, skills=[skill])
    first = refused.steps[0]
    # Its schema here asks for the expression (spec_for the goal), so the call is refused before it runs.
    assert skill.spec_for(equation.goal).parameters["required"] == ["expression"]
    assert first.executed.status is ActionStatus.error
    assert "'expression' is a required property" in str(first.executed.denied_reason)
    given = run_episode(equation, ScriptedPolicy([ActionRequest(tool=skill.spec.name,
                                                                args=solving_script(equation)[0].args)]),
                        store=store, assess=assess_experience, skills=[skill])
    assert given.outcome is Outcome.passed


def test_a_model_that_repeats_its_calculation_still_yields_the_goal_bound_skill(store: Store) -> None:
    # Qwen2.5-Coder-0.5B calculates the same expression three times, then submits. The repeats (same call, same
    # result) are dropped from the trace: the skill is calculate -> submit with the expression read from the goal,
    # not calculate -> calculate -> submit reading it from the first calculation's result.
    from lle.carriers.skill_mining import trace_of
    from lle.worlds.math import GsmFamily

    library = SkillLibrary(store)
    worlds = level0(ARITH, range(4)) + [GsmFamily().small_world(Split.train, s, level=0) for s in range(3)]
    for sw in worlds:
        calc, submit = solving_script(sw)
        exp = run_episode(sw, ScriptedPolicy([calc, calc, calc, submit]), store=store, assess=assess_experience)
        assert exp.outcome is Outcome.passed
        assert [a.tool for seg in trace_of(exp).segments for a in seg] == ["calculate", "submit"]
        library.observe(exp)
    [skill] = [s for s in library.skills() if s.descriptor.calls[0].tool == "calculate"]
    assert [c.tool for c in skill.descriptor.calls] == ["calculate", "submit"]
    expression = next(s.bind for s in skill.descriptor.slots if s.name == "expression")
    assert expression is not None and expression.source == "goal" and not expression.always
    assert skill.spec_for(worlds[0].goal).parameters["required"] == []
    assert skill.spec_for(worlds[-1].goal).parameters["required"] == ["expression"]


def test_a_candidate_that_more_support_lets_read_an_argument_becomes_a_new_version(store: Store) -> None:
    from lle.carriers.skills import SkillState
    from lle.worlds.math import GsmFamily

    library = SkillLibrary(store)
    # First two arithmetic tasks and two word problems: a candidate, but the goal's expression was read in two
    # worlds only (three are needed), so it asks the model for it.
    record(store, library, level0(ARITH, [0, 1]) + [GsmFamily().small_world(Split.train, s, level=0) for s in (0, 1)])
    goal = level0(ARITH, [9])[0].goal
    [first] = library.skills("math")
    assert first.state is SkillState.candidate and first.spec_for(goal).parameters["required"] == ["expression"]
    record(store, library, level0(ARITH, [2]))
    old, new = sorted(library.skills("math"), key=lambda s: s.descriptor.version)
    assert (old.item_id, old.state, new.state) == (first.item_id, SkillState.superseded, SkillState.candidate)
    assert new.descriptor.version == 2 and new.spec_for(goal).parameters["required"] == []
    record(store, library, level0(ARITH, [3]))  # more of the same support: no third version
    assert len(library.skills("math")) == 2


def bound_math_skill() -> Skill:
    """calculate -> submit with both slots bound (the goal's expression, then the calculator's result), active."""
    from lle.carriers.skill_mining import SkillCall, SkillDescriptor, SkillSlot
    from lle.carriers.skills import SkillState
    from lle.core import CarrierItem, CarrierKind, Scope, ScopeLevel

    calls = [SkillCall(tool="calculate", slots={"expression": "expression"}),
             SkillCall(tool="submit", slots={"answer": "answer"})]
    slots = [SkillSlot(name="expression", bind=SlotBinding(source="goal", left="Calculate ", right=".")),
             SkillSlot(name="answer", bind=SlotBinding(source="observation:1", left=" = ", occurrence="last"))]
    desc = SkillDescriptor(name="calculate_submit", family="math", calls=calls, slots=slots).finished()
    item = CarrierItem(carrier=CarrierKind.skills, scope=Scope(level=ScopeLevel.family, family="math"),
                       content=desc.model_dump(mode="json"))
    return Skill(item, desc, SkillState.active)


def test_a_skill_bound_to_the_goal_is_offered_only_where_the_goal_fills_it() -> None:
    skill = bound_math_skill()
    assert skill.fits("Calculate 3 + 4.") and not skill.fits("Solve for b: b - 15 = -4")
    assert skill.spec.parameters["properties"] == {} and skill.spec.parameters["required"] == []
    call = skill.call(1, {}, goal="Calculate 3 + 4.", observations=["Calculate 3 + 4.", "3 + 4 = 7"])
    assert isinstance(call, ActionRequest) and call.args == {"answer": "7"}
    missing = skill.call(1, {}, goal="Calculate 3 + 4.", observations=["Calculate 3 + 4.", "error: no result"])
    assert isinstance(missing, str) and "could not read $answer from the result of call 1" in missing


def test_a_slot_read_from_the_goal_where_it_can_be_is_required_where_this_goal_cannot_fill_it() -> None:
    skill = bound_math_skill()
    optional = skill.descriptor.model_copy(update={"slots": [
        s.model_copy(update={"bind": s.bind.model_copy(update={"always": False})}) if s.name == "expression" else s
        for s in skill.descriptor.slots]})
    loose = Skill(skill.item, optional, skill.state)
    assert loose.spec.parameters["required"] == [] and "expression" in loose.spec.parameters["properties"]
    assert loose.spec_for("Calculate 3 + 4.").parameters["required"] == []  # {} is a whole call here
    assert loose.spec_for("Mia has 7 apples and gets 5 more.").parameters["required"] == ["expression"]


def test_the_skills_note_names_a_whole_call_only_for_a_skill_that_needs_no_argument() -> None:
    from lle.core import ToolSpec
    from lle.runtime.levers import skills_note

    whole = ToolSpec(name="skill_calc", description="Runs calculate -> submit as one action.",
                     parameters={"type": "object", "properties": {"expression": {"type": "string"}}})
    asked = ToolSpec(name="skill_read", description="Runs read_file -> submit as one action.",
                     parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    assert '{"tool": "skill_calc", "args": {}}' in skills_note([asked, whole])
    note = skills_note([asked])
    assert note.startswith("Learned skills you may call") and "skill_read(path: string)" in note
    assert '"args": {}' not in note


def test_skills_first_puts_a_fitting_skill_where_a_small_model_looks() -> None:
    """A policy that takes the first tool it is offered (a 135M model's habit) solves the task with the lever."""
    from lle.config import Levers
    from lle.core import Context

    skill = bound_math_skill()
    seen: list[Context] = []

    def first_tool(context: Context) -> ActionRequest:
        seen.append(context)
        tool = context.action_schema["anyOf"][0]["properties"]["tool"]["const"]  # type: ignore[index]
        return ActionRequest(tool=str(tool), args={} if str(tool).startswith("skill_") else {"expression": "1 + 1"})

    sw = ARITH.small_world(Split.train, 41, level=0)
    exp = run_episode(sw, ScriptedPolicy(first_tool), skills=[skill], levers=Levers(skills_first=True),
                      assess=assess_experience)
    assert exp.outcome is Outcome.passed and [s.executed.tool for s in exp.steps] == ["calculate", "submit"]
    # A skill that needs no argument is shown as the whole call to copy.
    assert '{"tool": "skill_calculate_submit", "args": {}}' in seen[0].messages[-1].content
    lever = [f.content for f in exp.steps[0].feedback if f.kind == "intervention"]
    assert {"lever": "skills_first", "tools": ["skill_calculate_submit"]} in lever
    seen.clear()
    plain = run_episode(sw, ScriptedPolicy([ActionRequest(tool="calculate", args={"expression": "1 + 1"})] * 4),
                        skills=[skill], levers=Levers())
    assert plain.outcome is not Outcome.passed  # without the lever nothing was moved or named
