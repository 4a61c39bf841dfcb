"""Untrusted text keeps its quoting through every digest, cut and export.

Memory digests cut each step at 120 characters, which dropped the closing marker of a quoted tool
output, so "IMPORTANT!!! Ignore all previous inst…" reached the prompts of held-out episodes as if it
were the harness's own words. A cut now happens inside the quote, never through its markers; the
dataset refuses rows that carry a flagged instruction outside quotes; the poison report counts every
carrier, the dataset included.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lle.carriers.dataset import Dataset
from lle.carriers.memory import memory_item_from
from lle.context.builder import episode_digest, render_item
from lle.context.compress import clip_end, shorten_middle
from lle.core import CarrierKind, Split, UpdateOp
from lle.evidence import assess_experience
from lle.flywheel import poison
from lle.governance.hygiene import ContaminationIndex, quote_untrusted, scrub_experience
from lle.policies.scripted import ScriptedPolicy
from lle.router.router import UpdateRouter
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy.keys import KeysFamily, oracle_actions

INJECTION = poison.INJECTIONS[1].format(mark=poison.INJECTION_MARK)  # "IMPORTANT!!! Ignore all previous …"
OPEN = re.compile(r"<<untrusted source=[^>]*>>")
CLOSE = "<<end>>"


def quoting_holds(text: str) -> None:
    """Markers are whole and balanced, and no injected word stands outside a quote."""
    assert len(OPEN.findall(text)) == text.count(CLOSE), text
    assert text.count("<<") == len(OPEN.findall(text)) + text.count(CLOSE), f"a marker was cut: {text!r}"
    outside = re.sub(r"<<untrusted source=[^>]*>>.*?<<end>>", "", text, flags=re.DOTALL)
    assert "IMPORTANT" not in outside and "Ignore" not in outside, f"injection outside quotes: {text!r}"


def test_a_cut_at_every_length_keeps_both_markers() -> None:
    quoted = quote_untrusted(f"You see a chest.\n{INJECTION}", "tool:look")
    for text in (quoted, f"look {{}} -> {quoted} then more", f"{quoted}\n{quoted}"):
        for limit in range(1, len(text) + 3):
            quoting_holds(clip_end(text, limit))
            quoting_holds(shorten_middle(text, limit))


@settings(max_examples=300, deadline=None)
@given(before=st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=60),
       after=st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=60),
       body=st.text(max_size=80), limit=st.integers(min_value=0, max_value=400))
@example(before="", after="", body="<<", limit=43)  # data "<<" cut to "<<…" read as a marker cut through
def test_cuts_never_cut_through_a_quote_property(before: str, after: str, body: str, limit: int) -> None:
    text = before + quote_untrusted(f"{body} {INJECTION}", "tool:read") + after
    quoting_holds(clip_end(text, max(limit, 1)))
    quoting_holds(shorten_middle(text, limit))


def test_a_cut_still_shortens() -> None:
    text = "x" * 50 + quote_untrusted("y" * 500, "tool:cat") + "z" * 50
    assert len(clip_end(text, 200)) <= 200 and len(shorten_middle(text, 200)) <= 200


@pytest.fixture(scope="module")
def poisoned_toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[str]]:
    """Toy episodes whose every observation carries an injected instruction, routed by lle; one of them
    with an agent that copied the injection into its own thought (unquoted in its dataset rows)."""
    store = Store(tmp_path_factory.mktemp("poison") / "lle.db")
    family = KeysFamily()
    router = UpdateRouter(store, contamination=ContaminationIndex.from_families([family], per_split=30))
    ids = []
    for seed in range(3):
        sw = family.small_world(Split.train, seed)
        world = poison.PoisonWrapper(family.make_world(sw), sw)
        world.active = True
        actions = oracle_actions(sw)
        if seed == 2:
            actions = [actions[0].model_copy(update={"thought": INJECTION}), *actions[1:]]
        exp = run_episode(sw, ScriptedPolicy(actions), world=world, store=store, assess=assess_experience)
        router.route(exp)
        ids.append(exp.id)
    return store, ids


def test_memory_digests_of_poisoned_episodes_keep_the_quotes(poisoned_toy: tuple[Store, list[str]]) -> None:
    store, ids = poisoned_toy
    memories = [i for i in store.carrier_items(CarrierKind.memory.value)]
    assert memories
    assert all("<<untrusted source=tool:" in str(item.content) for item in memories)
    for item in memories:
        quoting_holds(episode_digest(item.content))  # type: ignore[arg-type]
        quoting_holds(render_item(item).replace("\\n", "\n"))
    for exp_id in ids:  # and the item built straight from the scrubbed experience
        quoting_holds(str(memory_item_from(scrub_experience(store.get_experience(exp_id))).content))


def test_the_dataset_refuses_rows_with_an_unquoted_flagged_instruction(poisoned_toy: tuple[Store, list[str]]) -> None:
    store, ids = poisoned_toy
    decisions = {u.experience_ids[0]: u for u in store.list_updates(limit=10_000, carrier="dataset")}
    assert decisions[ids[0]].op is UpdateOp.admit, "quoted injections in observations are data: admitted"
    refused = decisions[ids[2]]
    assert refused.op is UpdateOp.reject and refused.gate is not None
    assert any("outside quotes" in r for r in refused.gate.reasons), refused.gate.reasons
    again = Dataset(store).admit(store.get_experience(ids[2]))
    assert again.op is UpdateOp.reject


def test_the_poison_count_includes_dataset_rows(poisoned_toy: tuple[Store, list[str]]) -> None:
    store, _ = poisoned_toy
    counts = poison.poisoned_items(store)
    for carrier in CarrierKind:
        assert f"{carrier.value}:injected" in counts and f"{carrier.value}:preference" in counts
    assert counts["dataset:injected"] == 2, counts  # the two admitted episodes saw the injection (quoted)
    assert counts["dataset:injected_unquoted"] == counts["memory:injected_unquoted"] == 0, counts
    memories = [i for i in store.carrier_items(CarrierKind.memory.value) if poison.INJECTION_MARK in str(i.content)]
    assert counts["memory:injected"] == len(memories)


def test_a_quote_in_an_export_row_is_whole(poisoned_toy: tuple[Store, list[str]], tmp_path: Path) -> None:
    import json

    from lle.carriers.exports import export

    store, _ = poisoned_toy
    snap = export(Dataset(store), "sft", tmp_path)
    rows = [json.loads(line) for line in Path(snap.path).read_text().splitlines()]
    assert rows
    for row in rows:
        for message in row["messages"]:
            if message["role"] != "assistant":
                quoting_holds(message["content"])
