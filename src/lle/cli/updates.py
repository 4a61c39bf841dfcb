"""`lle updates list|show` and `lle revoke`."""

from __future__ import annotations

import getpass

import typer

from lle import registry
from lle.cli.common import (
    MAX_ROWS,
    LatestRunOption,
    StrategyOption,
    WideOption,
    console,
    open_store,
    print_json,
    print_table,
    table,
)
from lle.errors import InvalidInputError
from lle.governance import lineage
from lle.policies.catalog import CATALOG
from lle.store import Store
from lle.store import experiences as stored_experiences
from lle.viewer import lookup

app = typer.Typer(help="Carrier updates: every routing decision, with its gate and reasons.", no_args_is_help=True)


@app.command("list")
def list_(
    carrier: str | None = typer.Option(None, help="Only this carrier (memory, rules, …)."),
    rejected: bool = typer.Option(False, "--rejected", help="Only rejections (what did not get in, and why)."),
    limit: int = typer.Option(50, min=1, max=MAX_ROWS),
    offset: int = typer.Option(0, min=0, max=MAX_ROWS),
    as_json: bool = typer.Option(False, "--json"),
    run: LatestRunOption = None,
    strategy: StrategyOption = None,
    wide: WideOption = False,
) -> None:
    """List updates, oldest first."""
    with open_store(run, strategy, latest=True) as db:
        updates = db.list_updates(limit=limit, offset=offset, carrier=carrier, op="reject" if rejected else None)
        short = lookup.short_ids([u.id for u in updates], stored_experiences.all_ids(db, "updates"))
        items = lookup.short_ids([u.item_id for u in updates if u.item_id], lookup.item_ids(db))
    if as_json:
        print_json([u.model_dump(mode="json") for u in updates])
        return
    # The actor and time are in --json and --wide; 80 columns keep the two (short) ids and the gate's words.
    extra = ["actor", "at"] if wide else []
    out = table("id", "carrier", "op", "item", "gate", *extra, wide=wide, ids=("id", "item"), flex=("gate",))
    for u in updates:
        gate = f"{u.gate.name}: {'pass' if u.gate.passed else '; '.join(u.gate.reasons)}" if u.gate else ""
        out.add_row(short[u.id], u.carrier, u.op, items.get(u.item_id or "", ""), gate,
                    *([u.actor, u.at.isoformat()[:19]] if wide else []))
    print_table(out, wide)


@app.command("show")
def show(update_id: str = typer.Argument(..., help="An update id or a short one (as listed)."),
         as_json: bool = typer.Option(False, "--json"), run: LatestRunOption = None,
         strategy: StrategyOption = None) -> None:
    """One update: its item, gate and reasons, the experiences it came from, who and when."""
    with open_store(run, strategy, latest=True) as db:
        update_id = lookup.update_id(db, update_id)
        u = next(u for u in db.list_updates(limit=lookup.BIG) if u.id == update_id)
    if as_json:
        print_json(u.model_dump(mode="json"))
        return
    gate = f"{u.gate.name}: {'pass' if u.gate.passed else '; '.join(u.gate.reasons)}" if u.gate else "-"
    console.print(f"{u.id}  {u.carrier} {u.op} {u.item_id or '-'}  by {u.actor} at {u.at.isoformat()[:19]}\n"
                  f"gate       {gate}\nfrom experiences {', '.join(u.experience_ids) or '-'}", highlight=False)


def _known_source(db: Store, target: str) -> None:
    """A revocation is permanent: one of a mistyped world or model would sit in the ledger, revoking nothing."""
    kind, _, name = target.partition(":")
    if kind == "world":
        name = name.split("@", 1)[0]
        if name in registry.ids() or db.list_experiences(world=name, limit=1):
            return
        listing = "`lle worlds list` (or `lle experiences list --world ID`)"
    elif kind == "model":
        if name in CATALOG or stored_experiences.of_model(db, name):
            return
        listing = "`lle models list` (or the policy of `lle experiences show ID`)"
    else:
        return
    raise InvalidInputError(f"{kind} {name!r} is not known here and has no experiences in this store, so its "
                            f"revocation would revoke nothing, forever; check the name with {listing}")


def revoke(
    target: str = typer.Argument(..., help="An id (exp_, evd_, upd_, itm_) or a source: world:ID[@VERSION], "
                                      "model:NAME, time:START..END."),
    reason: str = typer.Option(..., "--reason", help="Why (recorded)."),
    author: str = typer.Option(None, "--author", help="Who (default: the current user)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be revoked; write nothing."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Revoke a record or a whole source, and everything derived from it: appends one revocation row."""
    with open_store(write=not dry_run) as db:
        target = lookup.record_id(db, target)
        _known_source(db, target)
        rev = lineage.revoke(db, target, reason, author or getpass.getuser(), dry_run=dry_run)
    if as_json:
        print_json({"dry_run": dry_run, **rev.model_dump(mode="json")})
        return
    verb = "would revoke" if dry_run else f"{rev.id}: revoked"
    console.print(f"{verb} {target} and {len(rev.cascade)} derived: {', '.join(rev.cascade) or 'nothing'}",
                  highlight=False)
