"""`lle episodes run|resume|list`: one policy in one small world, every step recorded as it happens."""

from __future__ import annotations

import os
from typing import Any

import typer

from lle.cli.common import (
    MAX_ROWS,
    LatestRunOption,
    SlotsOption,
    StrategyOption,
    WideOption,
    err_console,
    open_store,
    print_json,
    print_table,
    settings,
    slots_of,
    table,
)
from lle.config import Levers
from lle.context.builder import for_policy
from lle.core import Experience, Limits, Policy, SmallWorld, Split
from lle.errors import InvalidInputError
from lle.evidence import assess_experience
from lle.policies import load_policy
from lle.runtime.harness import run_episode, stop_of
from lle.runtime.resume import resume as resume_episode
from lle.store import experiences as stored_experiences
from lle.store.episodes import list_episodes
from lle.viewer import lookup
from lle.worlds.base import open_family

LEVERS: dict[str, dict[str, object]] = {
    "stuck": {"stuck": "mask"}, "note": {"stuck": "note"}, "submit": {"submit_discipline": True},
    "memory": {"working_memory": True}, "masks": {"admissible_masks": True}, "skills": {"skills_first": True},
}
ALL_LEVERS = ("stuck", "submit", "memory", "masks", "skills")
"""What `all` means (`note` is the milder form of `stuck`)."""


def parse_levers(text: str) -> Levers:
    """`off`, `all`, or a comma list of lever names (`stuck,submit`)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["off"]:
        return Levers()
    if names == ["all"]:
        names = list(ALL_LEVERS)
    unknown = [n for n in names if n not in LEVERS]
    if unknown or not names:
        raise InvalidInputError(f"--levers {text!r}: unknown lever {', '.join(unknown) or '(none)'}; use off, all, "
                                f"or a comma list of {', '.join(LEVERS)}")
    fields: dict[str, object] = {}
    for name in names:
        fields |= LEVERS[name]
    return Levers.model_validate(fields)


app = typer.Typer(help="Episodes: a policy acting in a small world, step by step, recorded.", no_args_is_help=True)


def _summary(exp: Experience) -> None:
    stop = stop_of(exp.steps[-1]) if exp.steps else None
    ended = f"{stop.reason}: {stop.detail}" if stop else "no stop recorded"
    # The id alone on stdout (scriptable); the rest on stderr.
    print(exp.id)
    where = " --run workspace" if lookup.run_ids(settings.workspace) else ""  # else the listings read the latest run
    err_console.print(f"{len(exp.steps)} steps, ended by {ended}; outcome {exp.outcome.value} "
                      f"({exp.verification.value}). "
                      f"See `lle experiences show {exp.id}{where}`.", highlight=False, soft_wrap=True)


@app.command("run")
def run(
    world_id: str = typer.Argument(..., help="Registered world id, e.g. toy/keys-v1."),
    seed: int = typer.Option(0, "--seed", help="Seed of the small world."),
    split: str = typer.Option("train", "--split", help="train, dev or test."),
    policy: str = typer.Option(..., "--policy", help="scripted:PATH (JSON or JSONL actions) or a model spec."),
    base_url: str | None = typer.Option(None, "--base-url", help="Server of an openai:NAME policy (or LLE_BASE_URL)."),
    project: str | None = typer.Option(None, "--project", help="Project of the family (default: by seed)."),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1, help="Override the small world's step limit."),
    levers: str = typer.Option("off", "--levers", help=f"Harness levers: off, all, or some of {', '.join(LEVERS)}."),
    as_json: bool = typer.Option(False, "--json", help="Print the stored experience as JSON."),
    count: int = typer.Option(1, "--count", help="Episodes to run, at seeds SEED, SEED+1, …"),
    slots_option: SlotsOption = "auto",
    lean: bool = typer.Option(False, "--lean", help="Lean actions: short keys, no whitespace in the decoded JSON."),
) -> None:
    """Run one episode (or --count of them), store it step by step, print its experience id.

    The context is the budgeted one, sized to the model's real window and counted in its tokenizer.
    """
    try:
        chosen = Split(split)
    except ValueError:
        raise InvalidInputError(f"--split {split!r} is not a split; use train, dev or test") from None
    if base_url:
        os.environ["LLE_BASE_URL"] = base_url  # read by the OpenAI policy, as `lle run --base-url` does
    embedded = not policy.startswith(("scripted:", "openai:"))
    slots = slots_of(slots_option, batchable=embedded and count > 1, most=count)
    check_batching(policy, slots=slots, count=count, lean=lean)
    family = open_family(world_id)
    small_worlds = [family.small_world(chosen, seed + i, project=project) for i in range(count)]
    limits = Limits(max_steps=max_steps, max_seconds=small_worlds[0].limits.max_seconds) if max_steps else None
    chosen_levers = parse_levers(levers)
    if slots:
        done = run_batched(small_worlds, policy, slots=slots, lean=lean, limits=limits,
                           world_options=family.options(), levers=chosen_levers)
    else:
        actor = make_policy(policy, lean=True) if lean else load_policy(policy)
        done = []
        with open_store(write=True) as db:
            for i, sw in enumerate(small_worlds):
                if i and policy.startswith("scripted:"):
                    actor = load_policy(policy)  # a script is consumed by its episode: each starts it afresh
                done.append(run_episode(sw, actor, for_policy(actor), limits=limits, store=db,
                                        world_options=family.options(), assess=assess_experience,
                                        levers=chosen_levers))
    if as_json:
        print_json(done[0].model_dump(mode="json") if count == 1 else [e.model_dump(mode="json") for e in done])
        return
    for exp in done:
        _summary(exp)


MAX_EPISODES = 100_000
"""The most episodes one `lle episodes run` plays: its small worlds are built up front."""


def check_batching(policy: str, *, slots: int, count: int, lean: bool) -> None:
    """One line naming the option and the fix, before any model loads."""
    if not 1 <= count <= MAX_EPISODES:
        raise InvalidInputError(f"--count {count} must be in 1-{MAX_EPISODES} (the episodes to run; run more in "
                                "several calls)")
    embedded = not policy.startswith(("scripted:", "openai:"))
    if (slots or lean) and not embedded:
        option = "--slots" if slots else "--lean"
        raise InvalidInputError(f"{option} needs an embedded model policy (a catalog name or PATH.gguf), not "
                                f"{policy.partition(':')[0]}:…; change --policy or leave {option} out")


def make_policy(spec: str, **params: Any) -> Policy:
    """An embedded model policy with `params` (the resume spec is the plain one)."""
    from lle.policies import catalog

    actor = catalog.make_policy(spec, **params)
    actor.spec = spec  # type: ignore[attr-defined]
    return actor


def run_batched(small_worlds: list[SmallWorld], spec: str, *, slots: int, lean: bool, limits: Limits | None,
                world_options: dict[str, Any], levers: Levers) -> list[Experience]:
    """`small_worlds` through one `BatchedDecoder` of `slots` sequences, `slots` episodes at a time in threads."""
    from lle.policies.batched import BatchedDecoder
    from lle.runtime.parallel import run_many
    from lle.runtime.threaded import ThreadBackend

    with BatchedDecoder.from_spec(spec, slots=slots) as decoder, open_store(write=True) as db:
        sizing = decoder.policy(lean=lean)  # the budget and the token count every episode's context uses
        return run_many(small_worlds, lambda sw: decoder.policy(sw, lean=lean), store=db,
                        context_builder_factory=lambda: for_policy(sizing), backend=ThreadBackend(slots),
                        limits=limits, world_options=world_options, assess=assess_experience, levers=levers)


@app.command("resume")
def resume(
    episode_id: str = typer.Argument(..., help="Episode id (exp_…, or a short one), from `lle episodes list "
                                               "--unfinished --run workspace`."),
    policy: str | None = typer.Option(None, "--policy", help="Policy spec, when the episode did not record one."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Continue a killed episode from its last committed step (a finished one is just shown)."""
    with open_store(write=True) as db:
        actor = load_policy(policy) if policy else None
        exp = resume_episode(db, lookup.episode_id(db, episode_id), policy=actor, assess=assess_experience,
                             context_builder=for_policy(actor) if actor else None)
    if as_json:
        print_json(exp.model_dump(mode="json"))
        return
    _summary(exp)


