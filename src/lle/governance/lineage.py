"""Revocation with lineage: revoking something revokes everything derived from it.

Targets are ids (`exp_…`, `evd_…`, `upd_…`, `itm_…`) or whole sources:

    world:sql/shop-v1        every experience from that world (any version)
    world:sql/shop-v1@2      only those recorded with world version 2
    model:smollm2-135m       every experience of that model
    time:2026-12-01T00:00..2026-12-02T00:00   every experience recorded in that range (UTC)

A revocation is a new ledger row listing its cascade. The active view of every carrier is the
ledger minus the `Denylist`, which is checked on every read and every write: an item is blocked
when it, or any experience, evidence or item it derives from, is revoked, and a new experience is
blocked when its source is — so a revoked source can never be re-admitted. Revocation is by content
as well as by id: each revocation records the content and trajectory hashes of the experiences it
revokes (`lle.store.content`), so the same trajectory exported, given new ids and imported again is
blocked too, and so is everything built on it. And by meaning: a copy with zero-width characters,
homoglyphs, case, whitespace, null arguments or added text is blocked where denial is decided, by
`lle.governance.normalize` over the revoked experiences' steps (nothing stored, so no migration).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from lle.core import CarrierItem, Experience, Revocation, Update, UpdateOp
from lle.errors import InvalidInputError, UnknownIdError
from lle.governance.normalize import Meaning, step_fields
from lle.store import Store, content, experiences
from lle.store.content import trajectory_hash

__all__ = ["Denylist", "Source", "active_items", "admit_item", "cascade", "denylist", "item_states", "parse_source",
           "plan", "refuse_revoked", "revoke", "trajectory_hash", "update_history"]

SOURCE_KINDS = ("world", "model", "time")


@dataclass(frozen=True)
class Source:
    """A parsed source selector."""

    kind: str
    value: str
    version: str | None = None
    start: datetime | None = None
    end: datetime | None = None

    def matches(self, exp: Experience) -> bool:
        if self.kind == "world":
            return exp.small_world.world == self.value and self.version in (None, exp.world_version)
        if self.kind == "model":
            return exp.policy.model == self.value
        assert self.start is not None and self.end is not None
        return self.start <= exp.created_at < self.end


def parse_source(target: str) -> Source | None:
    """The source a selector names, None for a plain id; a malformed selector is an error."""
    kind, sep, value = target.partition(":")
    if not sep or kind not in SOURCE_KINDS:
        return None
    if not value:
        raise InvalidInputError(
            f"revocation target {target!r} names no {kind}; e.g. `{kind}:…` (see `lle revoke --help`)")
    if kind == "world":
        name, _, version = value.partition("@")
        return Source("world", name, version or None)
    if kind == "model":
        return Source("model", value)
    start_text, dots, end_text = value.partition("..")
    start, end = _instant(start_text), _instant(end_text)
    if not dots or start is None or end is None or start >= end:
        raise InvalidInputError(f"revocation target {target!r} is not a time range; write time:START..END in ISO 8601")
    return Source("time", value, start=start, end=end)


def _instant(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Denylist:
    """Everything revoked: ids (targets, cascades, and stored copies of revoked content), source
    selectors, and the content and trajectory hashes of revoked experiences."""

    ids: frozenset[str] = frozenset()
    sources: tuple[Source, ...] = ()
    hashes: Mapping[str, str] = field(default_factory=dict)
    """Revoked content or trajectory hash → the revoked experience it was taken from."""
    copies: Mapping[str, str] = field(default_factory=dict)
    """Stored experience id → the revoked experience whose content it repeats."""
    meaning: Meaning = field(default_factory=Meaning)
    """The revoked experiences' steps by meaning: normalized, and near copies (`lle.governance.normalize`)."""

    def blocks_item(self, item: CarrierItem) -> str | None:
        """The revoked id that blocks `item`, or None when it is active."""
        for id_ in (item.id, *item.experience_ids, *item.evidence_ids, *item.derived_from):
            if id_ in self.ids:
                return id_
        return None

    def blocks_experience(self, exp: Experience) -> str | None:
        """The revoked id or source that blocks `exp`: its own id, a revoked experience whose content or
        trajectory it repeats (under any id: an export edited and imported again), or its source."""
        if exp.id in self.ids and exp.id not in self.copies:
            return exp.id
        for source in self.sources:
            if source.matches(exp):
                return f"{source.kind}:{source.value}"
        if exp.id in self.copies:
            return self.copies[exp.id]
        for digest in (exp.content_hash or exp.compute_hash(), trajectory_hash(exp.small_world.world, exp.steps)):
            if digest is not None and digest in self.hashes:
                return self.hashes[digest]
        world = exp.small_world.world
        return self.meaning.find(world, step_fields(exp.steps)) if self.meaning.covers(world) else None


