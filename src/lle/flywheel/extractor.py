"""The extractor: a model that never acts on held-out tasks writes program skills from verified train successes.

    round r of `lle` (after its train attempts are routed):
      explore  the extractor plays the round's train small worlds beside the actor (`rN/train/extractor`); its
               attempts join each small world's group, so its verified successes are routed like the actor's
      write    per world of the suite with a verified train success and no program skill in use or waiting:
               up to three successes (goal, calls, what they returned) and the tools are shown to the extractor,
               which writes `samples` programs `def skill(goal, call)` (the first greedy, the others sampled)
      try out  each program runs alone on the tasks it was shown (`try_out`, no model call); one that does not
               solve them is told what it did and written once more; one that solves them is a candidate
               program skill, its lineage the successes it was shown
      check    the flywheel's skill replay (`Flywheel.validate_skills`): each candidate runs first (the fast path)
               on fresh train small worlds of its world beside the no-skill arm; admitted only if it passes
               there and loses no task the no-skill arm solves, so execution chooses among the samples

A small model copies what it is shown but seldom calls a listed skill; a program the runtime runs for it, written
by whoever writes best (`--extractor MODEL`, or the actor itself: `self`), is the procedural carrier that
works at this size (issue 42; ASI, SkillWeaver). Nothing here is aimed at one world: the prompt is the same for
every world, its only contents the world's own tools and one of its verified train successes.

What the extractor costs (its calls, tokens and seconds, writing and exploring) is the cost of learning:
`runs/RUN/extractor/STRATEGY/rN.json`, one file a round, written once (a resumed run neither writes nor counts twice).
"""

from __future__ import annotations

import ast
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lle.actions import NO_ACTION
from lle.config import RunConfig
from lle.core import ActionRequest, Context, Experience, LLMCall, Outcome, PolicyInfo, SmallWorld, Split, ToolSpec
from lle.errors import InvalidInputError
from lle.evidence.evidence import assess_experience
from lle.flywheel.suite import strata
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.base import open_world

PROGRAM_TOKENS = 400
"""What one program may cost to write (the programs that solved a world took 150-340 tokens)."""
SAMPLE_TEMPERATURE = 0.7
OBSERVATION_CHARS = 300
"""How much of each observation the prompt shows."""


class Writer(Protocol):
    """What writes programs: a model policy's `write` (llama.cpp, an OpenAI-compatible server) or a script."""

    def write(self, prompt: str, max_tokens: int = ..., *, temperature: float = ..., seed: int | None = ...) -> str:
        ...


class ScriptedWriter:
    """`scripted:FILE.py`: the file's text is every sample (a person's program, checked like any other)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        try:
            self.text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InvalidInputError(f"extractor {path}: cannot read it ({type(err).__name__}); give a UTF-8 "
                                    "Python file that defines skill(goal, call)") from err
        self.model_id = f"scripted:{self.path.name}"

    def write(self, prompt: str, max_tokens: int = PROGRAM_TOKENS, *, temperature: float = 0.0,
              seed: int | None = None) -> str:
        return self.text


def make_writer(spec: str, *, seed: int) -> Writer:
    """The writer a run's extractor spec names: `scripted:FILE.py`, else a model spec (`lle.policies.catalog`)."""
    if spec.startswith("scripted:"):
        return ScriptedWriter(spec.removeprefix("scripted:"))
    if spec == "oracle":
        raise InvalidInputError("the oracle plays the toy world and writes nothing; name a model as the extractor, "
                                "or scripted:FILE.py")
    from lle.policies.catalog import make_policy

    policy: Any = make_policy(spec, temperature=0.0, seed=seed)
    if not callable(getattr(policy, "write", None)):
        raise InvalidInputError(f"extractor {spec} cannot write text; name a model (a catalog name, PATH.gguf or "
                                "openai:NAME)")
    return policy  # type: ignore[no-any-return]


# --- the prompt and what comes back ---------------------------------------------------------------


def tool_line(tool: ToolSpec) -> str:
    props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    args = ", ".join(props) if isinstance(props, dict) else ""
    return f"- {tool.name}({args}): {tool.description[:160]}"


def call_line(tool: str, args: dict[str, Any], observation: str) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"call({tool!r}{', ' if shown else ''}{shown}) -> {observation[:OBSERVATION_CHARS]!r}"


