"""Hygiene (issue 7), run before anything leaves an episode: PII, untrusted text, dedupe, contamination.

- `scrub_experience` redacts PII and secrets in every string of the trajectory (`lle.governance.pii`),
  flags observations that carry instruction-like text, quotes those as data with their source,
  records what it did in `hygiene`, and re-seals the experience.
- `find_instructions` / `carries_untrusted_instruction` detect prompt-injection text in the style of
  AgentDojo's and InjecAgent's templates; the rules and skills gates call the latter on candidate
  text (such text needs independent hard evidence; the gate enforces it, this module detects).
- `DedupeIndex`: exact content hash plus MinHash/LSH near duplicates over word shingles.
- `ContaminationIndex`: the dev/test items of every registered task family, so nothing held out is
  admitted to memory, rules or the dataset (exact, whitespace-changed and reworded copies).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import random
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from lle import registry
from lle.context.compress import QUOTE_TAIL, outside_quotes
from lle.core import Experience, SmallWorld, Split
from lle.governance.family_texts_cache import cache_path, read_cache, write_cache
from lle.governance.pii import PLACEHOLDERS, carries_untrusted_instruction, find_instructions, redact
from lle.worlds.base import TaskFamily

log = logging.getLogger(__name__)

__all__ = [
    "PLACEHOLDERS",
    "ContaminationIndex",
    "DedupeIndex",
    "Match",
    "carries_untrusted_instruction",
    "find_instructions",
    "normalize",
    "quote_untrusted",
    "redact",
    "scrub_experience",
]

UNTRUSTED_TAG = "untrusted_instruction"

# Every "<<" in quoted data is split, not only whole delimiters: a cut that ends in the data on "<<"
# would otherwise read as the start of a marker cut through ("<<…").
_DELIMITER = re.compile(r"<(?=<)")


def quote_untrusted(text: str, source: str) -> str:
    """`text` as a clearly delimited block of data from `source`; delimiters inside it are neutralised."""
    safe_source = re.sub(r"[^\w.:/@-]", "_", source)[:80] or "unknown"
    body = _DELIMITER.sub("< ", text)
    return f"<<untrusted source={safe_source}>>\n{body}{QUOTE_TAIL}"  # the markers `compress` cuts around


_SCOPE_CLAIMS = re.compile(
    r"\b(?:just|only) for this (?:task|time|request|once)\b|\bfor this (?:task|request) only\b|\bjust this once\b"
    r"|\b(?:in|for|on|during) (?:all |any |every |the )?(?:later|future|next|subsequent|upcoming|other) "
    r"(?:tasks?|runs?|visits?|episodes?|requests?)\b|\bevery (?:later|future|subsequent|other) (?:task|run|request)\b"
    r"|\bnext time\b", re.IGNORECASE)


def scope_claims(task_text: str) -> list[str]:
    """Phrases of the task text (outside quotes) that speak for other tasks than this one, or for this one only."""
    return [m.group(0) for m in _SCOPE_CLAIMS.finditer(outside_quotes(task_text))]


def quote_scope_claims(text: str, source: str = "task") -> str:
    """`text` with each sentence that speaks beyond its own task quoted as data from `source`.

    A MINJA-style attack needs no injected tool output: an ordinary-looking request carries an aside for
    later tasks ("so in later tasks here the quickest way is to call submit first"), and an episodic memory
    that keeps the task as asked would show it, unquoted, to every later task it is retrieved for."""
    if not scope_claims(text):
        return text
    pieces = re.split(r"((?<=[.!?)])\s+|\n+)", text)  # sentences, with what separates them kept
    return "".join(quote_untrusted(p, source) if p.strip() and scope_claims(p) else p for p in pieces)


# --- scrubbing an experience ---------------------------------------------------------------------------


def _redact_json(value: JsonValue, counts: Counter[str]) -> JsonValue:
    if isinstance(value, str):
        clean, found = redact(value)
        counts.update(found)
        return clean
    if isinstance(value, list):
        return [_redact_json(v, counts) for v in value]
    if isinstance(value, dict):
        return {k: _redact_json(v, counts) for k, v in value.items()}
    return value


def scrub_experience(exp: Experience, *, quote_all: bool = False) -> Experience:
    """A re-sealed copy of `exp` with PII and secrets redacted and untrusted instructions flagged.

    Redacts every string in the steps (observations, args, thoughts, expectations, errors, changes,
    feedback), evidence detail, attribution and goal; counts go to `hygiene["redactions"]` (added
    to earlier counts, so scrubbing twice changes nothing). Observations carrying instruction-like
    text are quoted as data with their tool as source (all observations with `quote_all`; the
    quoted step indices go to `hygiene["quoted_steps"]`), listed in `hygiene["untrusted_instructions"]`,
    and tag the experience `untrusted_instruction`.
    """
    data = exp.model_dump(mode="json")
    hygiene = dict(data["hygiene"])
    # Steps quoted by an earlier scrub are recorded, not recognised by their text: an observation
    # that merely starts like a quote block must not be able to skip the check.
    quoted_before = hygiene.get("quoted_steps")
    done = {int(i) for i in quoted_before if isinstance(i, int)} if isinstance(quoted_before, list) else set()
    earlier = hygiene.get("untrusted_instructions")
    flagged: list[JsonValue] = list(earlier) if isinstance(earlier, list) else []
    quoted: list[JsonValue] = list(sorted(done))
    counts: Counter[str] = Counter()
    for step in data["steps"]:
        effect, index = step["effect"], step["index"]
        observation = effect.get("observation") or ""
        if index not in done:
            snippets = find_instructions(observation) + find_instructions(effect.get("error") or "")
            if snippets:
                flagged.append({"step": index, "tool": step["executed"]["tool"],
                                "snippets": [redact(s)[0] for s in snippets]})
            if observation and (snippets or quote_all):
                effect["observation"] = quote_untrusted(observation, f"tool:{step['executed']['tool']}")
                quoted.append(index)
        for key in ("request", "executed", "effect", "feedback", "llm"):  # the llm call keeps its prompt
            step[key] = _redact_json(step[key], counts)
    for ev in data["evidence"]:
        ev["detail"] = _redact_json(ev["detail"], counts)
    data["attribution"] = _redact_json(data["attribution"], counts)
    data["small_world"]["goal"] = _redact_json(data["small_world"]["goal"], counts)
    previous = hygiene.get("redactions")
    total = Counter({k: int(v) for k, v in previous.items() if isinstance(v, int)}) if isinstance(previous, dict) \
        else Counter()
    total.update(counts)
    hygiene["redactions"] = {k: total[k] for k in sorted(total)}
    if quoted:
        hygiene["quoted_steps"] = quoted
    if flagged:
        hygiene["untrusted_instructions"] = flagged
        if UNTRUSTED_TAG not in data["risk_tags"]:
            data["risk_tags"].append(UNTRUSTED_TAG)
    data["hygiene"] = hygiene
    data["content_hash"] = ""
    return Experience.model_validate(data).sealed()


# --- dedupe -------------------------------------------------------------------------------------------

_MERSENNE = (1 << 61) - 1


def _shingles(text: str, k: int) -> set[str]:
    words = tokens(text)
    if len(words) <= k:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i:i + k]) for i in range(len(words) - k + 1)}


def _bands_for(threshold: float, num_perm: int) -> tuple[int, int]:
    # Bands and rows so that the LSH S-curve's midpoint (1/b)^(1/r) sits just below the threshold:
    # candidates are verified on the signature afterwards, so recall matters more than precision.
    options = [(num_perm // rows, rows) for rows in range(1, num_perm + 1)]
    fitting = [(b, r) for b, r in options if (1 / b) ** (1 / r) <= threshold - 0.1]
    return max(fitting, key=lambda br: (1 / br[0]) ** (1 / br[1])) if fitting else (num_perm, 1)


class DedupeIndex:
    """Exact and near-duplicate detection: sha256 of the normalized text, MinHash over word shingles, LSH bands."""

    def __init__(self, threshold: float = 0.8, *, num_perm: int = 128, shingle: int = 3, seed: int = 1) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold {threshold} must be in (0, 1]; 0.8 is the usual near-duplicate level")
        self.threshold, self.num_perm, self.shingle = threshold, num_perm, shingle
        rng = random.Random(seed)
        self._perms = [(rng.randrange(1, _MERSENNE), rng.randrange(0, _MERSENNE)) for _ in range(num_perm)]
        self.bands, self.rows = _bands_for(threshold, num_perm)
        self._exact: dict[str, str] = {}
        self._signatures: dict[str, list[int]] = {}
        self._buckets: list[dict[tuple[int, ...], list[str]]] = [{} for _ in range(self.bands)]

    def __len__(self) -> int:
        return len(self._signatures)

    def signature(self, text: str) -> list[int]:
        hashes = [int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "big")
                  for s in _shingles(text, self.shingle)]
        if not hashes:
            return [_MERSENNE] * self.num_perm
        return [min((a * h + b) % _MERSENNE for h in hashes) for a, b in self._perms]

    @staticmethod
    def similarity(sig_a: list[int], sig_b: list[int]) -> float:
        """Estimated Jaccard similarity of two signatures."""
        return sum(x == y for x, y in zip(sig_a, sig_b, strict=True)) / len(sig_a)

    def _band_keys(self, sig: list[int]) -> Iterable[tuple[int, tuple[int, ...]]]:
        for band in range(self.bands):
            yield band, tuple(sig[band * self.rows:(band + 1) * self.rows])

    def find(self, text: str) -> str | None:
        """Key of an exact or near duplicate of `text` already in the index, else None."""
        digest = hashlib.sha256(normalize(text).encode()).hexdigest()
        if digest in self._exact:
            return self._exact[digest]
        return self._near(self.signature(text))

    def _near(self, sig: list[int]) -> str | None:
        seen: set[str] = set()
        best: tuple[float, str] | None = None
        for band, key in self._band_keys(sig):
            for other in self._buckets[band].get(key, []):
                if other in seen:
                    continue
                seen.add(other)
                score = self.similarity(sig, self._signatures[other])
                if score >= self.threshold and (best is None or score > best[0]):
                    best = (score, other)
        return best[1] if best else None

    def add(self, key: str, text: str) -> str | None:
        """Add `text` under `key`; return the key of a duplicate already present (the text is added either way)."""
        digest = hashlib.sha256(normalize(text).encode()).hexdigest()
        sig = self.signature(text)
        found = self._exact.get(digest) or self._near(sig)
        self._exact.setdefault(digest, key)
        if key not in self._signatures:
            self._signatures[key] = sig
            for band, band_key in self._band_keys(sig):
                self._buckets[band].setdefault(band_key, []).append(key)
        return found


# --- contamination ------------------------------------------------------------------------------------

# Operators are words too: `846 * 9` and `846 + 9` are different tasks; other punctuation is noise.
_WORD = re.compile(r"\w+|[-+*/=<>%^&|~]")


def tokens(text: str) -> list[str]:
    """Case-folded words and operators of `text` (NFKC), other punctuation dropped."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def normalize(text: str) -> str:
    """Words joined by single spaces: copies that differ in whitespace, case or punctuation normalize equal."""
    return " ".join(tokens(text))


