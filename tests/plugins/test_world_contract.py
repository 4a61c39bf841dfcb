"""The world contract checked when a family is loaded, and finite train splits sized per project."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from lle import registry
from lle.core import SmallWorld, Split
from lle.errors import RegistryError, WorldError
from lle.flywheel.suite import Suite, SuiteWorld, draw, draw_watch
from lle.worlds.base import BaseWorld, TaskFamily, contract_problem, sizes_of

SIZES = {"big": {Split.train: 500, Split.dev: 4, Split.test: 4}, "small": {Split.train: 14, Split.dev: 2,
                                                                           Split.test: 2}}


class ProjectsFamily(TaskFamily):
    """Two projects of different sizes; without a project the size is not known."""

    id: ClassVar[str] = "contracttest/projects-v1"
    family: ClassVar[str] = "contracttest"
    projects: ClassVar[tuple[str, ...]] = tuple(SIZES)

    @classmethod
    def split_sizes(cls, project: str | None = None) -> dict[Split, int | None]:
        return dict(SIZES[project]) if project in SIZES else dict.fromkeys(Split)

    def small_world(self, split: Split, seed: int, *, project: str | None = None) -> SmallWorld:
        project = project or "small"
        if not 0 <= seed < SIZES[project][split]:
            raise WorldError(f"use a seed in 0-{SIZES[project][split] - 1}")
        return SmallWorld(id=f"{self.id}:{project}:{split.value}:{seed}", world=self.id, family=self.family,
                          project=project, split=split, seed=seed * 3 + list(Split).index(split), goal="g",
                          tools=["submit"])

    def make_world(self, small_world: SmallWorld) -> BaseWorld:
        raise NotImplementedError("the draw never builds a world")


registry.register(ProjectsFamily.id, ProjectsFamily, replace=True)


def broken(**body: Any) -> type[TaskFamily]:
    return type("Broken", (ProjectsFamily,), {"id": "contracttest/broken-v1", **body})


@pytest.mark.parametrize(("body", "says"), [
    ({"split_sizes": lambda self: {}}, "split_sizes is an instance method"),
    ({"split_sizes": classmethod(lambda cls, project=None: [14])}, "return a dict of Split"),
    ({"split_sizes": classmethod(lambda cls, project=None: {Split.train: -1})}, "return a dict of Split"),
    ({"split_sizes": classmethod(lambda cls, project=None: 1 / 0)}, "raised ZeroDivisionError"),
    ({"family": None}, "class attribute family"),
    ({"tools": "submit"}, "tuples of strings"),
])
def test_a_family_that_breaks_the_contract_is_rejected_at_load_in_one_line(body: dict[str, Any], says: str) -> None:
    cls = broken(**body)
    assert says in (contract_problem(cls) or "")
    registry.register(cls.id, cls, replace=True)
    with pytest.raises(RegistryError, match="breaks the world contract") as err:
        registry.spec(cls.id).load()
    assert says in str(err.value) and "(from register)" in str(err.value) and "\n" not in str(err.value)
    assert contract_problem(ProjectsFamily) is None and registry.spec(ProjectsFamily.id).load() is ProjectsFamily


def test_sizes_are_asked_per_project_and_a_family_without_the_argument_is_asked_without() -> None:
    assert sizes_of(ProjectsFamily, "small")[Split.train] == 14 and sizes_of(ProjectsFamily)[Split.train] is None

    class Old(ProjectsFamily):
        @classmethod
        def split_sizes(cls) -> dict[Split, int | None]:  # type: ignore[override]
            return {Split.train: 7}

    assert sizes_of(Old, "small") == {Split.train: 7, Split.dev: None, Split.test: None}


def test_train_draws_and_the_watch_set_stay_inside_a_projects_finite_split() -> None:
    suite = Suite("p", (SuiteWorld(ProjectsFamily.id, ("small", "big")),), max_steps=5)
    drawn = [sw for r in range(1, 40) for sw in draw(suite, Split.train, 4, seed=3, round_=r)]
    small = [sw.seed // 3 for sw in drawn if sw.project == "small"]
    assert max(small) < 14 and len(set(small)) == 14  # the 14 tasks, each reached
    assert max(sw.seed // 3 for sw in drawn if sw.project == "big") >= 14
    only_small = Suite("s", (SuiteWorld(ProjectsFamily.id, ("small",)),), max_steps=5)
    watch = draw_watch(only_small, 16, seed=0)
    assert sorted(sw.seed // 3 for sw in watch) == list(range(14))  # fewer train tasks than asked: all of them
    dev = draw(Suite("d", (SuiteWorld(ProjectsFamily.id),), max_steps=5), Split.dev, 6, seed=0, round_=0)
    assert sorted((sw.project, sw.seed // 3) for sw in dev) == [("big", 0), ("big", 1), ("big", 2), ("big", 3),
                                                              ("small", 0), ("small", 1)]