def prompt_for(shown: Sequence[Experience], tools: Sequence[ToolSpec]) -> str:
    """The extractor's prompt: the world's tools and verified successes of it, nothing else."""
    tasks = []
    for exp in shown:
        tasks += ["", f"goal = {exp.small_world.goal!r}", *[
            call_line(s.executed.tool, dict(s.executed.args), s.effect.observation)
            for s in exp.steps if s.executed.allowed]]
    return "\n".join([
        "You write a Python function that solves a family of tasks by calling tools.",
        "",
        "Tools (call them as call(TOOL, ARG=VALUE, ...); each call returns the observation text):",
        *[tool_line(t) for t in tools],
        "",
        f"Here {'is one task' if len(shown) == 1 else 'are tasks'} of this family and the calls that solved "
        f"{'it' if len(shown) == 1 else 'them'} (verified):",
        *tasks,
        "",
        "Write `def skill(goal, call):` that solves ANY task of this family, not only these. Rules:",
        "- `goal` is the task text, exactly like the goal strings above but with other values in it. Read the "
        "values you need from it with `re`, and make sure your pattern matches every goal above.",
        "- The tools are not Python functions: reach them only as call('TOOL', ARG=VALUE), which returns the "
        "observation text.",
        "- Read each observation to decide the next call, with a loop or an if where the task needs one, and go "
        "on until the task is done (the solutions above end with the call that finished the task).",
        "- Use only the standard library.",
        "Reply with one ```python code block only.",
    ])


_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)(?:```|\Z)", re.S)


def parse_program(text: str) -> str | None:
    """The program in a reply: its code block (or the whole reply) when it parses and defines `skill(goal, call)`."""
    match = _BLOCK.search(text)
    source = (match.group(1) if match else text).strip()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "skill" and len(node.args.args) == 2:
            return source + "\n"
    return None


# --- the try-out: the program alone on the tasks it was written from --------------------------------


@dataclass(frozen=True)
class TrialProgram:
    """A written program offered to one try-out episode (the harness's `SkillTool`; stored nowhere)."""

    program: str
    item_id: str = "trial"
    size: int = 0

    def spec_for(self, goal: str | None) -> ToolSpec:
        return ToolSpec(name="skill_trial", description="the program on trial", parameters={"type": "object"})

    def call(self, n: int, args: Any, *, goal: str, observations: Sequence[str]) -> ActionRequest | str:
        raise AssertionError("a program skill makes its own calls")


class ProgramOnly:
    """The try-out's policy: it never acts, so a try-out passes only when the program alone finished the task."""

    info = PolicyInfo(model="program-only")

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        raise RuntimeError("the program returned before the task was done")


def try_out(program: str, sw: SmallWorld) -> Experience:
    """The program alone on `sw` (the runtime's fast path, nothing after it), assessed by the small world's own
    verifiers. Before a program is proposed it must solve the train tasks it was written from: a program that
    cannot redo what it was shown never costs a check's episodes (ASI's verify-before-admit, at no model cost)."""
    return run_episode(sw, ProgramOnly(), skills=[TrialProgram(program)], record_timings=False,
                       assess=assess_experience)


def what_happened(exp: Experience) -> str:
    """A failed try-out told back to the writer: the calls the program made, what they returned, and why it failed."""
    lines, returned = [f"goal = {exp.small_world.goal!r}"], False
    for step in exp.steps:
        if step.executed.allowed:
            lines.append(call_line(step.executed.tool, dict(step.executed.args), step.effect.observation))
        elif step.request.tool == NO_ACTION:  # the try-out's policy: the program had returned
            returned = True
        else:
            lines.append(f"error: {(step.executed.denied_reason or step.effect.error or '')[:OBSERVATION_CHARS]}")
    if returned and not lines[-1].startswith("error:"):
        lines.append("then skill() returned, but the task was not done")
    return "\n".join(lines)


def repair_prompt(prompt: str, program: str, failed: Experience) -> str:
    """The writer's second try: its own program and what it did on a task it should have solved."""
    told = what_happened(failed)
    lines, where = program.splitlines(), re.search(r"\(program line (\d+)\)", told)
    if where and 0 < int(where.group(1)) <= len(lines):  # the line itself: a small model does not count lines
        told += f"\nprogram line {where.group(1)} is: {lines[int(where.group(1)) - 1].strip()}"
    return "\n".join([prompt, "", "You wrote:", "```python", program.rstrip(), "```", "",
                      "Run on one of the tasks above it did this, and did not solve it:", told, "",
                      "Write the corrected `def skill(goal, call):`. Reply with one ```python code block only."])


# --- one round's writing ---------------------------------------------------------------------------


@dataclass
class Cost:
    """What the extractor spent in a round (the cost of learning, reported beside the verdict)."""

    round: int
    write_calls: int = 0
    completion_tokens: int = 0
    write_seconds: float = 0.0
    explore_episodes: int = 0
    explore_calls: int = 0
    explore_tokens: int = 0
    explore_seconds: float = 0.0
    shown: list[str] = field(default_factory=list)
    """The train experiences shown to the extractor."""
    candidates: list[str] = field(default_factory=list)
    """The candidate program skills it wrote (item ids)."""
    repairs: int = 0
    """Programs written again after their try-out failed (told what they did)."""
    screened: list[str] = field(default_factory=list)
    """Programs never proposed, and why: even repaired, they did not solve the tasks they were written from."""


def explore_cost(cost: Cost, episodes: Sequence[Experience], seconds: float) -> None:
    """Count the extractor's exploring episodes: their model calls and tokens, and the batch's wall time."""
    cost.explore_episodes += len(episodes)
    cost.explore_seconds += seconds
    for exp in episodes:
        for step in exp.steps:
            if step.llm is not None:
                cost.explore_calls += 1
                cost.explore_tokens += step.llm.prompt_tokens + step.llm.completion_tokens


def cost_path(folder: Path, strategy: str, round_: int) -> Path:
    return folder / "extractor" / strategy / f"r{round_}.json"


def read_costs(folder: Path, strategy: str) -> list[dict[str, Any]]:
    """Every round's cost record of a strategy's extractor (empty when it had none)."""
    out = []
    for path in sorted((folder / "extractor" / strategy).glob("r*.json"), key=lambda p: int(p.stem[1:] or 0)):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, OSError):
            continue  # a damaged record costs its round's figures, not the report
    return out