_cache: dict[str, tuple[tuple[int, int], Denylist]] = {}
_meanings: dict[str, tuple[int, Meaning]] = {}


def _meaning(store: Store, revoked: Iterable[str]) -> Meaning:
    """The revoked experiences by meaning, rebuilt only when a revocation was appended."""
    mark = store.count("revocations")
    cached = _meanings.get(str(store.path))
    if cached and cached[0] == mark:
        return cached[1]
    found = Meaning()
    for exp_id in sorted(i for i in revoked if i.startswith("exp_") and store.kind_of(i) is not None):
        exp = store.get_experience(exp_id)
        found.add(exp_id, exp.small_world.world, step_fields(exp.steps))
    _meanings[str(store.path)] = (mark, found)
    return found


def denylist(store: Store) -> Denylist:
    """The store's denylist, reloaded only when a revocation or an experience (a possible copy of
    revoked content) was appended since the last call."""
    mark = (store.count("revocations"), store.last_rowid("experiences"))
    cached = _cache.get(str(store.path))
    if cached and cached[0] == mark:
        return cached[1]
    ids: set[str] = set()
    sources = []
    for rev in store.list_revocations():
        ids.add(rev.target)
        ids.update(rev.cascade)
        source = parse_source(rev.target)
        if source is not None:
            sources.append(source)
    hashes = content.revoked_hashes(store, ids)
    copies = {exp_id: origin for exp_id, origin in content.copies_of(store, hashes).items() if exp_id not in ids}
    result = Denylist(frozenset(ids | set(copies)), tuple(sources), hashes, copies, _meaning(store, ids))
    _cache[str(store.path)] = (mark, result)
    return result


def _experiences_of(store: Store, source: Source) -> list[str]:
    if source.kind == "time":
        assert source.start is not None and source.end is not None
        return experiences.created_between(store, source.start.isoformat(), source.end.isoformat())
    if source.kind == "world":
        return experiences.of_world(store, source.value, source.version)
    return experiences.of_model(store, source.value)


def cascade(store: Store, roots: Iterable[str]) -> list[str]:
    """Every id derived from `roots`: their evidence, the items built on them, items built on those…"""
    revoked = set(roots)
    for exp_id in [r for r in revoked if r.startswith("exp_")]:
        revoked.update(experiences.evidence_ids(store, exp_id))
    for upd_id in [r for r in revoked if r.startswith("upd_")]:
        if item_id := store.update_item_id(upd_id):
            revoked.add(item_id)
    items = store.carrier_items()
    changed = True
    while changed:  # fixpoint: items derived from items derived from …
        changed = False
        for item in items:
            if item.id not in revoked and any(p in revoked for p in (*item.experience_ids, *item.evidence_ids,
                                                                     *item.derived_from)):
                revoked.add(item.id)
                changed = True
    return sorted(revoked - set(roots))


