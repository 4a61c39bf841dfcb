"""A skill's measured use: the train episodes offered it against those withheld the library's skills.

The flywheel withholds the skills from a share of its governed train episodes, chosen by seed, and records each
episode's arm in its levers (`Levers.skills_arm`). Since a skill's activation, every stored, unrevoked train
experience of its family whose small world it would be offered to is in one arm: `with` (offered the active
skills; a program skill must also have fired) or `without`. The difference of the two success rates and its 95 %
interval (Newcombe's, unpaired, from two Wilson intervals) is the skill's usefulness; held-out episodes never count.
`usefulness` measures it, `retire_useless` retires what it shows to be of no use
(`lle.governance.gates.skills_usefulness_gate`), `source` says where a skill came from.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime

from lle.carriers.skills import Skill, SkillLibrary, SkillState
from lle.core import Outcome, SmallWorld, Split, Update, UpdateOp
from lle.governance import gates, intervals
from lle.governance.lineage import denylist
from lle.store import Store, experiences

WITH, WITHOUT = "with", "without"
"""The arms, as `Levers.skills_arm` records them."""


@dataclass(frozen=True)
class Usefulness:
    """A skill's measured use. `diff` (with − without success rate), `low` and `high` (its 95 % interval) are
    shares from −1 to 1; `needed` episodes in each arm decide anything; `since`: its activation (None: never
    active, so never measured)."""

    with_n: int = 0
    with_passed: int = 0
    without_n: int = 0
    without_passed: int = 0
    diff: float = 0.0
    low: float = -1.0
    high: float = 1.0
    needed: int = 1
    since: datetime | None = None
    with_ids: tuple[str, ...] = ()
    without_ids: tuple[str, ...] = ()

    @property
    def decided(self) -> bool:
        """Enough episodes in each arm to judge it."""
        return self.since is not None and min(self.with_n, self.without_n) >= max(1, self.needed)

    @property
    def useless(self) -> bool:
        """Judged, and its interval lies at or below 0: no use shown (the retirement rule)."""
        return self.decided and self.high <= 0

    @property
    def hurts(self) -> bool:
        """Judged, and the episodes offered it did worse (negative transfer)."""
        return self.decided and self.diff < 0

    @property
    def figures(self) -> str:
        """The figures a retirement's reason carries: "with 3/12, without 7/10: \u221228.3 points (\u221261.0 to
        +4.4)"."""
        return gates.usefulness_figures(self.with_n, self.with_passed, self.without_n, self.without_passed)

    def row(self) -> dict[str, object]:
        """As JSON: both arms, the difference and its interval in points, whether it is judged and hurts."""
        return {"with": f"{self.with_passed}/{self.with_n}", "without": f"{self.without_passed}/{self.without_n}",
                "difference_points": round(100 * self.diff, 1),
                "ci95_points": [round(100 * self.low, 1), round(100 * self.high, 1)],
                "decided": self.decided, "hurts": self.hurts, "figures": self.figures}


def measure(store: Store, family: str, since: datetime, until: datetime | None, *,
            offered: Callable[[SmallWorld, datetime], bool], unrevoked: Callable[[str], bool],
            fired: Collection[str] | None, needed: int) -> Usefulness:
    """The two arms over the family's train episodes started in [since, until) whose small world `offered` accepts
    (at the episode's start) and whose experience is `unrevoked`; with `fired` (a program skill), a `with` episode
    counts only when it ran the skill. Episodes whose outcome is unknown say nothing and are left out."""
    arms: dict[str, list[tuple[str, bool]]] = {WITH: [], WITHOUT: []}
    for exp_id, arm, outcome, small_world, started in experiences.skills_arms(store, family):
        if arm not in arms or outcome == Outcome.unknown.value:
            continue
        at = datetime.fromisoformat(started)
        if at < since or (until is not None and at >= until):
            continue
        sw = SmallWorld.model_validate_json(small_world)
        if sw.split is not Split.train or not offered(sw, at) or not unrevoked(exp_id):
            continue
        if arm == WITH and fired is not None and exp_id not in fired:
            continue
        arms[arm].append((exp_id, outcome == Outcome.passed.value))
    with_n, without_n = len(arms[WITH]), len(arms[WITHOUT])
    with_passed, without_passed = sum(p for _, p in arms[WITH]), sum(p for _, p in arms[WITHOUT])
    diff = (with_passed / with_n if with_n else 0.0) - (without_passed / without_n if without_n else 0.0)
    low, high = intervals.newcombe_unpaired(with_passed, with_n, without_passed, without_n)
    return Usefulness(with_n, with_passed, without_n, without_passed, diff, low, high, needed, since,
                      tuple(i for i, _ in arms[WITH]), tuple(i for i, _ in arms[WITHOUT]))


