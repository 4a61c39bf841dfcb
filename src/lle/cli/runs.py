"""`lle report`, `lle runs …`: reading finished (or interrupted) flywheel runs."""

from __future__ import annotations

import typer
from rich.table import Table

from lle.cli.common import console, err_console, print_json, settings
from lle.cli.run import print_table, print_verdicts
from lle.flywheel import loop, report
from lle.flywheel.evaluate import paired_verdicts, table

runs_app = typer.Typer(help="Flywheel runs.", no_args_is_help=True)


def report_cmd(run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Rebuild a run's report from its stores and print its table."""
    res = report.load_results(run_id, settings.workspace)
    page = report.write_report(res, settings.workspace)
    verdicts = [v.row() for v in paired_verdicts(loop.run_folder(run_id, settings.workspace), res.config)]
    if as_json:
        print_json({"run": run_id, "report": str(page), "table": table(res), "verdict": verdicts})
        return
    print_table(table(res))
    print_verdicts(verdicts)
    console.print(f"report: {page}", highlight=False)


@runs_app.command("list")
def runs_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Runs in this workspace."""
    damaged: list[str] = []
    runs = loop.list_runs(settings.workspace, damaged)
    for line in damaged:  # the others are still listed; the damaged ones named on stderr
        err_console.print(f"[yellow]warning:[/yellow] {line}", highlight=False, soft_wrap=True)
    if as_json:
        print_json(runs)
        return
    out = Table("id", "suite", "model", "strategies", "rounds", "finished")
    for r in runs:
        out.add_row(str(r["id"]), str(r["suite"]), str(r["model"]), ",".join(r["strategies"]),  # type: ignore[arg-type]
                    str(r["rounds"]), str(r["finished_at"] or "no (resume with lle run --resume ID)"))
    console.print(out)
