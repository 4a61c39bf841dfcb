"""`lle run`: the flywheel from the command line."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lle.cli.common import console, print_json, settings
from lle.core import RunConfig, Step, Update
from lle.errors import InvalidInputError
from lle.flywheel import loop, report
from lle.flywheel import suite as suites
from lle.flywheel.evaluate import paired_verdicts, table
from lle.flywheel.strategies import STRATEGIES, check_strategy
from lle.policies import doctor

# Bounds of the numeric options: past them a run would not end in any useful time (drawing a billion
# small worlds hangs silently), so typer refuses them at once and says the bound.
MAX_ROUNDS, MAX_TASKS, MAX_WORKERS, MAX_STEPS = 1_000, 100_000, 256, 10_000


def print_table(rows: list[dict[str, object]]) -> None:
    # Short headers, no borders, tokens per solved task left to the report and --json: the table fits
    # 80 columns (a pipe, a CI log) without folding a world id.
    out = Table(title="Held-out success (dev small worlds)", box=box.SIMPLE, pad_edge=False)
    for name in ("world", "strategy", "round 0", "last", "95% CI", "steps/ok"):
        out.add_column(name, no_wrap=True)
    for row in rows:
        ci = row["ci95"]
        out.add_row(str(row["world"]), str(row["strategy"]), str(row["round0"]), str(row["last"]),
                    f"{ci[0]:.2f}–{ci[1]:.2f}" if isinstance(ci, list) else "", str(row["steps_per_solved"] or "-"))
    console.print(out)
    capped = {str(r["strategy"]): r["time_capped"] for r in rows if r["world"] == "all" and r.get("time_capped")}
    if capped:
        console.print("stopped by the time cap: " + ", ".join(f"{s} {n}" for s, n in capped.items())
                      + " held-out episodes (a safety cap, not a failure: left out of the rates)", highlight=False)


def print_verdicts(rows: list[dict[str, object]]) -> None:
    """The paired verdict (held-out tasks, task by task, exact McNemar): a small table, then its sentences."""
    if not rows:
        return
    out = Table(title="Paired verdict (same held-out tasks)", box=box.SIMPLE, pad_edge=False)
    for name in ("strategy", "vs", "tasks", "solved", "diff", "b/c", "p", "95% CI (points)"):
        out.add_column(name, no_wrap=True)
    for row in rows:
        ci = row["ci95_points"]
        out.add_row(str(row["strategy"]), str(row["baseline"]), str(row["n"]), str(row["solved"]),
                    f"{row['difference_points']:+}", f"{row['b']}/{row['c']}", f"{row['p_value']:.3g}",
                    f"{ci[0]:+.1f}..{ci[1]:+.1f}" if isinstance(ci, list) else "")
    console.print(out)
    for row in rows:
        console.print(str(row["sentence"]), highlight=False)


def routing_summary(updates: list[Update]) -> str:
    """`memory admit 4 · rules reject 3 (rules) · …`: what a round's routing wrote, by carrier, op and gate."""
    counts = Counter(f"{u.carrier.value} {u.op.value}" + (f" ({u.gate.name})" if u.gate and not u.gate.passed else "")
                     for u in updates)
    return " · ".join(f"{what} {n}" for what, n in sorted(counts.items())) or "nothing"


