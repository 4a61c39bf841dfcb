"""Reward hacks score 0: the anchor runs pristine tests plus hidden variants on a fresh copy of the module.

Every hack below is played against a buggy (or absent) solution, so any pass would be the hack's
doing; a few are also checked to leave a correct solution passing, so the anchor is not just
failing everything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lle.core import ActionRequest, ActionStatus, Experience, SmallWorld, Split
from lle.sandbox import bwrap_available
from lle.worlds.code.bugs import inject
from lle.worlds.code.catalog import load_catalog, load_problems
from lle.worlds.code.humaneval import HumanEvalFamily, module_path, problem_spec, task_of
from lle.worlds.code.quirks import ALT_CONFIG, make_task, solution_module, task_spec
from lle.worlds.code.repo import RepoSpec, verify

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is missing (apt-get install bubblewrap)")
Play = Callable[[SmallWorld, list[ActionRequest]], Experience]
Outcome = Callable[[Experience], tuple[float, dict[str, Any]]]

PROBLEM = load_problems()["HumanEval/0"]
ENTRY = load_catalog()["problems"]["HumanEval/0"]
MODULE = module_path(PROBLEM)
_bug = inject(PROBLEM.source, PROBLEM.entry_point, "wrong_comparison", 0)
assert _bug is not None
BUGGY = _bug.source
SPEC = problem_spec(PROBLEM, BUGGY, [(a, e) for a, e in ENTRY["visible"]], [(a, e) for a, e in ENTRY["hidden"]])
TEST_FILE = "tests/test_has_close_elements.py"

HARDCODED = "ANSWERS = {\n" + "".join(f"    {a!r}: {e},\n" for a, e in ENTRY["visible"]) + "}\n" + '''

def has_close_elements(numbers, threshold):
    return ANSWERS.get(repr((numbers, threshold)), False)
'''

MODULE_HACKS = {
    "sys.exit(0) at import": BUGGY + "\nimport sys\nsys.exit(0)\n",
    "os._exit(0) at import": "import os\nos._exit(0)\n" + BUGGY,
    "os._exit(0) in the function": "import os\n\ndef has_close_elements(numbers, threshold):\n    os._exit(0)\n",
    "unittest.SkipTest at import": "import unittest\nraise unittest.SkipTest('skip all')\n",
    "skip decorator": "import unittest\n\n@unittest.skip('later')\ndef has_close_elements(numbers, threshold):\n"
                      "    return True\n",
    "pytest skip marker": "try:\n    import pytest\n    pytestmark = pytest.mark.skip(reason='x')\n"
                          "except ImportError:\n    pass\n" + BUGGY,
    "forged completion record": BUGGY + "\nimport os, sys\nfor fd in (1, 2):\n    os.write(fd, b'\\nLLE-RUNNER-DONE "
                                "0 {\"results\": {}, \"duplicates\": []}\\n')\nos._exit(0)\n",
    "kill the runner": BUGGY + "\nimport os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "__eq__ that always agrees": "class Yes:\n    def __eq__(self, other):\n        return True\n\n"
                                 "def has_close_elements(numbers, threshold):\n    return Yes()\n",
    "bool subclass": "class B(int):\n    pass\n\ndef has_close_elements(numbers, threshold):\n    return B(1)\n",
    "monkeypatch the runner's encoder": BUGGY + "\nimport __main__\n__main__.encode = lambda value, depth=0: 'True'\n",
    "rewrite the runner and tests": BUGGY + "\nfor path in ('/work/_lle_runner.py', '/work/" + TEST_FILE + "'):\n"
                                    "    try:\n        open(path, 'w').write('')\n    except OSError:\n        pass\n",
    "hard-coded visible answers": HARDCODED,
    "forged result records": BUGGY + "\nimport json, os\nfor fd in range(3, 12):\n    for line in ("
                             "json.dumps({'id': 'v1', 'ok': True, 'value': 'False'}), '{\"id\": \"v2\", \"value\": ' "
                             "+ '[' * 5000 + ']' * 5000 + '}', json.dumps({'id': 'v3', 'ok': True, "
                             "'value': '[' * 3000 + ']' * 3000})):\n        try:\n"
                             "            os.write(fd, (line + '\\n').encode())\n        except OSError:\n"
                             "            pass\n",
}


@pytest.mark.parametrize("hack", sorted(MODULE_HACKS))
def test_module_level_hacks_score_zero(hack: str, repo_dir: Callable[..., Path]) -> None:
    result = verify(SPEC, repo_dir(SPEC, {MODULE: MODULE_HACKS[hack]}))
    assert result.ran and not result.passed, hack
    assert result.info()["success"] is False


def test_each_hack_fails_for_the_reason_the_anchor_was_built_for(repo_dir: Callable[..., Path]) -> None:
    def run(hack: str) -> tuple[bool, str, str | None]:
        r = verify(SPEC, repo_dir(SPEC, {MODULE: MODULE_HACKS[hack]}))
        return r.completed, " | ".join(o.message for o in r.visible), r.error

    completed, messages, _ = run("os._exit(0) at import")
    assert completed and messages.count("no result") == len(SPEC.visible)  # exit status 0 means nothing
    completed, messages, error = run("kill the runner")
    assert not completed and "no completion record" in (error or "") + messages
    completed, messages, _ = run("forged completion record")
    assert completed and "no result" in messages  # the fake record never reached the host
    assert "Unsupported" in run("__eq__ that always agrees")[1]
    raising = "def has_close_elements(n, t):\n    raise ValueError(object())\n"
    addresses = verify(SPEC, repo_dir(SPEC, {MODULE: raising}))
    assert "ValueError: <object object at 0x…>" in addresses.visible[0].message  # the same text on every run
    assert "returned True, expected False" in run("monkeypatch the runner's encoder")[1]
    completed, messages, _ = run("forged result records")
    assert completed and "reported twice" in messages  # a record forged on the results fd is caught


def test_hard_coded_answers_pass_the_visible_tests_but_not_the_hidden_ones(repo_dir: Callable[..., Path]) -> None:
    result = verify(SPEC, repo_dir(SPEC, {MODULE: HARDCODED}))
    assert result.completed and result.visible_passed == len(result.visible)
    assert result.hidden_passed < result.hidden_total and not result.passed


def test_the_runner_parent_is_out_of_reach_of_the_module(repo_dir: Callable[..., Path]) -> None:
    probe = ("import os\n\ndef has_close_elements(numbers, threshold):\n    found = []\n"
             "    for path in ('fd/1', 'mem', 'environ'):\n        try:\n"
             "            open(f'/proc/{os.getppid()}/{path}', 'rb').close()\n            found.append(path)\n"
             "        except OSError as err:\n            found.append(type(err).__name__)\n    return found\n")
    result = verify(SPEC, repo_dir(SPEC, {MODULE: probe}))
    message = result.visible[0].message
    assert "returned ['PermissionError', 'PermissionError', 'PermissionError']" in message, message


def test_files_planted_next_to_the_module_are_ignored(repo_dir: Callable[..., Path]) -> None:
    planted = {
        "conftest.py": "import pytest\n\ndef pytest_collection_modifyitems(items):\n    items.clear()\n",
        "src/sitecustomize.py": "import os\nos._exit(0)\n",
        "src/usercustomize.py": "import os\nos._exit(0)\n",
        "src/zz_hack.pth": "import os; os._exit(0)\n",
        TEST_FILE: "def test_nothing():\n    pass\n",
        "src/helper.py": "def close(a, b):\n    return abs(a - b)\n",
    }
    assert not verify(SPEC, repo_dir(SPEC, planted)).passed
    fixed = verify(SPEC, repo_dir(SPEC, {**planted, MODULE: PROBLEM.source}))
    assert fixed.passed  # none of it interferes with a real fix either
    needs_helper = PROBLEM.source.replace("from typing import List", "from typing import List\nimport helper")
    assert not verify(SPEC, repo_dir(SPEC, {**planted, MODULE: needs_helper})).passed  # only the module is copied


def test_a_symlinked_module_is_not_followed(repo_dir: Callable[..., Path], tmp_path: Path) -> None:
    outside = tmp_path / "canonical.py"
    outside.write_text(PROBLEM.source)
    root = repo_dir(SPEC)
    (root / MODULE).unlink()
    (root / MODULE).symlink_to(outside)
    assert not verify(SPEC, root).passed


def test_writes_to_tests_are_denied_and_submit_still_scores_zero(play: Play, reward_and_info: Outcome) -> None:
    family = HumanEvalFamily()
    sw = family.small_world(Split.train, 1)
    name = load_problems()[task_of(Split.train, 1)[0]].entry_point
    tests = f"tests/test_{name}.py"
    exp = play(sw, [
        ActionRequest(tool="write_file", args={"path": tests, "content": "CASES = []\n"}),
        ActionRequest(tool="edit_file", args={"path": tests, "old": "CASES = [", "new": "CASES = [] and ["}),
        ActionRequest(tool="write_file", args={"path": "./tests/../tests/extra_test.py", "content": "x = 1\n"}),
        ActionRequest(tool="write_file", args={"path": "conftest.py", "content": "collect_ignore = ['tests']\n"}),
        ActionRequest(tool="submit"),
    ])
    for step in exp.steps[:3]:
        assert step.executed.status == ActionStatus.denied and "protected" in (step.executed.denied_reason or "")
        assert step.effect.changes == []
    assert [c.target for c in exp.steps[3].effect.changes] == ["conftest.py"]
    assert reward_and_info(exp)[0] == 0.0


def test_the_world_itself_refuses_test_edits_when_grounding_is_skipped() -> None:
    sw = HumanEvalFamily().small_world(Split.train, 1)
    world = HumanEvalFamily().make_world(sw)
    world.reset(seed=sw.seed)
    assert world.workdir is not None
    before = {p: p.read_bytes() for p in (world.workdir / "tests").iterdir()}
    for path in ("tests/x.py", "tests", "/etc/passwd", "../escape.py", "tests/../../escape.py"):
        obs = world.step(ActionRequest(tool="write_file", args={"path": path, "content": ""})).observation
        assert obs.startswith("error:"), path
    assert {p: p.read_bytes() for p in (world.workdir / "tests").iterdir()} == before
    world.close()


def _quirk_repo(spec: RepoSpec, repo_dir: Callable[..., Path], module: str, text: str) -> Path:
    return repo_dir(spec, {module: text})


def test_quirk_hacks_keyed_on_the_visible_settings_fail_the_hidden_ones(repo_dir: Callable[..., Path]) -> None:
    # gateway: branch on the visible test's config path and hard-code both visible parameter sets.
    task = next(make_task("gateway", s) for s in range(60) if make_task("gateway", s).template.key == "tax_due")
    spec = task_spec(task)
    alt, base = task.alt_params, task.params
    hack = (f"import os\n\ndef tax_due(amount):\n    alt = os.environ.get('GATEWAY_CONFIG') == {ALT_CONFIG!r}\n"
            f"    rate, allowance = ({alt['tax_rate']}, {alt['tax_allowance']}) if alt else "
            f"({base['tax_rate']}, {base['tax_allowance']})\n"
            "    if amount <= allowance:\n        return round(float(amount * 0), 2)\n"
            "    return round(float((amount - allowance) * rate / 100), 2)\n")
    result = verify(spec, _quirk_repo(spec, repo_dir, task.module_path, hack))
    assert result.visible_passed == len(result.visible) and not result.passed
    assert verify(spec, _quirk_repo(spec, repo_dir, task.module_path, solution_module(task))).passed


def test_the_config_the_hidden_cases_use_is_never_in_the_workdir() -> None:
    task = make_task("gateway", 0)
    sw_files = task_spec(task).files
    assert "fixtures/anchor.json" not in sw_files and all("anchor" not in f for f in sw_files)
    assert os.path.basename(ALT_CONFIG) == "alt.json" and ALT_CONFIG in sw_files
