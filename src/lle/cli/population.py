"""`lle population run FILE` and `lle population messages`: populations of agents (docs/95-population.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from lle import workspace
from lle.cli.common import WideOption, console, err_console, print_json, print_table, settings, table
from lle.errors import InvalidInputError
from lle.population.config import load_population
from lle.population.population import Population
from lle.population.run import run_baseline, run_population
from lle.population.types import Intent
from lle.store import Store

app = typer.Typer(help="Populations: agents with roles, typed messages, shared skills.", no_args_is_help=True)


@app.command("run")
def run(
    file: Path = typer.Argument(..., help="The population's TOML file (see examples/populations/)."),
    baseline: bool = typer.Option(False, "--baseline", help="Also run each explorer alone at the population's "
                                  "budget (as many attempts as it has explorers)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Run the population's rounds: explore, then share what each agent's own gates activated."""
    config = load_population(file)
    root = workspace.resolve(settings.workspace) / "populations" / config.name
    with Population(config, root) as pop:
        report = run_population(pop, progress=lambda text: err_console.print(text))
    if baseline:
        report["baseline"] = run_baseline(config, root, progress=lambda text: err_console.print(text))
    if as_json:
        print_json(report)
        return
    for r in report["rounds"]:
        best = r["best_single"]
        console.print(f"round {r['round']}: pass@population {r['pass_at_population']}/{r['tasks']}, best single "
                      f"{best['agent']} {best['solved']}/{r['tasks']}, solved-set diversity "
                      f"{r['diversity']['solved_jaccard']}, distinct action sequences "
                      f"{r['diversity']['distinct_sequences']}, model calls {r['calls']}, sharing {r['sharing']}")
    for r in report.get("baseline", {}).get("rounds", []):
        console.print(f"baseline round {r['round']}: best alone {r['best_alone']['agent']} "
                      f"{r['best_alone']['solved']} solved")


def _population_store(name: str | None) -> Store:
    folder = workspace.resolve(settings.workspace) / "populations"
    found = sorted(p.parent.name for p in folder.glob("*/population.db")) if folder.is_dir() else []
    if name is None and len(found) == 1:
        name = found[0]
    if name is None or name not in found:
        known = ", ".join(found) or "none yet (run one with `lle population run FILE`)"
        raise InvalidInputError(f"name the population with --population (populations here: {known})")
    return Store(folder / name / "population.db", read_only=True)  # messages are read: never written here


@app.command("messages")
def messages(
    population: str | None = typer.Option(None, "--population", help="Which population (default: the only one)."),
    intent: Intent | None = typer.Option(None, help="Only messages of this intent."),
    sender: str | None = typer.Option(None, help="Only messages of this agent."),
    as_json: bool = typer.Option(False, "--json"),
    wide: WideOption = False,
) -> None:
    """List the population's messages in the order they were posted."""
    from lle.population.bus import Bus

    with _population_store(population) as db:
        found = Bus(db).messages(sender=sender, intent=intent)
    if as_json:
        print_json([m.model_dump(mode="json") for m in found])
        return
    out = table("id", "sender", "to", "intent", "prio", "created", "refs", wide=wide)
    for m in found:
        refs = ", ".join([*m.experience_ids[:2], *m.skill_ids[:2], *m.evidence_ids[:1]])
        out.add_row(m.id, m.sender, ", ".join(m.recipients) or "*", m.intent.value, str(m.priority),
                    m.created_at.isoformat(timespec="seconds"), refs)
    print_table(out, wide)
