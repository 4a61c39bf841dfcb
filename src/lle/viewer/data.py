"""What the pages show, read through the Store's methods and the carriers (no SQL here): a run's
episodes with their round and phase, one episode as a transcript, the carriers with their state, an
item's provenance, and revocation (preview, then the write)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lle import workspace as workspaces
from lle.actions import copies_placeholder
from lle.core import CarrierItem, Evidence, Experience, Revocation, Step, Update
from lle.errors import UnknownIdError
from lle.flywheel import loop
from lle.governance import lineage
from lle.policies.prompt import messages_of
from lle.store import Store
from lle.store import experiences as stored_experiences
from lle.store import flywheel as flywheel_store
from lle.viewer import lookup

WORKSPACE = "workspace"
"""The pseudo-run naming the workspace's own store (`.lle/lle.db`), beside the runs."""
CARRIERS = ("memory", "rules", "skills", "context", "dataset", "verifier_cases")
TITLES = {"memory": "Memories", "rules": "Rules", "skills": "Skills", "context": "Context recipes",
          "dataset": "Dataset rows", "verifier_cases": "Verifier cases"}


@dataclass(frozen=True)
class Source:
    """One store the viewer reads: a run's strategy store, or the workspace's own."""

    run: str
    strategy: str
    path: Path

    def open(self, *, write: bool = False) -> Store:
        """For reading only unless `write` (revoking): the viewer's pages never write a store."""
        return Store(self.path, read_only=not write)


def source(run: str, strategy: str | None, workspace: str | Path | None) -> Source:
    if run == WORKSPACE:
        path = workspaces.db_path(workspace)
        if not path.exists():
            raise UnknownIdError("store", str(path), "this workspace has no store of its own; open a run")
        return Source(WORKSPACE, "main", path)
    found = lookup.run_store(run, strategy, workspace)
    return Source(found.run, found.strategy, found.path)


# --- episodes -------------------------------------------------------------------------------------------


@dataclass
class EpisodeRow:
    id: str
    small_world: str
    batch: str
    round: str
    phase: str
    outcome: str
    verification: str
    steps: int
    revoked: bool


def episodes(src: Source) -> list[EpisodeRow]:
    with src.open() as db:
        batch_of = flywheel_store.batches(db, "")
        rows = db.list_experiences(limit=lookup.BIG)
        out = []
        for r in rows:
            batch = batch_of.get(r.id, "")
            parts = batch.split("/")
            out.append(EpisodeRow(r.id, r.world, batch, parts[2] if len(parts) > 2 else "—",
                                  "/".join(parts[3:]) if len(parts) > 3 else "—", r.outcome, r.verification,
                                  r.n_steps, r.revoked))
    return out


def intervention_text(content: dict[str, Any]) -> str:
    """One line for a runtime intervention (`lle.runtime.levers`)."""
    lever = content.get("lever")
    if lever == "stuck":
        masked = content.get("masked") or []
        return (f"stuck ({content.get('pattern')}), told the model: {content.get('note')}"
                + (f"; masked {', '.join(map(str, masked))} for this step" if masked else ""))
    if lever == "submit_only":
        return f"last step: only {', '.join(map(str, content.get('tools') or []))} offered"
    if lever == "working_memory":
        return f"working memory shown ({content.get('chars')} characters)"
    if lever == "admissible_masks":
        return "the world's admissible commands offered as an enum"
    return json.dumps(content, ensure_ascii=False)


def prompt_of(step: Step) -> str | None:
    """The exact prompt the model saw at this step, when the policy recorded it (`LLMCall.prompt`, a
    `prompt`/`context` feedback, or the gateway's `llm_call` feedback with the chat messages it sent
    upstream); None when it was not stored (scripted steps, older records).

    A chat API's prompt is stored as its messages (JSON): shown one message after another under its role,
    each content as sent; a rendered chat template is shown as is."""
    stored = step.llm.prompt if step.llm is not None else None
    if stored:
        messages = messages_of(stored)
        if messages is None:
            return stored
        return "\n\n".join(f"── {m['role']} ──\n{m['content']}" for m in messages)
    for fb in step.feedback:
        if fb.kind in ("prompt", "context") and fb.content:
            content = fb.content
            return content if isinstance(content, str) else json.dumps(content, indent=2, ensure_ascii=False)
        sent = fb.content.get("messages") if fb.kind == "llm_call" and isinstance(fb.content, dict) else None
        if isinstance(sent, list):  # the gateway keeps the chat messages exactly as sent upstream
            return chat_text(sent)
    return None