def _features(words: list[str]) -> set[str]:
    # Unigrams carry the content, bigrams the order; rewording 20% of the words keeps most of both.
    return set(words) | {f"{a} {b}" for a, b in itertools.pairwise(words)}


@dataclass(frozen=True)
class Match:
    """A held-out item that a text copies: its small-world id, how close, and how it was found."""

    item: str
    score: float
    kind: Literal["exact", "near", "held_out_source"]


@dataclass
class _Item:
    id: str
    norm: str
    length: int
    features: frozenset[str]
    total: float
    unposted: float
    """Weight of its features too common to be in the postings (they only ever add this much)."""
    shared: bool
    """Its text also occurs in the train split: it carries nothing held out."""


@dataclass
class _World:
    id: str
    df: Counter[str]
    n: int
    threshold: float
    items: list[_Item] = field(default_factory=list)
    postings: dict[str, list[int]] = field(default_factory=dict)
    family: TaskFamily | None = None
    with_observation: bool = False

    def weight(self, feature: str) -> float:
        # IDF over the family's held-out items: template words every task shares weigh almost nothing,
        # so a near duplicate has to share what makes the item that item.
        df = self.df.get(feature)
        return 0.0 if df is None else math.log((self.n + 1) / (df + 0.5))


def _visible_text(family: TaskFamily, sw: SmallWorld, with_observation: bool) -> str:
    if not with_observation:
        return sw.goal
    world = family.make_world(sw)
    try:
        observation = world.reset(seed=sw.seed)[0]
    finally:
        world.close()
    return f"{sw.goal}\n{observation}"


