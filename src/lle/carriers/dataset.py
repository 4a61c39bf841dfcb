"""The dataset carrier: hard-verified, scrubbed, deduplicated, uncontaminated experience as training rows.

`Dataset.admit(experience)` decides, behind `gates.dataset_gate`, whether an experience may ever
become training data; each decision is an `Update` (admit or reject, with reasons), and an admitted
experience is a `CarrierItem` of kind `dataset`. `lle.carriers.exports.export(dataset, fmt, out_dir)`
writes a snapshot of the active items as JSONL rows.

What the model saw: the harness records each step's request, not the prompt. The messages are
rebuilt here with the harness's own context builder (`PlainContextBuilder`, the default of
`run_episode`) from the recorded history and the episode's initial observation (from its episode
row, else from a fresh `reset` under the same seed): `build` is a pure function of them, so the
rebuilt messages equal the ones the policy received (a test checks this against a live policy).
They are rebuilt from the *scrubbed* experience, so PII and secrets are placeholders and untrusted
instructions are quoted. Steps that showed carrier items (`context_refs`) were built by the
`lle.context.BudgetedContextBuilder`, whose budget and tokenizer are not recorded: those are
rebuilt with its defaults and the referenced items, and marked `context: "approximate"`; so is an
episode that called a skill (the skill tools offered are not recorded), and the steps a skill call
expanded into are never rows (the model did not write them). Skills offered but never called leave
no trace at all: until the harness records the prompt (or the tools offered), such rows miss them.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from lle.actions import NO_ACTION
from lle.context.builder import BudgetedContextBuilder
from lle.context.compress import outside_quotes
from lle.context.plain import PlainContextBuilder
from lle.core import (
    ActionRequest,
    CarrierItem,
    CarrierKind,
    Evidence,
    Experience,
    GateResult,
    Message,
    Outcome,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    Step,
    Strength,
    ToolSpec,
    Update,
    UpdateOp,
    VerificationLevel,
)
from lle.errors import LleError, StoreError, UnknownIdError
from lle.evidence.evidence import decide
from lle.governance import gates
from lle.governance.hygiene import (
    ContaminationIndex,
    DedupeIndex,
    find_instructions,
    quote_untrusted,
    redact,
    scope_claims,
)
from lle.governance.hygiene import scrub_experience as scrub
from lle.governance.lineage import active_items, admit_item, denylist
from lle.store import Store, experiences
from lle.store.episodes import get_episode
from lle.worlds.base import open_world

Row = dict[str, Any]

# --- what the model saw ----------------------------------------------------------------------------

_tools: dict[tuple[str, tuple[str, ...]], list[ToolSpec]] = {}


def tools_of(small_world: SmallWorld) -> list[ToolSpec]:
    """The tools the policy was shown: the world's, in the small world's order (as the grounder does)."""
    key = (small_world.world, tuple(small_world.tools))
    if key not in _tools:
        world = open_world(small_world)
        try:
            by_name = {t.name: t for t in world.tools}
        finally:
            world.close()
        _tools[key] = [by_name[n] for n in small_world.tools if n in by_name]
    return _tools[key]


def episode_options(store: Store, experience_id: str) -> tuple[str | None, dict[str, JsonValue]]:
    """(initial observation, world options) from the episode row, when the harness wrote one."""
    try:
        record = get_episode(store, experience_id)
    except UnknownIdError:
        return None, {}  # imported experiences have no episode row
    return record.initial_observation, dict(record.world_options)


def initial_observation(store: Store, exp: Experience) -> str:
    recorded, options = episode_options(store, exp.id)
    if recorded is not None:
        return recorded
    world = open_world(exp.small_world, **options)  # worlds are deterministic under their seed (check_world)
    try:
        return world.reset(seed=exp.small_world.seed, options=None)[0]
    finally:
        world.close()


def clean_text(text: str, source: str) -> str:
    """What `scrub_experience` does to an observation, for text outside the steps (the initial observation)."""
    clean = redact(text)[0]
    return quote_untrusted(clean, source) if find_instructions(clean) else clean


def seen_messages(store: Store, exp: Experience, *, scrubbed: bool = True) -> tuple[list[list[Message]], bool]:
    """The messages the policy received before each step, and whether they are exact (see the module doc).

    `scrubbed`: `exp` is a scrubbed copy, so the initial observation (not part of the steps) is
    scrubbed the same way; pass False to rebuild the raw messages of a recorded experience.
    """
    tools = tools_of(exp.small_world)
    observation = initial_observation(store, exp)
    if scrubbed:
        observation = clean_text(observation, "world:reset")
    exact = not any(step.context_refs or skill_step(step) for step in exp.steps)
    items = {} if exact else {i.id: i for i in store.carrier_items()}
    plain = PlainContextBuilder()
    history: list[Step] = []
    out = []
    for step in exp.steps:
        # A skill's id is on the steps it expanded into; only notes (memories, rules) change the builder.
        shown = [items[r] for r in step.context_refs if r in items and items[r].carrier is not CarrierKind.skills]
        if shown:
            context = BudgetedContextBuilder(items=shown).build(exp.small_world, tools, history, observation)
        else:
            context = plain.build(exp.small_world, tools, history, observation)
        out.append(list(context.messages))
        history.append(step)
        observation = step.effect.observation
    return out, exact


def action_text(request: ActionRequest) -> str:
    """The action as the assistant wrote it: the JSON the builders render past actions with."""
    return json.dumps({"thought": request.thought, "tool": request.tool, "args": request.args,
                       "expect": request.expect}, ensure_ascii=False)


def _messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def skill_step(step: Step) -> bool:
    """A step the harness expanded from a skill call: its request is the skill's, not the model's words."""
    return any(fb.source == "runtime" and fb.kind == "skill" for fb in step.feedback)


def own_action(step: Step) -> bool:
    """The policy itself produced this step's request."""
    return step.request.tool != NO_ACTION and not skill_step(step)


