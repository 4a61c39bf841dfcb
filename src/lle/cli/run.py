"""`lle run`: the main job.

Until the flywheel lands this does the one real thing that exists end to end: it records an
experience in a fresh workspace, reads it back from disk, checks its content hash and the store's
integrity, and prints what was stored.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from lle.cli.common import console, print_json, settings
from lle.core import (
    ActionRequest,
    Effect,
    ExecutedAction,
    Experience,
    PolicyInfo,
    SmallWorld,
    Split,
    Step,
)
from lle.errors import StoreError
from lle.workspace import open_store


def run(as_json: bool = typer.Option(False, "--json", help="Print the stored experience as JSON.")) -> None:
    """Run the main job (for now: a store round trip in a fresh workspace)."""
    folder = Path(settings.workspace) if settings.workspace else Path(tempfile.mkdtemp(prefix="lle-run-"))
    goal = "Record this run and read it back."
    experience = Experience(
        small_world=SmallWorld(id="selfcheck/store-v1:train:0", world="selfcheck/store-v1", family="selfcheck",
                               project="lle", split=Split.train, seed=0, goal=goal),
        policy=PolicyInfo(model="none"),
        steps=[Step(index=0, request=ActionRequest(tool="noop", thought=goal),
                    executed=ExecutedAction(tool="noop", allowed=True), effect=Effect(observation="ok"))],
    )
    with open_store(folder) as db:
        stored = db.append_experience(experience)
    with open_store(folder) as db:  # a new connection: what is on disk, not what is cached
        back = db.get_experience(stored.id)
        integrity = db.integrity_check()
    if back != stored or back.compute_hash() != stored.content_hash or integrity != "ok":
        raise StoreError(f"round trip through {folder} changed the experience (integrity: {integrity})")
    if as_json:
        print_json(back.model_dump(mode="json"))
        return
    console.print(f"workspace {folder}", highlight=False)
    console.print(f"stored and read back {back.id}: {len(back.steps)} step, hash {back.content_hash[:19]}…, "
                  f"integrity {integrity}", highlight=False)
    console.print("The flywheel (rounds on real worlds, held-out evaluation) is not built yet: see the open issues.")
