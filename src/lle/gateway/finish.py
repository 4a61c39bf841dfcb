"""An ended episode goes the flywheel's way: assess → hygiene → store → router.

`assess_experience` runs the always-on verifiers with `GatewayAnchor` (the caller's feedback) in
place of the world's own check; `scrub_experience` redacts and quotes before anything reaches the
ledger; the episode row and the experience are written in one transaction; `route_once` routes it
and marks it routed in one transaction, so a crash anywhere routes it exactly once.
"""

from __future__ import annotations

from typing import Any

from lle import __version__
from lle.carriers.verifier_cases import CaseVerifier
from lle.core import CarrierKind, Experience, Feedback, Limits, PolicyInfo, Update
from lle.evidence.evidence import assess_experience
from lle.gateway.capture import EndBody, GatewayAnchor, feedback_record, message_text, small_world
from lle.gateway.config import ClientConfig
from lle.gateway.journal import OpenEpisode
from lle.governance import hygiene
from lle.router.router import UpdateRouter
from lle.store import Store
from lle.store.episodes import EpisodeRecord, begin_episode, is_finished

RUNTIME_VERSION = f"lle-gateway {__version__}"


def goal_of(ep: OpenEpisode) -> str:
    first = ep.calls[0].messages if ep.calls else []
    return next((message_text(m) for m in first if isinstance(m, dict) and m.get("role") == "user"), "")


def build(ep: OpenEpisode, client: ClientConfig, body: EndBody, model: str, upstream: str) -> Experience:
    """The recorded (not yet assessed) experience of an episode."""
    per_step: dict[int, list[Feedback]] = {}
    for step, fb in ep.feedback:
        per_step.setdefault(step, []).append(feedback_record(fb))
    steps = [call.step(per_step.get(call.index, [])) for call in ep.calls]
    tools = [s.request.tool for s in steps if s.request.tool != "<none>"]
    tools += [str(t.get("function", {}).get("name")) for c in ep.calls for t in c.params.get("tools") or []
              if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    writeback = list(body.writeback) if body.writeback is not None else list(client.writeback)
    world = small_world(episode=ep.episode, client=client.name, family=client.family,
                        project=body.project or ep.project, goal=body.goal or goal_of(ep), tools=tools,
                        split=body.split, writeback=writeback)
    return Experience(id=ep.experience_id, small_world=world, runtime_version=RUNTIME_VERSION,
                      world_version="gateway-v1",
                      policy=PolicyInfo(model=model, params={"upstream": upstream}), steps=steps)


def finish(store: Store, router: UpdateRouter, ep: OpenEpisode, client: ClientConfig, body: EndBody,
           *, model: str, upstream: str) -> tuple[Experience, list[Update]]:
    if is_finished(store, ep.experience_id):  # ended before a crash cut the journal's deletion short
        return store.get_experience(ep.experience_id), []
    recorded = build(ep, client, body, model, upstream)
    assessed = assess_experience(recorded, extra=[GatewayAnchor(ep.feedback), CaseVerifier(store)])
    clean = hygiene.scrub_experience(assessed)
    record = EpisodeRecord(id=clean.id, small_world=clean.small_world, policy=clean.policy,
                           limits=Limits(max_steps=max(1, len(clean.steps))),
                           initial_observation=clean.small_world.goal, runtime_version=RUNTIME_VERSION)
    with store.transaction():  # the episode row and its experience: both or neither
        begin_episode(store, record)
        stored = store.append_experience(clean)
    updates = router.route_once(stored, f"gateway:{client.name}")
    return stored, updates


def summary(exp: Experience, updates: list[Update]) -> dict[str, Any]:
    return {
        "experience_id": exp.id, "outcome": exp.outcome.value, "verification": exp.verification.value,
        "steps": len(exp.steps), "evidence": [{"id": e.id, "anchor": e.anchor, "outcome": e.outcome.value,
                                               "strength": e.strength.value} for e in exp.evidence],
        "risk_tags": exp.risk_tags,
        "updates": [{"carrier": u.carrier.value, "op": u.op.value, "item_id": u.item_id,
                     "gate": u.gate.name if u.gate else None, "passed": u.gate.passed if u.gate else None,
                     "reasons": u.gate.reasons if u.gate else []} for u in updates],
        "memory_items": [u.item_id for u in updates if u.carrier is CarrierKind.memory and u.op.value == "admit"],
    }
