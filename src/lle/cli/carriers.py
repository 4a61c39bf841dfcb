"""`lle memory list|show|search` and `lle rules list|show`: what the agent has learned, as it is active now."""

from __future__ import annotations

import dataclasses

import typer
from rich.table import Table

from lle.cli.common import console, open_store, print_json
from lle.core import CarrierItem, CarrierKind, Scope, ScopeLevel
from lle.errors import UnknownIdError
from lle.governance.lineage import active_items, denylist

memory_app = typer.Typer(help="Episodic memory (active items: the ledger minus revocations).", no_args_is_help=True)
rules_app = typer.Typer(help="Project rules with their state (candidate, active, superseded, revoked).",
                        no_args_is_help=True)


def _show(item_id: str, carrier: CarrierKind, as_json: bool) -> None:
    with open_store() as db:
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
    console.print(f"[bold]{item.id}[/bold] {carrier.value}, scope {item.scope.level} "
                  f"{item.scope.family or ''}/{item.scope.project or ''}{state}", highlight=False)
    console.print_json(data=item.content)
    console.print(f"from experiences {', '.join(item.experience_ids) or '-'}", highlight=False)
    for u in updates:
        reasons = "; ".join(u.gate.reasons) if u.gate else ""
        console.print(f"  {u.at.isoformat()[:19]} {u.op:<9} by {u.actor}: {reasons}", highlight=False)


def _rows(items: list[CarrierItem], as_json: bool, states: dict[str, str] | None = None) -> None:
    if as_json:
        print_json([{**i.model_dump(mode="json"), **({"state": states[i.id]} if states else {})} for i in items])
        return
    table = Table("id", "scope", "state" if states else "from", "content")
    for i in items:
        text = str(i.content)
        table.add_row(i.id, f"{i.scope.level} {i.scope.project or ''}", states[i.id] if states else
                      ",".join(i.experience_ids)[:30], text[:90] + ("…" if len(text) > 90 else ""))
    console.print(table)


@memory_app.command("list")
def memory_list(limit: int = typer.Option(50, min=1), as_json: bool = typer.Option(False, "--json")) -> None:
    """Active memories, oldest first."""
    with open_store() as db:
        _rows(active_items(db, CarrierKind.memory.value)[:limit], as_json)


@memory_app.command("show")
def memory_show(item_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """One memory with its lineage and every decision about it."""
    _show(item_id, CarrierKind.memory, as_json)


@memory_app.command("search")
def memory_search(
    query: str,
    family: str | None = typer.Option(None, help="Search as a task of this family sees memory."),
    project: str | None = typer.Option(None, help="… and of this project."),
    k: int = typer.Option(5, "-k", min=1),
    mode: str = typer.Option("hybrid", help="hybrid, bm25 or dense."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Hybrid retrieval (BM25 + embeddings, fused, re-ranked by learned utility), scoped like a task."""
    from lle.carriers.memory import MemoryCarrier

    level = ScopeLevel.project if project else ScopeLevel.family if family else ScopeLevel.global_
    with open_store() as db:
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
               all_states: bool = typer.Option(False, "--all", help="Also candidates and ended rules.")) -> None:
    """Project rules (active ones unless --all)."""
    from lle.carriers.rules import RuleBook

    with open_store() as db:
        items = RuleBook(db).items()
    chosen = [(i, s) for i, s in items.values() if all_states or s == "active"]
    _rows([i for i, _ in chosen], as_json, {i.id: s for i, s in chosen})


@rules_app.command("show")
def rules_show(item_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """One rule with its supporting and contradicting experiences."""
    _show(item_id, CarrierKind.rules, as_json)
