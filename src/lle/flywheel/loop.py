"""The flywheel: rounds of experience on real worlds, each followed by a held-out evaluation.

    round 0: evaluate on dev small worlds with nothing learned (shared by every strategy)
    round r: draw train small worlds at each family's curriculum level -> attempt each `group_size`
             times (the first greedy, the others sampled), in parallel through the harness (each
             step committed; assessed when it ends) -> route what was learned (per strategy) ->
             move each family's level by its train success -> evaluate on the same dev small
             worlds with every carrier frozen, greedily -> (lle) play the monitor's train watch set
             and roll back what regressed there

A run is its `RunConfig` (stored as `runs/RUN/config.json`) plus one store per strategy. Every
episode belongs to a named batch (`RUN/STRATEGY/rN/train|eval|watch`), so running the same config again
— `lle run --resume RUN` — reads back finished episodes, resumes started ones from their last
committed step, and routes only what was not routed yet: a killed run loses at most the steps in
flight. Evaluation episodes are never routed, and the test split is never drawn.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from lle.carriers.recipes import RecipeBook, levers_of
from lle.config import Levers, RunConfig
from lle.core import Experience, SmallWorld, Split, Step, Update, utcnow
from lle.errors import InvalidInputError
from lle.evidence import VerificationBudget, assess_experience
from lle.flywheel import curriculum, extractor, poison, strategies, suite, weights
from lle.flywheel.paths import strategy_db as strategy_db  # re-exported: callers know it as loop.strategy_db
from lle.runtime.harness import stop_of
from lle.runtime.parallel import Backend, LocalBackend, PolicyFactory, run_many
from lle.store import Store
from lle.store import flywheel as flywheel_store
from lle.workspace import resolve

MAX_SKILL_REPLAYS = 2
"""Candidate skills replayed per round: each costs 2 x `skills_min_pairs` train episodes."""
MAX_PROGRAM_CHECKS = 12
"""Candidate program skills checked per round: each costs `skills_min_pairs` train episodes that the program
starts (cheap where it solves), its world's no-skill arm played once for all of them."""
MAX_RECIPE_REPLAYS = 1
"""Candidate context recipes replayed per family a round (each costs as a skill's replay): per family, so no
family's proposal waits for another's. On the default compare with Qwen2.5-Coder-0.5B, math's and SQL's `notes=0`
were proposed in the same round (4 train failures each copied another task's note); SQL's waited."""


def _population(config: RunConfig, folder: Path) -> strategies.StrategyPlugin:
    from lle.population.strategy import PopulationStrategy  # its floor's other package, imported on use

    return PopulationStrategy.for_run(config, folder)


PLUGINS: dict[str, Callable[[RunConfig, Path], strategies.StrategyPlugin]] = {"population": _population}
"""Strategies that bring their own agents (`strategies.StrategyPlugin`), by name: built once per run."""

OnEpisode = Callable[[str, Step], None]
"""Called after each committed step (phase label, step): the progress display counts episodes."""
OnRouted = Callable[[str, list[Update]], None]
"""Called after a round's train experiences were routed (phase label, the updates written)."""


def runs_dir(workspace: str | Path | None = None) -> Path:
    return resolve(workspace) / "runs"


def run_folder(run_id: str, workspace: str | Path | None = None) -> Path:
    return runs_dir(workspace) / run_id


def save_config(config: RunConfig, workspace: str | Path | None = None) -> Path:
    folder = run_folder(config.id, workspace)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    if not path.exists():  # the config is written once: a resumed run keeps the one it started with
        path.write_text(config.model_dump_json(indent=2))
    return folder


def load_config(run_id: str, workspace: str | Path | None = None) -> RunConfig:
    path = run_folder(run_id, workspace) / "config.json"
    if not path.exists():
        raise InvalidInputError(f"no run {run_id!r} in {runs_dir(workspace)}; list runs with `lle runs list`")
    try:
        config = RunConfig.model_validate_json(path.read_text())
    except ValueError as err:  # also bytes that are not UTF-8
        first = str(err).splitlines()[0]
        raise InvalidInputError(f"{path} is not a run config ({first}); it was edited by hand or is damaged: "
                                "restore it from a backup, or start a new run") from err
    if "skills_withhold" not in config.model_fields_set:  # a run started before skills were withheld: it goes on so
        config = config.model_copy(update={"skills_withhold": 0.0})
    if config.id != run_id:  # resumed, it would start a new run under the other id (listed twice)
        raise InvalidInputError(f"{path} names run {config.id}, but it is in the folder of run {run_id}: the config "
                                "was copied from another run or edited; put back this run's own config.json (from "
                                f"a backup), or remove the folder (`lle runs rm {run_id}`)")
    return config  # an empty store is refused where it is opened (`locations.check_file`)


