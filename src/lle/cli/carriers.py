"""`lle memory list|show|search` and `lle rules list|show`: what the agent has learned, as it is active now."""

from __future__ import annotations

import dataclasses
import json

import typer

from lle.cli.common import (
    MAX_ROWS,
    LatestRunOption,
    StrategyOption,
    WideOption,
    console,
    line,
    open_store,
    print_json,
    print_table,
    styled,
    table,
)
from lle.core import CarrierItem, CarrierKind, Scope, ScopeLevel
from lle.errors import UnknownIdError
from lle.governance.lineage import active_items, denylist
from lle.viewer import lookup

memory_app = typer.Typer(help="Episodic memory (active items: the ledger minus revocations).", no_args_is_help=True)
rules_app = typer.Typer(help="Project rules with their state (candidate, active, superseded, revoked).",
                        no_args_is_help=True)


def _show(item_id: str, carrier: CarrierKind, as_json: bool, run: str | None, strategy: str | None) -> None:
    with open_store(run, strategy, latest=True) as db:
        item_id = lookup.item_id(db, item_id, carrier.value)
        item = next((i for i in db.carrier_items(carrier.value) if i.id == item_id), None)
        if item is None:
            raise UnknownIdError(f"{carrier.value} item", item_id, f"list them with `lle {carrier.value} list`")
        blocked = denylist(db).blocks_item(item)
        updates = [u for u in db.list_updates(limit=1_000_000, carrier=carrier.value) if u.item_id == item_id]
    if as_json:
        print_json({"item": item.model_dump(mode="json"), "revoked_by": blocked,
                    "updates": [u.model_dump(mode="json") for u in updates]})
        return
    state = f"  REVOKED ({blocked})" if blocked else ""
    console.print(line(styled(item.id, "bold"), f" {carrier.value}, scope {item.scope.level} "
                       f"{item.scope.family or ''}/{item.scope.project or ''}{state}"))
    console.print_json(data=item.content)
    console.print(f"from experiences {', '.join(item.experience_ids) or '-'}", highlight=False)
    for u in updates:
        reasons = "; ".join(u.gate.reasons) if u.gate else ""
        console.print(f"  {u.at.isoformat()[:19]} {u.op:<9} by {u.actor}: {reasons}", highlight=False)


def _rows(items: list[CarrierItem], among: list[str], as_json: bool, states: dict[str, str] | None = None,
          wide: bool = False) -> None:
    if as_json:
        print_json([{**i.model_dump(mode="json"), **({"state": states[i.id]} if states else {})} for i in items])
        return
    out = table("id", "scope", "state" if states else "from", "content", wide=wide)
    short = lookup.short_ids([i.id for i in items], among)
    for i in items:
        text = summary(i.content)
        # `from`: how many experiences (their ids with `show`); the content is a summary; the id is short.
        origin = f"{len(i.experience_ids)} exp"
        out.add_row(short[i.id], f"{i.scope.level} {i.scope.project or ''}", states[i.id] if states else origin,
                    text if wide or len(text) <= 90 else text[:90] + "…")
    print_table(out, wide)


def summary(content: object) -> str:
    """One line for an item's content: its lesson or text when it has one, else its JSON."""
    if isinstance(content, dict):
        for key in ("lesson", "text", "rule", "summary", "name"):
            if isinstance(content.get(key), str) and content[key]:
                return str(content[key])
    return json.dumps(content, ensure_ascii=False)


@memory_app.command("list")
def memory_list(limit: int = typer.Option(50, min=1, max=MAX_ROWS), as_json: bool = typer.Option(False, "--json"),
                run: LatestRunOption = None, strategy: StrategyOption = None, wide: WideOption = False) -> None:
    """Active memories, oldest first."""
    with open_store(run, strategy, latest=True) as db:
        among = lookup.item_ids(db, CarrierKind.memory.value)
        _rows(active_items(db, CarrierKind.memory.value)[:limit], among, as_json, wide=wide)


@memory_app.command("show")
def memory_show(item_id: str = typer.Argument(..., help="A memory id or a short one (as listed)."),
                as_json: bool = typer.Option(False, "--json"), run: LatestRunOption = None,
                strategy: StrategyOption = None) -> None:
    """One memory with its lineage and every decision about it."""
    _show(item_id, CarrierKind.memory, as_json, run, strategy)


@memory_app.command("search")
def memory_search(
    query: str,
    family: str | None = typer.Option(None, help="Search as a task of this family sees memory."),
    project: str | None = typer.Option(None, help="… and of this project."),
    k: int = typer.Option(5, "-k", min=1, max=MAX_ROWS),
    mode: str = typer.Option("hybrid", help="hybrid, bm25 or dense."),
    as_json: bool = typer.Option(False, "--json"),
    run: LatestRunOption = None,
    strategy: StrategyOption = None,
) -> None:
    """Hybrid retrieval (BM25 + embeddings, fused, re-ranked by learned utility), scoped like a task."""
    from lle.carriers.memory import MemoryCarrier

    level = ScopeLevel.project if project else ScopeLevel.family if family else ScopeLevel.global_
    with open_store(run, strategy, latest=True) as db:
        hits = MemoryCarrier(db).search(query, Scope(level=level, family=family, project=project), k,
                                        mode=mode)  # type: ignore[arg-type]
    if as_json:
        print_json([dataclasses.asdict(h) for h in hits])
        return
    for h in hits:
        console.print(f"{h.item_id}  score {h.score:.3f}  bm25 #{h.bm25_rank}  dense #{h.dense_rank}  "
                      f"utility {h.utility:+.2f}", highlight=False)


@rules_app.command("list")
def rules_list(as_json: bool = typer.Option(False, "--json"),
               all_states: bool = typer.Option(False, "--all", help="Also candidates and ended rules."),
               run: LatestRunOption = None, strategy: StrategyOption = None, wide: WideOption = False) -> None:
    """Project rules (active ones unless --all)."""
    from lle.carriers.rules import RuleBook

    with open_store(run, strategy, latest=True) as db:
        items = RuleBook(db).items()
        among = lookup.item_ids(db, CarrierKind.rules.value)
    chosen = [(i, s) for i, s in items.values() if all_states or s == "active"]
    _rows([i for i, _ in chosen], among, as_json, {i.id: s for i, s in chosen}, wide=wide)


@rules_app.command("show")
def rules_show(item_id: str = typer.Argument(..., help="A rule id or a short one (as listed)."),
               as_json: bool = typer.Option(False, "--json"), run: LatestRunOption = None,
               strategy: StrategyOption = None) -> None:
    """One rule with its supporting and contradicting experiences."""
    _show(item_id, CarrierKind.rules, as_json, run, strategy)
