"""What a strategy does with experience: `none` keeps nothing, `raw` keeps every log, `reflect` keeps the
model's own lesson of each episode (a playbook with no gates, the Reflexion/ACE way), `lle` routes, and
`population` routes what a population's explorers found (`lle.population.strategy`, registered in
`lle.flywheel.loop.PLUGINS`).

Each strategy of a run has its own store (`runs/RUN/STRATEGY.db`), so what one learns can never
leak into another's context. The context builder and the policy are built inside the episode
workers from the picklable factories below; retrieval there reads the strategy's store (WAL lets
readers run beside the single writer). `lle` episodes read only what their small world `inherits`;
`raw`, the ungoverned baseline, keeps and reads every log whatever the small world declares.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import JsonValue

from lle.config import Levers
from lle.core import CarrierItem, CarrierKind, Experience, Policy, Scope, ScopeLevel, SmallWorld, Update, UpdateOp
from lle.errors import InvalidInputError
from lle.governance import gates
from lle.store import Store

if TYPE_CHECKING:
    from lle.carriers.memory import MemoryCarrier

STRATEGIES = ("none", "raw", "reflect", "lle", "lle-self")
"""The strategies `lle run --compare` runs side by side."""
COMPARE_ORDER = ("none", "lle", "lle-self", "raw", "reflect")
"""The order `--compare` runs them in (one strategy after another): lle right after the shared round 0, so a run
cut short still pairs lle with none; the baselines it must also beat come next."""
WITH_INPUT = {"population": "--population FILE"}
"""Strategies that need an input of their own; they join a run only when it is given."""
GOVERNED = ("lle", "lle-self", "population")
"""Strategies whose train experiences go through the update router's gates (and whose retrieval is governed)."""
LLE = ("lle", "lle-self")
"""`lle` and `lle-self`: the same loop (recipes, skill checks, an extractor writing programs), except that
`lle-self`'s extractor is its own acting model (what a model learns on its own, beside what it is taught)."""
RAW_K = 2
LESSON_TOKENS = 64
"""What a `reflect` lesson may cost to write (one or two sentences)."""
LLE_K = 3


def check_strategy(name: str) -> str:
    if name not in STRATEGIES and name not in WITH_INPUT:
        raise InvalidInputError(f"no strategy {name!r}; choose from {', '.join([*STRATEGIES, *WITH_INPUT])}")
    return name


class StrategyPlugin(Protocol):
    """A strategy that brings its own agents. It plays a round's train small worlds its way and names the
    policy and levers evaluated on the held-out tasks; the loop routes its groups, moves its curriculum and
    evaluates it like any other strategy (so held-out tasks reach it only as evaluation)."""

    def train(self, flywheel: Any, db_path: Path, round_: int, worlds: list[SmallWorld]) -> list[list[Experience]]:
        """The round's train groups (the attempts at each small world, in draw order), stored in `db_path`."""
        ...

    def eval_policy(self, flywheel: Any, db_path: Path) -> Any:
        """The policy factory (`runtime.parallel.PolicyFactory`) of held-out episodes: greedy, frozen."""
        ...

    def eval_levers(self) -> Levers:
        """The harness levers of held-out episodes."""
        ...


# --- what the policy sees ------------------------------------------------------------------------


def _raw_text(exp: Experience) -> str:
    lines = [f"goal: {exp.small_world.goal}"]
    for s in exp.steps:
        lines.append(f"{s.request.tool} {s.request.args} -> {s.effect.observation[:400]}")
    lines.append(f"outcome: {exp.outcome.value}")
    return "\n".join(lines)


