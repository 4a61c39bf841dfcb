"""`lle updates list` and `lle revoke`."""

from __future__ import annotations

import getpass

import typer
from rich.table import Table

from lle.cli.common import console, open_store, print_json
from lle.core import Revocation
from lle.errors import InvalidInputError

app = typer.Typer(help="Carrier updates: every routing decision, with its gate and reasons.", no_args_is_help=True)


@app.command("list")
def list_(
    carrier: str | None = typer.Option(None, help="Only this carrier (memory, rules, …)."),
    limit: int = typer.Option(50, min=1),
    offset: int = typer.Option(0, min=0),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List updates, oldest first."""
    with open_store() as db:
        updates = db.list_updates(limit=limit, offset=offset, carrier=carrier)
    if as_json:
        print_json([u.model_dump(mode="json") for u in updates])
        return
    table = Table("id", "carrier", "op", "item", "gate", "actor", "at")
    for u in updates:
        gate = f"{u.gate.name}: {'pass' if u.gate.passed else 'fail'}" if u.gate else ""
        table.add_row(u.id, u.carrier, u.op, u.item_id or "", gate, u.actor, u.at.isoformat()[:19])
    console.print(table)


def revoke(
    target: str = typer.Argument(..., help="Id of an experience, evidence, update or carrier item."),
    reason: str = typer.Option(..., "--reason", help="Why (recorded)."),
    author: str = typer.Option(None, "--author", help="Who (default: the current user)."),
) -> None:
    """Revoke a record: appends a revocation row; nothing is deleted."""
    if not reason.strip():
        raise InvalidInputError("--reason is empty; say why the record is revoked (it is kept with the revocation)")
    with open_store() as db:
        kind = db.require(target)
        rev = Revocation(target=target, reason=reason, author=author or getpass.getuser())
        db.append_revocation(rev)
    console.print(f"{rev.id}: revoked {kind[:-1] if kind.endswith('s') else kind} {target}", highlight=False)
