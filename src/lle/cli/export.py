"""`lle export dataset|list`: training data snapshots and whether a revocation has tainted them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from lle import workspace
from lle.carriers.dataset import Dataset
from lle.carriers.exports import FORMATS, export, snapshots
from lle.cli.common import (
    RunOption,
    StrategyOption,
    WideOption,
    console,
    err_console,
    open_store,
    print_json,
    print_table,
    settings,
    table,
)
from lle.core import UpdateOp
from lle.errors import InvalidInputError
from lle.governance.hygiene import ContaminationIndex

app = typer.Typer(help="Export the dataset carrier as training data (JSONL for Hugging Face datasets).",
                  no_args_is_help=True)


@app.command("dataset")
def dataset(
    fmt: str = typer.Option(..., "--format", help="sft (messages + action), dpo (prompt/chosen/rejected) "
                                                  "or rl (prompt + verifier spec)."),
    out: Path | None = typer.Option(None, "--out", help="Folder for the snapshot (default: WORKSPACE/exports)."),
    admit: bool = typer.Option(True, "--admit/--no-admit",
                               help="First run the dataset gate on stored experiences it has not decided on."),
    all_worlds: bool = typer.Option(False, "--contamination-all",
                                    help="Check contamination against every registered world's held-out items "
                                         "(slower), not only each experience's own world."),
    as_json: bool = typer.Option(False, "--json"),
    run: RunOption = None,
    strategy: StrategyOption = None,
) -> None:
    """Write a snapshot of the dataset: OUT/<snap_id>/<format>.jsonl and manifest.json, recorded in the ledger."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    folder = out if out is not None else workspace.resolve(settings.workspace) / "exports"
    try:  # before the gate writes anything: a snapshot that cannot be written admits nothing
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvalidInputError(f"--out {folder}: {err.strerror}; --out names a folder the snapshot is written "
                                "into (a new one inside it)") from None
    with open_store(run, strategy, write=True) as db:  # the gate and the snapshot are recorded
        carrier = Dataset(db, actor="lle export",
                          contamination=ContaminationIndex.from_registry() if all_worlds else None)
        decided = carrier.admit_pending() if admit else []
        snap = export(carrier, fmt, folder)
    admitted = sum(u.op is UpdateOp.admit for u in decided)
    if as_json:
        print_json({**dataclasses.asdict(snap), "admitted_now": admitted, "rejected_now": len(decided) - admitted})
        return
    if decided:
        err_console.print(f"dataset gate: {admitted} admitted, {len(decided) - admitted} rejected "
                          "(reasons: `lle updates list --carrier dataset --rejected`)", highlight=False)
    skipped = "; ".join(f"{n} {why}" for why, n in snap.skipped.items())
    console.print(f"{snap.id}: {snap.n_rows} {fmt} rows from {len(snap.experience_ids)} experiences -> {snap.path}"
                  + (f" (skipped: {skipped})" if skipped else ""), highlight=False)


@app.command("list")
def list_(as_json: bool = typer.Option(False, "--json"), run: RunOption = None, strategy: StrategyOption = None,
          wide: WideOption = False) -> None:
    """List snapshots, oldest first; a snapshot that contains a revoked experience or item is tainted."""
    with open_store(run, strategy) as db:
        found = snapshots(db)
    if as_json:
        print_json([{**dataclasses.asdict(s), "tainted": s.tainted} for s in found])
        return
    out = table("id", "format", "rows", "experiences", "created", "tainted", "path", wide=wide,
                ids=("id", "path"), flex=("tainted",))
    for s in found:
        taint = f"yes: {', '.join(s.tainted_by[:3])}{' …' if len(s.tainted_by) > 3 else ''}" if s.tainted else "no"
        out.add_row(s.id, s.format, str(s.n_rows), str(len(s.experience_ids)), s.created_at[:19], taint, s.path)
    print_table(out, wide)
