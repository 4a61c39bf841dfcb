"""`lle report`, `lle runs list|show|diff|outcomes|verdict|rm`: reading finished (or interrupted) flywheel runs.

Every RUN argument takes `latest`, a run id or a unique prefix of one (`lle.viewer.lookup`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer

from lle.cli.common import WideOption, console, err_console, line, print_json, print_table, settings, styled, table
from lle.cli.run import print_table as print_results
from lle.cli.run import print_verdicts
from lle.flywheel import loop, report
from lle.flywheel.evaluate import paired_verdicts, verdicts_by_world
from lle.flywheel.evaluate import table as results_table
from lle.store import Store
from lle.viewer import lookup
from lle.viewer.data import compare_runs

runs_app = typer.Typer(help="Flywheel runs (RUN: an id, a unique prefix, or latest).", no_args_is_help=True)

RunArgument = typer.Argument("latest", metavar="[RUN]", help="A run id, a unique prefix of one, or latest (default).")


def report_cmd(run_ref: str = RunArgument, as_json: bool = typer.Option(False, "--json"),
               pages: bool = typer.Option(True, "--pages/--no-pages", help="Also write a page per episode and "
                                                                           "carrier item beside the report.")) -> None:
    """Rebuild a run's report (self-contained HTML in the run folder) from its stores and print its table."""
    run_id = lookup.resolve_run(run_ref, settings.workspace)
    res = report.load_results(run_id, settings.workspace)
    page = report.write_report(res, settings.workspace)
    if pages:
        from lle.viewer.static import write_pages

        page = write_pages(run_id, settings.workspace)
    verdicts = [v.row() for v in paired_verdicts(loop.run_folder(run_id, settings.workspace), res.config)]
    by_world = verdicts_by_world(loop.run_folder(run_id, settings.workspace), res.config)
    if as_json:
        print_json({"run": run_id, "report": str(page), "table": results_table(res), "verdict": verdicts,
                    "verdict_by_world": by_world})
        return
    print_results(results_table(res))
    print_verdicts(verdicts, by_world)
    console.print(f"report: {page}")


@runs_app.command("list")
def runs_list(as_json: bool = typer.Option(False, "--json"), wide: WideOption = False) -> None:
    """Runs in this workspace, oldest first."""
    damaged: list[str] = []
    runs = loop.list_runs(settings.workspace, damaged)
    for text in damaged:  # the others are still listed; the damaged ones named on stderr
        err_console.print(line(styled("warning:", "yellow"), f" {text}"), soft_wrap=True)
    if as_json:
        print_json(runs)
        return
    out = table("id", "suite", "model", "strategies", "rounds", "finished", wide=wide, flex=("finished",))
    for r in runs:
        out.add_row(str(r["id"]), str(r["suite"]), str(r["model"]), ",".join(r["strategies"]),  # type: ignore[arg-type]
                    str(r["rounds"]), str(r["finished_at"] or "")[:19] or f"no (lle run --resume {r['id']})")
    print_table(out, wide)


def _stores(run_id: str) -> dict[str, dict[str, int]]:
    """Rows per strategy store: what each strategy recorded and keeps."""
    from lle.governance.lineage import active_items

    out: dict[str, dict[str, int]] = {}
    for strategy in lookup.strategies_of(run_id, settings.workspace):
        found = lookup.run_store(run_id, strategy, settings.workspace)
        with found.open() as db:
            active = active_items(db)
            out[strategy] = {"experiences": db.count("experiences"), "updates": db.count("updates"),
                             "revocations": db.count("revocations"), "active items": len(active)}
    return out


