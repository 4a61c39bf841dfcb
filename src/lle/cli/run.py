"""`lle run`: the flywheel from the command line."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lle.cli import common
from lle.cli.common import SlotsOption, console, print_json, settings, slots_of
from lle.cli.episodes import ALL_LEVERS, parse_levers
from lle.config import RunConfig
from lle.core import Step, Update
from lle.errors import InvalidInputError
from lle.flywheel import extractor, loop, report
from lle.flywheel import suite as suites
from lle.flywheel.evaluate import learned, paired_verdicts, table, verdicts_by_world
from lle.flywheel.strategies import COMPARE_ORDER, STRATEGIES, WITH_INPUT, check_strategy
from lle.flywheel.verdict import interval
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
                    interval(ci[0], ci[1], signed=False, digits=2) if isinstance(ci, list) else "",
                    str(row["steps_per_solved"] or "-"))
    console.print(out)
    capped = {str(r["strategy"]): r["time_capped"] for r in rows if r["world"] == "all" and r.get("time_capped")}
    if capped:
        console.print("stopped by the time cap: " + ", ".join(f"{s} {n}" for s, n in capped.items())
                      + " held-out episodes (a safety cap, not a failure: left out of the rates)", highlight=False)


def print_learned(found: dict[str, Any], extractor_cost: list[dict[str, Any]]) -> None:
    """The run's last lines: each skill lle learned (its source, its check, its measured use), what the extractor
    cost, and the held-out tasks lle turned from fail to pass, named, so a first run shows what learning did."""
    name = found["strategy"]
    for row in found["skills"]:
        console.print(f"{name} learned skill {row['skill']} v{row['version']} ({row['family']}), {row['state']}, "
                      f"from {row['source']}", highlight=False)
        if row["check"]:
            console.print(f"  check: {row['check']}", highlight=False)
        use = ("not measured yet (no train episode since its activation)" if row["with"] == row["without"] == "0/0"
               else row["figures"] + ("" if row["decided"] else " (too few episodes to judge)"))
        console.print(f"  use on train: {use}", highlight=False)
    if not found["skills"]:
        console.print(f"{name} learned no skill this run", highlight=False)
    if found["rejected"]:
        console.print(f"  {found['rejected']} candidate skills failed their check and were never offered",
                      highlight=False)
    if extractor_cost:
        console.print(f"  {extractor.cost_line(extractor_cost)}", highlight=False)
    fixed, broken = found["fixed"], found["broken"]
    shown = ", ".join(fixed[:6]) + (f", and {len(fixed) - 6} more" if len(fixed) > 6 else "")
    console.print(f"held-out tasks {name} turned from fail to pass: {len(fixed)} of {found['tasks']}"
                  + (f" ({len(broken)} from pass to fail)" if broken else "") + (f": {shown}" if fixed else ""),
                  highlight=False)


def print_adapters(adapters: list[dict[str, Any]]) -> None:
    """lle's LoRA adapters per round: each one's gate replay against the policy served then, and its state."""
    if not adapters:
        console.print("weights: no round trained an adapter (the dataset did not gain --weights-min-rows rows)",
                      highlight=False)
        return
    console.print("Weights: adapters per round (gate replay on dev tasks apart from the verdict's)", highlight=False)
    out = common.table("round", "adapter", "method", "rows", "replay adapter/served", "state", "gate",
                       ids=("adapter",))
    for a in adapters:
        out.add_row(str(a["round"]), str(a["adapter"]), str(a["method"]), str(a["rows"]),
                    f"{a['candidate_solved']}/{a['served_solved']}", str(a["state"]), str(a["gate"]))
    common.print_table(out)


def print_verdicts(rows: list[dict[str, object]],
                   by_world: dict[str, list[dict[str, object]]] | None = None) -> None:
    """The paired verdict (held-out tasks, task by task, exact McNemar): a small table, per world too when
    given, then the overall sentences."""
    if not rows:
        return
    console.print("Paired verdict (same held-out tasks)", highlight=False)
    out = common.table("world", "strategy", "vs", "tasks", "solved", "diff", "b/c", "p", "95% CI (points)",
                       ids=("world",))
    for world, row in [("all", r) for r in rows] + [(w, r) for w, rs in (by_world or {}).items() if w != "all"
                                                     for r in rs]:
        ci = row["ci95_points"]
        out.add_row(world, str(row["strategy"]), str(row["baseline"]), str(row["n"]), str(row["solved"]),
                    f"{row['difference_points']:+}", f"{row['b']}/{row['c']}", f"{row['p_value']:.3g}",
                    f"{ci[0]:+.1f}..{ci[1]:+.1f}" if isinstance(ci, list) else "")  # 80 columns: "to" would wrap
    common.print_table(out)
    for row in rows:
        console.print(str(row["sentence"]), highlight=False)


LEVER_NAMES = ALL_LEVERS


def reach_server(spec: str) -> None:
    """Ask an openai:NAME model's server for its models once; a failure is one line naming the server and the fix."""
    from lle.errors import PolicyBackendError
    from lle.policies.catalog import make_policy

    policy = make_policy(spec)
    try:
        policy.client.models.list()  # type: ignore[attr-defined]
    except Exception as err:  # the client's connection, auth and status errors alike
        raise PolicyBackendError(f"cannot reach the server of {spec} at {policy.where}: "  # type: ignore[attr-defined]
                                 f"{type(err).__name__}; start it, or fix --base-url / LLE_BASE_URL") from err