def check_stores(folder: Path) -> None:
    """Name a run's strategy store that is empty (0 bytes) without opening it: `lle runs list` lists the run
    and says which store is damaged."""
    for db in sorted(folder.glob("*.db")):
        if db.stat().st_size == 0:
            raise InvalidInputError(f"{db} is empty (0 bytes): this run's store is damaged; restore it from a "
                                    f"backup, or move it aside (`mv {db} {db}.damaged`) to run that strategy "
                                    "again from the start")


def resume_config(run_id: str, workspace: str | Path | None = None) -> RunConfig:
    """The config of a run to continue, checked against its folder: the config's id and the run every episode of
    its stores was played for must be the folder's (a store copied from another run is not continued)."""
    config = load_config(run_id, workspace)
    for path in sorted(run_folder(run_id, workspace).glob("*.db")):
        with Store(path, read_only=True) as db:
            others = sorted(flywheel_store.run_ids(db) - {run_id})
        if others:
            raise InvalidInputError(f"{path} holds episodes of run {others[0]}, not of run {run_id} (its folder): "
                                    "the store was copied from another run; put back this run's own store (from a "
                                    f"backup), or move it aside (`mv {path} {path}.other`) to run that strategy again")
    return config


def model_path(config: RunConfig) -> str | None:
    """The GGUF behind the run's model, so workers count tokens with the model's own tokenizer."""
    if config.model == "oracle" or config.model.startswith("openai:"):  # a server's model: no local file
        return None
    if config.model.endswith(".gguf"):
        return config.model
    from lle.policies.catalog import locate

    return str(locate(config.model))


