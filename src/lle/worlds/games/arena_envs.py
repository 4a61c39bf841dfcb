"""TextArena's single-player games with the task fixed by lle instead of drawn from the global `random`.

Each class subclasses the game's own env and replaces only `reset`: the hidden number, the secret
code or the starting towers come from the small world's item, and the game state is built exactly
as the original `reset` builds it. Moves, rules, rewards and the end of the game stay TextArena's
code. Passing `seed=None` to the state keeps TextArena from reseeding the process-wide `random`.

Imported lazily (TextArena's import takes about a second), by `lle.worlds.games.arena` only.
"""

from __future__ import annotations

from typing import Any

import textarena as ta
from textarena.envs.GuessTheNumber.env import GuessTheNumberEnv
from textarena.envs.Mastermind.env import MastermindEnv
from textarena.envs.TowerOfHanoi.env import TowerOfHanoiEnv

BASED_ON = {
    "GuessTheNumber-v0": GuessTheNumberEnv,
    "TowerOfHanoi-v0": TowerOfHanoiEnv,
    "Mastermind-v0": MastermindEnv,
}
"""TextArena registry id -> the env class its entry point names (a test checks the registry agrees)."""


class FixedGuessTheNumber(GuessTheNumberEnv):  # type: ignore[misc]
    def __init__(self, target: int, *, min_number: int, max_number: int, max_turns: int) -> None:
        super().__init__(min_number=min_number, max_number=max_number, max_turns=max_turns)
        self.target = target

    def reset(self, num_players: int, seed: int | None = None) -> None:
        self.state = ta.SinglePlayerState(num_players=num_players, seed=None, max_turns=self.max_turns)
        self.game_number = self.target
        self.guessed_numbers: set[int] = set()
        self.state.reset(game_state={"game_number": self.game_number, "guess_history": []},
                         player_prompt_function=self._prompt)


class FixedTowerOfHanoi(TowerOfHanoiEnv):  # type: ignore[misc]
    def __init__(self, towers: dict[str, list[int]], *, max_turns: int) -> None:
        super().__init__(num_disks=sum(len(t) for t in towers.values()), max_turns=max_turns)
        self.start = {peg: list(disks) for peg, disks in towers.items()}

    def reset(self, num_players: int, seed: int | None = None) -> None:
        self.state = ta.SinglePlayerState(num_players=num_players, max_turns=self.max_turns, seed=None)
        towers = {peg: list(disks) for peg, disks in self.start.items()}
        self.state.reset(game_state={"towers": towers}, player_prompt_function=self._generate_player_prompt)
        self.state.add_observation(message=f"Current Board: \n{self._render_board()}.",
                                   observation_type=ta.ObservationType.GAME_BOARD)

    def _generate_player_prompt(self, player_id: int, game_state: dict[int, Any]) -> str:
        # The original prompt says "from tower A"; here the disks start spread over the towers.
        return (
            f"You are playing Tower of Hanoi with {self.num_disks} disks.\n"
            "You have to move all disks onto tower C, largest at the bottom.\n"
            "To move a disk, give the source tower and the target tower (e.g., '[A C]').\n"
            "Note that you can only move the top disk of a tower, and that a bigger disk cannot be placed on a "
            "smaller disk.\nAt each turn, submit one move."
        )


class FixedMastermind(MastermindEnv):  # type: ignore[misc]
    def __init__(self, code: list[int], *, num_numbers: int, max_turns: int) -> None:
        super().__init__(code_length=len(code), num_numbers=num_numbers, max_turns=max_turns,
                         duplicate_numbers=False)
        self.code = list(code)

    def reset(self, num_players: int, seed: int | None = None) -> None:
        self.state = ta.SinglePlayerState(num_players=num_players, seed=None, max_turns=self.max_turns)
        game_state = {"secret_code": list(self.code), "guess": [], "code_length": self.code_length,
                      "num_numbers": self.num_numbers, "duplicate_numbers": self.duplicate_numbers, "history": []}
        self.state.reset(game_state=game_state, player_prompt_function=self._generate_player_prompt)