class WorkerCache:
    """What a process opens once and reuses across its episodes: strategy stores (read beside the
    parent's single writer) and policies (loading a model per episode would dominate). The run
    passes one to all its factories; pickled, it travels empty, so each worker process fills its
    own (a store connection must not cross processes)."""

    def __init__(self) -> None:
        # Per thread: episodes in threads (batched decoding) must not use one connection at once; a pool
        # worker has the one thread. A thread's stores go (and close) with it.
        self._local = threading.local()
        self.policies: dict[str, Policy] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._local, self.policies = threading.local(), {}

    @property
    def stores(self) -> dict[str, Store]:
        """This thread's open stores, by path."""
        if not hasattr(self._local, "stores"):
            self._local.stores = {}
        stores: dict[str, Store] = self._local.stores
        return stores

    def store(self, db_path: str) -> Store:
        if db_path not in self.stores:
            self.stores[db_path] = Store(db_path)
        return self.stores[db_path]

    def memory(self, db_path: str) -> MemoryCarrier:
        """This thread's memory carrier over the store. Kept, not rebuilt per episode: it folds in what the
        writer added since its last search (high-water marks), where a new one reloads every item (100k:
        1.8 s an episode start), and it keeps the query vectors of goals already seen."""
        from lle.carriers.memory import MemoryCarrier

        if not hasattr(self._local, "memories"):
            self._local.memories = {}
        memories: dict[str, MemoryCarrier] = self._local.memories
        if db_path not in memories:
            memories[db_path] = MemoryCarrier(self.store(db_path))
        return memories[db_path]


class Retriever:
    """Per-episode retrieval from a strategy's store (opened lazily, once per worker process).

    It retrieves once per episode, by the goal, and shows the same notes at every step: the text
    before the trajectory then stays the same from step to step, so llama.cpp reuses its evaluated
    prefix (retrieving by each new observation re-evaluated every note on every step), and a
    resumed episode sees the notes it saw before the kill.
    """

    def __init__(self, strategy: str, db_path: str, cache: WorkerCache | None = None) -> None:
        self.strategy, self.db_path, self.cache = strategy, db_path, cache or WorkerCache()
        self._shown: dict[str, list[CarrierItem]] = {}

    def __call__(self, small_world: SmallWorld, observation: str) -> list[CarrierItem]:
        if small_world.id not in self._shown:
            self._shown = {small_world.id: self.find(small_world)}  # one episode at a time per builder
        return self._shown[small_world.id]

    def find(self, small_world: SmallWorld) -> list[CarrierItem]:
        if self.strategy == "none" or not Path(self.db_path).exists():
            return []
        db = self.cache.store(self.db_path)
        query = small_world.goal
        if self.strategy == "reflect":
            # The playbook (Reflexion/ACE): the latest self-written lessons, whatever they say. A lesson
            # shares few words with the next goal, so it is shown by recency, not found by search.
            from lle.governance.lineage import active_items

            return active_items(db, "memory")[-LLE_K:]
        if self.strategy == "raw":
            # The naive way: the most similar whole logs, whatever they contain.
            ids = [ref for kind, ref, _ in db.search(query[:500], limit=RAW_K * 4) if kind == "memory"][:RAW_K]
            return db.items_by_id(ids)
        from lle.carriers.rules import RuleBook

        scope = Scope(level=ScopeLevel.task, family=small_world.family, project=small_world.project,
                      task_id=small_world.id)

        def inherited(items: list[CarrierItem]) -> list[CarrierItem]:
            # Over-fetched, then cut: a note outside the small world's `inherits` must not take the
            # place of one inside (the best k are the same when nothing is left out).
            return [i for i in items if gates.inherited(small_world, i.scope)][:LLE_K]

        return [*inherited(RuleBook(db).retrieve(query, scope, k=4 * LLE_K)),
                *inherited(self.cache.memory(self.db_path).retrieve(query, scope, k=4 * LLE_K))]


@dataclass(frozen=True)
class StrategyBuilderFactory:
    """Picklable: builds the strategy's context builder in the worker (a `runtime.parallel.BuilderFactory`)."""

    strategy: str
    db_path: str
    model_path: str | None = None
    cache: WorkerCache = field(default_factory=WorkerCache, compare=False, repr=False)
    lean: bool = False
    """The output format shows the lean action the run's policy decodes."""

    def __call__(self) -> Any:
        from lle.context.builder import BudgetedContextBuilder

        count = None
        if self.model_path:
            from lle.policies.llama import load_token_counter

            count = load_token_counter(self.model_path)
        retrieve = Retriever(self.strategy, self.db_path, self.cache) if self.strategy != "none" else None
        return BudgetedContextBuilder(count_tokens=count, retrieve=retrieve, lean=self.lean)


