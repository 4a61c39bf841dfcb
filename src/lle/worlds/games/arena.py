"""TextArena single-player games: `games/guess-number-v1`, `games/hanoi-v1`, `games/mastermind-v1`.

One world per game, played through TextArena's own env (no wrappers, nothing remote). lle fixes the
task (the hidden number, the starting towers, the secret code) from a finite list of items; an
item's split is a stable hash of its key, so a held-out item is a task never seen in train. Each
observation is self-contained (the game's messages plus a status line with everything so far), so a
policy that reads only the latest observation can play. Success is the game's own end state, checked
on the real game state (`verify`), never the agent's word; the hidden answer never reaches an
observation, an info field or `state()`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import permutations, product
from typing import Any, ClassVar

from pydantic import JsonValue

from lle.core import ActionRequest, Limits, SmallWorld, Split, ToolSpec, WorldStep
from lle.errors import WorldError
from lle.worlds.base import BaseWorld, TaskFamily, split_of, stable_order
from lle.worlds.levels import levelled_id
from lle.worlds.toolkit import SUBMIT, GameVerdict

HIDDEN_TYPES = ("PLAYER_ACTION", "PROMPT", "GAME_BOARD")
"""Message types not echoed per step: the action (the model wrote it), the prompt (shown once at reset),
the board (the status line renders it)."""


@dataclass(frozen=True)
class Item:
    """One task of a game: a stable key (its split follows from it), a public variant, the hidden data."""

    key: str
    group: str
    """The public variant (range, number of disks, code length); splits interleave variants."""
    data: tuple[int, ...]


class ArenaGame(ABC):
    """What differs between the TextArena games; the world and family below are shared."""

    world_id: str
    env_id: str
    """The TextArena registry id whose env class this game uses."""
    project: str
    tool: ToolSpec
    max_turns: int
    max_steps: int
    anchor: str
    levels: tuple[str, ...] = ()
    """Difficulty levels, easiest first, in words; `level_items(i)` are the tasks of level i."""

    @abstractmethod
    def items(self) -> list[Item]: ...

    def level_items(self, level: int) -> list[Item]:
        """The tasks of difficulty `level` (an item keeps its key, hence its split, in every level it is in)."""
        raise WorldError(f"{self.world_id} has no difficulty levels; leave level unset")

    def split_key(self, item: Item) -> str:
        """What `split_of` hashes for `item`: the world id and the item's key."""
        return f"{self.world_id}:{item.key}"

    @abstractmethod
    def make_env(self, item: Item) -> Any: ...

    @abstractmethod
    def command(self, args: dict[str, JsonValue]) -> str:
        """The game's own command text for the tool's arguments (a malformed one lets the game say so)."""

    @abstractmethod
    def status(self, env: Any) -> str:
        """One line with everything the player knows so far (never the hidden answer)."""

    @abstractmethod
    def public_state(self, env: Any) -> dict[str, JsonValue]: ...

    @abstractmethod
    def solved(self, env: Any) -> tuple[bool, dict[str, JsonValue]]:
        """The anchor on the real game state: (solved, what was looked at)."""

    @abstractmethod
    def goal(self, item: Item) -> str: ...

    @abstractmethod
    def solve(self, observation: str) -> ActionRequest:
        """The reference move for a status line (a solver that reads only the observation)."""

    def public_reason(self, reason: str) -> str:
        return reason


