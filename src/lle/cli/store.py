"""`lle store path|schema|check|search`."""

from __future__ import annotations

import typer

from lle import workspace
from lle.cli.common import console, open_store, print_json, settings
from lle.governance.lineage import denylist
from lle.store import Store

app = typer.Typer(help="The append-only store.", no_args_is_help=True)


@app.command("path")
def path() -> None:
    """Print the path of the workspace's database."""
    print(workspace.db_path(settings.workspace).resolve())


@app.command("schema")
def schema() -> None:
    """Print the store's SQL schema (tables, triggers, indexes)."""
    with open_store() as db:
        print(db.schema_sql())


@app.command("check")
def check(as_json: bool = typer.Option(False, "--json")) -> None:
    """Run SQLite's integrity check and count the ledger rows."""
    with open_store() as db:
        report = {
            "path": str(db.path),
            "schema_version": db.schema_version,
            "integrity": db.integrity_check(),
            "rows": {t: db.count(t) for t in ("episodes", "experiences", "steps", "evidence", "updates",
                                                "revocations", "carrier_items", "blobs")},
        }
    if as_json:
        print_json(report)
    else:
        console.print(report)
    if report["integrity"] != "ok":
        raise typer.Exit(1)


@app.command("search")
def search(query: str, limit: int = typer.Option(10, min=1), as_json: bool = typer.Option(False, "--json")) -> None:
    """Full-text search (BM25) over experiences and carrier items; revoked records are marked."""
    with open_store() as db:
        hits = db.search(query, limit=limit)
        revoked = _revoked(db, [i for _, i, _ in hits])
    if as_json:
        print_json([{"kind": k, "id": i, "snippet": s, "revoked": i in revoked} for k, i, s in hits])
        return
    for kind, id_, snippet in hits:
        mark = "  [red]revoked[/red]" if id_ in revoked else ""
        console.print(f"{id_}  [dim]{kind}[/dim]{mark}  {snippet}", highlight=False)


def _revoked(db: Store, ids: list[str]) -> set[str]:
    """The ids among `ids` that the denylist blocks: revoked, derived from something revoked, or a
    copy of revoked content under another id (search reads the ledger, revoked rows included)."""
    denied = denylist(db)
    items = {item.id: item for item in db.items_by_id(ids)}
    return {i for i in ids if i in denied.ids or (i in items and denied.blocks_item(items[i]) is not None)}
