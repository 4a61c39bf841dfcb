"""Episode records (migration m002): what `resume` needs to rebuild a killed episode.

Functions over a `Store`, kept out of `sqlite.py` so the ledger core stays small. An episode row is
written once, at the start; the episode is finished when the experiences row with its id exists.
"""

from __future__ import annotations

import json
from datetime import datetime

from pydantic import Field, JsonValue

from lle.config import Levers
from lle.core import Limits, PolicyInfo, Record, SmallWorld, canonical_json, utcnow
from lle.errors import InvalidInputError, UnknownIdError
from lle.store.sqlite import Store


class EpisodeRecord(Record):
    id: str
    """Experience id the episode's steps and final record use (`exp_…`)."""
    small_world: SmallWorld
    """The task it runs."""
    policy: PolicyInfo
    """The policy that acts."""
    policy_spec: str | None = None
    """How to rebuild the policy for resume (e.g. `scripted:/abs/actions.jsonl`); None: pass it in."""
    world_options: dict[str, JsonValue] = Field(default_factory=dict)
    """Keywords of the task family (e.g. `step_cost_ms`), so resume builds the same world."""
    limits: Limits
    """Step and time limits in force."""
    levers: Levers = Field(default_factory=Levers)
    """Harness levers in force (stuck notes and masks, submit discipline, …), so resume acts the same."""
    initial_observation: str
    """What reset returned; resume checks the rebuilt world returns it again."""
    runtime_version: str = ""
    """Version of the runtime that started it."""
    batch: str | None = None
    """`run_many` batch name, so a restarted batch finds this episode."""
    batch_key: str | None = None
    """Key of the episode inside its batch."""
    started_at: datetime = Field(default_factory=utcnow)
    """When it started (UTC)."""


_COLUMNS = "id, small_world, policy, runtime, started_at, batch, batch_key"


def begin_episode(store: Store, record: EpisodeRecord) -> None:
    """Commit the episode row; raises `InvalidInputError` if the id or (batch, key) is taken."""
    runtime = {"policy_spec": record.policy_spec, "world_options": record.world_options,
               "limits": record.limits.model_dump(mode="json"), "levers": record.levers.model_dump(mode="json"),
               "initial_observation": record.initial_observation,
               "runtime_version": record.runtime_version, "version": record.version}
    try:
        with store._write():  # the store's one write path: BEGIN IMMEDIATE, refuses newer schemas
            store.conn.execute(
                "INSERT INTO episodes(id, small_world_id, batch, batch_key, small_world, policy, runtime, started_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record.id, record.small_world.id, record.batch, record.batch_key,
                 canonical_json(record.small_world.model_dump(mode="json")),
                 canonical_json(record.policy.model_dump(mode="json")), canonical_json(runtime),
                 record.started_at.isoformat()),
            )
    except store.constraint_errors as err:
        raise InvalidInputError(
            f"episode {record.id} (batch {record.batch!r}, key {record.batch_key!r}) is already recorded; "
            "resume it with `lle episodes resume` instead of starting it again"
        ) from err


def _record(row: tuple[object, ...]) -> EpisodeRecord:
    id_, small_world, policy, runtime, started_at, batch, batch_key = row
    extra = json.loads(str(runtime))
    return EpisodeRecord(
        id=str(id_), small_world=SmallWorld.model_validate_json(str(small_world)),
        policy=PolicyInfo.model_validate_json(str(policy)), policy_spec=extra.get("policy_spec"),
        world_options=extra.get("world_options") or {}, limits=Limits.model_validate(extra["limits"]),
        levers=Levers.model_validate(extra.get("levers") or {}),
        initial_observation=extra.get("initial_observation", ""), runtime_version=extra.get("runtime_version", ""),
        batch=None if batch is None else str(batch), batch_key=None if batch_key is None else str(batch_key),
        started_at=datetime.fromisoformat(str(started_at)), version=int(extra.get("version", 1)),
    )


def get_episode(store: Store, episode_id: str) -> EpisodeRecord:
    row = store.conn.execute(f"SELECT {_COLUMNS} FROM episodes WHERE id=?", (episode_id,)).fetchone()
    if row is None:
        raise UnknownIdError("episode", episode_id, "list episodes with `lle episodes list`")
    return _record(row)


def batch_episodes(store: Store, batch: str) -> dict[str, EpisodeRecord]:
    """Episodes of a batch by key."""
    rows = store.conn.execute(f"SELECT {_COLUMNS} FROM episodes WHERE batch=?", (batch,))
    return {str(r[6]): _record(r) for r in rows}


def is_finished(store: Store, episode_id: str) -> bool:
    return store.conn.execute("SELECT 1 FROM experiences WHERE id=?", (episode_id,)).fetchone() is not None


def list_episodes(store: Store, *, unfinished: bool = False, limit: int = 50,
                  offset: int = 0) -> list[tuple[EpisodeRecord, int, bool]]:
    """(record, committed steps, finished) in start order; `unfinished` keeps only those to resume."""
    where = " WHERE x.id IS NULL" if unfinished else ""
    rows = store.conn.execute(
        f"SELECT {', '.join('e.' + c.strip() for c in _COLUMNS.split(','))},"
        " (SELECT count(*) FROM steps s WHERE s.experience_id = e.id), x.id IS NOT NULL"
        f" FROM episodes e LEFT JOIN experiences x ON x.id = e.id{where} ORDER BY e.rowid LIMIT ? OFFSET ?",
        (limit, offset),
    )
    return [(_record(r[:7]), int(r[7]), bool(r[8])) for r in rows]