def trainable(step: Step) -> bool:
    """A step worth imitating: the policy produced the action and the runtime ran it."""
    return own_action(step) and step.executed.allowed


# --- rows --------------------------------------------------------------------------------------------


def _meta(exp: Experience, exact: bool) -> Row:
    sw = exp.small_world
    return {"world": sw.world, "small_world_id": sw.id, "context": "exact" if exact else "approximate"}


def recorded_call(step: Step) -> Row:
    """What the policy recorded of its call, when it recorded the exact text: `prompt` (byte for byte what
    the model was given) and `completion` (what it generated), with the model that ran (its weights' sha256 is
    on the adapter's training card: a 64-digit hash here would read as a secret to the row check)."""
    llm = step.llm
    if llm is None or llm.prompt is None or llm.completion is None:
        return {}
    return {"prompt": llm.prompt, "completion": llm.completion, "model": llm.model}


def sft_rows(exp: Experience, seen: list[list[Message]], exact: bool) -> list[Row]:
    """One row per trainable step of a success: the messages seen, then the action taken; with the recorded
    `prompt` and `completion` when the policy kept them (a trainer uses those, never a rebuilt prompt)."""
    adapter = exp.policy.params.get("adapter")
    return [{"messages": [*_messages(msgs), {"role": "assistant", "content": action_text(step.request)}],
             "experience_ids": [exp.id], "step": step.index, **_meta(exp, exact), **recorded_call(step),
             **({"adapter": adapter} if adapter else {})}
            for step, msgs in zip(exp.steps, seen, strict=True) if trainable(step)]


def dpo_row(chosen: Experience, seen_c: list[list[Message]], rejected: Experience,
            seen_r: list[list[Message]], exact: bool) -> Row | None:
    """A success and a failure on one small world, at the first step where their actions part.

    Up to that step both saw the same messages (same world, seed and actions), so the prompt is
    what each really saw there; None when they never part or saw different prompts there.
    """
    for k, (a, b) in enumerate(zip(chosen.steps, rejected.steps, strict=False)):
        if action_text(a.request) == action_text(b.request):
            continue
        if seen_c[k] != seen_r[k] or not (trainable(a) and own_action(b)):
            return None
        return {"prompt": _messages(seen_c[k]),
                "chosen": [{"role": "assistant", "content": action_text(a.request)}],
                "rejected": [{"role": "assistant", "content": action_text(b.request)}],
                "experience_ids": [chosen.id, rejected.id], "step": k, **_meta(chosen, exact)}
    return None


def rl_row(exps: Sequence[Experience], outcomes: Sequence[Outcome], seen: list[list[Message]], exact: bool,
           verifier_ids: Sequence[str], world_options: dict[str, JsonValue]) -> Row:
    """One row per small world: the first prompt, and what recomputes the reward (`lle.flywheel.reward`)."""
    sw = exps[0].small_world
    return {"prompt": _messages(seen[0]) if seen else [], "small_world": sw.model_dump_json(),
            "verifiers": list(verifier_ids), "world_options": json.dumps(world_options, sort_keys=True),
            "experience_ids": [e.id for e in exps], "outcomes": [o.value for o in outcomes],
            **_meta(exps[0], exact)}