def plan(store: Store, target: str) -> tuple[list[str], list[str]]:
    """(roots, cascade) that revoking `target` would revoke, without writing anything."""
    source = parse_source(target)
    if source is not None:
        roots = _experiences_of(store, source)
    else:
        if store.kind_of(target) is None:
            raise UnknownIdError("record", target, "revoke an id from `lle experiences list` / `lle updates list`, "
                                 "or a source such as world:ID, model:NAME, time:START..END")
        roots = [target]
    return roots, cascade(store, roots)


def revoke(store: Store, target: str, reason: str, author: str, *, dry_run: bool = False) -> Revocation:
    """Append a revocation of `target` and everything derived from it (returned unsaved with `dry_run`)."""
    if not reason.strip():
        raise InvalidInputError("the reason is empty; say why (it is kept with the revocation)")
    roots, derived = plan(store, target)
    everything = sorted(set(roots) - {target} | set(derived))
    rev = Revocation(target=target, reason=reason, author=author, cascade=everything)
    if not dry_run:
        # The content of each revoked experience goes with the revocation, in its transaction: a
        # copy imported later under a new id is blocked by its hashes, not by an id it no longer has.
        revoked_exps = [i for i in dict.fromkeys([*roots, *everything]) if i.startswith("exp_")]
        with store.transaction():
            store.append_revocation(rev)
            content.record_revoked(store, rev.id, [(exp_id, kind, digest) for exp_id in revoked_exps
                                                   for kind, digest in content.hashes_of(store.get_experience(exp_id))])
    return rev


def refuse_revoked(store: Store, exps: Iterable[Experience]) -> None:
    """Refuse, in one line, an import holding an experience that repeats revoked content (by id, content or
    meaning) or comes from a revoked source; experiences already stored under their id are let through."""
    denied = denylist(store)
    for n, exp in enumerate(exps, 1):
        if store.kind_of(exp.id) is None and (blocked := denied.blocks_experience(exp)):
            raise InvalidInputError(f"experience #{n} ({exp.id}) repeats or comes from revoked {blocked}; "
                                    "nothing imported")


def admit_item(store: Store, item: CarrierItem, update: Update) -> None:
    """Write an admitted item and its update, unless the item or anything it derives from is revoked."""
    missing = [p for p in (*item.experience_ids, *item.derived_from) if store.kind_of(p) is None]
    if missing:
        raise InvalidInputError(f"{item.carrier} item {item.id} derives from {', '.join(missing)}, which is not "
                                "stored; admit what it derives from first")
    blocked = denylist(store).blocks_item(item)
    if blocked:
        raise InvalidInputError(f"{item.carrier} item {item.id} derives from revoked {blocked}; it cannot be admitted")
    if store.kind_of(item.id) is None:
        store.append_item(item)
    store.append_update(update)


def active_items(store: Store, carrier: str | None = None) -> list[CarrierItem]:
    """The active view: every stored item of `carrier` that the denylist does not block."""
    denied = denylist(store)
    return [item for item in store.carrier_items(carrier) if denied.blocks_item(item) is None]


def update_history(store: Store, carrier: str) -> dict[str, list[Update]]:
    """Every update of `carrier`, per item, in the order written."""
    history: dict[str, list[Update]] = defaultdict(list)
    for update in store.list_updates(limit=10_000_000, carrier=carrier):
        if update.item_id:
            history[update.item_id].append(update)
    return history


def item_states(store: Store, carrier: str, states: Mapping[UpdateOp, str],
                history: Mapping[str, list[Update]] | None = None) -> dict[str, tuple[CarrierItem, str]]:
    """Each item of `carrier` with its lifecycle state: `candidate` until an update whose op is in
    `states` moves it; `revoked` whenever the denylist blocks it (the ledger minus revocations)."""
    denied = denylist(store)
    history = update_history(store, carrier) if history is None else history
    out = {}
    for item in store.carrier_items(carrier):
        state = "candidate"
        for update in history.get(item.id, []):
            state = states.get(update.op, state)
        out[item.id] = (item, "revoked" if denied.blocks_item(item) else state)
    return out
