"""TextWorldExpress worlds: `games/coin-v1`, `games/twc-v1`, `games/cooking-v1`.

TextWorldExpress is a Java simulator behind py4j. A world opens its game on the first reset and
reuses it for every later reset; the JVM under it is shared by all open worlds of the process and
shut down (and reaped) when the last one closes (`twx_jvm`). Splits are the game's own folds:
train seeds 0-999, dev 10000-10999, test 20000-20999, each fold with its own objects.

Success is the game's own state (`tasksuccess` with a full score, no `taskfailure`), read from the
simulator after the last command, never from the agent's word. The gold path the simulator computes
stays in the JVM: it is reachable only through `TwxWorld.gold_actions()` (for reference solutions)
and never appears in an observation or an info field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import JsonValue

from lle.core import ActionRequest, Limits, SmallWorld, Split, ToolSpec, WorldStep
from lle.errors import WorldError
from lle.worlds.base import BaseWorld, TaskFamily
from lle.worlds.games.twx_jvm import Simulator
from lle.worlds.toolkit import SUBMIT, GameVerdict

FOLD_BASE = {Split.train: 0, Split.dev: 10000, Split.test: 20000}
"""First TextWorldExpress seed of each fold; `TextWorldExpressEnv.getValidSeeds*` list exactly these ranges."""
SEEDS_PER_FOLD = 1000

ACT = ToolSpec(
    name="act",
    description="Type one command into the game, e.g. `look around`, `move east`, `take coin`; "
                "the observation lists the valid commands.",
    permissions=["write"],
    parameters={"type": "object", "properties": {"command": {"type": "string", "minLength": 1, "maxLength": 200}},
                "required": ["command"], "additionalProperties": False},
)
TOOLS = [ACT, SUBMIT]


@dataclass(frozen=True)
class TwxGame:
    """One TextWorldExpress game at a fixed small size."""

    world_id: str
    game: str
    """`gameName` in TextWorldExpress."""
    params: str
    """`gameParams`: kept small so episodes are short."""
    project: str
    max_steps: int


GAMES = {
    "coin": TwxGame("games/coin-v1", "coin", "numLocations=3,numDistractorItems=0,includeDoors=0",
                    "coin-3rooms", 40),
    "twc": TwxGame("games/twc-v1", "twc", "numLocations=1,numItemsToPutAway=2", "twc-1room-2items", 20),
    "cooking": TwxGame("games/cooking-v1", "cookingworld",
                       "numLocations=1,numIngredients=2,numDistractorItems=0,includeDoors=0",
                       "cooking-1room-2ingredients", 40),
}


def fold_of(twx_seed: int) -> Split:
    """The fold a TextWorldExpress seed belongs to; raises on a seed outside the three folds."""
    for split, base in FOLD_BASE.items():
        if base <= twx_seed < base + SEEDS_PER_FOLD:
            return split
    ranges = ", ".join(f"{s.value} {b}-{b + SEEDS_PER_FOLD - 1}" for s, b in FOLD_BASE.items())
    raise WorldError(f"TextWorldExpress seed {twx_seed} is in no fold; use one of {ranges}")


def verify(infos: dict[str, Any]) -> GameVerdict:
    """The anchor: the simulator's own state after the last command (not the agent's claim)."""
    score = float(infos.get("score", 0.0))
    success = bool(infos.get("tasksuccess")) and not bool(infos.get("taskfailure")) and score >= 1.0
    return GameVerdict(
        anchor="textworld-express:tasksuccess", success=success, score=score,
        detail={"tasksuccess": bool(infos.get("tasksuccess")), "taskfailure": bool(infos.get("taskfailure")),
                "score": score, "moves": int(infos.get("numMoves", 0))},
    )


class TwxWorld(BaseWorld):
    """One TextWorldExpress game; `reset(seed=…)` takes a TextWorldExpress seed (its fold follows from it)."""

    version = "1"

    def __init__(self, game: TwxGame, *, seed: int) -> None:
        self.game = game
        self.default_seed = seed
        self.tools = list(TOOLS)
        self._sim: Simulator | None = None
        self.moves = 0
        self._infos: dict[str, Any] | None = None
        self.done = False

    # --- Gymnasium shape ------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        twx_seed = self.default_seed if seed is None else int(seed)
        fold = fold_of(twx_seed)
        infos = self._simulator().reset(twx_seed, fold.value)
        self._infos = infos
        self.done = False
        self.moves = 0
        text = f"{infos['taskDescription'].strip()}\n\n{self._describe(infos['observation'])}"
        return text, {"game": self.game.game, "fold": fold.value, "twx_seed": twx_seed}

    def step(self, action: ActionRequest) -> WorldStep:
        if self._infos is None or self.done:
            raise WorldError(f"{self.game.world_id}: step() before reset() or after the episode ended; call reset()")
        if action.tool == "submit":
            return self._end("submit", "You stop playing.")
        if action.tool != "act":
            raise WorldError(f"{self.game.world_id} has no tool {action.tool!r}; use act or submit")
        command = str(action.args.get("command", "")).strip()
        assert self._sim is not None
        self.moves += 1
        infos = self._sim.step(command, self.moves)
        self._infos = infos
        obs = str(infos["observation"])
        # The game is over when it says so, or at a full score (TextWorldExpressEnv's own rule).
        if infos.get("tasksuccess") or infos.get("taskfailure") or float(infos.get("score", 0.0)) >= 1.0:
            return self._end("game", obs.strip())
        return WorldStep(self._describe(obs), 0.0, False, False, {"game_score": float(infos.get("score", 0.0))})

    def state(self) -> dict[str, JsonValue]:
        if self._infos is None:
            return {}
        room = re.match(r"You are in the ([^.]+)\.", str(self._infos.get("look", "")))
        return {
            "room": room.group(1) if room else None,
            "inventory": str(self._infos.get("inventory", "")).strip(),
            "score": float(self._infos.get("score", 0.0)),
            "tasksuccess": bool(self._infos.get("tasksuccess")),
            "taskfailure": bool(self._infos.get("taskfailure")),
            "done": self.done,
        }

    def close(self) -> None:
        if self._sim is not None:
            self._sim.close()
            self._sim = None

    # --- beyond the protocol ----------------------------------------------------------------------

    def valid_actions(self) -> list[str]:
        """The commands the game accepts now, sorted (the simulator's own order is a hash-set order)."""
        return sorted(str(a) for a in (self._infos or {}).get("validActions", []))

    def tools_now(self) -> list[ToolSpec]:
        """`tools` with `act.command` constrained to the current valid actions (for schema-guided decoding)."""
        enum: list[JsonValue] = list(self.valid_actions())
        params: dict[str, JsonValue] = {"type": "object", "properties": {"command": {"type": "string", "enum": enum}},
                                        "required": ["command"], "additionalProperties": False}
        return [ACT.model_copy(update={"parameters": params}), SUBMIT]

    def gold_actions(self) -> list[str]:
        """The simulator's gold path for the game last reset (for reference solutions; never shown to a model)."""
        if self._sim is None or self._infos is None:
            raise WorldError(f"{self.game.world_id}: gold_actions() before reset(); call reset(seed=…) first")
        return self._sim.gold()

    def verdict(self) -> GameVerdict:
        return verify(self._infos or {})

    # --- helpers -------------------------------------------------------------------------------------

    def _simulator(self) -> Simulator:
        if self._sim is None:
            self._sim = Simulator()
        self._sim.load(self.game.game, self.game.params)
        return self._sim

    def _describe(self, observation: str) -> str:
        score = float((self._infos or {}).get("score", 0.0))
        return (f"{observation.strip()}\n\nScore: {score:g} of 1. "
                f"Valid commands: {', '.join(self.valid_actions())}.")

    def _end(self, ended_by: str, text: str) -> WorldStep:
        self.done = True
        verdict = self.verdict()
        outcome = "The task is complete." if verdict.success else "The task is not complete."
        return WorldStep(f"{text}\n\n{outcome} Final score: {verdict.score:g} of 1.",
                         1.0 if verdict.success else 0.0, True, False, verdict.info(ended_by=ended_by))


class TwxFamily(TaskFamily):
    """A TextWorldExpress game as a task family; subclasses fix the game."""

    game: ClassVar[TwxGame]
    family = "games"
    version = "1"
    tools = ("act", "submit")
    anchor = "state"
    quick_reset = False  # a TextWorldExpress game takes about 0.4 s to build and reset

    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        split = Split(split)
        self.check_level(level)  # no levels here: only None passes
        if project not in (None, self.game.project):
            raise WorldError(f"{self.id} has no project {project!r}; use {self.game.project}")
        if not 0 <= seed < SEEDS_PER_FOLD:
            raise WorldError(f"{self.id} has {SEEDS_PER_FOLD} {split.value} tasks; "
                             f"use a seed in 0-{SEEDS_PER_FOLD - 1}")
        twx_seed = FOLD_BASE[split] + seed
        return SmallWorld(
            id=f"{self.id}:{split.value}:{seed}", world=self.id, family=self.family, project=self.game.project,
            split=split, seed=twx_seed, goal=_goal(self.game), tools=list(self.tools),
            limits=Limits(max_steps=self.game.max_steps,
                                                                          max_seconds=120.0),
        )

    def make_world(self, small_world: SmallWorld) -> TwxWorld:
        self.check_small_world(small_world)
        return TwxWorld(self.game, seed=small_world.seed)

    @classmethod
    def split_sizes(cls, project: str | None = None) -> dict[Split, int | None]:
        return dict.fromkeys(Split, SEEDS_PER_FOLD)


def _goal(game: TwxGame) -> str:
    what = {"coin": "find the coin and take it",
            "twc": "pick up the misplaced objects and put each one in its usual place",
            "cookingworld": "read the cookbook, prepare the meal it describes, then eat it"}[game.game]
    return (f"Play the TextWorldExpress game `{game.game}`: {what}. Type commands with `act`; "
            "the game ends by itself when the task is done (call `submit` only to give up).")


class CoinFamily(TwxFamily):
    """`games/coin-v1`: find the coin in a few rooms."""

    id = GAMES["coin"].world_id
    game = GAMES["coin"]
    projects = (GAMES["coin"].project,)


class TwcFamily(TwxFamily):
    """`games/twc-v1`: TextWorld Commonsense, tidy objects to their usual places."""

    id = GAMES["twc"].world_id
    game = GAMES["twc"]
    projects = (GAMES["twc"].project,)


class CookingFamily(TwxFamily):
    """`games/cooking-v1`: CookingWorld, follow the cookbook's recipe."""

    id = GAMES["cooking"].world_id
    game = GAMES["cooking"]
    projects = (GAMES["cooking"].project,)