@dataclass(frozen=True)
class SkillsOffer:
    """Picklable: the skills an episode is offered: the library's active ones for the small world, or
    exactly the skills `only` names (a skill's A/B replay: `()` for one arm, `(ITEM,)` for the other).

    With `withhold` (a governed train batch), that share of small worlds, chosen by `withheld(seed, small world,
    salt)`, is offered nothing: the `without` arm of each skill's measured use (`skill_use.usefulness`)."""

    db_path: str
    only: tuple[str, ...] | None = None
    cache: WorkerCache = field(default_factory=WorkerCache, compare=False, repr=False)
    withhold: float = 0.0
    """The share of small worlds withheld the library's skills; 0: none."""
    seed: int = 0
    """The run's seed: two runs with the same seed withhold the same episodes."""
    salt: str = ""
    """The batch's label (`rN/train/aK`): each attempt of a group draws apart."""

    def withholds(self, small_world: SmallWorld) -> bool:
        """Whether this small world's episode is played without the library's skills (the `without` arm)."""
        return self.only is None and withheld(self.seed, small_world.id, self.salt, self.withhold)

    def __call__(self, small_world: SmallWorld) -> list[Any]:
        if not Path(self.db_path).exists() or self.withholds(small_world):
            return []
        from lle.carriers.skills import SkillLibrary

        library = SkillLibrary(self.cache.store(self.db_path))
        skills = [library.get(ref) for ref in self.only] if self.only is not None else library.offered(small_world)
        return [s for s in skills if gates.inherited(small_world, s.item.scope)]  # only what it may read


@dataclass(frozen=True)
class SpecPolicyFactory:
    """Picklable: the policy a spec names, one per worker process (loading a model per episode would dominate);
    a `runtime.parallel.PolicyFactory`."""

    spec: str
    threads: int = 1
    seed: int = 0
    db_path: str | None = None
    temperature: float = 0.0
    """Above 0 (a group's exploring attempt): sampled, with a seed of its own per small world."""
    """The strategy's store: the oracle calls the skills of it that an episode offers."""
    adapter: str | None = None
    """A GGUF LoRA adapter file applied on the model (`lle.carriers.weights`)."""
    adapter_id: str | None = None
    """The adapter's carrier item id, recorded on each experience that ran with it."""
    cache: WorkerCache = field(default_factory=WorkerCache, compare=False, repr=False)
    lean: bool = False
    """Decode lean actions (`lle.actions.lean_schema`)."""

    def __call__(self, small_world: SmallWorld) -> Policy:
        if self.spec == "oracle":  # the toy world's solver: tests the machinery, never a learner
            from lle.worlds.toy import oracle_actions

            skills = []
            if self.db_path and Path(self.db_path).exists():
                from lle.carriers.skills import SkillLibrary, SkillState

                library = SkillLibrary(self.cache.store(self.db_path))
                skills = [s for s in library.skills(small_world.family) if s.state is not SkillState.revoked]
            from lle.flywheel.replay import SkillAwarePolicy

            # A skill whose whole macro is the plan's next steps is called instead (only if offered).
            return SkillAwarePolicy(oracle_actions(small_world), skills, name="oracle")
        key = f"{self.spec}+{self.adapter}" if self.adapter else self.spec
        if key not in self.cache.policies:
            from lle.policies.catalog import make_policy

            extra: dict[str, Any] = {"lora_path": self.adapter, "adapter_id": self.adapter_id} if self.adapter else {}
            # Passed, not left to LLE_THREADS: a worker inherits its parent's environment, and two workers of two
            # llama.cpp threads each on two cores spin-wait on each other (steps 20-100x slower).
            extra |= {} if self.spec.startswith("openai:") else {"n_threads": self.threads}
            extra |= {"lean": True} if self.lean else {}
            self.cache.policies[key] = make_policy(self.spec, temperature=0.0, seed=self.seed, **extra)
        policy = self.cache.policies[key]
        # One model per process serves every attempt: a worker runs one episode at a time, so the sampling
        # settings are set per episode (a model loaded per temperature would cost its memory again).
        if hasattr(policy, "temperature") and hasattr(policy, "seed"):
            policy.temperature = self.temperature
            policy.seed = self.seed if self.temperature == 0 else self.seed + stable_seed(small_world.id)
        return policy


