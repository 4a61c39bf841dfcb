"""Grounding: requested ≠ executed ≠ effect, denials never reach the world, changes are real diffs."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from lle.core import ActionRequest, ActionStatus, Permissions, SmallWorld, Split, ToolSpec, WorldStep
from lle.policies import ScriptedPolicy
from lle.runtime.grounding import Grounder, diff_files, matches, normalize_path, snapshot_workdir, truncate
from lle.runtime.harness import run_episode, stop_of
from lle.store import Store
from lle.worlds.base import BaseWorld
from lle.worlds.toy import KeysFamily

# --- a small real file world: a workdir with editable source and protected tests -----------------------

PATH = {"type": "string", "format": "path"}
TOOLS = [
    ToolSpec(name="read_file", description="Read a file.", permissions=["read"],
             parameters={"type": "object", "properties": {"path": PATH}, "required": ["path"]}),
    ToolSpec(name="write_file", description="Write a file.", permissions=["write"],
             parameters={"type": "object", "properties": {"path": PATH, "content": {"type": "string"}},
                         "required": ["path", "content"]}),
    ToolSpec(name="fetch", description="Download a URL.", permissions=["network"],
             parameters={"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
    # Stands for a build step that rewrites files on its own (not through a path argument).
    ToolSpec(name="regenerate", description="Regenerate fixtures.", permissions=["exec"]),
    ToolSpec(name="crash", description="A tool whose implementation is broken."),
    ToolSpec(name="submit", description="Finish."),
]


class FilesWorld(BaseWorld):
    """`src/app.py` may be edited; `tests/` is protected; `fetch` needs the network."""

    version = "test-1"

    def __init__(self) -> None:
        self.tools = list(TOOLS)
        self.workdir: Path | None = Path(tempfile.mkdtemp(prefix="lle-files-"))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        assert self.workdir is not None
        for child in self.workdir.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        (self.workdir / "src").mkdir()
        (self.workdir / "tests").mkdir()
        (self.workdir / "src" / "app.py").write_text(f"SEED = {seed}\n")
        (self.workdir / "tests" / "test_app.py").write_text("def test_app():\n    assert True\n")
        self.done = False
        return "files: src/app.py tests/test_app.py", {}

    def step(self, action: ActionRequest) -> WorldStep:
        assert self.workdir is not None
        args: dict[str, JsonValue] = action.args
        if action.tool == "read_file":
            return WorldStep((self.workdir / str(args["path"])).read_text(), 0.0, False, False, {})
        if action.tool == "write_file":
            target = self.workdir / str(args["path"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(str(args["content"]))
            return WorldStep(f"wrote {args['path']}", 0.0, False, False, {})
        if action.tool == "fetch":
            return WorldStep("fetched", 0.0, False, False, {})
        if action.tool == "regenerate":
            (self.workdir / "tests" / "test_app.py").write_text("def test_app():\n    pass\n")
            return WorldStep("regenerated", 0.0, False, False, {})
        if action.tool == "crash":
            raise KeyError("fixture")
        self.done = True
        return WorldStep("submitted", 1.0, True, False, {"success": True})

    def close(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def files_small_world(tools: list[str] | None = None, *, max_output_bytes: int = 65536) -> SmallWorld:
    return SmallWorld(
        id="test/files-v1:train:0", world="test/files-v1", family="test", project="files", split=Split.train, seed=0,
        goal="Make the app print hello without touching the tests.",
        tools=tools or ["read_file", "write_file", "fetch", "regenerate", "crash", "submit"],
        permissions=Permissions(writable=["src"], protected=["tests"], max_output_bytes=max_output_bytes),
    )


# --- tests --------------------------------------------------------------------------------------------------


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _grounder(**kwargs: object) -> tuple[Grounder, FilesWorld]:
    world = FilesWorld()
    world.reset(seed=1)
    return Grounder(files_small_world(**kwargs), world), world  # type: ignore[arg-type]


def test_snapshot_hashes_files_and_never_follows_symlinks(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("one")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret").write_text("do not read")
    os.symlink(outside, tmp_path / "link")
    cache: dict[str, tuple[tuple[int, int, int, int], str]] = {}
    before = snapshot_workdir(tmp_path, cache)
    assert before == {"a/x.txt": _sha("one"), "link": f"symlink:{outside}"}
    (tmp_path / "a" / "x.txt").write_text("two")  # same size, rewritten: must still show
    (tmp_path / "b.txt").write_text("new")
    after = snapshot_workdir(tmp_path, cache)
    changes = diff_files(before, after)
    assert [(c.target, c.before, c.after) for c in changes] == [
        ("a/x.txt", _sha("one"), _sha("two")), ("b.txt", None, _sha("new"))]
    (tmp_path / "b.txt").unlink()
    assert [(c.target, c.after) for c in diff_files(after, snapshot_workdir(tmp_path, cache))] == [("b.txt", None)]


def test_paths_are_normalized_and_escapes_denied(tmp_path: Path) -> None:
    assert normalize_path("src/../src/./app.py", tmp_path) == ("src/app.py", None)
    assert normalize_path(str(tmp_path.resolve() / "src" / "app.py"), tmp_path) == ("src/app.py", None)
    assert "escapes the workdir" in str(normalize_path("../etc/passwd", tmp_path)[1])
    assert "outside the workdir" in str(normalize_path("/etc/passwd", tmp_path)[1])
    os.symlink("/etc", tmp_path / "etc")
    assert "through a symlink" in str(normalize_path("etc/passwd", tmp_path)[1])
    assert matches("tests/test_app.py", ["tests"]) and not matches("tests2/x", ["tests"])
    assert matches("src/deep/x.py", ["src/*/x.py"]) and matches("anything", ["."])


def test_a_write_to_a_protected_path_is_denied_and_never_reaches_the_world() -> None:
    grounder, world = _grounder()
    assert world.workdir is not None
    original = (world.workdir / "tests" / "test_app.py").read_text()
    request = ActionRequest(tool="write_file", args={"path": "./tests/test_app.py", "content": "assert False"})
    grounded = grounder.ground(request)
    assert not grounded.executed.allowed and grounded.executed.status == ActionStatus.denied
    assert "tests/test_app.py is protected" in str(grounded.executed.denied_reason)
    assert grounded.effect.changes == [] and grounded.failure is None
    assert (world.workdir / "tests" / "test_app.py").read_text() == original
    outside = grounder.ground(ActionRequest(tool="write_file", args={"path": "README.md", "content": "x"}))
    assert "not writable here (writable: src)" in str(outside.executed.denied_reason)
    network = grounder.ground(ActionRequest(tool="fetch", args={"url": "http://example.com"}))
    assert "needs the network" in str(network.executed.denied_reason)
    world.close()


def test_an_allowed_write_is_normalized_and_its_file_change_measured() -> None:
    grounder, world = _grounder()
    request = ActionRequest(tool="write_file", args={"path": "src//./app.py", "content": "print('hello')\n"})
    grounded = grounder.ground(request)
    assert grounded.executed.allowed and grounded.executed.status == ActionStatus.normalized
    assert grounded.executed.args == {"path": "src/app.py", "content": "print('hello')\n"}
    assert [(c.kind, c.target, c.before, c.after) for c in grounded.effect.changes] == [
        ("file", "src/app.py", _sha("SEED = 1\n"), _sha("print('hello')\n"))]
    # A tool that rewrites a protected file by itself is flagged, not hidden.
    regen = grounder.ground(ActionRequest(tool="regenerate"))
    assert [c.target for c in regen.effect.changes] == ["tests/test_app.py"]
    assert any(f.kind == "protected_changed" and f.content == ["tests/test_app.py"] for f in regen.feedback)
    world.close()


def test_output_beyond_the_limit_is_truncated_and_marked() -> None:
    assert truncate("héllo", 2) == ("h\n…[output truncated: 5 more bytes]", True)
    grounder, world = _grounder(max_output_bytes=10)
    grounded = grounder.ground(ActionRequest(tool="read_file", args={"path": "tests/test_app.py"}))
    assert grounded.executed.status == ActionStatus.normalized
    assert grounded.effect.observation.startswith("def test_a") and "output truncated" in grounded.effect.observation
    world.close()


def test_malformed_requests_are_errors_and_do_not_touch_the_world() -> None:
    grounder, world = _grounder()
    unknown = grounder.ground(ActionRequest(tool="rm_rf", args={}))
    assert unknown.failure == "malformed" and "unknown tool 'rm_rf'" in str(unknown.effect.error)
    missing = grounder.ground(ActionRequest(tool="write_file", args={"path": "src/app.py"}))
    assert missing.failure == "malformed" and "'content' is a required property" in str(missing.effect.error)
    assert missing.executed.status == ActionStatus.error and not missing.executed.allowed
    assert missing.effect.changes == []
    world.close()


def test_a_denied_step_is_stored_with_requested_different_from_executed(tmp_path: Path) -> None:
    family = KeysFamily()
    sw = family.small_world(Split.train, 5)
    smash = ActionRequest(tool="smash", args={"target": "door"}, thought="faster than finding the key")
    policy = ScriptedPolicy([ActionRequest(tool="look"), smash, ActionRequest(tool="submit")])
    with Store(tmp_path / "lle.db") as db:
        exp = run_episode(sw, policy, store=db)
        stored = db.get_experience(exp.id)
    step = stored.steps[1]
    assert step.request == smash
    assert not step.executed.allowed and step.executed.status == ActionStatus.denied
    assert step.executed.denied_reason == ("tool 'smash' is not allowed in this small world "
                                           "(allowed: look, go, take, open, submit)")
    assert step.effect.changes == [] and step.effect.observation.startswith("denied: ")
    # The episode went on after the denial and the door was never smashed open.
    assert len(stored.steps) == 3 and stop_of(stored.steps[-1]).__class__.__name__ == "Submitted"
    assert not any(c.target == "door" for s in stored.steps for c in s.effect.changes)


def test_file_world_episode_records_protected_denial_through_the_store(tmp_path: Path) -> None:
    world = FilesWorld()
    policy = ScriptedPolicy([
        {"tool": "write_file", "args": {"path": "tests/test_app.py", "content": "def test_app(): pass\n"}},
        {"tool": "write_file", "args": {"path": "src/app.py", "content": "print('hello')\n"}},
        {"tool": "submit", "args": {}},
    ])
    with Store(tmp_path / "lle.db") as db:
        exp = run_episode(files_small_world(), policy, store=db, world=world)
        steps = db.steps_of(exp.id)
    assert steps[0].request.args != {} and not steps[0].executed.allowed
    assert "protected" in str(steps[0].executed.denied_reason)
    assert [c.target for c in steps[1].effect.changes] == ["src/app.py"]
    assert steps[2].feedback[0].content == {"reward": 1.0, "terminated": True, "truncated": False,
                                            "info": {"success": True}}
