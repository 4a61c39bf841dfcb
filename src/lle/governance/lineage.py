"""Revocation with lineage: revoking something revokes everything derived from it.

Targets are ids (`exp_…`, `evd_…`, `upd_…`, `itm_…`) or whole sources:

    world:sql/shop-v1        every experience from that world (any version)
    world:sql/shop-v1@2      only those recorded with world version 2
    model:smollm2-135m       every experience of that model
    time:2026-12-01T00:00..2026-12-02T00:00   every experience recorded in that range (UTC)

A revocation is a new ledger row listing its cascade. The active view of every carrier is the
ledger minus the `Denylist`, which is checked on every read and every write: an item is blocked
when it, or any experience, evidence or item it derives from, is revoked, and a new experience is
blocked when its source is — so a revoked source can never be re-admitted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from lle.core import CarrierItem, Experience, Revocation, Update, UpdateOp
from lle.errors import InvalidInputError, UnknownIdError
from lle.store import Store, experiences

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
    """Everything revoked: ids (targets and cascades) and source selectors."""

    ids: frozenset[str] = frozenset()
    sources: tuple[Source, ...] = ()

    def blocks_item(self, item: CarrierItem) -> str | None:
        """The revoked id that blocks `item`, or None when it is active."""
        for id_ in (item.id, *item.experience_ids, *item.evidence_ids, *item.derived_from):
            if id_ in self.ids:
                return id_
        return None

    def blocks_experience(self, exp: Experience) -> str | None:
        if exp.id in self.ids:
            return exp.id
        for source in self.sources:
            if source.matches(exp):
                return f"{source.kind}:{source.value}"
        return None


_cache: dict[str, tuple[int, Denylist]] = {}


def denylist(store: Store) -> Denylist:
    """The store's denylist, reloaded only when a revocation was appended since the last call."""
    count = store.count("revocations")
    cached = _cache.get(str(store.path))
    if cached and cached[0] == count:
        return cached[1]
    ids: set[str] = set()
    sources = []
    for rev in store.list_revocations():
        ids.add(rev.target)
        ids.update(rev.cascade)
        source = parse_source(rev.target)
        if source is not None:
            sources.append(source)
    result = Denylist(frozenset(ids), tuple(sources))
    _cache[str(store.path)] = (count, result)
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
        store.append_revocation(rev)
    return rev



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
