"""A protected test file guards its folder: no `conftest.py` (or other new file) may be added beside it."""

from __future__ import annotations

from lle.core import ActionRequest, Permissions
from lle.runtime.grounding import Grounder
from runtime.test_grounding import FilesWorld, files_small_world


def test_a_new_file_beside_a_protected_test_file_is_denied() -> None:
    world = FilesWorld()
    world.reset(seed=1)
    small_world = files_small_world().model_copy(
        update={"permissions": Permissions(writable=["."], protected=["tests/test_app.py"])})
    grounder = Grounder(small_world, world)
    assert world.workdir is not None
    try:
        conftest = grounder.ground(ActionRequest(tool="write_file", args={
            "path": "tests/conftest.py", "content": "collect_ignore = ['test_app.py']"}))
        assert not conftest.executed.allowed and "tests/conftest.py is protected" in str(
            conftest.executed.denied_reason)
        assert sorted(p.name for p in (world.workdir / "tests").iterdir()) == ["test_app.py"]
        elsewhere = grounder.ground(ActionRequest(tool="write_file", args={"path": "src/util.py", "content": "X = 1"}))
        assert elsewhere.executed.allowed, elsewhere.executed.denied_reason
    finally:
        world.close()
