"""`lle store path|schema|check|search|copy`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from lle import workspace
from lle.cli.common import MAX_ROWS, RunOption, StrategyOption, console, line, open_store, print_json, settings, styled
from lle.errors import InvalidInputError
from lle.governance.lineage import denylist
from lle.store import Store
from lle.store.locations import check_location, is_url

app = typer.Typer(help="The append-only store.", no_args_is_help=True)


@app.command("path")
def path() -> None:
    """Print the path of the workspace's database (its URL, password hidden, when LLE_STORE_URL is set)."""
    url = os.environ.get("LLE_STORE_URL")
    if url and is_url(url):
        from lle.store.postgres import redact

        print(redact(url))
        return
    print(workspace.db_path(settings.workspace).resolve())


@app.command("schema")
def schema() -> None:
    """Print the store's SQL schema (tables, triggers, indexes)."""
    with open_store() as db:
        print(db.schema_sql())


@app.command("check")
def check(as_json: bool = typer.Option(False, "--json"), run: RunOption = None,
          strategy: StrategyOption = None) -> None:
    """Run the backend's integrity check (SQLite's, or PostgreSQL's triggers and torn records) and count rows."""
    with open_store(run, strategy) as db:
        report = {
            "path": db.location,
            "backend": db.dialect,
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
def search(query: str, limit: int = typer.Option(10, min=1, max=MAX_ROWS),
           as_json: bool = typer.Option(False, "--json"), run: RunOption = None,
           strategy: StrategyOption = None) -> None:
    """Full-text search (BM25) over experiences and carrier items; revoked records are marked."""
    with open_store(run, strategy) as db:
        hits = db.search(query, limit=limit)
        revoked = _revoked(db, [i for _, i, _ in hits])
    if as_json:
        print_json([{"kind": k, "id": i, "snippet": s, "revoked": i in revoked} for k, i, s in hits])
        return
    for kind, id_, snippet in hits:
        console.print(line(f"{id_}  ", styled(kind, "dim"), styled("  revoked", "red") if id_ in revoked else "",
                           f"  {snippet}"))


def _revoked(db: Store, ids: list[str]) -> set[str]:
    """The ids among `ids` that the denylist blocks: revoked, derived from something revoked, or a
    copy of revoked content under another id (search reads the ledger, revoked rows included)."""
    denied = denylist(db)
    items = {item.id: item for item in db.items_by_id(ids)}
    return {i for i in ids if i in denied.ids or (i in items and denied.blocks_item(items[i]) is not None)}


@app.command("copy")
def copy(
    source: str = typer.Argument(..., help="A store: a SQLite file (lle.db) or a postgresql:// URL."),
    destination: str = typer.Argument(..., help="An empty store to create or fill: a path or a postgresql:// URL."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Copy a whole store into an empty one (SQLite -> PostgreSQL or back), verified by content hashes.

    Every row is copied as stored, in one transaction; then each table is hashed on both sides and
    every experience read back must match its content hash. A failed check leaves nothing usable behind
    to mistake for a copy: the command exits 2 and says so."""
    from lle.store.copy import copy_store

    if not is_url(source) and not Path(source).is_file():
        raise InvalidInputError(f"the source store {source} does not exist; pass a store file (lle.db) or a "
                                "postgresql:// URL")
    check_location(destination)  # before the source is opened: a bad destination leaves both as they were
    with Store(source, read_only=True) as src, Store(destination) as dst:
        report = copy_store(src, dst)
    if as_json:
        print_json(report.as_json())
        return
    rows = sum(t["rows"] for t in report.tables.values())
    console.print(f"copied {rows} rows ({report.experiences_verified} experiences, each verified) "
                  f"from {report.source} to {report.destination}; table hashes match")


@app.command("migrate")
def migrate(run: RunOption = None, strategy: StrategyOption = None) -> None:
    """Bring a store written by an older lle to this version's schema (reading commands never do: they read an
    older store from a copy in memory, and refuse one too big for that)."""
    with open_store(run, strategy, write=True) as db:  # a writable open migrates
        console.print(f"{db.location}: schema {db.schema_version} (this lle's: {db.latest_version})")