class ContaminationIndex:
    """Dev and test items of registered task families; `check(text)` names the item a text copies.

    An item's text is what the agent is shown: the goal and, when the family builds its worlds
    quickly, the first observation (several families share one goal template across splits).
    Exact copies (after normalizing case, whitespace and punctuation) and near copies (IDF-weighted
    Jaccard over word unigrams and bigrams, in item-sized windows of longer texts) are caught.
    Where a family's own train items come as close to its held-out items as a reworded copy would,
    the near threshold is raised for it (see `warnings`); pass `source=` (the small world the text
    comes from) to judge such a text against its own task instead.
    """

    def __init__(self, threshold: float = 0.5, *, source_threshold: float = 0.35, margin: float = 0.05) -> None:
        # With a source the decision is nearest-neighbour (held-out item vs own task), so a lower
        # floor only keeps out texts that resemble nothing much.
        self.threshold, self.source_threshold, self.margin = threshold, source_threshold, margin
        self.worlds: dict[str, _World] = {}
        self.warnings: list[str] = []
        self._source_texts: dict[str, str] = {}

    def __len__(self) -> int:
        return sum(len(w.items) for w in self.worlds.values())

    def add_world(self, world_id: str, held: list[tuple[str, str]], train: Sequence[str] = (), *,
                  family: TaskFamily | None = None, with_observation: bool = False,
                  closest: float | None = None) -> float:
        """Index `held` (small-world id, visible text) of one family; `train` texts calibrate and mark shared items.

        Returns how close the closest train text comes to a held-out item (`closest`, when known, skips that).
        """
        feats = [(sid, tokens(text)) for sid, text in held]
        df: Counter[str] = Counter(f for _, words in feats for f in _features(words))
        world = _World(world_id, df, len(feats), self.threshold, family=family, with_observation=with_observation)
        train_norms = {normalize(t) for t in train}
        # Only the rarer features get postings: a template feature would make every item a candidate.
        common = {f for f, n in df.items() if n > max(8, world.n // 4)}
        for sid, words in feats:
            fs = frozenset(_features(words))
            norm = " ".join(words)
            world.items.append(_Item(sid, norm, len(words), fs, sum(world.weight(f) for f in fs),
                                     sum(world.weight(f) for f in fs & common), norm in train_norms))
            for f in fs - common:
                world.postings.setdefault(f, []).append(len(world.items) - 1)
        self.worlds[world_id] = world
        shared = sum(i.shared for i in world.items)
        if shared:
            self.warnings.append(f"{world_id}: {shared} dev/test items have the very text of a train item; "
                                 "they carry nothing held out and are not matched")
        if closest is None:
            closest = max((s for t in train if (s := self._best(world, tokens(t), world.threshold / 2)[1]) < 1.0),
                          default=0.0)
        if closest + self.margin > world.threshold:
            world.threshold = closest + self.margin
            self.warnings.append(
                f"{world_id}: train items come within {closest:.2f} of dev/test items, so its near-duplicate "
                f"threshold is {world.threshold:.2f}; pass source= to judge a text against its own task")
        return closest

    @staticmethod
    def _score(world: _World, item: _Item, words: list[str], cand_total: float) -> float:
        """IDF-weighted Jaccard of `item` and `words`, or of its best item-sized window when `words` is long."""
        if len(words) <= 1.5 * item.length:
            inter = sum(world.weight(f) for f in item.features.intersection(_features(words)))
            return inter / (item.total + cand_total - inter) if item.total else 0.0
        best, size = 0.0, max(1, item.length)
        for start in range(0, len(words) - size + 1, max(1, size // 4)):
            window = _features(words[start:start + size])
            inter = sum(world.weight(f) for f in item.features & window)
            union = item.total + sum(world.weight(f) for f in window) - inter
            best = max(best, inter / union if union else 0.0)
        return best

    def _best(self, world: _World, words: list[str], floor: float) -> tuple[_Item | None, float, bool]:
        """The closest item of `world` to `words` at `floor` or above: (item, score, exact)."""
        cand = _features(words)
        norm = f" {' '.join(words)} "
        acc: dict[int, float] = {}
        for f in cand:
            w = world.weight(f)
            for idx in world.postings.get(f, ()):
                acc[idx] = acc.get(idx, 0.0) + w
        cand_total = sum(world.weight(f) for f in cand)
        exact: _Item | None = None
        best: tuple[_Item | None, float, bool] = (None, 0.0, False)
        for idx, inter in sorted(acc.items(), key=lambda kv: -kv[1] / max(world.items[kv[0]].total, 1e-9)):
            item = world.items[idx]
            if item.shared or not item.total:
                continue
            containment = (inter + item.unposted) / item.total  # bounds every window's Jaccard from above
            if inter > 0.999 * (item.total - item.unposted) and f" {item.norm} " in norm:
                if exact is None or item.length > exact.length:
                    exact = item  # the longest item copied verbatim is the one the text names
                continue
            if exact is not None or containment < max(floor, best[1]):
                continue
            score = self._score(world, item, words, cand_total)
            if score > best[1]:
                best = (item, score, False)
        return (exact, 1.0, True) if exact is not None else best

    def _source_text(self, source: SmallWorld) -> str:
        if source.id not in self._source_texts:
            world = self.worlds.get(source.world)
            text = source.goal
            if world is not None and world.family is not None:
                try:
                    text = _visible_text(world.family, source, world.with_observation)
                except Exception:  # the goal alone still explains part of the text
                    text = source.goal
            self._source_texts[source.id] = text
        return self._source_texts[source.id]

    def match(self, text: str, *, source: SmallWorld | None = None) -> Match | None:
        """The held-out item `text` copies, if any; with `source`, only what its own task does not explain."""
        if source is not None and source.split.value != "train":
            return Match(source.id, 1.0, "held_out_source")
        words = tokens(text)
        if not words:
            return None
        found: Match | None = None
        for world in self.worlds.values():
            floor = self.source_threshold if source is not None else world.threshold
            item, score, exact = self._best(world, words, floor)
            if item is None or (not exact and score < floor) or (found is not None and score <= found.score):
                continue
            if source is not None:
                if not exact and len(words) > 1.5 * item.length and score < world.threshold:
                    continue  # a long text holds more of its world than the task statement can explain
                # Nearest of the two wins: a text closer to its own task than to the held-out item is
                # that task's text, however much the family's items look alike.
                own = tokens(self._source_text(source))
                own_features = frozenset(_features(own))
                own_item = _Item(source.id, " ".join(own), len(own), own_features,
                                 sum(world.weight(f) for f in own_features), 0.0, False)
                explained = self._score(world, own_item, words, sum(world.weight(f) for f in _features(words)))
                if f" {item.norm} " in f" {own_item.norm} " or (not exact and score <= explained + self.margin):
                    continue
            found = Match(item.id, score, "exact" if exact else "near")
        return found

    def check(self, text: str, *, source: SmallWorld | None = None) -> str | None:
        """Id of the dev/test small world that `text` copies (exactly or nearly), else None."""
        hit = self.match(text, source=source)
        return hit.item if hit else None

    @classmethod
    def from_families(cls, families: Iterable[TaskFamily], *, per_split: int = 200, threshold: float = 0.5,
                      budget_s: float = 30.0) -> ContaminationIndex:
        """Index the first `per_split` dev and test small worlds of each family (train ones calibrate)."""
        index = cls(threshold)
        for family in families:
            try:
                index._add_family(family, per_split, budget_s)
            except Exception as err:  # one broken family must not stop hygiene for the others
                index.warnings.append(f"{getattr(family, 'id', family)}: skipped ({type(err).__name__}: {err})")
        return index

    def _add_family(self, family: TaskFamily, per_split: int, budget_s: float) -> None:
        path = cache_path(family, per_split)
        cached = read_cache(path)
        if cached is None:
            held, train, with_obs, notes, complete = _family_texts(family, per_split, budget_s)
        else:
            held, train, with_obs, notes, complete = cached["held"], cached["train"], cached["with_obs"], \
                cached["notes"], True
        self.warnings += notes
        closest = self.add_world(family.id, [(i, t) for i, t in held], train, family=family, with_observation=with_obs,
                                 closest=cached["closest"] if cached else None)
        if cached is None and complete and path is not None:
            write_cache(path, {"held": held, "train": train, "with_obs": with_obs, "notes": notes,
                                "closest": closest})

    @classmethod
    def from_registry(cls, worlds: list[str] | None = None, per_split: int = 200) -> ContaminationIndex:
        """The index over every registered TaskFamily (or `worlds`), built once per process."""
        key = (tuple(worlds) if worlds is not None else None, per_split)
        if key not in _CACHE:
            families: list[TaskFamily] = []
            skipped: list[str] = []
            for world_id in worlds if worlds is not None else registry.ids():
                try:
                    factory = registry.spec(world_id).load()
                    if worlds is None and not (isinstance(factory, type) and issubclass(factory, TaskFamily)):
                        continue  # calling other factories could have effects (a store opens a file)
                    family = factory()
                    if isinstance(family, TaskFamily):
                        families.append(family)
                    else:
                        skipped.append(f"{world_id}: not a TaskFamily")
                except Exception as err:
                    skipped.append(f"{world_id}: skipped ({type(err).__name__}: {err})")
            index = cls.from_families(families, per_split=per_split)
            index.warnings[:0] = skipped
            for warning in index.warnings:  # a family left out matters; calibration notes are routine
                log.log(logging.WARNING if ": skipped (" in warning else logging.INFO, "contamination index: %s",
                        warning)
            _CACHE[key] = index
        return _CACHE[key]


_CACHE: dict[tuple[tuple[str, ...] | None, int], ContaminationIndex] = {}


def _family_texts(family: TaskFamily, per_split: int, budget_s: float
                  ) -> tuple[list[list[str]], list[str], bool, list[str], bool]:
    """(held [id, text] pairs, train texts, with first observations, notes, complete) of one family."""
    started, notes, complete = time.perf_counter(), [], True
    worlds: dict[Split, list[SmallWorld]] = {}
    for split in (Split.dev, Split.test, Split.train):
        worlds[split] = []
        for seed in range(per_split):
            if time.perf_counter() - started > budget_s:
                notes.append(f"{family.id}: {split}: {seed} of {per_split} items in {budget_s:.0f}s")
                complete = False
                break
            try:
                worlds[split].append(family.small_world(split, seed))
            except Exception as err:  # a finite benchmark split ends here
                if seed == 0:
                    notes.append(f"{family.id}: {split}: no small world ({type(err).__name__}: {err})")
                break
    held = worlds[Split.dev] + worlds[Split.test]
    train_goals = {normalize(sw.goal) for sw in worlds[Split.train]}
    # Goals from a template (the same text in every split) say nothing about which item it is:
    # then the first observation is part of the item, if the family can produce it quickly.
    repeating = bool(held) and sum(normalize(sw.goal) in train_goals for sw in held) > 0.1 * len(held)
    with_obs = repeating
    declared = getattr(type(family), "quick_reset", None)
    if with_obs and declared is not None:
        # Said by the family, not timed: a decision timed on a loaded machine was kept in the cache and
        # made a later index, on a quiet one, unable to tell the toy world's held-out items apart.
        with_obs = declared
    elif with_obs:
        probe = time.perf_counter()
        try:
            _visible_text(family, held[0], True)
            # Worth it only when all of them cost a few seconds at most (building databases is not).
            with_obs = (time.perf_counter() - probe) * (len(held) + len(worlds[Split.train])) < 3.0
        except Exception:
            with_obs = False
    if repeating and not with_obs:
        notes.append(f"{family.id}: goals repeat across splits and first observations are slow or "
                     "unavailable; goals only")
    return ([[sw.id, _visible_text(family, sw, with_obs)] for sw in held],
            [_visible_text(family, sw, with_obs) for sw in worlds[Split.train]], with_obs, notes, complete)
