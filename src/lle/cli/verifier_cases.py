"""`lle verifier-cases list|scan|approve|reject|retire`: checks for failures the verifiers missed."""

from __future__ import annotations

import getpass

import typer
from pydantic import JsonValue

from lle.carriers.verifier_cases import VerifierCases
from lle.cli.common import RunOption, StrategyOption, WideOption, console, open_store, print_json, print_table, table
from lle.core import CarrierItem, UpdateOp
from lle.viewer import lookup

app = typer.Typer(help="Verifier cases: a missed failure, confirmed by a stronger anchor, approved by a person.",
                  no_args_is_help=True)


def _summary(item: CarrierItem, state: str) -> dict[str, JsonValue]:
    content = item.content if isinstance(item.content, dict) else {}
    missed = content.get("missed")
    missed = missed if isinstance(missed, dict) else {}
    check = content.get("check")
    caught = missed.get("caught_by")
    return {"id": item.id, "state": state, "family": item.scope.family, "small_world_id": content.get("small_world_id"),
            "check": check.get("type") if isinstance(check, dict) else None,
            "experience_id": missed.get("experience_id"),
            "caught_by": ", ".join(str(c.get("anchor")) for c in caught if isinstance(c, dict))
            if isinstance(caught, list) else "",
            "content": content}


@app.command("list")
def list_(
    state: str | None = typer.Option(None, help="Only this state: candidate, active, rejected, retired, revoked."),
    family: str | None = typer.Option(None, help="Only this task family (e.g. math)."),
    as_json: bool = typer.Option(False, "--json"),
    run: RunOption = None,
    strategy: StrategyOption = None,
    wide: WideOption = False,
) -> None:
    """List verifier cases with their state (candidates wait for a person's approval)."""
    with open_store(run, strategy) as db:
        found = [_summary(item, s) for item, s in VerifierCases(db).items().values()
                 if (state is None or s == state) and (family is None or item.scope.family == family)]
    if as_json:
        print_json(found)
        return
    out = table("id", "state", "family", "small world", "check", "missed in", "caught by", wide=wide,
                ids=("id", "small world", "missed in"), flex=("caught by",))
    for c in found:
        out.add_row(str(c["id"]), str(c["state"]), str(c["family"]), str(c["small_world_id"]), str(c["check"]),
                    str(c["experience_id"]), str(c["caught_by"]))
    print_table(out, wide)


@app.command("scan")
def scan(as_json: bool = typer.Option(False, "--json")) -> None:
    """Propose cases from every stored pass that later hard evidence (e.g. `lle evidence add`) contradicts."""
    with open_store(write=True) as db:
        updates = VerifierCases(db, actor="lle verifier-cases scan").scan()
    if as_json:
        print_json([u.model_dump(mode="json") for u in updates])
        return
    for u in updates:
        why = "; ".join(u.gate.reasons) if u.gate else ""
        what = f"proposed {u.item_id}" if u.op is UpdateOp.propose else "not a case"
        console.print(f"{', '.join(u.experience_ids)}: {what}: {why}", highlight=False)
    if not updates:
        console.print("nothing new: no recorded pass has been contradicted since the last scan")


def _decide(verb: str, item_id: str, reason: str, author: str | None, as_json: bool) -> None:
    with open_store(write=True) as db:
        item_id = lookup.item_id(db, item_id, "verifier_cases")
        cases = VerifierCases(db)
        update = getattr(cases, verb)(item_id, actor=author or getpass.getuser(), reason=reason)
    if as_json:
        print_json(update.model_dump(mode="json"))
        return
    console.print(f"{update.id}: {item_id} {update.op} by {update.actor}: "
                  f"{'; '.join(update.gate.reasons) if update.gate else reason}", highlight=False)


@app.command("approve")
def approve(
    item_id: str,
    reason: str = typer.Option(..., "--reason", help="Why this case is right (recorded)."),
    author: str | None = typer.Option(None, "--author", help="Who approves (default: the current user)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Approve a candidate case: from now on it runs with its family's verifiers."""
    _decide("approve", item_id, reason, author, as_json)


@app.command("reject")
def reject(
    item_id: str,
    reason: str = typer.Option(..., "--reason", help="Why this case is wrong (recorded)."),
    author: str | None = typer.Option(None, "--author", help="Who rejects (default: the current user)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Reject a candidate case: it never runs."""
    _decide("reject", item_id, reason, author, as_json)


@app.command("retire")
def retire(
    item_id: str,
    reason: str = typer.Option(..., "--reason", help="Why it should stop running (recorded)."),
    author: str | None = typer.Option(None, "--author", help="Who retires it (default: the current user)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Retire an active case (e.g. the world's own anchor now catches it)."""
    _decide("retire", item_id, reason, author, as_json)
