"""Experience, evidence and step lookups by column: the ids that lineage, skills, the dataset and
verifier cases select. Functions over a `Store`; the records themselves are read with `Store`."""

from __future__ import annotations

from lle.store.sqlite import Store


def _ids(store: Store, sql: str, args: tuple[object, ...] = ()) -> list[str]:
    return [str(r[0]) for r in store.conn.execute(sql, args)]


def _body_field(store: Store, *keys: str) -> str:
    """SQL for the text at `keys` inside the JSON `body` column, in the store's dialect."""
    if store.dialect == "postgres":
        return "body::jsonb" + "".join(f" -> '{k}'" for k in keys[:-1]) + f" ->> '{keys[-1]}'"
    return f"json_extract(body, '$.{'.'.join(keys)}')"


def all_ids(store: Store, table: str = "experiences") -> list[str]:
    """Every stored experience id (or episode or update id, by `table`), in id order; bodies are not read."""
    if table not in ("experiences", "episodes", "updates"):
        raise ValueError(f"no ids of {table!r} here")
    return _ids(store, f"SELECT id FROM {table} ORDER BY id")


def created_between(store: Store, start: str, end: str) -> list[str]:
    """Experiences created in [start, end) (ISO timestamps)."""
    return _ids(store, "SELECT id FROM experiences WHERE created_at >= ? AND created_at < ?", (start, end))


def of_world(store: Store, world: str, version: str | None = None) -> list[str]:
    """Experiences in `world` (at `version`, when given)."""
    if version:
        field = _body_field(store, "world_version")
        return _ids(store, f"SELECT id FROM experiences WHERE world = ? AND {field} = ?", (world, version))
    return _ids(store, "SELECT id FROM experiences WHERE world = ?", (world,))


def of_model(store: Store, model: str) -> list[str]:
    """Experiences whose policy was `model`."""
    field = _body_field(store, "policy", "model")
    return _ids(store, f"SELECT id FROM experiences WHERE {field} = ?", (model,))


def latest(store: Store, *, family: str, split: str, outcome: str, verification: list[str], limit: int) -> list[str]:
    """The family's `limit` most recently stored experiences with this split, outcome and a verification in the list."""
    marks = ",".join("?" * len(verification))
    return _ids(store, f"SELECT id FROM experiences WHERE family=? AND split=? AND outcome=? AND verification IN "
                       f"({marks}) ORDER BY rowid DESC LIMIT ?", (family, split, outcome, *verification, limit))


def with_later_evidence(store: Store) -> list[str]:
    """Experiences with evidence appended after they were stored, in id order."""
    return _ids(store, "SELECT x.id FROM experiences x WHERE (SELECT count(*) FROM evidence e"
                       " WHERE e.experience_id = x.id) > x.n_evidence ORDER BY x.id")


def evidence_ids(store: Store, experience_id: str, *, hard_decided: bool = False) -> list[str]:
    """Ids of the evidence about an experience, in writing order; `hard_decided`: only hard pass/fail."""
    only = " AND strength='hard' AND outcome!='unknown'" if hard_decided else ""
    return _ids(store, f"SELECT id FROM evidence WHERE experience_id=?{only} ORDER BY rowid", (experience_id,))


def feedback_outcomes(store: Store, kind: str, skill: str) -> list[tuple[str, str]]:
    """(experience id, outcome) of stored experiences with a step whose feedback of `kind` names `skill`."""
    # instr/strpos first: a cheap text test before the JSON is parsed, on the few steps that name the skill.
    if store.dialect == "postgres":
        feedback = ("strpos(s.body, ?) > 0 AND EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(s.body::jsonb ->"
                    " 'feedback', '[]'::jsonb)) f WHERE f ->> 'kind' = ? AND f -> 'content' ->> 'skill' = ?)")
    else:
        feedback = ("instr(s.body, ?) > 0 AND EXISTS (SELECT 1 FROM json_each(s.body, '$.feedback') f"
                    " WHERE json_extract(f.value, '$.kind') = ? AND json_extract(f.value, '$.content.skill') = ?)")
    rows = store.conn.execute(
        "SELECT DISTINCT s.experience_id, e.outcome FROM steps s JOIN experiences e ON e.id = s.experience_id"
        f" WHERE {feedback} ORDER BY s.experience_id", (skill, kind, skill))
    return [(str(i), str(o)) for i, o in rows]


def skills_arms(store: Store, family: str) -> list[tuple[str, str, str, str, str]]:
    """(experience id, skills arm, outcome, small world JSON, episode start) of the family's stored train
    experiences whose episode recorded the arm of the skills' measured use in its levers (`Levers.skills_arm`),
    in start order."""
    if store.dialect == "postgres":
        arm = "e.runtime::jsonb -> 'levers' ->> 'skills_arm'"
    else:
        arm = "json_extract(e.runtime, '$.levers.skills_arm')"
    rows = store.conn.execute(
        f"SELECT x.id, {arm}, x.outcome, e.small_world, e.started_at FROM episodes e JOIN experiences x ON x.id = e.id"
        f" WHERE x.family = ? AND x.split = 'train' AND {arm} IS NOT NULL ORDER BY e.rowid", (family,))
    return [(str(i), str(a), str(o), str(w), str(t)) for i, a, o, w, t in rows]
