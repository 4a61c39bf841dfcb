"""The extractor in the default loop: programs written from verified train successes, checked by execution on fresh
train small worlds before anyone is offered them, and never shown a held-out task (issue 42).

The toy world with the oracle actor keeps these fast; the programs are the files an extractor would have written
(`scripted:FILE.py`), so what is tested is the loop around them: the prompt, the proposal, the check, the offer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lle.carriers import skill_programs
from lle.carriers.skill_mining import FIRED_FEEDBACK
from lle.carriers.skills import SkillLibrary, SkillState
from lle.config import RunConfig
from lle.core import Experience, Outcome, Split, Update
from lle.errors import InvalidInputError
from lle.flywheel import extractor, loop, report
from lle.flywheel.evaluate import learned
from lle.flywheel.strategies import SkillsOffer
from lle.governance.lineage import revoke
from lle.sandbox import bwrap_available
from lle.store import Store
from lle.store import flywheel as flywheel_store

DATA = Path(__file__).parent / "data"


def updates_of(db: Store, item_id: str) -> list[Update]:
    return [u for _, u in db.update_rows("skills") if u.item_id == item_id]


def evaluated(db: Store, config: RunConfig) -> list[Experience]:
    return [db.get_experience(i) for i in flywheel_store.batches(db, f"{config.id}/lle/r1/eval")]
pytestmark = pytest.mark.skipif(not bwrap_available(), reason="program skills run in the bubblewrap sandbox "
                                "(make test installs it)")


def run(tmp_path: Path, program: Path, rounds: int = 1) -> tuple[RunConfig, Path]:
    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=rounds, train_per_round=2,
                       eval_tasks=3, workers=1, group_size=1, max_steps=30, monitor=False,
                       extractor=f"scripted:{program}", extractor_samples=1)
    loop.Flywheel(config, tmp_path).run()
    return config, loop.run_folder(config.id, tmp_path)


def test_a_program_that_passes_its_check_is_offered_first_on_held_out_tasks(tmp_path: Path) -> None:
    config, folder = run(tmp_path, DATA / "toy_program.py")
    with Store(loop.strategy_db(folder, "lle")) as db:
        library = SkillLibrary(db)
        programs = [s for s in library.skills() if s.program is not None]
        assert [(s.state, s.descriptor.world) for s in programs] == [(SkillState.active, "toy/keys-v1")]
        skill = programs[0]
        assert skill.descriptor.evidence.origin == f"extractor:scripted:{DATA / 'toy_program.py'}"
        shown = skill.item.experience_ids
        assert 1 <= len(shown) <= 3 and {db.get_experience(i).small_world.split for i in shown} == {Split.train}
        check = [u for u in updates_of(db, skill.item_id) if u.gate and u.gate.name == "skills_program_check"]
        assert check and check[0].gate.passed and check[0].experience_ids  # the check's episodes, as evidence
        evals = evaluated(db, config)
    assert evals and all(any(f.kind == FIRED_FEEDBACK for f in e.steps[0].feedback) for e in evals)
    cost = json.loads(extractor.cost_path(folder, "lle", 1).read_text())
    assert cost["write_calls"] == 1 and cost["candidates"] == [skill.item_id] and cost["shown"] == shown
    res = report.load_results(config.id, tmp_path)  # the cost of learning, in the report and its summary
    summary = json.loads((report.write_report(res, tmp_path).parent / "summary.json").read_text())
    assert summary["extractor"]["lle"] == [cost]
    assert "1 programs proposed, 0 failed their try-out" in extractor.cost_line([cost])
    found = learned(folder, config)
    assert [r["skill"] for r in found["skills"]] == [skill.name] and "passed" in found["skills"][0]["check"]


def test_revoking_the_success_a_program_was_written_from_revokes_it_and_refuses_its_copies(tmp_path: Path) -> None:
    _, folder = run(tmp_path, DATA / "toy_program.py")
    with Store(loop.strategy_db(folder, "lle")) as db:
        library = SkillLibrary(db)
        skill = next(s for s in library.skills() if s.program is not None)
        exported = library.export(skill.item_id)
        with Store(tmp_path / "other.db") as other:  # a copy taken before the revocation, in another store
            copy = SkillLibrary(other).import_descriptor(exported, actor="person")
        revoke(db, skill.item.experience_ids[0], "that episode's verifier was wrong", "person")
        assert SkillLibrary(db).get(skill.item_id).state is SkillState.revoked
        sw = db.get_experience(skill.item.experience_ids[0]).small_world
        assert SkillsOffer(str(loop.strategy_db(folder, "lle")))(sw.model_copy(update={"split": Split.dev})) == []
        with pytest.raises(InvalidInputError, match="revoked"):  # its copy, renamed, does not come back in
            SkillLibrary(db).import_descriptor({**exported, "name": "walk_rooms"}, actor="person")
    with Store(tmp_path / "other.db") as other:  # the copy is a candidate there: it must pass that store's check
        assert SkillLibrary(other).get(copy.item_id).state is SkillState.candidate


def test_a_program_that_cannot_redo_what_it_was_shown_is_repaired_once_then_never_proposed(tmp_path: Path) -> None:
    denied = tmp_path / "smash.py"  # the toy world has `smash`, but no small world of it allows it
    denied.write_text("def skill(goal, call):\n    call('smash', target='door')\n    call('submit')\n")
    config, folder = run(tmp_path, denied)
    cost = json.loads(extractor.cost_path(folder, "lle", 1).read_text())
    assert cost["write_calls"] == 2 and cost["repairs"] == 1 and cost["candidates"] == []
    assert len(cost["screened"]) == 1 and "smash" in cost["screened"][0]  # the denial it was told, and why it stopped
    with Store(loop.strategy_db(folder, "lle")) as db:
        assert not [s for s in SkillLibrary(db).skills() if s.program is not None]
        evals = evaluated(db, config)
    assert evals and not any(f.kind in (FIRED_FEEDBACK, "skill") for e in evals for s in e.steps for f in s.feedback)


def test_a_program_that_fails_its_check_is_never_offered(tmp_path: Path) -> None:
    denied = tmp_path / "smash.py"  # screened by its try-out in the run; then proposed as a person would, directly
    denied.write_text("def skill(goal, call):\n    call('smash', target='door')\n    call('submit')\n")
    config, folder = run(tmp_path, denied)
    db_path = loop.strategy_db(folder, "lle")
    with Store(db_path) as db:
        library = SkillLibrary(db, actor="person")
        shown = skill_programs.successes(library, "toy/keys-v1")
        tools = [t.name for t in extractor.world_tools(shown[0].small_world)]  # as the extractor declares them
        proposed = skill_programs.propose(library, shown, denied.read_text(), tools, origin="person")
        assert proposed is not None and proposed.state is SkillState.candidate
    loop.Flywheel(config, tmp_path).validate_skills(db_path, round_=2)  # the check, as a round runs it
    with Store(db_path) as db:
        programs = [s for s in SkillLibrary(db).skills() if s.program is not None]
        assert [s.state for s in programs] == [SkillState.rejected]
        check = next(u for u in updates_of(db, programs[0].item_id) if u.op.value == "reject")
        assert check.gate is not None and "passed 0 of" in check.gate.reasons[0]
        tried = [db.get_experience(i) for i in check.experience_ids]
        smashes = [s for e in tried for s in e.steps if s.request.tool == "smash"]
        assert smashes and all(not s.executed.allowed for s in smashes)  # denied and recorded, step by step
        held_out = evaluated(db, config)[0].small_world
    assert SkillsOffer(str(db_path))(held_out) == []  # a rejected program is offered nowhere


def test_a_failed_try_out_is_told_back_with_the_calls_and_the_error(tmp_path: Path) -> None:
    from lle.flywheel.suite import family
    from lle.worlds.base import cut

    sw = cut(family("toy/keys-v1"), Split.train, 3)
    trial = extractor.try_out("def skill(goal, call):\n    call('look')\n    return 1 / 0\n", sw)
    assert trial.outcome is not Outcome.passed and trial.small_world.split is Split.train
    told = extractor.what_happened(trial).splitlines()
    assert told[0] == f"goal = {sw.goal!r}" and told[1].startswith("call('look') -> ")
    assert "ZeroDivisionError" in told[-1] and "line 3" in told[-1]
    returned = extractor.what_happened(extractor.try_out("def skill(goal, call):\n    call('look')\n", sw))
    assert returned.splitlines()[-1] == "then skill() returned, but the task was not done"
    solved = extractor.try_out((DATA / "toy_program.py").read_text(), sw)
    assert solved.outcome is Outcome.passed


def test_no_held_out_task_reaches_the_extractor_or_a_skill_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    shown: list[Split] = []
    checked: list[Split] = []
    prompt_for, phase = extractor.prompt_for, loop.Flywheel.phase

    def spy_prompt(experiences, tools):  # type: ignore[no-untyped-def]
        shown.extend(e.small_world.split for e in experiences)
        return prompt_for(experiences, tools)

    def spy_phase(self, strategy, db_path, label, small_worlds, *args, **kwargs):  # type: ignore[no-untyped-def]
        if "/skill/" in label or label.endswith("/train/extractor"):
            checked.extend(sw.split for sw in small_worlds)
        return phase(self, strategy, db_path, label, small_worlds, *args, **kwargs)

    monkeypatch.setattr(extractor, "prompt_for", spy_prompt)
    monkeypatch.setattr(loop.Flywheel, "phase", spy_phase)
    run(tmp_path, DATA / "toy_program.py", rounds=2)
    assert shown and set(shown) == {Split.train}
    assert checked and set(checked) == {Split.train}


def test_parse_program_takes_the_code_block_that_defines_skill() -> None:
    reply = "Here it is:\n```python\nimport re\n\ndef skill(goal, call):\n    call('submit')\n```\nDone."
    assert extractor.parse_program(reply) == "import re\n\ndef skill(goal, call):\n    call('submit')\n"
    assert extractor.parse_program("```python\ndef skill(goal):\n    pass\n```") is None  # not (goal, call)
    assert extractor.parse_program("def skill(goal, call) oops") is None


def test_lle_self_writes_with_its_own_model_and_explores_nothing_more() -> None:
    config = RunConfig(model="smollm2-135m", strategies=["lle", "lle-self"], extractor="qwen2.5-coder-1.5b")
    assert extractor.spec_for(config, "lle") == "qwen2.5-coder-1.5b" and extractor.explores(config, "lle")
    assert extractor.spec_for(config, "lle-self") == "smollm2-135m" and not extractor.explores(config, "lle-self")
    oracle = config.model_copy(update={"model": "oracle", "extractor": None})
    assert extractor.spec_for(oracle, "lle") is None and extractor.spec_for(oracle, "lle-self") is None


@pytest.mark.parametrize(("spec", "needle"), [
    ("nope", "--extractor 'nope' is not a model"),
    ("scripted:missing.py", "--extractor scripted:missing.py: no such file"),
    ("missing.gguf", "--extractor missing.gguf: no such model file"),
])
def test_a_bad_extractor_is_one_line_before_any_run_folder(tmp_path: Path, spec: str, needle: str) -> None:
    result = subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(tmp_path), "run", "--suite",
                             "toy", "--extractor", spec], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
    assert not (tmp_path / "runs").exists()


def test_the_run_ends_by_naming_what_lle_learned(tmp_path: Path) -> None:
    program = DATA / "toy_program.py"
    result = subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(tmp_path), "run",
                             "--suite", "toy", "--model", "oracle", "--rounds", "1", "--train", "2", "--eval", "3",
                             "--group", "1", "--max-steps", "30", "--extractor", f"scripted:{program}"],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"lle learned skill solve_keys_v1 v1 (toy), active, from extractor:scripted:{program}" in out
    assert "  check: passed 4 of 4 fresh train small worlds with the program run first" in out
    assert "  use on train: not measured yet (no train episode since its activation)" in out
    assert "  the extractor's cost: 4 model calls, 0 tokens" in out  # 4 samples, one program (a script)
    assert "held-out tasks lle turned from fail to pass: 0 of 3" in out  # the oracle solved them all before