def cost_line(records: Sequence[dict[str, Any]]) -> str:
    """A strategy's extractor cost in one line (the run's last lines, the report)."""
    calls = sum(int(c.get("write_calls", 0)) + int(c.get("explore_calls", 0)) for c in records)
    tokens = sum(int(c.get("completion_tokens", 0)) + int(c.get("explore_tokens", 0)) for c in records)
    seconds = sum(float(c.get("write_seconds", 0.0)) + float(c.get("explore_seconds", 0.0)) for c in records)
    written = sum(len(c.get("candidates", [])) for c in records)
    screened = sum(len(c.get("screened", [])) for c in records)
    return (f"the extractor's cost: {calls} model calls, {tokens} tokens, {seconds:.0f} s over {len(records)} rounds "
            f"({written} programs proposed, {screened} failed their try-out)")


def save_cost(path: Path, cost: Cost) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(cost), indent=2), encoding="utf-8")
    tmp.replace(path)


def write_programs(store: Store, writer: Writer, worlds: Sequence[str], *, round_: int, seed: int, samples: int,
                   origin: str, cost: Cost) -> None:
    """Per world: show the writer its latest verified train success and propose each program it writes. Only
    train experiences are ever shown (a held-out one here is a bug, and raises)."""
    from lle.carriers import skill_programs
    from lle.carriers.skills import SkillLibrary

    library = SkillLibrary(store, actor=origin)
    for world in worlds:
        if skill_programs.pending(library, world):
            continue  # one in use or waiting for its check: the next round's writing is for worlds without
        shown = skill_programs.successes(library, world)
        if not shown:
            continue
        for exp in shown:
            if exp.small_world.split is not Split.train or exp.outcome is not Outcome.passed:
                raise InvalidInputError(f"{exp.id} is not a verified train success; the extractor sees train only")
        tools = world_tools(shown[0].small_world)
        prompt = prompt_for(shown, tools)
        cost.shown += [e.id for e in shown]
        for k in range(samples):
            temperature, sample_seed = (0.0 if k == 0 else SAMPLE_TEMPERATURE), seed + 1000 * round_ + k
            program = _written(writer, prompt, temperature, sample_seed, cost)
            failed = None if program is None else _first_failure(program, shown)
            if program is not None and failed is not None:  # one repair, told what its program did
                cost.repairs += 1
                repaired = _written(writer, repair_prompt(prompt, program, failed), 0.0, sample_seed, cost)
                program, failed = repaired, (None if repaired is None else _first_failure(repaired, shown))
                if program is None or failed is not None:
                    why = what_happened(failed).splitlines()[-1] if failed else "the repair wrote no program"
                    cost.screened.append(f"{world} sample {k + 1}: {why[:160]}")
            if program is None or failed is not None:
                continue
            skill = skill_programs.propose(library, shown, program, [t.name for t in tools], origin=origin)
            if skill is not None:
                cost.candidates.append(skill.item_id)