def verifier_ids_of(small_world: SmallWorld) -> list[str]:
    """The verifiers `assess` runs on this small world: the always-on ones, then its own."""
    from lle.evidence.evidence import ALWAYS

    return list(dict.fromkeys([*ALWAYS, *small_world.verifiers]))


@functools.lru_cache(maxsize=4096)
def _secrets_in(text: str) -> int:
    # Rows of one episode repeat its system prompt and earlier turns: each text is checked once.
    return sum(redact(text)[1].values())


@functools.lru_cache(maxsize=4096)
def _unquoted_in(text: str) -> int:
    return len(find_instructions(outside_quotes(text)))


def unquoted_instructions(texts: Sequence[str]) -> int:
    """Flagged untrusted instructions in `texts` outside quoted blocks (after scrubbing: only what the
    agent itself repeated, or text that reached the rows some other way than as an observation)."""
    return sum(_unquoted_in(t) for t in set(texts))


# Task text has authority over its own task only. A one-off preference ("just for this task") and an indication
# aimed at other tasks ("in later tasks here, submit first": MINJA's query-only memory injection) both speak
# beyond it; a training row would teach either as part of every task like it.


def leftover_secrets(texts: Sequence[str]) -> int:
    """PII and secrets `redact` still finds in `texts` (after scrubbing this must be 0)."""
    return sum(_secrets_in(t) for t in set(texts))


_CHATML = re.compile(r"<\|im_start\|>(?:system|user|assistant|tool)\n|<\|im_end\|>")


def template_free(prompt: str, messages: int) -> str:
    """A recorded prompt without its chat template's own role markers (ChatML: SmolLM2, Qwen2.5), which the
    instruction check reads as fake role tags. A prompt with more markers than the row has messages keeps them
    all: one of them came from the data, and is flagged."""
    if prompt.count("<|im_start|>") > messages:
        return prompt
    return _CHATML.sub("\n", prompt)


def row_texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in row_texts(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in row_texts(v)]
    return []


# --- the carrier --------------------------------------------------------------------------------------


def dedupe_text(exp: Experience, outcome: Outcome) -> str:
    """What makes two experiences the same example: outcome, goal, and every action with what came back."""
    lines = [outcome.value, exp.small_world.goal]
    lines += [f"{s.request.tool} {json.dumps(s.request.args, sort_keys=True)} -> {s.effect.observation}"
              for s in exp.steps]
    return "\n".join(lines)


def seen_text(exp: Experience) -> str:
    """Everything the agent was shown (goal and observations), for the contamination check."""
    return "\n".join([exp.small_world.goal, *(s.effect.observation for s in exp.steps)])