class Flywheel:
    """Runs one config to its end (or continues it)."""

    def __init__(self, config: RunConfig, workspace: str | Path | None = None,
                 on_step: OnEpisode | None = None, on_routed: OnRouted | None = None) -> None:
        self.config = config
        self.on_routed = on_routed
        self.folder = save_config(config, workspace)
        self.suite = suite.for_run(config, self.folder)  # the snapshot: a resumed run draws from the same suite
        self.on_step = on_step
        self.model_path = model_path(config)
        self.cache = strategies.WorkerCache()  # one per process: each worker gets its own, empty
        self.eval_worlds = suite.draw(self.suite, Split.dev, config.eval_tasks, seed=config.seed, round_=0,
                                      max_steps=config.max_steps)
        self.watch_worlds = (suite.draw_watch(self.suite, config.monitor_watch, seed=config.seed,
                                              max_steps=config.max_steps)
                             if config.monitor and "lle" in config.strategies else [])
        """The monitor's train watch set (`lle.flywheel.monitor`): empty when nothing is monitored."""
        self.curriculum: list[curriculum.Choice] = []
        self._writer: object | None = None
        self._decoder: Any = None
        """The one `BatchedDecoder` of a run with `slots` (built at its first batch, closed at the end)."""
        self._plugins: dict[str, strategies.StrategyPlugin] = {}
        self.extractor_writers: dict[str, extractor.Writer] = {}
        """What writes `lle`'s program skills (`RunConfig.extractor`) and `lle-self`'s, by spec, loaded at first use."""
        self.explored: dict[tuple[str, int], list[Experience]] = {}
        self.explore_seconds: dict[tuple[str, int], float] = {}
        """The extractor's attempts at each round's train draw, and the seconds they took (its cost)."""

    def plugin(self, strategy: str) -> strategies.StrategyPlugin | None:
        """The strategy's own agents, when it brings them (`PLUGINS`); None for none, raw, reflect and lle."""
        if strategy not in PLUGINS:
            return None
        if strategy not in self._plugins:
            self._plugins[strategy] = PLUGINS[strategy](self.config, self.folder)
        return self._plugins[strategy]

    def policy_factory(self, db_path: Path, attempt: int = 0,
                       adapter: tuple[str, str] | None = None) -> PolicyFactory:
        """The policy of a batch: greedy, or for a group's exploring attempt `attempt` sampled with its own seeds;
        with `adapter` (file, item id) a LoRA adapter is applied on the model."""
        threads = max(1, (os.cpu_count() or 2) // max(1, self.config.workers))
        temperature = self.config.group_temperature if attempt else 0.0
        seed = self.config.seed + 1000 * attempt
        if self.config.slots and self.config.model != "oracle":
            if adapter is not None:  # the CLI refuses --slots with trained weights; a config file may not
                raise InvalidInputError("batched decoding (slots) does not apply LoRA adapters; set slots to 0 "
                                        "or leave weights_min_rows out")
            return strategies.BatchedPolicyFactory(self.decoder(), seed=seed, temperature=temperature,
                                                   lean=self.config.lean)
        return strategies.SpecPolicyFactory(self.config.model, threads=threads, seed=seed,
                                            db_path=str(db_path), cache=self.cache, temperature=temperature,
                                            adapter=adapter[0] if adapter else None,
                                            adapter_id=adapter[1] if adapter else None, lean=self.config.lean)

    def decoder(self) -> Any:
        """The run's batched decoder: one model, `slots` sequences (`lle.policies.batched`)."""
        if self._decoder is None:
            from lle.policies.batched import BatchedDecoder

            self._decoder = BatchedDecoder.from_spec(self.config.model,
                                                     slots=self.config.slots, seed=self.config.seed)
        return self._decoder

    def served_adapter(self, db_path: Path) -> tuple[str, str] | None:
        """The weights carrier's active adapter in a strategy's store (file, item id), when weights are trained."""
        if self.config.weights_min_rows is None or not db_path.exists():
            return None
        from lle.carriers.weights import WeightsCarrier

        with Store(db_path) as db:
            active = WeightsCarrier(db).active()
        return (str(active.path), active.id) if active is not None else None

    def phase(self, strategy: str, db_path: Path, label: str, small_worlds: list[SmallWorld],
              skills: strategies.SkillsOffer | None = None, levers: Levers | None = None,
              attempt: int = 0, adapter: tuple[str, str] | None = None, policy: PolicyFactory | None = None,
              serial: bool = False) -> list[Experience]:
        """One batch of episodes into `db_path`, assessed as they finish; resumable by its label.

        `lle` episodes are offered the library's active skills and run under their family's active
        context recipe (both frozen during the batch), unless `skills` or `levers` say otherwise (A/B
        replays); a governed train batch withholds the skills from `skills_withhold` of its small worlds, chosen by
        seed, and records each episode's arm in its levers; other strategies run under the run's levers. A plugin
        strategy's episodes run its own policy and levers unless `policy` and `levers` say otherwise; `serial` runs
        them here, one after another (an explorer's budget is checked between episodes, and its loaded model is
        reused)."""
        train = label.split("/")[1] == "train"  # a round's train batch or one of its group's attempts
        poisoned = self.config.scenario == "poison" and train
        options = {"wrapper": poison.WRAPPER_ID} if poisoned else {}
        worlds = [poison.prepare(sw) for sw in small_worlds] if poisoned else small_worlds

        def committed(_episode_id: str, step: Step) -> None:
            if self.on_step is not None:
                self.on_step(f"{strategy} {label}", step)

        # One verification budget per train batch; held-out and replay batches are checked in full, so every
        # strategy and both arms of a replay are judged by the same verifiers. Train experiences are routed,
        # possibly to the dataset: the purpose under which expensive checks may run.
        budget = None
        if train and self.config.verification_budget is not None:
            budget = VerificationBudget(units=self.config.verification_budget)
        from lle.carriers.verifier_cases import CaseVerifier

        if adapter is None and strategy == "lle":
            adapter = self.served_adapter(db_path)  # frozen for the batch, like its skills and recipe
        plugin = self.plugin(strategy)
        if policy is None and plugin is not None:
            policy = plugin.eval_policy(self, db_path)
            levers = levers or plugin.eval_levers()
        factory: PolicyFactory = policy or self.policy_factory(db_path, attempt, adapter)
        if poisoned:  # the self-poisoning arm's agent stops short; the weak check it fools runs beside the others
            factory = poison.ArmPolicyFactory(factory)

        with Store(db_path) as db:
            measured = None
            if skills is None and strategy in strategies.GOVERNED:
                # A train batch withholds the library's skills from a share of its small worlds, chosen by seed:
                # the `without` arm of each skill's measured use (`skill_use.usefulness`).
                withhold = self.config.skills_withhold if train else 0.0
                skills = strategies.SkillsOffer(str(db_path), cache=self.cache, withhold=withhold,
                                                seed=self.config.seed, salt=label)
                measured = skills if withhold > 0 else None
            chosen: Levers | Callable[[SmallWorld], Levers] = levers or self.config.levers
            if levers is None and strategy in strategies.LLE:
                in_force = functools.cache(RecipeBook(db, base=self.config.levers).levers_for)  # one read per family
                chosen = lambda sw: in_force(sw.family)  # noqa: E731
            if strategy in strategies.GOVERNED:
                chosen = skills_arm(chosen, measured)
            return run_many(
                worlds, factory, store=db, workers=self.config.workers,
                context_builder_factory=strategies.StrategyBuilderFactory(strategy, str(db_path), self.model_path,
                                                                         self.cache, lean=self.config.lean),
                skills_factory=skills,
                world_options=options, batch=f"{self.config.id}/{strategy}/{label}", on_commit=committed,
                backend=LocalBackend(0) if serial else self.backend(),
                assess=functools.partial(assess_experience,  # this store's cases (and a poisoned batch's weak check)
                                         extra=[CaseVerifier(db), *(poison.weak_checks() if poisoned else [])],
                                         budget=budget, purpose="dataset" if budget else "record"),
                levers=chosen,
            )

    def backend(self) -> Backend | str:
        """Where the run's episodes run: the process pool, threads of this process around one batched decoder
        (`slots`), or Ray tasks (a local cluster or `ray_address`)."""
        if self.config.slots and self.config.model != "oracle":
            from lle.runtime.threaded import ThreadBackend

            return ThreadBackend(self.config.slots)
        if self.config.executor != "ray":
            return "local"
        from lle.runtime.ray_executor import RayBackend

        return RayBackend(self.config.workers, address=self.config.ray_address)

    def retire_useless(self, db_path: Path) -> None:
        """Retire the active skills whose measured use (offered against withheld, on the train episodes since their
        activation) is shown to be nil or harmful; a retired skill stays retired, so a resumed round retires once."""
        if not self.config.skills_withhold or not db_path.exists():
            return
        from lle.carriers import skill_use
        from lle.carriers.skills import SkillLibrary

        actor = f"flywheel:{self.config.id}"
        with Store(db_path) as db:
            skill_use.retire_useless(SkillLibrary(db, actor=actor), actor)

    def route(self, strategy: str, db_path: Path, groups: list[list[Experience]], label: str) -> None:
        """What `strategy` keeps of a round's train groups (the attempts at each small world), each routed
        and marked routed in one transaction: a kill anywhere routes it exactly once."""
        written: list[Update] = []
        with Store(db_path) as db:
            router = None
            for group in groups:
                if strategy in strategies.GOVERNED:
                    if router is None:
                        from lle.router.router import UpdateRouter

                        router = UpdateRouter(db, actor=f"flywheel:{self.config.id}")
                    # The best verified attempt routed (credited, MemRL), failures as contrasts, all marked.
                    written += router.route_group_once(group, self.config.id)
                    continue
                for exp in group:  # raw and reflect keep every attempt: the naive ways
                    lesson = None
                    if strategy == "reflect" and not flywheel_store.is_routed(db, exp.id):
                        lesson = self.lesson(exp)  # written before the transaction: a model call holds no lock
                    with db.transaction():  # the writes and the routed marker: all or none
                        if flywheel_store.is_routed(db, exp.id):
                            continue  # routed before a kill: a resumed run does not route it again
                        if strategy == "raw":
                            written += strategies.keep_raw(db, exp)
                        elif lesson is not None:
                            written += strategies.keep_lesson(db, exp, lesson)
                        flywheel_store.mark_routed(db, exp.id, self.config.id)
        if self.on_routed is not None:
            self.on_routed(f"{strategy} {label}", written)

    def lesson(self, exp: Experience) -> str:
        """The `reflect` baseline's self-written lesson: the run's model writes it (greedy, so a resumed run
        writes the same); a policy that cannot write (the oracle) gets a template."""
        if self._writer is None:
            if self.config.model == "oracle":
                return strategies.template_lesson(exp)
            from lle.policies.catalog import make_policy

            self._writer = make_policy(self.config.model, temperature=0.0, seed=self.config.seed)
        write = getattr(self._writer, "write", None)
        if write is None:
            return strategies.template_lesson(exp)
        return str(write(strategies.lesson_prompt(exp), max_tokens=strategies.LESSON_TOKENS))

    def train(self, strategy: str, db_path: Path, round_: int, worlds: list[SmallWorld]) -> list[list[Experience]]:
        """A round's train small worlds, each attempted `group_size` times: attempt 0 greedy (`rN/train`), the
        others sampled (`rN/train/aK`); one resumable batch per attempt. Returns the groups, in draw order."""
        attempts = [self.phase(strategy, db_path, f"r{round_}/train" + (f"/a{k}" if k else ""), worlds, attempt=k)
                    for k in range(self.config.group_size)]
        if strategy in strategies.LLE and extractor.explores(self.config, strategy):  # joins each world's group
            self.explored[strategy, round_] = extractor.explore(self, strategy, db_path, round_, worlds)
            attempts.append(self.explored[strategy, round_])
        return [list(group) for group in zip(*attempts, strict=True)]

    def chosen(self, name: str, pick: Callable[[], list[str]]) -> list[str]:
        """The candidates a round replays, recorded before the first replay starts (`replays/NAME.json`): a run
        killed after a decision and resumed replays the same ones, not the next in line."""
        path = self.folder / "replays" / f"{name}.json"
        if path.exists():
            try:
                return [str(i) for i in json.loads(path.read_text(encoding="utf-8"))]
            except (ValueError, TypeError):  # UnicodeDecodeError is a ValueError
                raise InvalidInputError(f"{path} is damaged (not a JSON list of ids); remove it and resume: the "
                                        "round chooses its replays again") from None
        ids = pick()
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(ids), encoding="utf-8")
        tmp.replace(path)
        return ids

    def validate_skills(self, db_path: Path, round_: int, levels: suite.Levels | None = None,
                        strategy: str = "lle") -> None:
        """A/B replay of the library's candidate skills on fresh train small worlds of their family, played
        by the strategy's own acting policy (a population's: its acting agent, who will be offered them).

        Each arm is a resumable batch (`rN/skill/NAME-vK/without|with`); the gate decides once per
        round, so a resumed run neither replays nor decides twice. At most `MAX_SKILL_REPLAYS` a round.
        """
        from lle.carriers.skills import SkillLibrary, SkillState

        with Store(db_path) as db:
            library = SkillLibrary(db, actor=f"flywheel:{self.config.id}")
            waiting = [s for s in library.skills() if s.state is SkillState.candidate]
            ids = self.chosen(chosen_name(strategy, f"r{round_}-skills"), lambda: [
                *[s.item_id for s in waiting if s.program is None][:MAX_SKILL_REPLAYS],
                *[s.item_id for s in waiting if s.program is not None][:MAX_PROGRAM_CHECKS]])
            candidates = [library.get(i) for i in ids]
            pairs_needed = library.config.skills_min_pairs
        for skill in candidates:
            world = skill.descriptor.world  # a program is checked on the world it was written for
            worlds = suite.draw_for_skill(self.suite, skill.item.scope.family or "", pairs_needed,
                                          seed=self.config.seed, round_=round_, max_steps=self.config.max_steps,
                                          levels=levels, world=world)
            if not worlds:
                continue
            # Named by the skill's name, not its item id: a rerun of the same config mines other ids. The programs
            # of one world are checked on the same small worlds: their no-skill arm is played once.
            label = f"r{round_}/skill/{skill.name}-v{skill.descriptor.version}"
            alone = f"r{round_}/skill/{skill.name}" if world is not None else label
            without = self.phase(strategy, db_path, f"{alone}/without", worlds,
                                 skills=strategies.SkillsOffer(str(db_path), only=(), cache=self.cache))
            with_skill = self.phase(strategy, db_path, f"{label}/with", worlds,
                                    skills=strategies.SkillsOffer(str(db_path), (skill.item_id,), self.cache))
            with Store(db_path) as db:
                library = SkillLibrary(db, actor=f"flywheel:{self.config.id}")
                if not library.decided(skill.item_id, [e.id for e in [*without, *with_skill]]):
                    library.decide(skill.item_id, list(zip(without, with_skill, strict=True)))

    def validate_recipes(self, db_path: Path, round_: int, train: list[Experience],
                         levels: suite.Levels | None = None, strategy: str = "lle") -> None:
        """Failure attribution over the round's train episodes proposes context recipes; each candidate is
        A/B replayed on fresh train small worlds of its family (under the recipe in force, then under the
        candidate) and the replay gate decides once. Arms are resumable batches named by the candidate."""
        with Store(db_path) as db:
            book = RecipeBook(db, base=self.config.levers, actor=f"flywheel:{self.config.id}")
            for family in sorted({e.small_world.family for e in train}):
                book.propose_from(family, train)
            ids = self.chosen(chosen_name(strategy, f"r{round_}-recipes"),
                              lambda: [c.id for c in book.oldest_per_family(MAX_RECIPE_REPLAYS)])
            known = {item.id: item for item, _state in book.items().values()}
            candidates = [known[i] for i in ids]
            current = {c.id: book.levers_for(c.scope.family or "") for c in candidates}
            pairs_needed = book.config.skills_min_pairs
        for item in candidates:
            family = item.scope.family or ""
            worlds = suite.draw_for_skill(self.suite, family, pairs_needed, seed=self.config.seed, round_=round_,
                                          max_steps=self.config.max_steps, levels=levels)
            if not worlds:
                continue
            label = f"r{round_}/recipe/{family}-{item.id[-8:]}"
            before = self.phase(strategy, db_path, f"{label}/in-force", worlds, levers=current[item.id])
            after = self.phase(strategy, db_path, f"{label}/candidate", worlds,
                               levers=levers_of(item).model_copy(update={"recipe": item.id}))
            with Store(db_path) as db:
                book = RecipeBook(db, base=self.config.levers, actor=f"flywheel:{self.config.id}")
                if not book.decided(item.id, [e.id for e in [*before, *after]]):
                    book.decide(item.id, list(zip(before, after, strict=True)))

    def run(self) -> None:
        try:
            self._run()
        finally:
            if self._decoder is not None:
                self._decoder.close()
                self._decoder = None

    def _run(self) -> None:
        if self.config.baseline:
            self.phase("none", strategy_db(self.folder, "baseline"), "r0/eval", self.eval_worlds)
        if self.watch_worlds:  # the monitor's "before" for what round 1 activates
            self.phase("none", strategy_db(self.folder, "baseline"), "r0/watch", self.watch_worlds)
        for strategy in self.config.strategies:
            if strategy == "none":
                continue  # no experience at all: its held-out result is round 0's, every round
            db_path = strategy_db(self.folder, strategy)
            levels = curriculum.start(self.suite)
            moves: dict[str, str] = {}
            for round_ in range(1, self.config.rounds + 1):
                worlds = suite.draw(self.suite, Split.train, self.config.train_per_round, seed=self.config.seed,
                                    round_=round_, max_steps=self.config.max_steps, levels=levels)
                plugin = self.plugin(strategy)
                groups = (plugin.train(self, db_path, round_, worlds) if plugin is not None
                          else self.train(strategy, db_path, round_, worlds))
                attempts = [e for group in groups for e in group]
                self.curriculum += curriculum.choices(strategy, round_, levels, moves, attempts)
                curriculum.record(self.folder, self.curriculum)
                self.route(strategy, db_path, groups, f"r{round_}/train")
                if strategy in strategies.LLE:  # programs from the verified train successes, checked just below
                    extractor.extract(self, strategy, db_path, round_, self.explored.get((strategy, round_), []))
                if strategy in strategies.GOVERNED:  # a population's pooled skills face the same replay gate
                    self.retire_useless(db_path)  # the skills active this round, judged by their measured use
                    self.validate_skills(db_path, round_, levels, strategy)
                if strategy in strategies.LLE:
                    self.validate_recipes(db_path, round_, attempts, levels, strategy)
                if self.config.curriculum:  # from the round's stored outcomes: a resumed run moves alike
                    levels, moves = curriculum.step(self.suite, levels, attempts, self.config.band)
                if self.config.eval_rounds == "each" or round_ == self.config.rounds:
                    self.phase(strategy, db_path, f"r{round_}/eval", self.eval_worlds)
                if strategy == "lle" and self.config.weights_min_rows is not None:
                    weights.validate(self, db_path, round_)
                if strategy == "lle" and self.watch_worlds:
                    from lle.flywheel import monitor  # revokes what regressed since its activation (once)

                    self.phase(strategy, db_path, f"r{round_}/watch", self.watch_worlds)
                    monitor.check(self.folder, self.config, self.watch_worlds, round_)
        (self.folder / "finished_at").write_text(utcnow().isoformat())