@app.command("list")
def list_(
    unfinished: bool = typer.Option(False, "--unfinished", help="Only episodes that can be resumed."),
    limit: int = typer.Option(50, min=1, max=MAX_ROWS),
    offset: int = typer.Option(0, min=0, max=MAX_ROWS),
    as_json: bool = typer.Option(False, "--json"),
    run: LatestRunOption = None,
    strategy: StrategyOption = None,
    wide: WideOption = False,
) -> None:
    """List episodes in start order, with their committed steps and whether they finished."""
    with open_store(run, strategy, latest=True) as db:
        rows = list_episodes(db, unfinished=unfinished, limit=limit, offset=offset)
        # found again by `experiences show` once finished, by `episodes resume` before
        among = [*stored_experiences.all_ids(db), *stored_experiences.all_ids(db, "episodes")]
        short = lookup.short_ids([r.id for r, _, _ in rows], among)
    if as_json:
        print_json([{"id": r.id, "small_world": r.small_world.id, "policy": r.policy.model, "steps": n,
                     "finished": done, "started_at": r.started_at.isoformat()} for r, n, done in rows])
        return
    out = table("id", "small world", "policy", "steps", "finished", *(["started"] if wide else []), wide=wide,
                ids=("id", "small world"), flex=("policy",))
    for r, n, done in rows:
        out.add_row(short[r.id], r.small_world.id, r.policy.model, str(n), "yes" if done else "no",
                    *([r.started_at.isoformat()[:19]] if wide else []))
    print_table(out, wide)
