"""The dataset carrier on real episodes: admission, rows that `datasets` loads, hygiene, contamination, taint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import datasets  # type: ignore[import-untyped]
import pytest

from lle.carriers.dataset import Dataset, row_texts, seen_messages, sft_rows
from lle.carriers.exports import export, snapshots
from lle.core import ActionRequest, Context, Experience, Feedback, Message, Outcome, SmallWorld, Split, UpdateOp
from lle.evidence import assess_experience
from lle.evidence.verifiers import human_verdict
from lle.flywheel.reward import recompute_reward
from lle.governance.hygiene import ContaminationIndex, redact
from lle.governance.lineage import revoke
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.base import open_world
from lle.worlds.sql.world import ShopFamily, reference_actions
from lle.worlds.toy.keys import KeysFamily, oracle_actions

# Synthetic secrets and PII that a tool output hands the agent; none may reach a row.
SECRETS = ["alice.smith@example.com", "AKIAIOSFODNN7EXAMPLE", "ghp_9f8E7d6C5b4A3z2Y1x0W9v8U7t6S5r4Q3p2O",
           "4111 1111 1111 1111", "hunter2-Very-Secret"]
LEAKY_SQL = (f"SELECT '{SECRETS[0]}' AS email, '{SECRETS[1]}' AS aws_key, '{SECRETS[2]}' AS token, "
             f"'{SECRETS[3]}' AS card, 'password={SECRETS[4]}' AS config")


def visible_text(sw: SmallWorld) -> str:
    world = open_world(sw)
    try:
        return f"{sw.goal}\n{world.reset(seed=sw.seed)[0]}"
    finally:
        world.close()


def run(store: Store, sw: SmallWorld, actions: list[ActionRequest]) -> Experience:
    return run_episode(sw, ScriptedPolicy(actions), store=store, assess=assess_experience)


@dataclass
class Built:
    store: Store
    ids: dict[str, str] = field(default_factory=dict)
    decisions: dict[str, tuple[UpdateOp, list[str]]] = field(default_factory=dict)
    dataset: Dataset | None = None


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """One store: toy successes and failures, a SQL success that saw secrets, a duplicate, a dev task, a copy."""
    keys, shop = KeysFamily(), ShopFamily()
    index = ContaminationIndex.from_families([keys], per_split=30)
    with Store(tmp_path_factory.mktemp("dataset") / "lle.db") as store:
        b = Built(store)
        exps: dict[str, Experience] = {}
        for seed in (0, 1):
            sw = keys.small_world(Split.train, seed)
            exps[f"pass{seed}"] = run(store, sw, oracle_actions(sw))
            # Same first action, then a premature submit: a failure that parts from the success at step 1.
            exps[f"fail{seed}"] = run(store, sw, [*oracle_actions(sw)[:1], ActionRequest(tool="submit")])
        sw = shop.small_world(Split.train, 0)
        leaky = reference_actions(sw)
        leaky.insert(2, ActionRequest(tool="run_query", args={"sql": LEAKY_SQL}, thought="what is in here?"))
        exps["sql"] = run(store, sw, leaky)
        exps["sql_again"] = run(store, sw, leaky)  # the very same episode again
        dev = keys.small_world(Split.dev, 0)
        exps["dev"] = run(store, dev, oracle_actions(dev))
        copy_sw = keys.small_world(Split.train, 2)
        copied = ActionRequest(tool="take", args={"item": visible_text(dev)})  # echoed back by the world
        exps["copy"] = run(store, copy_sw, [copied, *oracle_actions(copy_sw)])
        exps["unknown"] = run(store, copy_sw, oracle_actions(copy_sw)[:2])  # the script runs out: no verdict
        b.dataset = Dataset(store, contamination=index)
        for name, exp in exps.items():
            b.ids[name] = exp.id
            update = b.dataset.admit(exp)
            assert update.gate is not None
            b.decisions[name] = (update.op, update.gate.reasons)
        yield b


def test_admission_follows_the_gate(built: Built) -> None:
    admitted = {n for n, (op, _) in built.decisions.items() if op is UpdateOp.admit}
    assert admitted == {"pass0", "fail0", "pass1", "fail1", "sql"}, built.decisions
    reasons = {n: " ".join(r) for n, (_, r) in built.decisions.items()}
    assert "duplicate of itm_" in reasons["sql_again"]
    assert "dev task" in reasons["dev"]
    assert "copies held-out item toy/keys-v1:manor:dev:0" in reasons["copy"]
    assert "outcome unknown" in reasons["unknown"]
    assert built.dataset is not None
    again = built.dataset.admit(built.store.get_experience(built.ids["pass0"]))
    assert again.op is UpdateOp.admit and len(built.dataset.items()) == 5  # admitting twice changes nothing


def test_rebuilt_messages_are_what_the_policy_saw(tmp_path: Path) -> None:
    for sw in (KeysFamily().small_world(Split.train, 3), ShopFamily().small_world(Split.train, 1)):
        actions = iter(oracle_actions(sw) if sw.family == "toy" else reference_actions(sw))
        seen: list[list[Message]] = []

        def act(context: Context, seen: list[list[Message]] = seen, actions: Iterator[ActionRequest] = actions) \
                -> ActionRequest:
            seen.append(list(context.messages))
            return next(actions)

        with Store(tmp_path / f"{sw.family}.db") as store:
            exp = run_episode(sw, ScriptedPolicy(act), store=store, assess=assess_experience)
            assert seen_messages(store, exp, scrubbed=False) == (seen, True)
            # Without an episode row (recorded elsewhere, imported): the world's reset gives the same start.
            imported = exp.model_copy(update={"id": "exp_01J00000000000000000000000"})
            assert seen_messages(store, imported, scrubbed=False) == (seen, True)


@pytest.fixture(scope="module")
def exported(built: Built, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    assert built.dataset is not None
    out = tmp_path_factory.mktemp("exports")
    return {fmt: Path(export(built.dataset, fmt, out).path) for fmt in ("sft", "dpo", "rl")}


def test_exports_load_with_hugging_face_datasets(built: Built, exported: dict[str, Path]) -> None:
    sft = datasets.load_dataset("json", data_files=str(exported["sft"]), split="train")
    passes = [built.store.get_experience(built.ids[n]) for n in ("pass0", "pass1", "sql")]
    assert len(sft) == sum(len(e.steps) for e in passes)  # one row per step of each success
    row = sft[0]
    assert [m["role"] for m in row["messages"]][:2] == ["system", "user"] and row["messages"][-1]["role"] == "assistant"
    assert json.loads(row["messages"][-1]["content"])["tool"] == "look" and row["context"] == "exact"
    assert {tuple(r) for r in sft["experience_ids"]} == {(e.id,) for e in passes}

    dpo = datasets.load_dataset("json", data_files=str(exported["dpo"]), split="train")
    assert len(dpo) == 2 and set(dpo.column_names) >= {"prompt", "chosen", "rejected", "experience_ids"}
    for r in dpo:
        assert r["step"] == 1 and json.loads(r["rejected"][0]["content"])["tool"] == "submit"
        assert json.loads(r["chosen"][0]["content"])["tool"] != "submit"
        chosen, rejected = (built.store.get_experience(i) for i in r["experience_ids"])
        assert (chosen.outcome, rejected.outcome) == (Outcome.passed, Outcome.failed)
        assert chosen.small_world.id == rejected.small_world.id == r["small_world_id"]

    rl = datasets.load_dataset("json", data_files=str(exported["rl"]), split="train")
    assert sorted(rl["small_world_id"]) == sorted({built.store.get_experience(built.ids[n]).small_world.id
                                                   for n in ("pass0", "pass1", "sql")})
    assert all("verifier/world-anchor-v1" in v for v in rl["verifiers"])


def test_no_row_holds_a_secret_or_a_held_out_item(built: Built, exported: dict[str, Path]) -> None:
    excluded = {built.ids[n] for n in ("dev", "copy", "sql_again", "unknown")}
    for path in exported.values():
        text = path.read_text()
        for secret in SECRETS:
            assert secret not in text and secret.lower() not in text.lower()
        for line in text.splitlines():
            row = json.loads(line)
            assert not excluded & set(row["experience_ids"])
            assert ":dev:" not in row["small_world_id"] and ":test:" not in row["small_world_id"]
            assert all(not redact(t)[1] for t in row_texts(row)), row["experience_ids"]
    sql = [json.loads(line) for line in exported["sft"].read_text().splitlines()
           if json.loads(line)["experience_ids"] == [built.ids["sql"]]]
    asked = json.loads(sql[2]["messages"][-1]["content"])["args"]["sql"]  # the leaky query as the target action
    shown = sql[3]["messages"][-2]["content"]  # its output, as the model saw it at the next step
    for placeholder in ("<EMAIL>", "<SECRET>", "<CARD>"):
        assert placeholder in asked and placeholder in shown


def test_rl_rows_recompute_the_reward(built: Built, exported: dict[str, Path]) -> None:
    rows = [json.loads(line) for line in exported["rl"].read_text().splitlines()]
    row = next(r for r in rows if r["world"] == "toy/keys-v1")
    sw = SmallWorld.model_validate_json(row["small_world"])
    assert recompute_reward(row, oracle_actions(sw)) == 1.0
    assert recompute_reward(row, [ActionRequest(tool="submit")]) == 0.0


def test_revocation_taints_the_snapshots_that_contain_it(built: Built, exported: dict[str, Path],
                                                         tmp_path: Path) -> None:
    assert built.dataset is not None
    by_path = {Path(s.path): s for s in snapshots(built.store)}
    assert not any(s.tainted for s in by_path.values())
    revoke(built.store, built.ids["fail1"], "the failure was an infrastructure fault", "tester")
    now = {s.id: s for s in snapshots(built.store)}
    tainted = {s.format for s in now.values() if s.tainted}
    assert tainted == {"dpo", "rl"}  # SFT holds successes only: it never contained the failure
    dpo = next(s for s in now.values() if s.format == "dpo")
    assert built.ids["fail1"] in dpo.tainted_by
    assert exported["dpo"].read_text() == next(p for p in by_path if p.name == "dpo.jsonl").read_text()
    fresh = export(built.dataset, "dpo", tmp_path)
    assert fresh.n_rows == 1 and not fresh.tainted and built.ids["fail1"] not in fresh.experience_ids
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        built.store.conn.execute("DELETE FROM export_rows")


def test_a_later_fail_verdict_takes_a_success_out_of_sft(built: Built, tmp_path: Path) -> None:
    assert built.dataset is not None
    exp = built.store.get_experience(built.ids["pass0"])
    built.store.append_evidence(human_verdict(exp.id, exp.small_world, Outcome.failed, "wrong vault", "tester"))
    snap = export(built.dataset, "sft", tmp_path)
    assert exp.id not in snap.experience_ids and snap.skipped == {"outcome changed since admission": 1}


def test_an_experience_whose_world_cannot_be_opened_is_rejected(store: Store, make_experience) -> None:  # type: ignore[no-untyped-def]
    exp = make_experience()
    gone = exp.small_world.model_copy(update={"world": "gone/world-v1"})
    exp = store.append_experience(exp.model_copy(update={"small_world": gone, "content_hash": ""}))
    update = Dataset(store, contamination=ContaminationIndex()).admit(exp)
    assert update.op is UpdateOp.reject and update.gate is not None
    assert "cannot rebuild what the model saw" in update.gate.reasons[0]


def test_steps_a_skill_expanded_into_are_not_rows(built: Built) -> None:
    exp = built.store.get_experience(built.ids["pass1"])
    note = Feedback(source="runtime", kind="skill", content={"skill": "itm_x", "call": 2, "of": 2})
    steps = [s.model_copy(update={"feedback": [*s.feedback, note]}) if s.index == 2 else s for s in exp.steps]
    skilled = exp.model_copy(update={"steps": steps})
    seen, exact = seen_messages(built.store, skilled, scrubbed=False)
    assert not exact  # the skill tools offered are not recorded: the prompt is a reconstruction
    rows = sft_rows(skilled, seen, exact)
    assert [r["step"] for r in rows] == [s.index for s in steps if s.index != 2]
    assert {r["context"] for r in rows} == {"approximate"}
