"""`lle weights train|list|show|approve|activate|rollback`: LoRA adapters trained on verified experience."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lle import workspace
from lle.carriers.exports import snapshots
from lle.carriers.weights import Adapter, WeightsCarrier
from lle.cli.common import WideOption, console, err_console, open_store, print_json, print_table, settings, table
from lle.errors import InvalidInputError
from lle.viewer import lookup

app = typer.Typer(help="Weights: LoRA adapters trained on verified experience, gated on held-out gain.",
                  no_args_is_help=True)

TRAIN_EXTRA_FIX = "install the training extra: pip install -e '.[train]' (torch, transformers, peft, gguf)"


def _row(a: Adapter) -> dict[str, Any]:
    c = a.card
    return {"id": a.id, "state": a.state, "method": c.method, "base": c.base_model, "rows": c.train_rows,
            "exact_rows": c.exact_rows, "steps": c.steps, "best_step": c.best_step, "snapshot": c.snapshot_id,
            "wall_seconds": c.wall_seconds, "path": str(a.path), "sha256": c.adapter_sha256}


def _is_rl(path: Path) -> bool:
    """An rl snapshot's rows (groups of attempts with outcomes), not sft rows."""
    with path.open("rb") as handle:
        first = handle.readline()
    return b'"outcomes"' in first and b'"experience_ids"' in first


def _ref(db: Any, ref: str) -> str:
    return lookup.item_id(db, ref, "weights")