def _written(writer: Writer, prompt: str, temperature: float, seed: int, cost: Cost) -> str | None:
    started = time.monotonic()
    text = writer.write(prompt, PROGRAM_TOKENS, temperature=temperature, seed=seed)
    cost.write_seconds += time.monotonic() - started
    cost.write_calls += 1
    cost.completion_tokens += int(getattr(writer, "last_completion_tokens", 0) or 0)
    return parse_program(text)


def _first_failure(program: str, shown: Sequence[Experience]) -> Experience | None:
    """The program's try-out on the first shown task it does not solve by itself (None: it solves them all)."""
    for exp in shown:
        trial = try_out(program, exp.small_world)
        if trial.outcome is not Outcome.passed:
            return trial
    return None


# --- in the flywheel's rounds -----------------------------------------------------------------------


def spec_for(config: RunConfig, strategy: str) -> str | None:
    """Who writes the strategy's programs: `lle`'s the run's extractor (`self`: the actor), `lle-self`'s the actor."""
    spec = config.extractor if strategy == "lle" else "self" if config.model != "oracle" else None
    return config.model if spec == "self" else spec


def explores(config: RunConfig, strategy: str) -> bool:
    """Whether the strategy's extractor plays train small worlds beside the actor: a model of its own (not the
    actor, not a script)."""
    spec = spec_for(config, strategy)
    return spec is not None and spec != config.model and not spec.startswith("scripted:")


def explore(flywheel: Any, strategy: str, db_path: Path, round_: int, worlds: list[SmallWorld]) -> list[Experience]:
    """The extractor's attempts at the round's train draw (`rN/train/extractor`, greedy, one after another in this
    process): offered the library's skills, in no arm of their measured use (another model's outcomes)."""
    from lle.flywheel.strategies import SkillsOffer, SpecPolicyFactory

    config = flywheel.config
    started = time.monotonic()
    factory = SpecPolicyFactory(str(spec_for(config, strategy)), threads=max(1, os.cpu_count() or 1),
                                seed=config.seed, db_path=str(db_path), cache=flywheel.cache, temperature=0.0,
                                lean=config.lean)
    found: list[Experience] = flywheel.phase(strategy, db_path, f"r{round_}/train/extractor", worlds,
                                             policy=factory, skills=SkillsOffer(str(db_path), cache=flywheel.cache),
                                             serial=True)
    # Kept beside the round's cost record, added to on resume: a resumed round finds its episodes played at once.
    kept = cost_path(flywheel.folder, strategy, round_).with_suffix(".explore-seconds")
    try:
        seconds = float(kept.read_text(encoding="utf-8")) + time.monotonic() - started
    except (OSError, ValueError):  # none yet (or damaged: the time before is lost, not the run)
        seconds = time.monotonic() - started
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(f"{seconds:.3f}\n", encoding="utf-8")
    flywheel.explore_seconds[strategy, round_] = seconds
    return found


_TOOLS: dict[str, tuple[ToolSpec, ...]] = {}


def world_tools(sw: SmallWorld) -> tuple[ToolSpec, ...]:
    """The tool specs the small world allows (read once per world from an instance: a family's class names its
    tools, not their specs)."""
    if sw.world not in _TOOLS:
        opened = open_world(sw)
        try:
            _TOOLS[sw.world] = tuple(opened.tools)
        finally:
            opened.close()
    return tuple(t for t in _TOOLS[sw.world] if t.name in sw.tools)


def extract(flywheel: Any, strategy: str, db_path: Path, round_: int, explored: Sequence[Experience]) -> Cost | None:
    """The round's writing: programs from each world's latest verified train success, proposed as candidates for
    the round's skill checks; the round's cost recorded. Once a round: a resumed run finds the record and goes on."""
    config: RunConfig = flywheel.config
    spec = spec_for(config, strategy)
    path = cost_path(flywheel.folder, strategy, round_)
    if spec is None or path.exists() or not db_path.exists():
        return None
    if spec not in flywheel.extractor_writers:
        flywheel.extractor_writers[spec] = make_writer(spec, seed=config.seed)
    cost = Cost(round=round_)
    explore_cost(cost, explored, flywheel.explore_seconds.get((strategy, round_), 0.0))
    worlds = [entry.id for entry in strata(flywheel.suite)]
    with Store(db_path) as db:
        write_programs(db, flywheel.extractor_writers[spec], worlds, round_=round_, seed=config.seed,
                       samples=config.extractor_samples, origin=f"extractor:{spec}", cost=cost)
    save_cost(path, cost)
    return cost
