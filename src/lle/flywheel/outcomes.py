"""A run's held-out outcomes as a file, and one verdict over several such files: a compare over several sittings.

Every strategy of a compare is evaluated on the same held-out small worlds, and each arm's outcomes depend on
the draws, the model, the levers and the code, never on another arm. So a compare too long for one sitting
runs as several runs with the same options but `--strategy` (suite, seed, sizes, levers, model) — for
example `lle run --strategy raw` in one sitting and `lle run --strategy lle --no-baseline` in another —
`lle runs outcomes RUN -o FILE` keeps each run's held-out outcomes (a small JSON file), and
`lle runs verdict FILE…` pools them into the table and the paired verdict that one `lle run --compare` prints.
Files that do not describe the same held-out set are refused with the field that differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lle import __version__
from lle.config import RunConfig
from lle.errors import InvalidInputError
from lle.flywheel import suite as suites
from lle.flywheel.evaluate import Outcomes, run_outcomes, shown_round, verdicts_of
from lle.flywheel.strategies import COMPARE_ORDER
from lle.flywheel.verdict import Verdict, wilson

FORMAT = "lle.outcomes/1"
SAME = ("model", "suite_digest", "seed", "eval_tasks", "max_steps", "rounds", "train_per_round", "group_size",
        "curriculum", "levers")
"""What every pooled file must share: otherwise its arm was evaluated on other tasks or under other conditions."""


def export(folder: Path, config: RunConfig) -> dict[str, Any]:
    """The run's held-out outcomes with what makes them comparable (JSON-ready)."""
    snapshot = suites.for_run(config, folder).as_json()
    outcomes = run_outcomes(folder, config)
    return {"format": FORMAT, "run": config.id, "model": config.model, "suite": snapshot.get("name"),
            "suite_digest": hashlib.sha256(json.dumps(snapshot, sort_keys=True).encode()).hexdigest()[:16],
            "seed": config.seed, "eval_tasks": config.eval_tasks, "max_steps": config.max_steps,
            "rounds": config.rounds, "train_per_round": config.train_per_round, "group_size": config.group_size,
            "curriculum": config.curriculum, "levers": config.levers.model_dump(mode="json"), "lle": __version__,
            "strategies": {s: {str(r): dict(sorted(o.items())) for r, o in per_round.items()}
                           for s, per_round in outcomes.items()}}


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InvalidInputError(f"{path} is not an outcomes file ({type(err).__name__}); write one with "
                                "`lle runs outcomes RUN -o FILE`") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("strategies"), dict):
        raise InvalidInputError(f"{path} is not an outcomes file ({FORMAT}); write one with "
                                "`lle runs outcomes RUN -o FILE`")
    return data


@dataclass
class Pooled:
    outcomes: Outcomes
    rounds: int
    strategies: list[str]
    """Every strategy found, in the compare's order."""
    sources: dict[str, str]
    """Strategy -> the run its outcomes came from."""
    notes: list[str]
    """What the reader should know: a strategy given by two files, and whether they agreed."""


def pool(records: Sequence[tuple[str, dict[str, Any]]]) -> Pooled:
    """(name, loaded file) pairs -> one compare's outcomes. A strategy given by several files is taken from the
    first that has it; where a later one disagrees, a note says on how many tasks."""
    if not records:
        raise InvalidInputError("no outcomes file given; name one or more (`lle runs outcomes RUN -o FILE`)")
    first_name, first = records[0]
    outcomes: Outcomes = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    for name, data in records:
        for key in SAME:
            if data.get(key) != first.get(key):
                raise InvalidInputError(f"{name} and {first_name} differ in {key} ({data.get(key)!r} against "
                                        f"{first.get(key)!r}): their arms were not evaluated alike; pool runs made "
                                        "with the same options but --strategy")
        for strategy, per_round in data["strategies"].items():
            # The same suite, seed, --eval and --steps draw the same held-out small worlds (a pure function).
            rounds = {int(r): dict(o) for r, o in per_round.items()}
            if strategy not in outcomes:
                outcomes[strategy], sources[strategy] = rounds, str(data.get("run"))
                continue
            differ = sum(1 for r, o in rounds.items() for t, v in o.items()
                         if t in outcomes[strategy].get(r, {}) and outcomes[strategy][r][t] != v)
            notes.append(f"{strategy} is in {sources[strategy]} and {data.get('run')}: the first is used"
                         + (f"; they differ on {differ} task(s)" if differ else "; they agree task by task"))
    order = [s for s in [*COMPARE_ORDER, *sorted(outcomes)] if s in outcomes]
    return Pooled(outcomes, int(first["rounds"]), list(dict.fromkeys(order)), sources, notes)


def verdicts(pooled: Pooled, world: str | None = None) -> list[Verdict]:
    return verdicts_of(pooled.outcomes, pooled.strategies, pooled.rounds, world)


def table(pooled: Pooled) -> list[dict[str, object]]:
    """Held-out success per world and strategy at round 0 (`none`) and at each strategy's last round: the rows of
    `lle run`'s table (without steps per solved task, which the files do not keep)."""
    none = pooled.outcomes.get("none", {}).get(0, {})
    worlds = sorted({t.split(":", 1)[0] for per_round in pooled.outcomes.values() for o in per_round.values()
                     for t in o})
    rows: list[dict[str, object]] = []
    for world in [*worlds, "all"]:
        def mine(o: dict[str, bool | None], w: str = world) -> list[bool]:
            return [bool(v) for t, v in o.items() if v is not None and (w == "all" or t.split(":", 1)[0] == w)]

        first = mine(none)
        for strategy in pooled.strategies:
            per_round = pooled.outcomes[strategy]
            last = 0 if strategy == "none" else shown_round({r: len(o) for r, o in per_round.items()},
                                                            pooled.rounds)
            end = mine(per_round[last])
            mark = f" (r{last})" if 0 < last < pooled.rounds else ""
            low, high = wilson(sum(end), len(end))
            rows.append({"world": world, "strategy": strategy, "round0": f"{sum(first)}/{len(first)}",
                         "last": f"{sum(end)}/{len(end)}{mark}", "last_round": last,
                         "last_rate": round(sum(end) / len(end), 3) if end else 0.0,
                         "ci95": [round(low, 3), round(high, 3)], "steps_per_solved": None,
                         "from_run": pooled.sources[strategy]})
    return rows