@runs_app.command("show")
def show(run_ref: str = RunArgument, as_json: bool = typer.Option(False, "--json")) -> None:
    """One run: its config, where its stores are, what each holds, the held-out table and the verdict."""
    run_id = lookup.resolve_run(run_ref, settings.workspace)
    config = loop.load_config(run_id, settings.workspace)
    folder = loop.run_folder(run_id, settings.workspace)
    finished = loop.finished_at(folder)
    stores = _stores(run_id)
    res = report.load_results(run_id, settings.workspace)
    rows = results_table(res)
    verdicts = [v.row() for v in paired_verdicts(folder, config)]
    if as_json:
        print_json({"run": run_id, "folder": str(folder), "finished_at": finished,
                    "config": config.model_dump(mode="json"), "stores": stores, "table": rows, "verdict": verdicts})
        return
    console.print(line(styled(run_id, "bold"), f"  {folder}"))
    console.print(f"finished   {finished[:19] if finished else 'no: continue with lle run --resume ' + run_id}")
    console.print(f"suite      {config.suite}   model {config.model}   rounds {config.rounds}   "
                  f"train {config.train_per_round}/round   eval {config.eval_tasks}   seed {config.seed}")
    out = table("strategy", "experiences", "updates", "active items", "revocations", ids=())
    for strategy, counts in stores.items():
        out.add_row(strategy, *(str(counts[k]) for k in ("experiences", "updates", "active items", "revocations")))
    print_table(out)
    console.print(f"read one with: lle experiences list --run {run_id} --strategy STRATEGY")
    print_results(rows)
    print_verdicts(verdicts)


@runs_app.command("diff")
def diff(a: str = typer.Argument(..., help="The first run (id, prefix or latest)."),
         b: str = typer.Argument(..., help="The second run."), as_json: bool = typer.Option(False, "--json")) -> None:
    """Two runs side by side: the config keys that differ, then held-out success at the last round."""
    run_a, run_b = lookup.resolve_run(a, settings.workspace), lookup.resolve_run(b, settings.workspace)
    found = compare_runs(run_a, run_b, settings.workspace)
    if as_json:
        print_json({"a": run_a, "b": run_b, **found})
        return
    console.print(f"a = {run_a}\nb = {run_b}")
    if found["config"]:
        out = table("config", "a", "b", ids=("config",))
        for row in found["config"]:
            out.add_row(str(row["key"]), json.dumps(row["a"]), json.dumps(row["b"]))
        print_table(out)
    else:
        console.print("configs: the same (but for the id)")
    out = table("world", "strategy", "a (last round)", "b (last round)", "change", ids=("world",))
    for row in found["table"]:
        change = row["change"]
        out.add_row(str(row["world"]), str(row["strategy"]), str(row["a"] or "—"), str(row["b"] or "—"),
                    f"{float(str(change)):+.3f}" if change is not None else "—")
    print_table(out)


@runs_app.command("outcomes")
def outcomes_cmd(run_ref: str = RunArgument,
                 out: Path | None = typer.Option(None, "--out", "-o", help="Write the file here (default: print).")
                 ) -> None:
    """A run's held-out outcomes as a small JSON file, to pool with other runs' (`lle runs verdict`): one compare
    run as several runs, in several sittings or on several machines (docs/90)."""
    from lle.flywheel import outcomes

    run_id = lookup.resolve_run(run_ref, settings.workspace)
    data = outcomes.export(loop.run_folder(run_id, settings.workspace), loop.load_config(run_id, settings.workspace))
    text = json.dumps(data, indent=1) + "\n"
    if out is None:
        console.print(text, end="", highlight=False, markup=False, soft_wrap=True)
        return
    out.write_text(text, encoding="utf-8")
    err_console.print(f"{run_id}: {', '.join(data['strategies']) or 'nothing evaluated yet'} -> {out}")


@runs_app.command("verdict")
def verdict_cmd(files: list[Path] = typer.Argument(..., metavar="FILE...", help="Outcomes files (`lle runs "
                                                   "outcomes RUN -o FILE`) of runs made alike but for --strategy."),
                as_json: bool = typer.Option(False, "--json")) -> None:
    """The table and the paired verdict of one compare, pooled from several runs' outcomes files."""
    from lle.flywheel import outcomes

    pooled = outcomes.pool([(str(f), outcomes.load(f)) for f in files])
    rows = outcomes.table(pooled)
    worlds = sorted({str(r["world"]) for r in rows} - {"all"})
    verdicts = [v.row() for v in outcomes.verdicts(pooled)]
    by_world = {"all": verdicts} | {w: [v.row() for v in outcomes.verdicts(pooled, w)] for w in worlds}
    if as_json:
        print_json({"sources": pooled.sources, "notes": pooled.notes, "table": rows, "verdict": verdicts,
                    "verdict_by_world": by_world})
        return
    for note in pooled.notes:
        console.print(note, highlight=False)
    console.print("from: " + ", ".join(f"{s} {run}" for s, run in pooled.sources.items()), highlight=False)
    print_results(rows)
    print_verdicts(verdicts, by_world)
    if not verdicts:
        console.print("no paired verdict yet: a verdict pairs a learning strategy with none (or lle with another); "
                      "add their runs' outcomes files", highlight=False)


