"""What every CLI module shares: the workspace option's value, JSON output, the store (the workspace's
or a run's: the latest one, for the listings), short ids, and consoles that print data as it is."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from lle import workspace
from lle.errors import InvalidInputError
from lle.store import Store
from lle.viewer import lookup

MAX_ROWS = 1_000_000_000
"""Upper bound of `--limit`/`--offset`: past it SQLite's 64-bit integers overflow (and no store is that big)."""

# Data is printed as it is: no markup (`[refunded]` would vanish), no emoji codes (`sql/shop-v1:train:54`
# would show a train), no highlighting. Style comes only from `Text` objects built on purpose (`styled`).
console = Console(soft_wrap=True, markup=False, emoji=False, highlight=False)
err_console = Console(stderr=True, markup=False, emoji=False, highlight=False)

RunOption = Annotated[str | None, typer.Option(
    "--run", metavar="RUN|latest", help="Read this flywheel run's store (an id, a short one, or latest) instead of "
                                        "the workspace's own.")]
LatestRunOption = Annotated[str | None, typer.Option(
    "--run", metavar="RUN|latest|workspace", help="Read this flywheel run's store (an id, a short one, or latest) "
                                                  "or the workspace's own (workspace); default: the latest run, "
                                                  "else the workspace's store.")]
StrategyOption = Annotated[str | None, typer.Option(
    "--strategy", help="With --run: which strategy's store (lle, raw, none); default lle if it ran, else the first.")]
SlotsOption = Annotated[str, typer.Option(
    "--slots", metavar="N|auto", help="Decode N episodes together in one embedded model (batched); auto: as many as "
                                      "the cores suit for an embedded model, else 0; 0: one model per worker.")]
WideOption = Annotated[bool, typer.Option("--wide", help="Never wrap a cell: one line per row (for wide terminals "
                                                         "and grep).")]


@dataclass
class Settings:
    workspace: str | None = None


settings = Settings()
WORKSPACE = "workspace"
"""`--run workspace`: the workspace's own store, where the listings would read the latest run."""


def open_store(run: str | None = None, strategy: str | None = None, *, write: bool = False,
               latest: bool = False) -> Store:
    """The workspace's store (`run` None or `workspace`), or `run`'s store of `strategy`, named on stderr so that
    stdout stays the data. With `latest` (the listings) no `run` is the latest run when the workspace has runs
    (and LLE_STORE_URL does not name its store). For reading only unless `write`: a reading command never
    creates, migrates nor writes a store, and a missing or damaged one is one line."""
    by_default = latest and not os.environ.get(workspace.STORE_URL_VAR) and lookup.run_ids(settings.workspace)
    chosen = lookup.LATEST if run is None and by_default else run
    if chosen is None or chosen == WORKSPACE:
        if strategy is not None:
            raise InvalidInputError(f"--strategy {strategy!r} needs --run RUN (a run has one store per strategy); "
                                    "add --run latest")
        return workspace.open_store(settings.workspace, read_only=not write)
    found = lookup.run_store(chosen, strategy, settings.workspace)
    opened = found.open(write=write)  # first: a store that cannot be opened is one line, this one not printed
    note = " (latest; --run RUN|workspace to choose)" if run is None else ""
    err_console.print(f"store: {found.describe(note)}", soft_wrap=True)
    return opened


def slots_of(value: str, *, batchable: bool, most: int | None = None) -> int:
    """`--slots N|auto` as a number: auto is the decoder's default for this machine (at most `most`) when the
    episodes can be batched (an embedded model, nothing the decoder cannot apply), else 0."""
    if value == "auto":
        from lle.policies.batched import default_slots

        return min(default_slots(), most or default_slots()) if batchable else 0
    try:
        slots = int(value)
    except ValueError:
        raise InvalidInputError(f"--slots {value!r} is not a number; say N (episodes decoded together), 0 for one "
                                "model per worker, or auto") from None
    if slots < 0:
        raise InvalidInputError(f"--slots {slots} must be at least 1 (episodes decoded together), 0 for one model "
                                "per worker, or auto")
    return slots


def styled(text: str, style: str) -> Text:
    """A piece of output with a style, its text taken literally."""
    return Text(text, style=style)


def line(*parts: str | Text) -> Text:
    """One output line from plain strings (taken literally) and styled pieces."""
    out = Text()
    for part in parts:
        out.append(part)
    return out


def table(*columns: str, wide: bool = False, ids: tuple[str, ...] = ("id",), flex: tuple[str, ...] = ()) -> Table:
    """A table whose cells are never cut: ids and short columns stay on one line while the terminal allows
    and fold (never an ellipsis) when it does not; the `flex` columns (default: the last) wrap at words.
    With `wide` every column stays on one line. `ids` are kept whole first."""
    # No borders: the columns, not the box, get the width of an 80-column terminal.
    out = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
    wrapping = set(flex or columns[-1:]) - set(ids)
    for name in columns:
        out.add_column(name, no_wrap=wide or name not in wrapping, overflow="fold")
    return out


def print_table(out: Table, wide: bool = False) -> None:
    # Cells are never cut: when the one-line columns alone are wider than the terminal (or with --wide),
    # the table takes the width it needs and the terminal wraps its lines, instead of rich cropping them.
    needed = Measurement.get(console, console.options.update_width(100_000), out).minimum
    if wide or needed > console.width:
        Console(soft_wrap=True, markup=False, emoji=False, highlight=False, width=100_000).print(out, crop=False)
    else:
        console.print(out)


def print_json(value: Any) -> None:
    # Plain print, not rich: JSON output must stay machine-readable (no wrapping, no markup).
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))