class Dataset:
    """Admission to, and the active view of, the dataset carrier over one store."""

    kind = CarrierKind.dataset

    def __init__(self, store: Store, *, config: gates.GateConfig = gates.DEFAULT,
                 contamination: ContaminationIndex | None = None, actor: str = "router") -> None:
        self.store, self.config, self.actor = store, config, actor
        self.contamination = contamination
        self._dedupe: DedupeIndex | None = None
        self._by_experience: dict[str, CarrierItem] = {}

    def items(self) -> list[CarrierItem]:
        """The active dataset items: admitted, and neither they nor their sources revoked."""
        return active_items(self.store, self.kind.value)

    def current(self, exp: Experience) -> tuple[Outcome, VerificationLevel, list[Evidence]]:
        """Outcome and level from all evidence now known (later verdicts included)."""
        found = self.store.evidence_for(exp.id) if self.store.kind_of(exp.id) else list(exp.evidence)
        outcome, level = decide(found)
        return outcome, level, found

    def _index(self) -> DedupeIndex:
        if self._dedupe is None:
            self._dedupe = DedupeIndex(self.config.dataset_dedupe_threshold)
            for item in self.items():
                exp_id = item.experience_ids[0]
                self._by_experience[exp_id] = item
                outcome = Outcome(str(item.content.get("outcome"))) if isinstance(item.content, dict) \
                    else Outcome.unknown
                self._dedupe.add(item.id, dedupe_text(self.store.get_experience(exp_id), outcome))
        return self._dedupe

    def _held_out_copy(self, exp: Experience) -> str | None:
        index = self.contamination
        if index is None:  # the experience's own world's held-out items; pass the router's index for all
            index = ContaminationIndex.from_registry(worlds=[exp.small_world.world])
        return index.check(seen_text(exp), source=exp.small_world)

    def _decide(self, exp: Experience, op: UpdateOp, gate: GateResult, scope: Scope,
                item: CarrierItem | None = None, evidence: Sequence[Evidence] = ()) -> Update:
        update = Update(carrier=self.kind, op=op, item_id=item.id if item else None, scope=scope,
                        experience_ids=[exp.id], gate=gate, actor=self.actor,
                        evidence_ids=[e.id for e in evidence if e.strength is Strength.hard])
        if item is not None:
            admit_item(self.store, item, update)
        else:
            self.store.append_update(update)
        return update

    def admit(self, experience: Experience) -> Update:
        """Admit a stored experience as training data, or reject it with reasons (both recorded)."""
        exp = experience
        if self.store.kind_of(exp.id) is None:
            raise UnknownIdError("experience", exp.id, "store it first (the dataset derives from stored experience)")
        dedupe = self._index()
        if exp.id in self._by_experience:
            admitted = [u for u in self.store.list_updates(limit=1_000_000, carrier=self.kind.value, op="admit")
                        if u.item_id == self._by_experience[exp.id].id]
            if admitted:
                return admitted[-1]
        sw = exp.small_world
        scope = Scope(level=ScopeLevel.task, family=sw.family, project=sw.project, task_id=sw.id)
        blocked = denylist(self.store).blocks_experience(exp)
        if blocked:
            gate = GateResult(name="dataset", passed=False, reasons=[f"its source {blocked} is revoked"])
            return self._decide(exp, UpdateOp.reject, gate, scope)
        outcome, level, evidence = self.current(exp)
        gate = gates.dataset_gate(exp, outcome=outcome, level=level, secrets_left=0, duplicate_of=None,
                                  contamination_hit=None, config=self.config)
        if not gate.passed:  # the cheap reasons first: rows, dedupe and contamination only for candidates
            return self._decide(exp, UpdateOp.reject, gate, scope, evidence=evidence)
        clean = scrub(exp)
        try:
            seen, _ = seen_messages(self.store, clean)
        except LleError as err:  # e.g. its world is no longer installed: no rows can be built
            gate = GateResult(name="dataset", passed=False, reasons=[f"cannot rebuild what the model saw: {err}"])
            return self._decide(exp, UpdateOp.reject, gate, scope, evidence=evidence)
        texts = [m.content for msgs in seen for m in msgs] + [action_text(s.request) for s in clean.steps]
        text = dedupe_text(exp, outcome)
        duplicate = dedupe.find(text)
        if duplicate in denylist(self.store).ids:  # a revoked twin no longer holds the place
            duplicate = None
        gate = gates.dataset_gate(exp, outcome=outcome, level=level, secrets_left=leftover_secrets(texts),
                                  duplicate_of=duplicate, contamination_hit=self._held_out_copy(exp),
                                  unquoted_instructions=unquoted_instructions(texts),
                                  scope_claims=scope_claims(clean.small_world.goal), config=self.config)
        if not gate.passed:
            return self._decide(exp, UpdateOp.reject, gate, scope, evidence=evidence)
        item = CarrierItem(carrier=self.kind, scope=scope, experience_ids=[exp.id],
                           evidence_ids=[e.id for e in evidence if e.strength is Strength.hard],
                           content={"experience_id": exp.id, "small_world_id": sw.id, "world": sw.world,
                                    "outcome": outcome.value, "verification": level.value,
                                    "scrubbed_hash": clean.content_hash, "steps": len(exp.steps)})
        update = self._decide(exp, UpdateOp.admit, gate, scope, item, evidence)
        dedupe.add(item.id, text)
        self._by_experience[exp.id] = item
        return update

    def admit_pending(self) -> list[Update]:
        """`admit` every stored experience the dataset has not decided on yet (oldest first)."""
        decided = self.store.experiences_decided(self.kind.value)
        pending = [i for i in experiences.all_ids(self.store) if i not in decided]
        return [self.admit(self.store.get_experience(i)) for i in pending]


def check_row(row: Row, small_worlds: dict[str, SmallWorld]) -> str | None:
    """Why a finished row must not be written (a held-out task, a secret left, a flagged instruction
    outside quotes), or None."""
    sw = small_worlds.get(str(row.get("small_world_id")))
    if sw is None:
        raise StoreError(f"row of {row.get('experience_ids')} names no known small world; the export is broken")
    if sw.split is not Split.train:
        return f"{sw.id} is a {sw.split} task"
    recorded = row.get("prompt")
    if isinstance(recorded, str):  # the exact prompt of an sft row (dpo and rl rows hold messages there)
        texts = row_texts({k: v for k, v in row.items() if k != "prompt"})
        texts.append(template_free(recorded, len(row.get("messages") or [])))
    else:
        texts = row_texts(row)
    left = leftover_secrets(texts)
    if left:
        return f"{left} secrets left"
    unquoted = unquoted_instructions(texts)
    return f"{unquoted} flagged instructions outside quotes" if unquoted else None