@runs_app.command("rm")
def rm(run_ref: str = typer.Argument(..., metavar="RUN", help="A run id or a unique prefix (not `latest`: "
                                                                 "name what you delete)."),
       yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask.")) -> None:
    """Delete a run's folder: its config, stores and report (the workspace's own store is not touched)."""
    if run_ref == lookup.LATEST:
        raise typer.BadParameter("name the run to delete by its id or a prefix (see `lle runs list`), not latest")
    run_id = lookup.resolve_run(run_ref, settings.workspace)
    folders = [loop.run_folder(run_id, settings.workspace), report.legacy_reports_dir(run_id, settings.workspace)]
    folders = [f for f in folders if f.exists()]
    size = sum(p.stat().st_size for f in folders for p in f.rglob("*") if p.is_file())
    if not yes and not typer.confirm(f"delete {', '.join(map(str, folders))} ({size / 1e6:.1f} MB)?", err=True):
        err_console.print(f"nothing deleted: {run_id} is kept")
        raise typer.Exit(1)
    for folder in folders:
        shutil.rmtree(folder)
    console.print(f"deleted {run_id}: {', '.join(str(Path(f)) for f in folders)}")


def view(
    port: int = typer.Option(8765, "--port", min=1, max=65535),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)."),
) -> None:
    """Browse runs, episodes and carriers in a local web app; revoke from it with the printed token."""
    from lle.viewer.app import serve

    serve(settings.workspace, host=host, port=port)


def monitor_cmd(run_ref: str = RunArgument, as_json: bool = typer.Option(False, "--json"),
                wide: WideOption = False) -> None:
    """Each activation's effect on the monitor's watch set of train small worlds (its family, now against the
    round before it) and the monitor's alerts: what was rolled back, when and why."""
    from lle.flywheel import monitor
    from lle.flywheel import suite as suites
    from lle.flywheel.evaluate import batch_round
    from lle.store import flywheel as flywheel_store

    run_id = lookup.resolve_run(run_ref, settings.workspace)
    folder = loop.run_folder(run_id, settings.workspace)
    config = loop.load_config(run_id, settings.workspace)
    rows: list[dict[str, object]] = []
    if "lle" in config.strategies and loop.strategy_db(folder, "lle").exists():
        watch_worlds = suites.draw_watch(suites.for_run(config, folder), config.monitor_watch, seed=config.seed,
                                         max_steps=config.max_steps)
        with Store(loop.strategy_db(folder, "lle"), read_only=True) as db:
            watched = {batch_round(b)[0] for b in flywheel_store.batches(db, f"{run_id}/lle/").values()
                       if batch_round(b)[1] == "watch"}
        last = max(watched, default=0)  # the latest round watched (a run may be unfinished)
        for effect in monitor.effects(folder, config, watch_worlds, last) if last else []:
            act, v = effect.activation, effect.verdict
            rows.append({"item": act.item_id, "carrier": act.carrier, "family": act.family, "round": act.round,
                         "checked_round": effect.round, "pairs": v.n, "difference_points": round(v.difference, 1),
                         "ci95_points": [round(v.ci95[0], 1), round(v.ci95[1], 1)],
                         "effect": f"{v.difference:+.1f} points at round {effect.round} ({v.ci95[0]:+.1f}.."
                                   f"{v.ci95[1]:+.1f}, {v.n} tasks)"})
    alerts = monitor.load(folder)
    if as_json:
        print_json({"run": run_id, "activations": rows, "alerts": alerts})
        return
    out = table("item", "carrier", "family", "activated", "effect on the watch set", ids=("item",), wide=wide)
    for r in rows:
        out.add_row(str(r["item"]), str(r["carrier"]), str(r["family"]), f"round {r['round']}", str(r["effect"]))
    print_table(out, wide)
    console.print(line(f"{len(alerts)} alert(s)" + (":" if alerts else "")))
    for alert in alerts:
        console.print(line(f"  round {alert['checked_round']}: {alert['action']} {alert['item_id']} "
                           f"({alert['carrier']}, {alert['family']}): {alert['verdict']['sentence']}"))  # type: ignore[index]