def chosen_name(strategy: str, name: str) -> str:
    """A round's record of the candidates it replays, one per strategy (each has its own store and ids); `lle`'s
    keeps the name runs made before others replayed too."""
    return name if strategy == "lle" else f"{strategy}-{name}"


def skills_arm(levers: Levers | Callable[[SmallWorld], Levers],
               offer: strategies.SkillsOffer | None) -> Callable[[SmallWorld], Levers]:
    """The levers of each small world with its arm of the skills' measured use recorded (`Levers.skills_arm`, kept
    with the episode): `without` where `offer` withholds the skills, else `with`; no arm when `offer` is None."""
    def chosen(sw: SmallWorld) -> Levers:
        base = levers(sw) if callable(levers) else levers
        arm = None if offer is None else "without" if offer.withholds(sw) else "with"
        return base if base.skills_arm == arm else base.model_copy(update={"skills_arm": arm})

    return chosen


def planned_episodes(config: RunConfig, *, attempts: bool = True) -> int:
    """The episodes a run plays, before any replay (those come as candidates are proposed): none's round 0, each
    learning strategy's train draws (with `attempts`, every attempt of a group; else one a small world) and
    held-out evaluations, and the monitor's watch set."""
    learning = [s for s in config.strategies if s != "none"]
    evaluated = config.rounds if config.eval_rounds == "each" else 1
    per_world = config.group_size if attempts else 1
    total = config.eval_tasks * config.baseline + len(learning) * (
        config.rounds * config.train_per_round * per_world + evaluated * config.eval_tasks)
    if config.monitor and "lle" in config.strategies:
        total += (config.rounds + 1) * config.monitor_watch  # none's before round 1, lle's after each round
    return total