@dataclass(frozen=True)
class BatchedPolicyFactory:
    """A `BatchedPolicy` per episode on the run's one `BatchedDecoder` (episodes in threads: nothing is
    pickled); greedy, or sampled with a seed of its own per small world, as `SpecPolicyFactory` does."""

    decoder: Any
    seed: int = 0
    temperature: float = 0.0
    lean: bool = False

    def __call__(self, small_world: SmallWorld) -> Policy:
        seed = self.seed if self.temperature == 0 else self.seed + stable_seed(small_world.id)
        policy: Policy = self.decoder.policy(small_world, temperature=self.temperature, seed=seed, lean=self.lean)
        return policy


def withheld(seed: int, small_world_id: str, salt: str, fraction: float) -> bool:
    """Whether a governed train episode is withheld the library's skills: the sha256 of (run seed, small world,
    batch label) below `fraction`, the same on every machine, run and resume."""
    if fraction <= 0:
        return False
    digest = hashlib.sha256(f"{seed}\x00{small_world_id}\x00{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * (1 << 64)


def stable_seed(text: str) -> int:
    """A seed from text, the same on every machine and Python (hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") % 1_000_000


# --- what is kept -----------------------------------------------------------------------------------


def keep_raw(store: Store, exp: Experience) -> list[Update]:
    """The naive way: every trajectory, whole, as an ungoverned memory item."""
    return _keep_ungated(store, exp, {"raw_log": _raw_text(exp)}, actor="raw")


def _keep_ungated(store: Store, exp: Experience, content: dict[str, JsonValue], actor: str) -> list[Update]:
    """A global memory item admitted with no gate: what the naive baselines keep."""
    scope = Scope(level=ScopeLevel.global_)
    item = CarrierItem(carrier=CarrierKind.memory, scope=scope, content=content, experience_ids=[exp.id])
    store.append_item(item)
    update = Update(carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=item.id, scope=scope,
                    experience_ids=[exp.id], actor=actor)
    store.append_update(update)
    return [update]


def lesson_prompt(exp: Experience) -> str:
    """What a `reflect` model is asked after an episode: the task, what it did, the verdict, one lesson."""
    lines = [f"You just tried this task:\n{exp.small_world.goal[:400]}", "What you did:"]
    for s in exp.steps[-8:]:
        lines.append(f"- {s.request.tool} {json.dumps(s.request.args, ensure_ascii=False)[:120]} -> "
                     f"{(s.effect.error or s.effect.observation)[:160]}")
    lines.append(f"Result: {exp.outcome.value}.")
    lines.append("Write one short lesson (one or two sentences) for the next time you meet a task like this.")
    return "\n".join(lines)


def template_lesson(exp: Experience) -> str:
    """The lesson of a policy that cannot write (the oracle): what was done and how it ended."""
    tools = " -> ".join(s.request.tool for s in exp.steps[-6:]) or "nothing"
    return f"On a {exp.small_world.family} task I did {tools} and it {exp.outcome.value}."


def keep_lesson(store: Store, exp: Experience, lesson: str) -> list[Update]:
    """The `reflect` baseline: the model's own lesson, kept as written, no gate (its flaws are the point)."""
    return _keep_ungated(store, exp, {"lesson": lesson[:600]}, actor="reflect")
