"""Child of the routing kill test: routes a store's experiences the way a flywheel round does.

`route_all(flywheel, db)` is what each killed (and each resuming) process runs: `Flywheel.route`
over every stored experience, under the run's id. The test forks it from a parent that already
imported lle and built the flywheel and the contamination index, so each of its many processes
starts in milliseconds; each is a real process, killed with a real SIGKILL.
Usage as a script: routing_child.py WORKSPACE CONFIG_JSON DB.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lle.config import RunConfig
from lle.flywheel.loop import Flywheel
from lle.store import Store, experiences


def route_all(flywheel: Flywheel, db_path: str) -> None:
    with Store(db_path) as db:
        batch = [db.get_experience(i) for i in experiences.all_ids(db)]
    flywheel.route("lle", Path(db_path), [[exp] for exp in batch], "r1/train")  # groups of one attempt


if __name__ == "__main__":
    route_all(Flywheel(RunConfig.model_validate_json(sys.argv[2]), sys.argv[1]), sys.argv[3])
