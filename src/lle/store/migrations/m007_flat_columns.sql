-- m007: the store for people (datasette, sqlite-utils): flat, typed columns beside the JSON bodies,
-- declared foreign keys where they always hold, and one view per concept. Nothing here is read by lle
-- itself; it is what a person filters, facets and follows links on (docs/07-store.md).
--
-- Why generated columns: the ledger is append-only (triggers refuse UPDATE), so a plain new column
-- could never be filled for the rows already stored, and a second copy of a value could drift from
-- its body. A VIRTUAL generated column is computed from the row's own body whenever it is read: typed,
-- equal to the JSON by construction, present on every old row without a backfill, filled in the very
-- statement that writes the row, and zero bytes on disk. (No value read here is ever a blob reference:
-- tools, statuses, flags and counts are far shorter than the blob threshold.)

-- steps: what the runtime executed, and how it went.
ALTER TABLE steps ADD COLUMN tool TEXT GENERATED ALWAYS AS (json_extract(body, '$.executed.tool')) VIRTUAL;
ALTER TABLE steps ADD COLUMN requested_tool TEXT GENERATED ALWAYS AS (json_extract(body, '$.request.tool')) VIRTUAL;
ALTER TABLE steps ADD COLUMN status TEXT GENERATED ALWAYS AS (json_extract(body, '$.executed.status')) VIRTUAL;
ALTER TABLE steps ADD COLUMN allowed INTEGER GENERATED ALWAYS AS (json_extract(body, '$.executed.allowed')) VIRTUAL;
ALTER TABLE steps ADD COLUMN has_error INTEGER
  GENERATED ALWAYS AS (coalesce(json_type(body, '$.effect.error'), 'null') <> 'null') VIRTUAL;
ALTER TABLE steps ADD COLUMN n_changes INTEGER
  GENERATED ALWAYS AS (coalesce(json_array_length(body, '$.effect.changes'), 0)) VIRTUAL;
ALTER TABLE steps ADD COLUMN model TEXT GENERATED ALWAYS AS (json_extract(body, '$.llm.model')) VIRTUAL;
ALTER TABLE steps ADD COLUMN prompt_tokens INTEGER GENERATED ALWAYS AS (json_extract(body, '$.llm.prompt_tokens')) VIRTUAL;
ALTER TABLE steps ADD COLUMN completion_tokens INTEGER
  GENERATED ALWAYS AS (json_extract(body, '$.llm.completion_tokens')) VIRTUAL;
ALTER TABLE steps ADD COLUMN has_prompt INTEGER
  GENERATED ALWAYS AS (coalesce(json_type(body, '$.llm.prompt'), 'null') <> 'null') VIRTUAL;

-- experiences: what its body holds beyond the columns m001 gave it.
ALTER TABLE experiences ADD COLUMN model TEXT GENERATED ALWAYS AS (json_extract(body, '$.policy.model')) VIRTUAL;
ALTER TABLE experiences ADD COLUMN level INTEGER GENERATED ALWAYS AS (json_extract(body, '$.small_world.level')) VIRTUAL;

-- evidence -> experiences, declared: datasette links each evidence row to its experience and lists an
-- experience's evidence on its page. On a generated copy of experience_id, because SQLite cannot add a
-- constraint to an existing column. It always holds (evidence is written with its experience, or
-- later about a stored one); DEFERRABLE because the store writes an experience's evidence before its
-- row, inside the one transaction.
ALTER TABLE evidence ADD COLUMN experience TEXT GENERATED ALWAYS AS (experience_id) VIRTUAL
  REFERENCES experiences(id) DEFERRABLE INITIALLY DEFERRED;

-- steps -> experiences cannot be declared on `steps`: a running episode commits each step before its
-- experience exists (that is what makes resume possible), and the store enforces declared keys. So a
-- finished experience's steps are listed here, written in the transaction that writes the experience
-- row (lle.store.flat), with the columns people facet on: datasette links each to its experience, and
-- an experience's page counts its steps. Old experiences get theirs below (INSERT only: append-only).
CREATE TABLE experience_steps (
  experience_id TEXT NOT NULL REFERENCES experiences(id) DEFERRABLE INITIALLY DEFERRED,
  idx           INTEGER NOT NULL,
  tool          TEXT NOT NULL,
  status        TEXT NOT NULL,
  allowed       INTEGER NOT NULL,
  has_error     INTEGER NOT NULL,
  PRIMARY KEY (experience_id, idx),
  FOREIGN KEY (experience_id, idx) REFERENCES steps(experience_id, idx) DEFERRABLE INITIALLY DEFERRED
) STRICT;