def check_batching(model: str, *, slots: int, lean: bool, executor: str, weights_min_rows: int | None) -> None:
    """`--slots` and `--lean`: one line naming the option and the fix, before any run folder exists."""
    option = "--slots" if slots else "--lean" if lean else None
    if option and (model == "oracle" or model.startswith("openai:")):
        raise InvalidInputError(f"{option} needs an embedded model (a catalog name or PATH.gguf), not {model}; "
                                f"change --model or leave {option} out")
    if slots and executor != "process":
        raise InvalidInputError("--slots runs episodes in threads of this process; leave out --executor ray "
                                "or --slots")
    if slots and weights_min_rows is not None:
        raise InvalidInputError("--slots does not apply trained LoRA adapters; leave out --weights-min-rows "
                                "or --slots")


def extractor_of(spec: str, model: str, workspace: str | None) -> str | None:
    """The run's extractor (`RunConfig.extractor`) for `--extractor`: checked here, before any run folder exists."""
    from lle.policies.catalog import CATALOG, locate, strongest_present

    if spec == "none" or (model == "oracle" and spec in ("auto", "self")):
        return None  # the oracle writes nothing
    if spec == "auto":
        spec = strongest_present(workspace) or "self"
    if spec in ("self", model):
        return "self"
    if spec.startswith("scripted:"):
        if not Path(spec.removeprefix("scripted:")).is_file():
            raise InvalidInputError(f"--extractor {spec}: no such file; give scripted:FILE.py (a program to check)")
        return f"scripted:{Path(spec.removeprefix('scripted:')).resolve()}"
    if spec in CATALOG:
        locate(spec, workspace)  # absent: one line saying how to pull it
    elif spec.endswith(".gguf") and not Path(spec).is_file():
        raise InvalidInputError(f"--extractor {spec}: no such model file; give a catalog name, PATH.gguf or self")
    elif not spec.endswith(".gguf") and not spec.startswith("openai:"):
        raise InvalidInputError(f"--extractor {spec!r} is not a model; give a catalog name (`lle models list`), "
                                "PATH.gguf, openai:NAME, self or none")
    return spec


def _eval_rounds(value: str) -> Literal["each", "last"]:
    if value not in ("each", "last"):
        raise InvalidInputError(f"--eval-rounds {value!r}: say each (a held-out evaluation after every round) or "
                                "last (after the last round only)")
    return "each" if value == "each" else "last"


def routing_summary(updates: list[Update]) -> str:
    """`memory admit 4 · rules reject 3 (rules) · …`: what a round's routing wrote, by carrier, op and gate."""
    counts = Counter(f"{u.carrier.value} {u.op.value}" + (f" ({u.gate.name})" if u.gate and not u.gate.passed else "")
                     for u in updates)
    return " · ".join(f"{what} {n}" for what, n in sorted(counts.items())) or "nothing"