def usefulness(library: SkillLibrary, ref: str | Skill) -> Usefulness:
    """The skill's measured use on its family's stored, unrevoked train episodes since its activation (until
    it left `active`) whose small world it would be offered to: offered the library's skills against withheld
    them (`lle.carriers.skill_use`); never active: an empty estimate."""
    skill = library.get(ref) if isinstance(ref, str) else ref
    updates = library._history().get(skill.item_id, [])
    since = next((u.at for u in updates if u.op is UpdateOp.activate), None)
    if since is None:
        return Usefulness(needed=library.config.skills_min_pairs)
    until = next((u.at for u in updates if u.at >= since and u.op in (
        UpdateOp.retire, UpdateOp.supersede, UpdateOp.revoke)), None)
    denied = denylist(library.store)

    def unrevoked(exp_id: str) -> bool:
        if exp_id in denied.ids:
            return False
        if denied.sources and exp_id not in library._records:
            library._records[exp_id] = library.store.get_experience(exp_id).model_copy(update={"steps": []})
        return not denied.sources or denied.blocks_experience(library._records[exp_id]) is None

    def offered(small_world: SmallWorld, at: datetime) -> bool:  # as `offered`, at the episode's start
        return skill.offered_to(small_world, at) and gates.inherited(small_world, skill.item.scope)

    fired = {i for i, _ in library.uses(skill.item_id)} if skill.program is not None else None
    return measure(library.store, skill.item.scope.family or skill.descriptor.family, since, until,
                   offered=offered, unrevoked=unrevoked, fired=fired, needed=library.config.skills_min_pairs)


def retire_useless(library: SkillLibrary, actor: str) -> list[Update]:
    """Retire each active skill whose measured use is judged (`skills_min_pairs` episodes in each arm) and shown
    to be nil or harmful (its interval at or below 0): a retire update whose gate carries the figures and whose
    experiences are both arms'. Its item and lineage stay; a skill retired already is left alone."""
    updates = []
    for skill in library.skills():
        if skill.state is not SkillState.active:
            continue
        use = usefulness(library, skill)
        gate = gates.skills_usefulness_gate(use.with_n, use.with_passed, use.without_n, use.without_passed,
                                            config=library.config)
        if gate.passed:
            continue
        ids = [*use.with_ids, *use.without_ids]
        updates.append(library.transition(skill, UpdateOp.retire, gate=gate, experience_ids=ids,
                                          evidence_ids=library.hard_evidence(ids), actor=actor))
    return updates


def source(library: SkillLibrary, ref: str | Skill) -> str:
    """Where the skill came from: `experience` (mined here), `import` or `extractor:<model>`.

    `extractor:<model>`: a model wrote it from experience; `import`: a descriptor from elsewhere (it names an
    origin, or it entered through the `skills_import` gate); `experience`: mined from this store's verified
    successes."""
    skill = library.get(ref) if isinstance(ref, str) else ref
    first = next(iter(library._history().get(skill.item_id, [])), None)
    imported = first is not None and first.gate is not None and first.gate.name == "skills_import"
    origin = skill.descriptor.evidence.origin
    if origin and origin.startswith("extractor:"):
        return origin
    return "import" if origin or imported else "experience"