def chat_text(messages: list[Any]) -> str:
    """OpenAI-style chat messages, one after another under their role: text (or content parts), the tool
    calls an assistant message asked for, the call a tool message answers."""
    out = []
    for m in messages:
        m = m if isinstance(m, dict) else {"role": "?", "content": m}
        content = m.get("content")
        parts = [str(p.get("text", "")) for p in content if isinstance(p, dict)] if isinstance(content, list) \
            else [] if content is None else [str(content)]
        calls = m.get("tool_calls")
        asked = [c.get("function") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
        parts += [f"→ {f.get('name')}({f.get('arguments')})" for f in asked if isinstance(f, dict)]
        answers = f" (answers {m['tool_call_id']})" if m.get("tool_call_id") else ""
        out.append(f"── {m.get('role')}{answers} ──\n" + "\n".join(parts))
    return "\n\n".join(out)


@dataclass
class StepView:
    step: Step
    prompt: str | None
    interventions: list[str]
    evidence: list[Evidence]
    credit: float | None
    expect_is_placeholder: bool
    thought_is_placeholder: bool
    world: str | None
    stop: str | None
    executed_differs: bool


@dataclass
class Transcript:
    experience: Experience
    batch: str
    revoked: bool
    steps: list[StepView]
    episode_evidence: list[Evidence]
    later: set[str]
    items: list[CarrierItem] = field(default_factory=list)


def transcript(src: Source, ref: str) -> Transcript:
    with src.open() as db:
        exp_id = lookup.experience_id(db, ref)
        exp = db.get_experience(exp_id)
        stored = {e.id for e in exp.evidence}
        evidence = [*exp.evidence, *[e for e in db.evidence_for(exp.id) if e.id not in stored]]
        revoked = exp.id in lineage.denylist(db).ids
        batch = flywheel_store.batches(db, "").get(exp.id, "")
        items = [i for i in db.carrier_items() if exp.id in i.experience_ids]
    per_step: dict[int, list[Evidence]] = defaultdict(list)
    for ev in evidence:
        if ev.step is not None:
            per_step[ev.step].append(ev)
    views = []
    for step in exp.steps:
        world, stop = None, None
        for fb in step.feedback:
            content = fb.content if isinstance(fb.content, dict) else {}
            if fb.kind == "reward" and content.get("terminated"):
                info = content.get("info")
                success = info.get("success") if isinstance(info, dict) else None
                world = f"reward {content.get('reward')}, success {success}"
            elif fb.kind == "stop":
                stop = f"{content.get('reason')}: {content.get('detail')}"
        req, ex = step.request, step.executed
        # The harness flags a slot the model filled with the slot's own text (`placeholder_copy`).
        copied: set[str] = set()
        for fb in step.feedback:
            flagged = fb.kind == "placeholder_copy" and isinstance(fb.content, dict)
            fields = fb.content.get("fields") if flagged and isinstance(fb.content, dict) else None
            copied |= {str(f) for f in fields} if isinstance(fields, list) else set()
        views.append(StepView(
            step=step, prompt=prompt_of(step),
            interventions=[intervention_text(fb.content) for fb in step.feedback
                           if fb.kind == "intervention" and isinstance(fb.content, dict)],
            evidence=per_step.get(step.index, []),
            credit=exp.credit[step.index] if step.index < len(exp.credit) else None,
            expect_is_placeholder=bool(req.expect) and (copies_placeholder(req.expect) or "expect" in copied),
            thought_is_placeholder=bool(req.thought) and (copies_placeholder(req.thought) or "thought" in copied),
            world=world, stop=stop, executed_differs=(ex.tool, ex.args) != (req.tool, req.args)))
    return Transcript(exp, batch, revoked, views, [e for e in evidence if e.step is None],
                      {e.id for e in evidence if e.id not in stored}, items)


# --- carriers -------------------------------------------------------------------------------------------


@dataclass
class ItemRow:
    item: CarrierItem
    state: str
    summary: str
    detail: list[str] = field(default_factory=list)
    """Lines shown under the summary: a skill's steps, a recipe's levers."""


def summary(content: object) -> str:
    if isinstance(content, dict):
        for key in ("lesson", "text", "rule", "summary", "description", "name"):
            if isinstance(content.get(key), str) and content[key]:
                return str(content[key])
    text = json.dumps(content, ensure_ascii=False)
    return text if len(text) < 200 else text[:200] + "…"


def carriers(src: Source, show_all: bool = False) -> dict[str, list[ItemRow]]:
    """Every carrier's items with their state; only the active ones unless `show_all`."""
    from lle.carriers.recipes import RecipeBook
    from lle.carriers.rules import RuleBook
    from lle.carriers.skill_mining import skill_lines
    from lle.carriers.skills import SkillLibrary
    from lle.carriers.verifier_cases import VerifierCases

    out: dict[str, list[ItemRow]] = {}
    with src.open() as db:
        denied = lineage.denylist(db)
        out["memory"] = [ItemRow(i, "revoked" if denied.blocks_item(i) else "active", summary(i.content))
                         for i in db.carrier_items("memory")]
        out["rules"] = [ItemRow(i, s, summary(i.content)) for i, s in RuleBook(db).items().values()]
        out["skills"] = [ItemRow(s.item, s.state.value, f"{s.name} v{s.descriptor.version}: "
                                 f"{s.descriptor.description or s.descriptor.family}",
                                 skill_lines(s.descriptor)) for s in SkillLibrary(db).skills()]
        out["context"] = [ItemRow(i, s, summary(i.content)) for i, s in RecipeBook(db).items().values()]
        out["dataset"] = [ItemRow(i, "revoked" if denied.blocks_item(i) else "active", summary(i.content))
                          for i in db.carrier_items("dataset")]
        out["verifier_cases"] = [ItemRow(i, s, summary(i.content)) for i, s in VerifierCases(db).items().values()]
    if not show_all:
        out = {k: [r for r in rows if r.state == "active"] for k, rows in out.items()}
    return out


@dataclass
class Provenance:
    """experience -> evidence -> update -> item -> derived items, with the gate's reasons."""

    item: CarrierItem
    state: str
    experiences: list[tuple[str, str, str]]
    """(id, small world, outcome)"""
    evidence: list[Evidence]
    updates: list[Update]
    parents: list[CarrierItem]
    derived: list[CarrierItem]
    revoked_by: str | None
    steps: list[str]

    def evidence_counts(self) -> list[tuple[str, int]]:
        """`state pass (hard)` × 4: the evidence summed up, its ids below it."""
        return Counter(f"{e.anchor} {e.outcome} ({e.strength})" for e in self.evidence).most_common()


def provenance(src: Source, ref: str) -> Provenance:
    with src.open() as db:
        item_id = lookup.item_id(db, ref)
        every = db.carrier_items()
        item = next(i for i in every if i.id == item_id)
        denied = lineage.denylist(db)
        exps = []
        for exp_id in item.experience_ids:
            if db.kind_of(exp_id):
                exp = db.get_experience(exp_id)
                exps.append((exp.id, exp.small_world.id, exp.outcome.value))
            else:
                exps.append((exp_id, "—", "not in this store"))
        # The evidence that admitted it; without a record of that, each episode's own verdicts (not every
        # step's checks, which would bury the page).
        wanted = set(item.evidence_ids)
        evidence = [e for x in item.experience_ids if db.kind_of(x) for e in db.evidence_for(x)
                    if e.id in wanted or (not wanted and e.step is None and e.strength == "hard")]
        updates = [u for u in db.list_updates(limit=lookup.BIG, carrier=item.carrier.value) if u.item_id == item.id]
        state = "revoked" if denied.blocks_item(item) else _state(updates)
        steps: list[str] = []
        if item.carrier.value == "skills":
            from lle.carriers.skill_mining import skill_lines
            from lle.carriers.skills import SkillLibrary

            skill = SkillLibrary(db).get(item.id)
            steps = skill_lines(skill.descriptor)
            state = skill.state.value
    return Provenance(item, state, exps, evidence, updates, [i for i in every if i.id in item.derived_from],
                      [i for i in every if item.id in i.derived_from], denied.blocks_item(item), steps)


def _state(updates: list[Update]) -> str:
    states = {"admit": "active", "activate": "active", "propose": "candidate", "reject": "rejected",
              "retire": "retired", "supersede": "superseded", "revoke": "revoked"}
    state = "candidate" if updates else "active"
    for u in updates:
        state = states.get(u.op.value, state)
    return state


# --- revocation -----------------------------------------------------------------------------------------


def preview(src: Source, target: str) -> tuple[str, list[str]]:
    """(the full id, everything its revocation would take with it): a dry run, nothing written."""
    with src.open() as db:
        full = lookup.record_id(db, target)
        rev = lineage.revoke(db, full, "preview", "viewer", dry_run=True)
    return full, rev.cascade


def revoke(src: Source, target: str, reason: str, author: str) -> Revocation:
    with src.open(write=True) as db:
        return lineage.revoke(db, lookup.record_id(db, target), reason, author)


def run_progress(run: str, workspace: str | Path | None) -> dict[str, dict[str, int]]:
    """Finished episodes per strategy and batch label (`rN/train`, `rN/eval`, …): a running run's progress."""
    out: dict[str, dict[str, int]] = {}
    for strategy in lookup.strategies_of(run, workspace):
        found = lookup.run_store(run, strategy, workspace)
        with found.open() as db:
            counts: dict[str, int] = defaultdict(int)
            for batch in flywheel_store.batches(db, f"{run}/").values():
                counts["/".join(batch.split("/")[2:])] += 1
            out[strategy] = dict(counts)
    return out


@dataclass
class Eta:
    done: int
    planned: int
    elapsed_s: float
    left_s: float | None


def eta(run: str, workspace: str | Path | None) -> Eta:
    """Episodes finished against those the config plans (replays of skills and recipes come on top), the time
    since the run started (its config was written), and the time left at the pace so far."""
    import time

    config = loop.load_config(run, workspace)
    planned = loop.planned_episodes(config, attempts=False)  # a group's first attempts: the `rN/train` batches
    done = sum(n for batches in run_progress(run, workspace).values() for label, n in batches.items()
               if label.count("/") == 1 and label.endswith(("/train", "/eval", "/watch")))  # not the replays
    started = (loop.run_folder(run, workspace) / "config.json").stat().st_mtime
    elapsed = max(0.0, time.time() - started)
    left = elapsed / done * max(0, planned - done) if done else None
    return Eta(done, planned, elapsed, left)


def finished(run: str, workspace: str | Path | None) -> str | None:
    return loop.finished_at(loop.run_folder(run, workspace))


def all_experience_ids(src: Source) -> list[str]:
    with src.open() as db:
        return stored_experiences.all_ids(db)


# --- comparing runs -------------------------------------------------------------------------------------


def _flat(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            out |= _flat(item, f"{prefix}{key}.")
        return out
    return {prefix.rstrip("."): value}


def compare_runs(a: str, b: str, workspace: str | Path | None) -> dict[str, list[dict[str, object]]]:
    """Config keys that differ (but the id), and held-out success at the last round side by side per
    (world, strategy), with the change in rate (b - a)."""
    from lle.flywheel import report
    from lle.flywheel.evaluate import table

    configs = [_flat(loop.load_config(r, workspace).model_dump(mode="json")) for r in (a, b)]
    keys = sorted(set(configs[0]) | set(configs[1]))
    config: list[dict[str, object]] = [{"key": k, "a": configs[0].get(k), "b": configs[1].get(k)}
                                       for k in keys if k != "id" and configs[0].get(k) != configs[1].get(k)]
    tables = [{(str(r["world"]), str(r["strategy"])): r for r in table(report.load_results(x, workspace))}
              for x in (a, b)]
    rows: list[dict[str, object]] = []
    for key in sorted(set(tables[0]) | set(tables[1])):
        left, right = tables[0].get(key), tables[1].get(key)
        rate_a = left["last_rate"] if left else None
        rate_b = right["last_rate"] if right else None
        both = rate_a is not None and rate_b is not None
        rows.append({"world": key[0], "strategy": key[1], "a": left["last"] if left else None,
                     "b": right["last"] if right else None,
                     "change": round(float(str(rate_b)) - float(str(rate_a)), 3) if both else None})
    return {"config": config, "table": rows}