def run(
    suite: str | None = typer.Option(None, "--suite", metavar="NAME|FILE.toml",
                                     help="starter (code, SQL, math, text games; the default), easy (their easiest "
                                     "levels; the default of --quick), toy, or a suite file (docs/90)."),
    model: str = typer.Option("smollm2-135m", "--model", help="Catalog name, PATH.gguf, openai:NAME, or oracle."),
    base_url: str | None = typer.Option(None, "--base-url", help="Server of an openai:NAME model (or LLE_BASE_URL)."),
    timeout: float | None = typer.Option(None, "--timeout", envvar="LLE_TIMEOUT", min=1, max=3600,
                                         help="Seconds an openai:NAME server may take per request (default 30)."),
    strategy: str | None = typer.Option(None, "--strategy", help=f"One of {', '.join(STRATEGIES)}, or population "
                                        "(needs --population); default lle, population with --population."),
    compare: bool = typer.Option(False, "--compare", help="Run none, lle, raw and reflect side by side, lle "
                                 "first so that a run cut short has its verdict (and "
                                 "population when --population is given)."),
    population: Path | None = typer.Option(None, "--population", metavar="FILE.toml", help="A population file "
                                           "(docs/95): its explorers play each round's train tasks and pool what "
                                           "they verify through the router; its acting agent is evaluated as the "
                                           "population strategy. Without it --compare runs no population."),
    rounds: int = typer.Option(2, "--rounds", min=1, max=MAX_ROUNDS),
    train: int | None = typer.Option(None, "--train", min=1, max=MAX_TASKS, help="Train small worlds per round "
                                     "(default: the suite's)."),
    eval_tasks: int | None = typer.Option(None, "--eval", min=1, max=MAX_TASKS, help="Dev small worlds evaluated "
                                          "each round (default: the suite's)."),
    workers: int = typer.Option(2, "--workers", min=1, max=MAX_WORKERS),
    executor: str = typer.Option("process", "--executor", help="process (a local pool) or ray (Ray tasks)."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="An existing Ray cluster (default: local)."),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1, max=MAX_STEPS, help="Default: the suite's."),
    seed: int = typer.Option(0, "--seed"),
    group: int | None = typer.Option(None, "--group", min=1, max=16, help="Attempts per train small world (the "
                                     "first greedy, the others sampled); default 4, 2 with --quick."),
    curriculum: bool = typer.Option(True, "--curriculum/--no-curriculum", help="Move each family's train level by "
                                    "its train success (suites with levels)."),
    levers: str = typer.Option("all", "--levers", metavar="off|all|LEVER,…", help="Harness levers every strategy "
                               f"starts from: off, all, or some of {', '.join(LEVER_NAMES)}."),
    quick: bool = typer.Option(False, "--quick", help="A small run on the easy suite (1 round, 6 train in groups of "
                               "2, 18 held-out, 4 steps an episode; ~8 min on 2 cores): it says when it is too small "
                               "to decide."),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="Evaluate none at round 0; --no-baseline "
                                  "for an arm of a compare whose none comes from another run (docs/90)."),
    eval_rounds: str = typer.Option("each", "--eval-rounds", metavar="each|last", help="Evaluate the held-out "
                                    "set after each round, or after the last only (the verdict's; saves an "
                                    "evaluation a round, the curve keeps round 0 and the last)."),
    scenario: str | None = typer.Option(None, "--scenario", help="poison: inject instructions and preferences."),
    weights_min_rows: int | None = typer.Option(None, "--weights-min-rows", min=1, max=MAX_TASKS * 100,
                                                help="lle trains a LoRA adapter after a round whose dataset gained "
                                                     "this many sft rows (extra [train]); default: never."),
    slots_option: SlotsOption = "auto",
    lean: bool = typer.Option(False, "--lean", help="Lean actions: short keys, no whitespace in the decoded JSON."),
    extractor_spec: str = typer.Option("auto", "--extractor", metavar="MODEL|self|none", help="Who writes lle's "
                                       "program skills from train successes; auto: the strongest catalog model here."),
    resume: str | None = typer.Option(None, "--resume", metavar="RUN", help="Continue a killed run."),
    as_json: bool = typer.Option(False, "--json", help="No progress display; print the summary as JSON."),
) -> None:
    """Run the flywheel: rounds of experience, each evaluated on held-out tasks; then the report."""
    if base_url:
        os.environ["LLE_BASE_URL"] = base_url  # read by the OpenAI policy in every worker
    if timeout is not None:
        os.environ["LLE_TIMEOUT"] = str(timeout)
    if resume:
        config = loop.resume_config(resume, settings.workspace)
    else:
        if executor not in ("process", "ray"):
            raise InvalidInputError(f"--executor {executor!r} is unknown; use process or ray")
        embedded = not (model == "oracle" or model.startswith(("openai:", "scripted:")))
        # A population's explorers bring models of their own: auto keeps such runs on the pool, as measured.
        slots = slots_of(slots_option, batchable=embedded and executor == "process" and weights_min_rows is None
                         and population is None)
        check_batching(model, slots=slots, lean=lean, executor=executor, weights_min_rows=weights_min_rows)
        if scenario not in (None, "poison"):
            raise InvalidInputError(f"--scenario {scenario!r} is unknown; the one scenario is poison")
        strategy = check_strategy(strategy or ("population" if population else "lle"))
        if population is None and strategy in WITH_INPUT:
            raise InvalidInputError(f"--strategy {strategy} needs {WITH_INPUT[strategy]}; see docs/95-population.md")
        if population is not None and not compare and strategy != "population":
            raise InvalidInputError(f"--population runs the population strategy; drop --strategy {strategy}, or add "
                                    "--compare to run it beside the others")
        chosen = [*COMPARE_ORDER, *(["population"] if population else [])] if compare else [strategy]
        if not baseline and "none" in chosen:
            raise InvalidInputError("--no-baseline leaves out none's evaluation, which this run is for; drop "
                                    "--no-baseline, or name another --strategy")
        if population is not None:
            from lle.population.config import load_population

            load_population(population)  # a bad file is one line naming it and the key, before any run folder
        suite = suite or ("easy" if quick else "starter")
        chosen_suite = suites.load_suite(suite)  # a bad file is one line before any run folder exists
        if quick:
            # Sized for make run's 10 minutes on 2 cores: 18 held-out (3 a world) and 12 train episodes.
            rounds, train, max_steps, group = 1, train or 6, max_steps or 4, group or 2
            eval_tasks = eval_tasks or 18
        writer = extractor_of(extractor_spec, model, settings.workspace) if "lle" in chosen else None
        config = RunConfig(suite=suites.suite_ref(suite), model=model, strategies=chosen, rounds=rounds,
                           train_per_round=train or chosen_suite.train_per_round,
                           eval_tasks=eval_tasks or chosen_suite.eval_tasks, workers=workers, max_steps=max_steps,
                           seed=seed, scenario=scenario, group_size=group or 4, curriculum=curriculum,
                           levers=parse_levers(levers), executor=executor, ray_address=ray_address,
                           weights_min_rows=weights_min_rows, slots=slots, lean=lean,
                           population=str(population.resolve()) if population else None,
                           # One round: a rollback after it would protect nothing, and its watch set would
                           # cost make run's minutes.
                           monitor=not quick, baseline=baseline,
                           eval_rounds=_eval_rounds(eval_rounds), extractor=writer,
                           extractor_samples=2 if quick else 4)
    if config.weights_min_rows is not None:
        if config.model == "oracle" or config.model.startswith("openai:"):
            raise InvalidInputError(f"--weights-min-rows trains a LoRA on a local GGUF model, not {config.model}; "
                                    "use a catalog model or PATH.gguf, or leave the option out")
        try:
            import lle.train.sft  # noqa: F401  (torch, transformers, peft: before any run folder exists)
        except ImportError as err:
            raise InvalidInputError(f"--weights-min-rows needs the [train] extra ({err.name} is missing); "
                                    "install it: pip install -e '.[train]'") from err
    if config.model.startswith("openai:") and not resume:
        reach_server(config.model)  # before any run folder exists: a wrong URL or key is one line, not a 0/N run
    if config.model != "oracle" and not config.model.startswith("openai:"):
        # Decode once in a child process: a llama.cpp build that does not fit this CPU is then one line
        # with the fix, before any run folder exists, instead of a crashed worker.
        doctor.check_model(Path(loop.model_path(config) or config.model), tokens=1)
    # Replays of candidate skills and recipes come on top, as they are proposed: the total then grows.
    total = loop.planned_episodes(config)
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
                progress.update(task, advance=1, description=phase, total=max(total, solved["n"]),
                                ok=f"world says solved {solved['ok']}/{solved['n']}")

        def on_routed(phase: str, updates: list[Update]) -> None:
            if not as_json:
                progress.console.print(f"{phase} routed: {routing_summary(updates)}", highlight=False)

        loop.Flywheel(config, settings.workspace, on_step=on_step, on_routed=on_routed).run()
    res = report.load_results(config.id, settings.workspace)
    page = report.write_report(res, settings.workspace)
    rows = table(res)
    folder = loop.run_folder(config.id, settings.workspace)
    verdicts = [v.row() for v in paired_verdicts(folder, config)]
    found = learned(folder, config) if "lle" in config.strategies else None
    if as_json:
        print_json({"run": config.id, "report": str(page), "table": rows, "verdict": verdicts,
                    "verdict_by_world": verdicts_by_world(loop.run_folder(config.id, settings.workspace), config),
                    "carriers": res.carriers, "poison": res.poison, "adapters": res.adapters, "learned": found,
                    "extractor_cost": extractor.read_costs(folder, "lle")})
        return
    print_table(rows)
    print_verdicts(verdicts, verdicts_by_world(loop.run_folder(config.id, settings.workspace), config))
    if config.weights_min_rows is not None:
        print_adapters(res.adapters)
    if found is not None:
        print_learned(found, extractor.read_costs(folder, "lle"))
    console.print(f"report: {page}", highlight=False)
    # The command that started this run, so the line works as typed (`.venv/bin/lle` under `make run`).
    program = sys.argv[0]
    here = "lle" if os.path.basename(program) != "lle" or os.path.sep not in program else min(
        (os.path.relpath(program), os.path.abspath(program)), key=lambda p: (p.startswith(".."), len(p)))
    where = f" --workspace {settings.workspace}" if settings.workspace else ""
    console.print(f"browse it, its episodes and what was learned: {here}{where} view", highlight=False)