INSERT INTO experience_steps(experience_id, idx, tool, status, allowed, has_error)
  SELECT s.experience_id, s.idx, s.tool, s.status, s.allowed, s.has_error
  FROM steps s JOIN experiences x ON x.id = s.experience_id ORDER BY x.rowid, s.idx;

CREATE TRIGGER experience_steps_no_update BEFORE UPDATE ON experience_steps
BEGIN SELECT RAISE(ABORT, 'ledger table experience_steps is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER experience_steps_no_delete BEFORE DELETE ON experience_steps
BEGIN SELECT RAISE(ABORT, 'ledger table experience_steps is append-only: append a revocation instead of deleting rows'); END;

-- updates -> carrier_items is not declared: not every update names an item stored in the same store
-- (a rejection without an item, a decision about an item of another store), and a declared key would
-- make the store refuse those writes. `updates_flat` joins the item where it is there.

-- Views: one per concept, typed and joined, for filtering and faceting (datasette offers facets on
-- views too). A flywheel episode's batch is `RUN/STRATEGY/rN/PHASE` (lle.flywheel.loop); other
-- batches (run_many's own names) leave run, strategy, round and phase empty.
CREATE VIEW episode_runs AS
WITH a AS (SELECT id, batch, instr(batch, '/') AS s FROM episodes WHERE batch IS NOT NULL),
b AS (SELECT id, batch, substr(batch, 1, s - 1) AS run, substr(batch, s + 1) AS rest FROM a WHERE s > 0),
c AS (SELECT id, batch, run, substr(rest, 1, instr(rest, '/') - 1) AS strategy,
             substr(rest, instr(rest, '/') + 1) AS rest FROM b WHERE instr(rest, '/') > 0),
d AS (SELECT id, batch, run, strategy,
             CASE WHEN instr(rest, '/') > 0 THEN substr(rest, 1, instr(rest, '/') - 1) ELSE rest END AS round_label,
             CASE WHEN instr(rest, '/') > 0 THEN substr(rest, instr(rest, '/') + 1) END AS phase FROM c)
SELECT e.id AS episode_id, e.batch, d.run, d.strategy, CAST(substr(d.round_label, 2) AS INTEGER) AS round,
       d.phase
FROM episodes e LEFT JOIN d ON d.id = e.id AND d.run <> '' AND d.strategy <> '' AND d.round_label GLOB 'r[0-9]*'
  AND NOT substr(d.round_label, 2) GLOB '*[^0-9]*' AND d.phase <> '';

CREATE VIEW experiences_flat AS
SELECT x.id, r.run, r.strategy, r.round, r.phase, r.batch, x.world, x.family, x.project, x.split, x.level,
       x.outcome, x.verification, x.score, x.n_steps, x.n_evidence, x.model, x.small_world_id, x.created_at
FROM experiences x LEFT JOIN episode_runs r ON r.episode_id = x.id;

-- Every stored step, finished episodes' and running ones' (outcome empty until the experience exists).
CREATE VIEW steps_flat AS
SELECT s.experience_id, s.idx, r.run, r.strategy, r.round, r.phase, x.world, x.split, x.outcome,
       s.requested_tool, s.tool, s.status, s.allowed, s.has_error, s.n_changes, s.model, s.prompt_tokens,
       s.completion_tokens, s.has_prompt
FROM steps s LEFT JOIN experiences x ON x.id = s.experience_id LEFT JOIN episode_runs r ON r.episode_id = s.experience_id;

CREATE VIEW updates_flat AS
SELECT u.id, u.carrier, u.op, u.item_id, i.carrier AS item_carrier, i.scope_level AS item_scope,
       json_extract(u.body, '$.actor') AS actor, json_extract(u.body, '$.gate.name') AS gate,
       json_extract(u.body, '$.gate.passed') AS gate_passed,
       json_array_length(u.body, '$.experience_ids') AS n_experiences, u.at
FROM updates u LEFT JOIN carrier_items i ON i.id = u.item_id;
