"""The curriculum: per family, train where the agent sometimes succeeds.

Learning is measurable only in the band where the agent sometimes succeeds: a family whose train
small worlds are never solved teaches nothing, one that is always solved teaches little. Each family
walks the ladder of levels its suite worlds offer (`levels = [0, 1, 2]` in the suite file), easiest
first. After each round the family's verified train success at its level decides the next round's
level: above the band (default 70 %) it moves up a rung, at 0 % it moves down one, anywhere else it
stays. Families without levels keep their unlevelled tasks.

The choice is a pure function of the suite and the round's stored outcomes, so a resumed run derives
the same levels; each round's choice is written to `curriculum.jsonl` in the run folder (one line per
strategy, round and family), which the report plots.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from lle.core import Experience, Outcome
from lle.flywheel import suite as suites

FILE = "curriculum.jsonl"
DEFAULT_BAND = (0.1, 0.7)


@dataclass(frozen=True)
class Choice:
    """One family's level for one round of one strategy, and what its train episodes there gave."""

    strategy: str
    round: int
    family: str
    level: int
    train_success: float | None
    """Share of the round's train episodes of this family at this level that passed; None before the round."""
    train_episodes: int
    move: str
    """How the level was reached: `start`, `up` (the round before passed the band), `down` (nothing
    succeeded), `stay`."""


def ladders(suite: suites.Suite) -> dict[str, list[int]]:
    """Each levelled family's rungs: the union of its suite worlds' levels, easiest first."""
    out: dict[str, set[int]] = {}
    for entry in suite.entries:
        if entry.levels:
            out.setdefault(suites.family(entry.id).family, set()).update(entry.levels)
    return {fam: sorted(levels) for fam, levels in sorted(out.items())}


def start(suite: suites.Suite) -> dict[str, int]:
    """Round 1's levels: every family at its easiest rung."""
    return {fam: rungs[0] for fam, rungs in ladders(suite).items()}


def success_by_family(experiences: Iterable[Experience]) -> dict[str, tuple[int, int]]:
    """(passed, episodes) per family over `experiences` (an unverified outcome counts as not passed)."""
    out: dict[str, tuple[int, int]] = {}
    for exp in experiences:
        ok, n = out.get(exp.small_world.family, (0, 0))
        out[exp.small_world.family] = (ok + (exp.outcome is Outcome.passed), n + 1)
    return out


def step(suite: suites.Suite, levels: dict[str, int], experiences: Sequence[Experience],
         band: tuple[float, float] = DEFAULT_BAND) -> tuple[dict[str, int], dict[str, str]]:
    """The next round's levels from this round's train `experiences`, and each family's move."""
    rungs = ladders(suite)
    seen = success_by_family(e for e in experiences if e.small_world.level is not None)
    nxt, moves = dict(levels), {}
    for fam, level in levels.items():
        ok, n = seen.get(fam, (0, 0))
        ladder = rungs.get(fam, [level])
        at = ladder.index(level) if level in ladder else 0
        moves[fam] = "stay"
        if n and ok / n > band[1] and at + 1 < len(ladder):
            nxt[fam], moves[fam] = ladder[at + 1], "up"
        elif n and ok == 0 and at > 0:
            nxt[fam], moves[fam] = ladder[at - 1], "down"
    return nxt, moves


def record(folder: Path, rows: list[Choice]) -> None:
    """Write every choice so far (the whole file each time: a resumed run writes the same lines again)."""
    tmp = folder / f"{FILE}.tmp"
    tmp.write_text("".join(json.dumps(asdict(r)) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(folder / FILE)


def load(folder: Path) -> list[Choice]:
    """The choices a run recorded (none for a run without levels or before its first round)."""
    path = folder / FILE
    if not path.exists():
        return []
    return [Choice(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def choices(strategy: str, round_: int, levels: dict[str, int], moves: dict[str, str],
            experiences: Sequence[Experience]) -> list[Choice]:
    """The rows of one round: the level each family trained at, how it got there, and what it gave."""
    seen = success_by_family(experiences)
    out = []
    for fam, level in sorted(levels.items()):
        ok, n = seen.get(fam, (0, 0))
        out.append(Choice(strategy, round_, fam, level, round(ok / n, 4) if n else None, n,
                          moves.get(fam, "start")))
    return out
