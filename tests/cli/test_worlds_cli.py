"""`lle worlds list|show|play` in real processes: listings, JSON, bad input, a person's game piped in."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lle.core import Split
from lle.worlds.games.arena import Hanoi, HanoiFamily, all_items, hanoi_plan
from lle.worlds.toy import KeysFamily, oracle_actions


def lle(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "worlds", *args],
                          capture_output=True, text=True, input=stdin, timeout=120)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.slow  # loads every registered plugin's module
def test_list_json_names_every_family_with_tools_and_split_sizes() -> None:
    result = lle("list", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    for world_id in ("games/coin-v1", "games/twc-v1", "games/cooking-v1", "games/guess-number-v1",
                     "games/hanoi-v1", "games/mastermind-v1", "toy/keys-v1"):
        assert world_id in rows
    assert not any(i.startswith(("store/", "verifier/")) for i in rows)  # not task families
    assert rows["games/hanoi-v1"]["tools"] == ["move", "submit"]
    assert rows["games/hanoi-v1"]["splits"] == {"train": 87, "dev": 10, "test": 9}
    assert rows["games/coin-v1"]["splits"] == {"train": 1000, "dev": 1000, "test": 1000}
    assert rows["toy/keys-v1"]["splits"] == {"train": None, "dev": None, "test": None}
    assert rows["toy/keys-v1"]["projects"] == ["manor", "cellar"] and rows["toy/keys-v1"]["family"] == "toy"


def test_show_gives_tool_schemas_permissions_verifiers_and_a_sample_goal() -> None:
    info = json.loads(lle("show", "games/mastermind-v1", "--json").stdout)
    tools = {t["name"]: t for t in info["tools"]}
    assert tools["guess"]["parameters"]["required"] == ["code"] and tools["guess"]["permissions"] == ["write"]
    assert tools["submit"]["allowed"] is True
    assert info["verifiers"] == []  # the game's own anchor reports through the world's info
    assert info["sample"]["id"] == "games/mastermind-v1:train:0" and "Crack the secret code" in info["sample"]["goal"]
    assert info["permissions"]["network"] is False and info["limits"]["max_steps"] == 14
    text = lle("show", "toy/keys-v1").stdout
    assert "smash: Break a door open" in text and "never allowed here" in text
    assert "sample toy/keys-v1:manor:train:0" in text  # plain text: no emoji made of `:train:`


@pytest.mark.slow  # three processes
def test_unknown_ids_and_seeds_out_of_range_are_one_line_errors() -> None:
    assert_one_line_error(lle("show", "games/nope-v1"), "no registered id 'games/nope-v1'", "games/hanoi-v1")
    assert_one_line_error(lle("play", "store/sqlite-v1"), "not a TaskFamily")
    assert_one_line_error(lle("play", "games/hanoi-v1", "--seed", "10", "--split", "dev"),
                          "has 10 dev tasks; use a seed in 0-9")


def test_a_person_plays_the_toy_world_to_success_through_stdin() -> None:
    sw = KeysFamily().small_world(Split.train, 0)
    lines = []
    for action in oracle_actions(sw):
        value = next(iter(action.args.values()), None)
        lines.append(action.tool if value is None else f"{action.tool} {value}")
    # Mistakes a person makes are answered, not fatal: an unknown tool, a bad argument, a denied tool.
    session = ["fly north", "go {\"direction\": \"up\"}", "smash door", "help", *lines]
    result = lle("play", "toy/keys-v1", "--seed", "0", stdin="\n".join(session) + "\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Goal: Find the key" in out and "error: unknown tool 'fly'" in out
    assert "malformed action" in out and "denied: tool 'smash' is not allowed" in out
    assert "You step into the vault" in out and "episode over: reward 1.0, success True" in out


def test_a_person_plays_hanoi_with_the_two_word_shorthand() -> None:
    fam = HanoiFamily()
    sw = fam.small_world(Split.test, 2)
    plan = hanoi_plan(Hanoi.towers(all_items(sw.world)[sw.seed]))
    stdin = "".join(f"move {a} {b}\n" for a, b in plan)
    result = lle("play", "games/hanoi-v1", "--split", "test", "--seed", "2", stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert "Solved." in result.stdout and "episode over: reward 1.0, success True" in result.stdout


def test_input_that_ends_early_exits_non_zero() -> None:
    result = lle("play", "games/guess-number-v1", "--seed", "0", stdin="guess 50\n")
    assert result.returncode == 1
    assert "You played [50]." in result.stdout and "input ended before the episode did" in result.stdout
