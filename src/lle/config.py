"""What a flywheel run is configured with: the harness levers and the run config.

Stored with each run (`runs/RUN/config.json`) so that it resumes and reports exactly; shared by the
runtime (levers), the carriers (recipes hold levers) and the flywheel.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, model_validator

from lle.core import PERSISTED_TYPES as CORE_TYPES
from lle.core import Record, new_id, utcnow

Strategy = Literal["none", "raw", "reflect", "lle", "lle-self", "population"]
"""What a run may do with experience (`lle.flywheel.strategies`); `population` needs `RunConfig.population`."""


def _default_strategies() -> list[Strategy]:
    return ["lle"]


class Levers(Record):
    """Harness levers for small models (`lle.runtime.levers`); part of a family's context recipe."""

    stuck: Literal["off", "note", "mask"] = "off"
    """Repeats and loops: `note` says so in the next observation; `mask` also removes the repeated tools
    from the next decode after a second detection."""
    submit_discipline: bool = False
    """The remaining budget in every observation; on the last step only the answer-bearing tools."""
    working_memory: bool = False
    """A compact state (actions tried and what they returned, facts, the last error) before the observation."""
    admissible_masks: bool = False
    """Where the world lists its admissible commands, they become an enum in that step's action schema."""
    skills_first: bool = False
    """Offered skills come first among the tools, and the first observation names them (a 135M model that was
    offered a verified skill never called it in 12 episodes when it was listed last and unnamed)."""
    notes: int | None = Field(default=None, ge=0)
    """Most carrier items (rules, memories) shown as notes; None: as many as the budget allows, 0: none. A
    recipe sets it when a family's failures copy arguments from other tasks' notes (`lle.carriers.recipes`)."""
    failed_notes: bool = True
    """Memories of failed episodes among the notes; False: only successes and contrasts (a failure beside the
    success that followed it). A 135M model copied a failed memory's call verbatim on held-out tasks; a recipe
    turns it off when a family's failures copy from failed memories, before it tries showing no notes at all."""
    thought_chars: int | None = None
    """Cap on the action's `thought` (decoded under `maxLength`): a step of a small model costs tens of tokens."""
    expect_chars: int | None = None
    """Cap on the action's `expect`, the model's predicted effect."""
    recipe: str | None = None
    """The context-carrier item (recipe) these levers come from; listed in every step's context refs."""
    skills_arm: Literal["with", "without"] | None = Field(default=None, exclude_if=lambda v: v is None)
    """The arm of the skills' measured use a flywheel train episode was played in (`skill_use.usefulness`):
    `with` was offered the library's active skills, `without` was withheld them (chosen by seed,
    `RunConfig.skills_withhold`); None: in neither (replays, recipes, evaluation, episodes outside a run). The
    flywheel sets it, so the decision is recorded with the episode (`EpisodeRecord.levers`) and resumes alike."""