@app.command("train")
def train(
    snapshot: str = typer.Argument(..., help="An sft snapshot id (`lle export list`) or the path of its JSONL file."),
    model: str = typer.Option("smollm2-135m", help="Base model: a catalog name (`lle models list`)."),
    steps: int = typer.Option(40, min=1, max=100_000, help="Optimizer steps at most (early stopping may end sooner)."),
    rank: int = typer.Option(8, min=1, max=256),
    learning_rate: float = typer.Option(1e-3, "--lr", min=1e-7, max=1.0),
    batch_size: int = typer.Option(4, min=1, max=256),
    beta: float | None = typer.Option(None, "--beta", min=0.0, max=10.0,
                                      help="GRPO's KL penalty to the base (rl snapshots; default 0.04)."),
    out: Path | None = typer.Option(None, "--out", help="Folder for the adapter (default: WORKSPACE/adapters/ID)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A LoRA adapter, proposed as a candidate: expert iteration on an sft snapshot's verified successes, or GRPO
    on an rl snapshot's groups of attempts (their verified rewards normalized in each group)."""
    try:
        from lle.train.grpo import GrpoConfig, train_grpo
        from lle.train.sft import SftConfig, train_sft
    except ImportError as err:
        raise InvalidInputError(f"training needs the [train] extra ({err.name} is missing); {TRAIN_EXTRA_FIX}") from err
    from lle.policies import catalog
    from lle.policies.llama import threads_from_env

    with open_store(write=True) as db:
        rows_path, snap_id = Path(snapshot), None
        if not rows_path.is_file():
            found = next((s for s in snapshots(db) if s.id == snapshot), None)
            if found is None:
                raise InvalidInputError(f"snapshot {snapshot!r} is neither a file nor a snapshot id; list them with "
                                        "`lle export list`, or export one with `lle export dataset --format sft`")
            if found.format not in ("sft", "rl"):
                raise InvalidInputError(f"snapshot {snapshot} is {found.format}; train on an sft snapshot (expert "
                                        "iteration) or an rl one (GRPO)")
            if found.tainted:
                raise InvalidInputError(f"snapshot {snapshot} holds revoked records ({', '.join(found.tainted_by)}); "
                                        "export a fresh one")
            rows_path, snap_id = Path(found.path), found.id
        base = catalog.locate(model, settings.workspace)
        folder = out or workspace.resolve(settings.workspace) / "adapters" / (snap_id or rows_path.stem)

        bar = Progress(TextColumn("training"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[metrics]}"),
                       TimeElapsedColumn(), console=err_console,
                       disable=as_json or not err_console.is_terminal)  # a log or pipe gets the card, not frames
        task = bar.add_task("train", total=steps, metrics="")

        def progress(step: int, of: int, metrics: dict[str, float]) -> None:
            bar.update(task, completed=step, total=of, metrics="  ".join(f"{k} {v:.4g}" for k, v in metrics.items()))

        with bar:
            if _is_rl(rows_path):
                card = train_grpo(rows_path, db, base, folder, base_model=model, snapshot_id=snap_id,
                                  progress=progress,
                                  config=GrpoConfig(steps=steps, rank=rank, learning_rate=learning_rate,
                                                    batch_size=batch_size, beta=0.04 if beta is None else beta,
                                                    threads=threads_from_env()))
            else:
                card = train_sft(rows_path, base, folder, base_model=model, snapshot_id=snap_id, progress=progress,
                                 config=SftConfig(steps=steps, rank=rank, learning_rate=learning_rate,
                                                  batch_size=batch_size, threads=threads_from_env()))
        adapter = WeightsCarrier(db, actor="lle weights train").propose(card, folder)
    if as_json:
        print_json(_row(adapter))
        return
    console.print(f"{adapter.id}: candidate, {card.train_rows} rows ({card.exact_rows} exact), {card.steps} steps "
                  f"(kept {card.best_step}), {card.wall_seconds:.0f} s -> {adapter.path}", highlight=False)


@app.command("list")
def list_(as_json: bool = typer.Option(False, "--json"), wide: WideOption = False) -> None:
    """List adapters, oldest first, with their state (one at most is active)."""
    with open_store() as db:
        adapters = WeightsCarrier(db).adapters()
    if as_json:
        print_json([_row(a) for a in adapters])
        return
    out = table("id", "state", "method", "base", "rows", "steps", "snapshot", wide=wide, ids=("id", "snapshot"))
    for a in adapters:
        r = _row(a)
        out.add_row(a.id, a.state, r["method"], r["base"], str(r["rows"]), str(r["steps"]), r["snapshot"] or "")
    print_table(out, wide)


@app.command("show")
def show(ref: str = typer.Argument(..., help="Adapter id (or a unique prefix).")) -> None:
    """One adapter: its state and training card (JSON)."""
    with open_store() as db:
        adapter = WeightsCarrier(db).get(_ref(db, ref))
    print_json({**_row(adapter), "card": adapter.card.model_dump(mode="json")})


@app.command("approve")
def approve(ref: str = typer.Argument(...), author: str = typer.Option(None, "--author")) -> None:
    """A person's approval of a candidate (needed when the gate requires one)."""
    with open_store(write=True) as db:
        update = WeightsCarrier(db).approve(_ref(db, ref), author or getpass.getuser())
    console.print(f"{update.id}: {update.item_id} approved", highlight=False)


@app.command("activate")
def activate(ref: str = typer.Argument(...), reason: str = typer.Option(..., "--reason"),
             author: str = typer.Option(None, "--author")) -> None:
    """Serve again an adapter that passed its gate before (standby or retired)."""
    with open_store(write=True) as db:
        update = WeightsCarrier(db).activate(_ref(db, ref), author or getpass.getuser(), reason)
    console.print(f"{update.id}: {update.item_id} active", highlight=False)


@app.command("rollback")
def rollback(reason: str = typer.Option(..., "--reason"), author: str = typer.Option(None, "--author")) -> None:
    """One switch back: the active adapter is retired; the one before it (or the base) is served."""
    with open_store(write=True) as db:
        update, now = WeightsCarrier(db).rollback(author or getpass.getuser(), reason)
    console.print(f"{update.id}: {update.item_id} retired; now serving {now.id if now else 'the base model'}",
                  highlight=False)
