"""Finding what a person names: runs (`latest`, an id or a short one), a run's store per strategy, and any
record id by a short id. Shared by `lle view` and the CLI (which imports it; this module imports nothing
of the CLI, so the two stay one-way).

A short id is a unique prefix (with or without the kind, `exp_`) or a unique tail of at least TAIL
characters. Ids are ULIDs: those minted in one batch share their time and, within a millisecond, all but
the last characters of their random part, so tables print tails (`short_ids`), as git prints heads.
Every miss is one line that names the input and lists a few candidates, so a cut id from a table or
a mistyped prefix is fixed without reading code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lle.errors import InvalidInputError, UnknownIdError
from lle.flywheel import loop
from lle.store import Store
from lle.store import experiences as stored_experiences

LATEST = "latest"
SHOWN = 5
"""Candidates named in an error: enough to pick from, few enough for one line."""
BASELINE_DB = "baseline"
"""The store of the `none` strategy (round 0, shared by every strategy) is named after what it is."""
BIG = 1_000_000_000
TAIL = 6
"""The shortest tail looked up (and printed): 30 random bits, unique among ids minted together."""


def _few(ids: list[str]) -> str:
    return ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def matching(ref: str, ids: Iterable[str]) -> list[str]:
    """The ids that `ref` starts, with or without their kind (`exp_`), or ends in TAIL characters or more."""
    return [i for i in ids if ref and (i.startswith(ref) or i.partition("_")[2].startswith(ref)
                                       or (len(ref) >= TAIL and i.endswith(ref)))]


def by_prefix(kind: str, ref: str, candidates: Iterable[str], fix: str) -> str:
    """The one candidate equal to `ref`, else the one `ref` is a short id of (`matching`); else one line."""
    ids = list(dict.fromkeys(candidates))
    if ref in ids:
        return ref
    matches = matching(ref, ids)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise InvalidInputError(f"{kind} {ref!r} is ambiguous: it matches {len(matches)} ids ({_few(matches)}); "
                                "give more characters")
    near = [i for i in ids if ref and ref[: max(4, len(ref) // 2)] in i] or ids[-SHOWN:]
    suffix = f" (e.g. {_few(near)})" if near else ""
    raise UnknownIdError(kind, ref, f"{fix}{suffix}")


def short_ids(shown: Iterable[str], ids: Iterable[str]) -> dict[str, str]:
    """Each shown id by its shortest tail (TAIL characters or more) that `by_prefix` finds among `ids` (and
    the shown ones) as that id alone; an id no tail tells apart stays whole."""
    todo = list(dict.fromkeys(shown))
    pool = list(dict.fromkeys([*ids, *todo]))
    out: dict[str, str] = {}
    for n in range(TAIL, max(map(len, todo), default=0)):
        # what a tail of n characters can match: an id's tail, its head, its head past the kind
        hits = Counter(key for i in pool for key in {i[-n:], i[:n], i.partition("_")[2][:n]})
        out |= {i: i[-n:] for i in todo if i not in out and hits[i[-n:]] == 1}
        if len(out) == len(todo):
            break
    return {i: out.get(i, i) for i in todo}


# --- runs -------------------------------------------------------------------------------------------------


def run_ids(workspace: str | Path | None = None) -> list[str]:
    """Ids of the run folders that have a config, oldest first (run ids are ULIDs: they sort by time)."""
    return sorted(p.parent.name for p in loop.runs_dir(workspace).glob("*/config.json"))


def resolve_run(ref: str, workspace: str | Path | None = None) -> str:
    """`latest`, a run id, or a short one (a unique prefix, with or without `run_`, or tail)."""
    ids = run_ids(workspace)
    if not ids:
        raise UnknownIdError("run", ref, f"there are no runs in {loop.runs_dir(workspace)}; start one with "
                                         "`lle run --quick` (or pass --workspace)")
    if ref == LATEST:
        return ids[-1]
    return by_prefix("run", ref, ids, "list runs with `lle runs list`")


@dataclass(frozen=True)
class RunStore:
    """One strategy's store of one run."""

    run: str
    strategy: str
    path: Path
    others: tuple[str, ...]

    def open(self, *, write: bool = False) -> Store:
        """For reading only unless `write` (nothing created, migrated nor written)."""
        return Store(self.path, read_only=not write)

    def describe(self, note: str = "") -> str:
        rest = f"; other strategies: {', '.join(self.others)} (--strategy)" if self.others else ""
        return f"run {self.run}, strategy {self.strategy}{note}: {self.path}{rest}"