def run(
    suite: str = typer.Option("starter", "--suite", metavar="NAME|FILE.toml",
                              help="starter (code, SQL, math, text games), toy, or a suite file (docs/90)."),
    model: str = typer.Option("smollm2-135m", "--model", help="Catalog name, PATH.gguf, openai:NAME, or oracle."),
    base_url: str | None = typer.Option(None, "--base-url", help="Server of an openai:NAME model (or LLE_BASE_URL)."),
    strategy: str = typer.Option("lle", "--strategy", help=f"One of {', '.join(STRATEGIES)}."),
    compare: bool = typer.Option(False, "--compare", help="Run none, raw and lle side by side."),
    rounds: int = typer.Option(2, "--rounds", min=1, max=MAX_ROUNDS),
    train: int | None = typer.Option(None, "--train", min=1, max=MAX_TASKS, help="Train small worlds per round "
                                     "(default: the suite's)."),
    eval_tasks: int | None = typer.Option(None, "--eval", min=1, max=MAX_TASKS, help="Dev small worlds evaluated "
                                          "each round (default: the suite's)."),
    workers: int = typer.Option(2, "--workers", min=1, max=MAX_WORKERS),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1, max=MAX_STEPS, help="Default: the suite's."),
    seed: int = typer.Option(0, "--seed"),
    quick: bool = typer.Option(False, "--quick", help="A small run (1 round, 4 train, 4 eval, 4 steps an episode)."),
    scenario: str | None = typer.Option(None, "--scenario", help="poison: inject instructions and preferences."),
    resume: str | None = typer.Option(None, "--resume", metavar="RUN", help="Continue a killed run."),
    as_json: bool = typer.Option(False, "--json", help="No progress display; print the summary as JSON."),
) -> None:
    """Run the flywheel: rounds of experience, each evaluated on held-out tasks; then the report."""
    if base_url:
        os.environ["LLE_BASE_URL"] = base_url  # read by the OpenAI policy in every worker
    if resume:
        config = loop.load_config(resume, settings.workspace)
    else:
        if scenario not in (None, "poison"):
            raise InvalidInputError(f"--scenario {scenario!r} is unknown; the one scenario is poison")
        chosen = ["none", "raw", "lle"] if compare else [check_strategy(strategy)]
        chosen_suite = suites.load_suite(suite)  # a bad file is one line before any run folder exists
        if quick:
            rounds, train, eval_tasks, max_steps = 1, 4, 4, max_steps or 4
        config = RunConfig(suite=suites.suite_ref(suite), model=model, strategies=chosen, rounds=rounds,
                           train_per_round=train or chosen_suite.train_per_round,
                           eval_tasks=eval_tasks or chosen_suite.eval_tasks, workers=workers, max_steps=max_steps,
                           seed=seed, scenario=scenario)
    if config.model != "oracle" and not config.model.startswith("openai:"):
        # Decode once in a child process: a llama.cpp build that does not fit this CPU is then one line
        # with the fix, before any run folder exists, instead of a crashed worker.
        doctor.check_model(Path(loop.model_path(config) or config.model), tokens=1)
    learning = [s for s in config.strategies if s != "none"]
    total = config.eval_tasks + len(learning) * config.rounds * (config.train_per_round + config.eval_tasks)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[ok]}"),
                  TimeElapsedColumn(), console=console, disable=as_json) as progress:
        task = progress.add_task(f"run {config.id}", total=total, ok="")
        solved = {"n": 0, "ok": 0}

        def on_step(phase: str, step: Step) -> None:
            if loop.episode_finished(step):
                solved["n"] += 1
                solved["ok"] += any(fb.kind == "reward" and isinstance(fb.content, dict)
                                    and isinstance(fb.content.get("info"), dict)
                                    and fb.content["info"].get("success") is True  # type: ignore[union-attr]
                                    for fb in step.feedback)
                progress.update(task, advance=1, description=phase,
                                ok=f"world says solved {solved['ok']}/{solved['n']}")

        def on_routed(phase: str, updates: list[Update]) -> None:
            if not as_json:
                progress.console.print(f"{phase} routed: {routing_summary(updates)}", highlight=False)

        loop.Flywheel(config, settings.workspace, on_step=on_step, on_routed=on_routed).run()
    res = report.load_results(config.id, settings.workspace)
    page = report.write_report(res, settings.workspace)
    rows = table(res)
    verdicts = [v.row() for v in paired_verdicts(loop.run_folder(config.id, settings.workspace), config)]
    if as_json:
        print_json({"run": config.id, "report": str(page), "table": rows, "verdict": verdicts,
                    "carriers": res.carriers, "poison": res.poison})
        return
    print_table(rows)
    print_verdicts(verdicts)
    console.print(f"report: {page}", highlight=False)