def episode_finished(step: Step) -> bool:
    return stop_of(step) is not None


def list_runs(workspace: str | Path | None = None, damaged: list[str] | None = None) -> list[dict[str, object]]:
    """The runs whose config reads back and names its own folder's run; each damaged one is named in `damaged`
    (when given), not listed (a run whose store or finish marker is damaged is listed and named)."""
    out = []
    for path in sorted(runs_dir(workspace).glob("*/config.json")):
        try:
            config = json.loads(path.read_text())
            config = {key: config[key] for key in ("id", "suite", "model", "strategies", "rounds")}
        except (ValueError, TypeError, KeyError, OSError) as err:
            if damaged is not None:
                damaged.append(f"run {path.parent.name} is damaged ({path} is not a run config: "
                               f"{type(err).__name__}); restore it from a backup or remove that run folder")
            continue
        if config["id"] != path.parent.name:  # another run's config: that run is listed once, from its own folder
            if damaged is not None:
                damaged.append(f"run {path.parent.name} is damaged ({path} names run {config['id']}: copied from "
                               "another run or edited); restore its own config.json from a backup or remove that "
                               "run folder")
            continue
        try:
            done = finished_at(path.parent)
        except InvalidInputError as err:
            if damaged is not None:
                damaged.append(str(err))
            done = None
        try:  # a damaged store: named, and the run listed all the same (its config reads back)
            check_stores(path.parent)
        except InvalidInputError as err:
            if damaged is not None:
                damaged.append(str(err))
        out.append({"id": config["id"], "suite": config["suite"], "model": config["model"],
                    "strategies": config["strategies"], "rounds": config["rounds"], "finished_at": done})
    return out


def finished_at(folder: Path) -> str | None:
    """When the run in `folder` finished (its `finished_at` marker); None while it has not."""
    path = folder / "finished_at"
    if not path.exists():
        return None
    text = path.read_bytes().decode("utf-8", errors="replace").strip()
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"{path} is damaged (not a finish time); remove it and finish the run with "
                                f"`lle run --resume {folder.name}`") from None
    return text