def strategies_of(run: str, workspace: str | Path | None = None) -> list[str]:
    """The strategies whose store exists in this run, in the config's order (`none` for the baseline store)."""
    folder = loop.run_folder(run, workspace)
    try:
        named: list[str] = list(loop.load_config(run, workspace).strategies)
    except InvalidInputError:
        named = []
    present = {p.stem for p in folder.glob("*.db")}
    ordered = [s for s in ["lle", *named, "raw"] if s in present]
    if BASELINE_DB in present:
        ordered.append("none")
    ordered += sorted(present - set(ordered) - {BASELINE_DB})
    return list(dict.fromkeys(ordered))


def run_store(ref: str, strategy: str | None = None, workspace: str | Path | None = None) -> RunStore:
    """A run's store: `strategy`'s, else `lle`'s when it ran, else the first one there."""
    run = resolve_run(ref, workspace)
    present = strategies_of(run, workspace)
    if not present:
        raise UnknownIdError("store in run", run, "the run has not recorded any episode yet; resume it with "
                                                  f"`lle run --resume {run}`")
    if strategy is None:
        chosen = present[0]
    elif strategy in present:
        chosen = strategy
    else:
        raise InvalidInputError(f"--strategy {strategy!r}: run {run} has no store for it; use one of "
                                f"{', '.join(present)}")
    name = BASELINE_DB if chosen == "none" else chosen
    path = loop.strategy_db(loop.run_folder(run, workspace), name)
    return RunStore(run, chosen, path, tuple(s for s in present if s != chosen))


# --- records ----------------------------------------------------------------------------------------------


def experience_id(db: Store, ref: str) -> str:
    if db.kind_of(ref) == "experiences":
        return ref
    return by_prefix("experience", ref, stored_experiences.all_ids(db), "list them with `lle experiences list`")


def item_ids(db: Store, carrier: str | None = None) -> list[str]:
    return [i for _, i, _ in db.item_rows(carrier)]


def episode_id(db: Store, ref: str) -> str:
    """An episode (finished or not) by a short id."""
    return by_prefix("episode", ref, stored_experiences.all_ids(db, "episodes"),
                     "list them with `lle episodes list --run workspace`")


def item_id(db: Store, ref: str, carrier: str | None = None) -> str:
    if carrier is None and db.kind_of(ref) == "carrier_items":
        return ref
    ids = item_ids(db, carrier)
    what = f"{carrier} item" if carrier else "carrier item"
    return by_prefix(what, ref, ids, f"list them with `lle {carrier or 'memory'} list`")


def update_id(db: Store, ref: str) -> str:
    if db.kind_of(ref) == "updates":
        return ref
    return by_prefix("update", ref, stored_experiences.all_ids(db, "updates"), "list them with `lle updates list`")


def evidence_id(db: Store, ref: str) -> str:
    if db.kind_of(ref) == "evidence":
        return ref
    ids = [e.id for x in stored_experiences.all_ids(db) for e in db.evidence_for(x)]
    return by_prefix("evidence", ref, ids, "list it with `lle evidence list EXPERIENCE`")


def record_id(db: Store, ref: str) -> str:
    """Any record id (exp_, itm_, upd_, evd_) by a short id (evidence with its kind); a source (world:…) as it is."""
    if ":" in ref or db.kind_of(ref) is not None:
        return ref
    finders = {"exp_": experience_id, "itm_": item_id, "upd_": update_id, "evd_": evidence_id}
    for head, finder in finders.items():
        if ref.startswith(head):
            return finder(db, ref)
    ids = [*stored_experiences.all_ids(db), *item_ids(db), *stored_experiences.all_ids(db, "updates")]
    return by_prefix("record", ref, ids, "give an id (exp_, itm_, upd_ or evd_; a short one as the tables print it "
                                         "is enough), or a source such as world:ID, model:NAME, time:START..END")