def _int(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _turns_left(game: ArenaGame, env: Any) -> int:
    return max(0, game.max_turns - int(env.state.turn))


# --- Guess the number ------------------------------------------------------------------------------


class GuessNumber(ArenaGame):
    world_id = "games/guess-number-v1"
    env_id = "GuessTheNumber-v0"
    project = "guess-number"
    max_turns = 10
    max_steps = 14
    anchor = "textarena:guessed-number"
    ranges = ((1, 20), (1, 50), (1, 100))
    tool = ToolSpec(
        name="guess", description="Guess the hidden number (sent to the game as `[N]`).", permissions=["write"],
        parameters={"type": "object", "properties": {"number": {"type": "integer", "minimum": 1, "maximum": 100}},
                    "required": ["number"], "additionalProperties": False},
    )

    levels = (
        "a window of 10 numbers (e.g. 31-40): at most 4 guesses with halving",
        "a window of 30 numbers (1-30, 31-60 or 61-90): at most 5 guesses",
        "the range 1-100: at most 7 guesses",
    )
    level_windows = (tuple((lo, lo + 9) for lo in range(1, 100, 10)), ((1, 30), (31, 60), (61, 90)), ((1, 100),))
    """Per level, the (low, high) ranges its hidden numbers are drawn in."""

    def items(self) -> list[Item]:
        return self._items(self.ranges)

    def level_items(self, level: int) -> list[Item]:
        return self._items(self.level_windows[level])

    @staticmethod
    def _items(ranges: Sequence[tuple[int, int]]) -> list[Item]:
        return [Item(f"{lo}-{hi}:{n}", f"{lo}-{hi}", (lo, hi, n)) for lo, hi in ranges for n in range(lo, hi + 1)]

    def make_env(self, item: Item) -> Any:
        from lle.worlds.games.arena_envs import FixedGuessTheNumber

        lo, hi, n = item.data
        return FixedGuessTheNumber(n, min_number=lo, max_number=hi, max_turns=self.max_turns)

    def command(self, args: dict[str, JsonValue]) -> str:
        number = _int(args.get("number"))
        return "[?]" if number is None else f"[{number}]"

    def status(self, env: Any) -> str:
        history = ", ".join(f"{g} ({hint})" for g, hint in env.state.game_state["guess_history"])
        return (f"Range: {env.min_number}-{env.max_number}. Guesses so far: {history or 'none'}. "
                f"Turns left: {_turns_left(self, env)}.")

    def public_state(self, env: Any) -> dict[str, JsonValue]:
        return {"guesses": [int(g) for g, _ in env.state.game_state["guess_history"]], "turn": int(env.state.turn)}

    def solved(self, env: Any) -> tuple[bool, dict[str, JsonValue]]:
        hit = env.game_number in env.guessed_numbers
        return hit, {"guessed_it": hit, "guesses": len(env.guessed_numbers)}

    def public_reason(self, reason: str) -> str:
        # TextArena's turn-limit message names the target ("…, Target: 42"): the model must never see it.
        return re.sub(r",?\s*Target:\s*-?\d+", "", reason)

    def goal(self, item: Item) -> str:
        lo, hi, _ = item.data
        return (f"Find the hidden whole number between {lo} and {hi} in at most {self.max_turns} guesses with "
                "`guess`; after each guess the game says whether the number is higher or lower.")

    def solve(self, observation: str) -> ActionRequest:
        found = re.search(r"Range: (\d+)-(\d+)\. Guesses so far: ([^\n]*?)\. Turns left", observation)
        if found is None:
            raise WorldError("guess-number solver: no status line in the observation")
        lo, hi = int(found.group(1)), int(found.group(2))
        for guess, hint in re.findall(r"(\d+) \((higher|lower)\)", found.group(3)):
            if hint == "higher":
                lo = max(lo, int(guess) + 1)
            else:
                hi = min(hi, int(guess) - 1)
        return ActionRequest(tool="guess", args={"number": (lo + hi) // 2}, thought=f"binary search in {lo}-{hi}")


# --- Tower of Hanoi ---------------------------------------------------------------------------------

PEGS = ("A", "B", "C")


def hanoi_plan(towers: dict[str, list[int]], target: str = "C") -> list[tuple[str, str]]:
    """The shortest move list that stacks every disk on `target`, from any legal position (classic recursion)."""
    where = {disk: peg for peg, disks in towers.items() for disk in disks}
    moves: list[tuple[str, str]] = []

    def put(size: int, dest: str) -> None:
        if size == 0:
            return
        if where[size] == dest:
            put(size - 1, dest)
            return
        spare = next(p for p in PEGS if p not in (where[size], dest))
        put(size - 1, spare)
        moves.append((where[size], dest))
        where[size] = dest
        put(size - 1, dest)

    put(len(where), target)
    return moves


class Hanoi(ArenaGame):
    world_id = "games/hanoi-v1"
    env_id = "TowerOfHanoi-v0"
    project = "hanoi"
    max_turns = 32
    max_steps = 40
    anchor = "textarena:towers"
    tool = ToolSpec(
        name="move", description="Move the top disk of `source` onto `target` (sent to the game as `[A C]`).",
        permissions=["write"],
        parameters={"type": "object", "properties": {"source": {"type": "string", "enum": list(PEGS)},
                                                     "target": {"type": "string", "enum": list(PEGS)}},
                    "required": ["source", "target"], "additionalProperties": False},
    )

    levels = (
        "2 disks from any start (at most 3 moves)",
        "3 disks from any start (at most 7 moves)",
        "4 disks from any start (at most 15 moves)",
    )

    def items(self) -> list[Item]:
        return self._items((3, 4))

    def level_items(self, level: int) -> list[Item]:
        return self._items((level + 2,))

    @staticmethod
    def _items(disks: Sequence[int]) -> list[Item]:
        found = []
        for n in disks:
            for place in product(range(3), repeat=n):  # place[d] = peg of disk d+1
                if all(p == 2 for p in place):
                    continue  # already solved
                found.append(Item(f"{n}:{''.join(PEGS[p] for p in place)}", f"{n} disks", tuple(place)))
        return found

    def split_key(self, item: Item) -> str:
        # Two disks give only 8 starts, found in no unlevelled list; hashed with the world id alone none of
        # them would land in dev, so they get a salt of their own (one that puts a start in dev and in test).
        return f"{self.world_id}:2 disks:{item.key}" if len(item.data) == 2 else super().split_key(item)

    @staticmethod
    def towers(item: Item) -> dict[str, list[int]]:
        towers: dict[str, list[int]] = {p: [] for p in PEGS}
        for size in range(len(item.data), 0, -1):
            towers[PEGS[item.data[size - 1]]].append(size)
        return towers

    def make_env(self, item: Item) -> Any:
        from lle.worlds.games.arena_envs import FixedTowerOfHanoi

        return FixedTowerOfHanoi(self.towers(item), max_turns=self.max_turns)

    def command(self, args: dict[str, JsonValue]) -> str:
        return f"[{args.get('source', '?')} {args.get('target', '?')}]"

    def status(self, env: Any) -> str:
        towers = env.state.game_state["towers"]
        return (f"Towers (bottom to top): {' | '.join(f'{p}: {towers[p]}' for p in PEGS)}. "
                f"Turns left: {_turns_left(self, env)}.")

    def public_state(self, env: Any) -> dict[str, JsonValue]:
        return {f"tower.{p}": [int(d) for d in disks] for p, disks in env.state.game_state["towers"].items()}

    def solved(self, env: Any) -> tuple[bool, dict[str, JsonValue]]:
        towers = env.state.game_state["towers"]
        done = towers["C"] == list(range(env.num_disks, 0, -1)) and not towers["A"] and not towers["B"]
        return done, {"all_on_c": done, "disks": int(env.num_disks), "on_c": len(towers["C"])}

    def goal(self, item: Item) -> str:
        return (f"Solve the Tower of Hanoi with {len(item.data)} disks spread over towers A, B and C: stack all "
                f"disks on tower C, largest at the bottom, within {self.max_turns} moves, using `move`.")

    def solve(self, observation: str) -> ActionRequest:
        found = re.search(r"Towers \(bottom to top\): A: \[([\d, ]*)\] \| B: \[([\d, ]*)\] \| C: \[([\d, ]*)\]",
                          observation)
        if found is None:
            raise WorldError("hanoi solver: no towers in the observation")
        towers = {p: [int(d) for d in found.group(i + 1).split(",") if d.strip()] for i, p in enumerate(PEGS)}
        plan = hanoi_plan(towers)
        if not plan:
            return ActionRequest(tool="submit", thought="all disks are on C")
        source, target = plan[0]
        return ActionRequest(tool="move", args={"source": source, "target": target}, thought=f"{len(plan)} to go")


# --- Mastermind ---------------------------------------------------------------------------------------


def pegs(guess: Sequence[int], code: Sequence[int]) -> tuple[int, int]:
    """(black, white) for codes without repeats, as TextArena scores them."""
    black = sum(g == c for g, c in zip(guess, code, strict=True))
    return black, len(set(guess) & set(code)) - black


class Mastermind(ArenaGame):
    world_id = "games/mastermind-v1"
    env_id = "Mastermind-v0"
    project = "mastermind"
    max_turns = 10
    max_steps = 14
    anchor = "textarena:code-cracked"
    variants = ((3, 5), (4, 6))
    """(code length, digits 1..N), no repeats."""
    tool = ToolSpec(
        name="guess", description="Guess the secret code, one digit per entry (sent to the game as `[1 2 3 4]`).",
        permissions=["write"],
        parameters={"type": "object", "properties": {"code": {
            "type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 6}, "minItems": 2, "maxItems": 4}},
            "required": ["code"], "additionalProperties": False},
    )

    levels = (
        "a code of 2 different digits from 1 to 6 (30 codes)",
        "a code of 3 different digits from 1 to 5 (60 codes)",
        "a code of 4 different digits from 1 to 6 (360 codes)",
    )
    level_variants = ((2, 6), (3, 5), (4, 6))

    def items(self) -> list[Item]:
        return self._items(self.variants)

    def level_items(self, level: int) -> list[Item]:
        return self._items(self.level_variants[level:level + 1])

    @staticmethod
    def _items(variants: Sequence[tuple[int, int]]) -> list[Item]:
        return [Item(f"{length}of{n}:{''.join(map(str, code))}", f"{length} digits 1-{n}", (n, *code))
                for length, n in variants for code in permutations(range(1, n + 1), length)]

    def make_env(self, item: Item) -> Any:
        from lle.worlds.games.arena_envs import FixedMastermind

        return FixedMastermind(list(item.data[1:]), num_numbers=item.data[0], max_turns=self.max_turns)

    def command(self, args: dict[str, JsonValue]) -> str:
        code = args.get("code")
        digits = [_int(d) for d in code] if isinstance(code, list) else []
        return "[" + " ".join(str(d) for d in digits if d is not None) + "]"

    def status(self, env: Any) -> str:
        gs = env.state.game_state
        history = "; ".join(f"[{' '.join(map(str, h['guess']))}] {h['black']} black {h['white']} white"
                            for h in gs["history"])
        return (f"Code: {gs['code_length']} digits from 1 to {gs['num_numbers']}, no repeats. "
                f"Guesses so far: {history or 'none'}. Turns left: {_turns_left(self, env)}.")

    def public_state(self, env: Any) -> dict[str, JsonValue]:
        return {"guesses": [" ".join(map(str, h["guess"])) for h in env.state.game_state["history"]],
                "turn": int(env.state.turn)}

    def solved(self, env: Any) -> tuple[bool, dict[str, JsonValue]]:
        history = env.state.game_state["history"]
        cracked = bool(history) and history[-1]["black"] == env.state.game_state["code_length"]
        return cracked, {"cracked": cracked, "guesses": len(history)}

    def goal(self, item: Item) -> str:
        n, length = item.data[0], len(item.data) - 1
        return (f"Crack the secret code of {length} different digits from 1 to {n} within {self.max_turns} "
                "guesses with `guess`; each guess is scored in black pegs (right digit, right place) and white "
                "pegs (right digit, wrong place).")

    def solve(self, observation: str) -> ActionRequest:
        spec = re.search(r"Code: (\d+) digits from 1 to (\d+), no repeats\. Guesses so far: ([^\n]*?)\. Turns left",
                         observation)
        if spec is None:
            raise WorldError("mastermind solver: no status line in the observation")
        length, n = int(spec.group(1)), int(spec.group(2))
        seen = [([int(d) for d in g.split()], (int(b), int(w)))
                for g, b, w in re.findall(r"\[([\d ]+)\] (\d+) black (\d+) white", spec.group(3))]
        for code in permutations(range(1, n + 1), length):
            if all(pegs(guess, code) == score and list(code) != guess for guess, score in seen):
                return ActionRequest(tool="guess", args={"code": list(code)}, thought="first code consistent so far")
        raise WorldError("mastermind solver: no code fits the feedback")


GAMES: dict[str, ArenaGame] = {g.world_id: g for g in (GuessNumber(), Hanoi(), Mastermind())}


# --- items and splits ---------------------------------------------------------------------------------------


@cache
def all_items(world_id: str, level: int | None = None) -> tuple[Item, ...]:
    """Every item of a game (or of one of its levels); a world seed is an index here. The order is a stable
    hash shuffle, so a seed says nothing about its item by itself (listed in order, seed 4 would be the number 5)."""
    game = GAMES[world_id]
    items = {it.key: it for it in (game.items() if level is None else game.level_items(level))}
    salt = f"{world_id}:seeds" if level is None else f"{world_id}:L{level}:seeds"
    return tuple(items[k] for k in stable_order(list(items), salt))


@cache
def split_items(world_id: str, split: Split, level: int | None = None) -> tuple[int, ...]:
    """Indexes into `all_items` of one split: hashed by item key (an item is in the same split at every level),
    variants interleaved, order stable."""
    items = all_items(world_id, level)
    index = {it.key: i for i, it in enumerate(items)}
    groups: dict[str, list[str]] = {}
    for it in items:
        if split_of(GAMES[world_id].split_key(it)) == split:
            groups.setdefault(it.group, []).append(it.key)
    queues = [stable_order(keys, world_id) for _, keys in sorted(groups.items())]
    order: list[int] = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(index[queue.pop(0)])
    return tuple(order)


# --- world and family ---------------------------------------------------------------------------------------


class ArenaWorld(BaseWorld):
    """One TextArena game; `reset(seed=…)` takes the item's index in the game's item list."""

    version = "1"

    def __init__(self, game: ArenaGame, *, seed: int, level: int | None = None) -> None:
        self.game = game
        self.default_seed = seed
        self.level = level
        self.tools = [game.tool, SUBMIT]
        self.env: Any = None
        self.done = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        index = self.default_seed if seed is None else int(seed)
        items = all_items(self.game.world_id, self.level)
        if not 0 <= index < len(items):
            raise WorldError(f"{self.game.world_id} has items 0-{len(items) - 1}; seed {index} is none of them")
        self.env = self.game.make_env(items[index])
        self.env.reset(num_players=1, seed=None)
        self.done = False
        prompt = "\n".join(m for _, m, kind in self.env.get_observation()[1] if kind.name == "PROMPT")
        example = self.game.command(EXAMPLE_ARGS)
        text = (f"{prompt.strip()}\n\n(Play with the `{self.game.tool.name}` tool: it sends the game a command "
                f"such as {example}.)\n{self.game.status(self.env)}")
        return text, {"game": self.game.env_id, "variant": items[index].group}

    def step(self, action: ActionRequest) -> WorldStep:
        if self.env is None or self.done:
            raise WorldError(f"{self.game.world_id}: step() before reset() or after the episode ended; call reset()")
        if action.tool == "submit":
            return self._end("submit", "You stop playing.")
        if action.tool != self.game.tool.name:
            raise WorldError(f"{self.game.world_id} has no tool {action.tool!r}; use {self.game.tool.name} or submit")
        command = self.game.command(action.args)
        done, _ = self.env.step(command)
        said = [m.strip() for _, m, kind in self.env.get_observation()[1] if kind.name not in HIDDEN_TYPES]
        text = "\n".join([f"You played {command}.", *said])
        if done:
            return self._end("game", text)
        if int(self.env.state.turn) >= self.game.max_turns:
            # TextArena checks its turn limit one move late (it would allow max_turns + 1); the prompt says
            # max_turns, so the world ends the game there, as lost.
            return self._end("turn-limit", f"{text}\nThe turn limit of {self.game.max_turns} turns has been reached.")
        return WorldStep(f"{text}\n{self.game.status(self.env)}", 0.0, False, False, {"command": command})

    def state(self) -> dict[str, JsonValue]:
        if self.env is None:
            return {}
        return {**self.game.public_state(self.env), "done": self.done}

    def verdict(self) -> GameVerdict:
        return verify(self.game, self.env)

    def _end(self, ended_by: str, text: str) -> WorldStep:
        self.done = True
        verdict = self.verdict()
        reason = str(self.env.state.game_info[0].get("reason") or "")
        lines = [text, self.game.public_reason(reason), self.game.status(self.env),
                 "Solved." if verdict.success else "Not solved."]
        return WorldStep("\n".join(x for x in lines if x), 1.0 if verdict.success else 0.0, True, False,
                         verdict.info(ended_by=ended_by))


def verify(game: ArenaGame, env: Any) -> GameVerdict:
    """The anchor: the game's real state says solved, and the game itself ended with reward 1."""
    solved, detail = game.solved(env)
    rewards = env.state.rewards or {}
    reward = float(rewards.get(0, 0.0))
    ended = bool(env.state.done)
    return GameVerdict(anchor=game.anchor, success=solved and ended and reward == 1.0, score=reward,
                       detail={**detail, "game_over": ended, "game_reward": reward})


EXAMPLE_ARGS: dict[str, JsonValue] = {"number": 5, "source": "A", "target": "C", "code": [1, 2, 3]}
"""Arguments for the example command shown at reset (each game reads the keys it knows)."""


class ArenaFamily(TaskFamily):
    """A TextArena game as a task family; subclasses fix the game."""

    game: ClassVar[ArenaGame]
    family = "games"
    version = "1"
    anchor = "state"
    quick_reset = True

    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        split = Split(split)
        level = self.check_level(level)
        if project not in (None, self.game.project):
            raise WorldError(f"{self.id} has no project {project!r}; use {self.game.project}")
        order = split_items(self.id, split, level)
        at = "" if level is None else f" at level {level}"
        if not 0 <= seed < len(order):
            raise WorldError(f"{self.id} has {len(order)} {split.value} tasks{at}; use a seed in 0-{len(order) - 1}")
        index = order[seed]
        return SmallWorld(
            id=levelled_id(self.id, split, seed, level), world=self.id, family=self.family, level=level,
            project=self.game.project, split=split, seed=index, goal=self.game.goal(all_items(self.id, level)[index]),
            tools=list(self.tools),
            limits=Limits(max_steps=self.game.max_steps, max_seconds=60.0),
        )

    def make_world(self, small_world: SmallWorld) -> ArenaWorld:
        self.check_small_world(small_world)
        return ArenaWorld(self.game, seed=small_world.seed, level=self.check_level(small_world.level))

    @classmethod
    def split_sizes(cls, project: str | None = None) -> dict[Split, int | None]:
        return {s: len(split_items(cls.id, s)) for s in Split}


class GuessNumberFamily(ArenaFamily):
    """`games/guess-number-v1`: find a hidden number from higher/lower hints (TextArena GuessTheNumber)."""

    id = GuessNumber.world_id
    game = GAMES[GuessNumber.world_id]
    projects = (GuessNumber.project,)
    levels = GuessNumber.levels
    tools = (GAMES[GuessNumber.world_id].tool.name, "submit")


class HanoiFamily(ArenaFamily):
    """`games/hanoi-v1`: Tower of Hanoi from a scattered start (TextArena TowerOfHanoi)."""

    id = Hanoi.world_id
    game = GAMES[Hanoi.world_id]
    projects = (Hanoi.project,)
    levels = Hanoi.levels
    tools = (GAMES[Hanoi.world_id].tool.name, "submit")


class MastermindFamily(ArenaFamily):
    """`games/mastermind-v1`: crack a code from black/white pegs (TextArena Mastermind)."""

    id = Mastermind.world_id
    game = GAMES[Mastermind.world_id]
    projects = (Mastermind.project,)
    levels = Mastermind.levels
    tools = (GAMES[Mastermind.world_id].tool.name, "submit")
