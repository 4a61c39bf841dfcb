"""`lle memory …`, `lle rules …`, `lle updates list --rejected` and `lle revoke --dry-run` over a routed store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lle.core import Split
from lle.evidence import assess_experience
from lle.governance.hygiene import ContaminationIndex
from lle.policies.scripted import ScriptedPolicy
from lle.router.router import UpdateRouter
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.base import open_family
from lle.worlds.sql.world import reference_actions


def lle(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_memory_rules_updates_and_revoke_from_the_cli(tmp_path: Path) -> None:
    family = open_family("sql/shop-v1")
    with Store(tmp_path / "lle.db") as db:
        router = UpdateRouter(db, contamination=ContaminationIndex.from_registry(worlds=["sql/shop-v1"], per_split=50))
        for seed in range(3):
            sw = family.small_world(Split.train, seed)
            exp = db.append_experience(assess_experience(run_episode(sw, ScriptedPolicy(reference_actions(sw)))))
            router.route(exp)
        dev = family.small_world(Split.dev, 0)
        router.route(db.append_experience(assess_experience(run_episode(dev, ScriptedPolicy(reference_actions(dev))))))
    memories = json.loads(lle(tmp_path, "memory", "list", "--json").stdout)
    assert len(memories) == 3
    shown = lle(tmp_path, "memory", "show", memories[0]["id"])
    assert "admit" in shown.stdout and "from experiences" in shown.stdout
    hits = json.loads(lle(tmp_path, "memory", "search", "orders total customers", "--family", "sql",
                          "--project", "shop", "--json").stdout)
    assert hits and {h["item_id"] for h in hits} <= {m["id"] for m in memories}
    rules = json.loads(lle(tmp_path, "rules", "list", "--json").stdout)
    assert rules and all(r["state"] == "active" and r["scope"]["project"] == "shop" for r in rules)
    rejected = json.loads(lle(tmp_path, "updates", "list", "--rejected", "--json").stdout)
    assert [u["gate"]["name"] for u in rejected] == ["held_out"]
    dry = json.loads(lle(tmp_path, "revoke", memories[0]["experience_ids"][0], "--reason", "bad", "--dry-run",
                         "--json").stdout)
    assert dry["dry_run"] and memories[0]["id"] in dry["cascade"]
    assert len(json.loads(lle(tmp_path, "memory", "list", "--json").stdout)) == 3  # a dry run writes nothing
    assert lle(tmp_path, "revoke", memories[0]["experience_ids"][0], "--reason", "bad").returncode == 0
    assert len(json.loads(lle(tmp_path, "memory", "list", "--json").stdout)) == 2
    assert lle(tmp_path, "rules", "show", "itm_missing").returncode == 2