class RunConfig(Record):
    """A flywheel run; stored with the run so it can be resumed and reported exactly."""

    id: str = Field(default_factory=lambda: new_id("run"))
    """`run_…`"""
    suite: str = "starter"
    """Which worlds small worlds are drawn from (`lle.flywheel.suite`)."""
    model: str = "smollm2-135m"
    """Policy: a catalog model, a .gguf path, `openai:NAME`, or `oracle` (the toy world's solver, for tests)."""
    strategies: list[Strategy] = Field(default_factory=lambda: _default_strategies())
    """What is done with experience: nothing, every raw log, self-written lessons with no gates, governed
    routing, or a population's explorers pooled through the router (`population`)."""
    population: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The population file (absolute path) of the `population` strategy; the run keeps a snapshot of it
    (`runs/RUN/population.json`), so a resumed run uses the agents it started with. None: no population."""
    rounds: int = Field(default=2, ge=1)
    """Train-then-evaluate rounds after round 0."""
    train_per_round: int = Field(default=8, ge=1)
    """Train small worlds per round."""
    eval_tasks: int = Field(default=8, ge=1)
    """Dev small worlds evaluated every round (the same ones each time)."""
    workers: int = Field(default=2, ge=1)
    """Episode worker processes."""
    executor: Literal["process", "ray"] = "process"
    """Where episodes run: the local process pool, or Ray tasks (`lle.runtime.ray_executor`, extra `lle[ray]`)."""
    ray_address: str | None = None
    """An existing Ray cluster (`auto`, `ray://head:10001`) for `executor="ray"`; None: a local one."""
    max_steps: int | None = Field(default=None, ge=1)
    """Step limit per episode (None: the suite's)."""
    seed: int = 0
    """Seed of the draws and of the model's sampling."""
    levers: Levers = Field(default_factory=Levers)
    """Harness levers every strategy's episodes start from; `lle` learns per-family recipes on top (the context
    carrier), activated only through a replay on train small worlds."""
    scenario: Literal["poison"] | None = None
    """`poison`: inject instructions into train tool outputs and one-off preferences into train goals."""
    group_size: int = Field(default=4, ge=1, le=16)
    """Attempts per train small world (exploration by groups): the first greedy, the others sampled at
    `group_temperature` with their own seeds. Evaluation stays greedy, one attempt."""
    group_temperature: float = Field(default=0.8, ge=0.0, le=2.0)
    """Sampling temperature of a group's exploring attempts."""
    curriculum: bool = True
    """Train each levelled family at the level where it sometimes succeeds (`lle.flywheel.curriculum`)."""
    band: tuple[float, float] = (0.1, 0.7)
    """The curriculum's learnable band of train success: above it a family moves up a level."""
    baseline: bool = Field(default=True, exclude_if=lambda v: v is True)
    """Evaluate `none` at round 0. False for an arm of a compare whose `none` comes from another run's outcomes
    file (`lle.flywheel.outcomes`): the verdict then needs that file."""
    eval_rounds: Literal["each", "last"] = Field(default="each", exclude_if=lambda v: v == "each")
    """Evaluate the held-out set after each round, or after the last only (the round the verdict reads): a long
    arm of a compare saves an evaluation a round, and its learning curve has round 0 and the last round."""
    monitor: bool = True
    """Watch each activation's effect in later rounds on a fixed set of train small worlds and roll back a
    regression (`lle.flywheel.monitor`); held-out outcomes never decide what is kept."""
    monitor_watch: int = Field(default=16, ge=1)
    """The monitor's watch set: train small worlds stratified like the held-out set, evaluated greedily by `lle`
    after each round (and by `none` before the first)."""
    monitor_min_pairs: int = Field(default=4, ge=1)
    """The monitor's rule: watch-set tasks of the family needed before a regression can be called."""
    monitor_max_drop: float = Field(default=0.0, ge=0.0, le=100.0)
    """The monitor's rule: a regression's 95 % interval lies wholly below minus this many points."""
    extractor: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """Who writes `lle`'s program skills from verified train successes (`lle.flywheel.extractor`): a model spec
    (it also plays each round's train draw beside the actor), `self` (the acting model writes, nothing more is
    played) or `scripted:FILE.py`; None: no extractor. It never acts on held-out tasks."""
    extractor_samples: int = Field(default=4, ge=1, le=16)
    """Programs the extractor writes per world and round (the first greedy, the others sampled): execution chooses."""
    skills_withhold: float = Field(default=0.25, ge=0.0, lt=1.0)
    """The share of governed train episodes (`lle`, `population`) played without the library's skills, chosen by
    seed per small world and batch: each active skill's measured use is its family's episodes offered it against
    these, and a skill whose use is shown to be nil or harmful is retired (`skill_use.retire_useless`); 0: none
    withheld, nothing retired for its use. Replays, recipes, evaluation and the watch set never withhold."""
    verification_budget: int | None = Field(default=None, ge=0)
    """Expensive verifier runs per train batch (`lle.evidence.budget`; skips are recorded as `unknown`
    evidence); None: no budget, every verifier runs. Evaluation and skill replays are never budgeted."""
    weights_min_rows: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    """`lle` trains a LoRA adapter (expert iteration, the `[train]` extra) after a round whose dataset holds at
    least this many more sft rows than the last adapter was trained on, and activates it through the weights
    gate (a paired verdict on dev tasks apart from the evaluation's); None: weights are never trained."""
    weights_steps: int = Field(default=40, ge=1)
    """Optimizer steps at most per adapter."""
    slots: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)
    """Batched decoding: this many episodes decoded together by one model in this process
    (`lle.policies.batched`, episodes in threads); 0: the worker pool, a model per worker."""
    lean: bool = Field(default=False, exclude_if=lambda v: v is False)
    """Lean actions (`lle.actions.lean_schema`): short keys and no whitespace in the decoded JSON."""
    created_at: datetime = Field(default_factory=utcnow)
    """When the run was started."""

    @model_validator(mode="after")
    def _population(self) -> RunConfig:
        if "population" in self.strategies and self.population is None:
            raise ValueError("the population strategy needs a population file (lle run --population FILE)")
        return self


PERSISTED_TYPES: dict[str, type[Record]] = {**CORE_TYPES, "RunConfig": RunConfig}
"""Every persisted type by name, for `lle schema TYPE`."""
