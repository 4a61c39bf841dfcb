"""`demo/project-v1`: a world whose tasks come from a project, so its splits are finite and sized per project.

The toy keys mazes stand in for a user's project: `manor` has 14 train tasks, `cellar` 40. Without a project the
size is not known (`split_sizes()` gives None), as for a world that reads the project it is given.
"""

from __future__ import annotations

from lle.core import SmallWorld, Split
from lle.errors import WorldError
from lle.worlds.toy.keys import WORLD_ID as KEYS_ID
from lle.worlds.toy.keys import KeysFamily

WORLD_ID = "demo/project-v1"
TASKS = {"manor": {Split.train: 14, Split.dev: 3, Split.test: 3},
         "cellar": {Split.train: 40, Split.dev: 5, Split.test: 5}}


class ProjectFamily(KeysFamily):
    """Reach the vault in one project's mazes; each project has a fixed number of tasks."""

    id = WORLD_ID
    family = "demoproject"
    projects = tuple(TASKS)
    description = "the toy mazes as a project's tasks: 14 train tasks in manor, 40 in cellar"
    levels = ()

    @classmethod
    def split_sizes(cls, project: str | None = None) -> dict[Split, int | None]:
        return dict(TASKS[project]) if project in TASKS else dict.fromkeys(Split)

    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        split, project = Split(split), project or "manor"
        if project not in TASKS:
            raise WorldError(f"{WORLD_ID} has no project {project!r}; use one of {', '.join(TASKS)}")
        size = TASKS[project][split]
        if not 0 <= seed < size:
            raise WorldError(f"{WORLD_ID} has {size} {split.value} tasks in {project}; use a seed in 0-{size - 1}")
        sw = super().small_world(split, seed, project=project, level=level)
        return sw.model_copy(update={"id": sw.id.replace(KEYS_ID, WORLD_ID), "world": WORLD_ID})
