-- m007 (PostgreSQL): the store for people, as SQLite's m007 (read its comments for the why): flat,
-- typed columns generated from the JSON bodies, the declared foreign keys that always hold, and the
-- same views with the same columns. PostgreSQL's generated columns are STORED (computed once, when
-- the row is written; adding one rewrites the table without firing row triggers, so the append-only
-- triggers stay as they are). Flags are integers 0/1, as SQLite's, so both backends read alike.

ALTER TABLE steps
  ADD COLUMN tool text GENERATED ALWAYS AS (body::jsonb #>> '{executed,tool}') STORED,
  ADD COLUMN requested_tool text GENERATED ALWAYS AS (body::jsonb #>> '{request,tool}') STORED,
  ADD COLUMN status text GENERATED ALWAYS AS (body::jsonb #>> '{executed,status}') STORED,
  ADD COLUMN allowed bigint GENERATED ALWAYS AS ((body::jsonb #>> '{executed,allowed}')::boolean::int) STORED,
  ADD COLUMN has_error bigint
    GENERATED ALWAYS AS ((coalesce(jsonb_typeof(body::jsonb #> '{effect,error}'), 'null') <> 'null')::int) STORED,
  ADD COLUMN n_changes bigint
    GENERATED ALWAYS AS (coalesce(jsonb_array_length(body::jsonb #> '{effect,changes}'), 0)) STORED,
  ADD COLUMN model text GENERATED ALWAYS AS (body::jsonb #>> '{llm,model}') STORED,
  ADD COLUMN prompt_tokens bigint GENERATED ALWAYS AS ((body::jsonb #>> '{llm,prompt_tokens}')::bigint) STORED,
  ADD COLUMN completion_tokens bigint
    GENERATED ALWAYS AS ((body::jsonb #>> '{llm,completion_tokens}')::bigint) STORED,
  ADD COLUMN has_prompt bigint
    GENERATED ALWAYS AS ((coalesce(jsonb_typeof(body::jsonb #> '{llm,prompt}'), 'null') <> 'null')::int) STORED;

ALTER TABLE experiences
  ADD COLUMN model text GENERATED ALWAYS AS (body::jsonb #>> '{policy,model}') STORED,
  ADD COLUMN level bigint GENERATED ALWAYS AS ((body::jsonb #>> '{small_world,level}')::bigint) STORED;

ALTER TABLE evidence ADD COLUMN experience text GENERATED ALWAYS AS (experience_id) STORED
  REFERENCES experiences(id) DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE experience_steps (
  rowid         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  experience_id text NOT NULL REFERENCES experiences(id) DEFERRABLE INITIALLY DEFERRED,
  idx           bigint NOT NULL,
  tool          text NOT NULL,
  status        text NOT NULL,
  allowed       bigint NOT NULL,
  has_error     bigint NOT NULL,
  PRIMARY KEY (experience_id, idx),
  FOREIGN KEY (experience_id, idx) REFERENCES steps(experience_id, idx) DEFERRABLE INITIALLY DEFERRED
);

INSERT INTO experience_steps(experience_id, idx, tool, status, allowed, has_error)
  SELECT s.experience_id, s.idx, s.tool, s.status, s.allowed, s.has_error
  FROM steps s JOIN experiences x ON x.id = s.experience_id ORDER BY x.rowid, s.idx;

SELECT lle_append_only('experience_steps');

CREATE VIEW episode_runs AS
SELECT e.id AS episode_id, e.batch,
       CASE WHEN ok THEN split_part(e.batch, '/', 1) END AS run,
       CASE WHEN ok THEN split_part(e.batch, '/', 2) END AS strategy,
       CASE WHEN ok THEN substr(split_part(e.batch, '/', 3), 2)::bigint END AS round,
       CASE WHEN ok THEN array_to_string((string_to_array(e.batch, '/'))[4:], '/') END AS phase
FROM episodes e,
     LATERAL (SELECT coalesce(split_part(e.batch, '/', 3) ~ '^r[0-9]+$' AND split_part(e.batch, '/', 4) <> ''
                              AND split_part(e.batch, '/', 1) <> '' AND split_part(e.batch, '/', 2) <> '', false)
              AS ok) k;

CREATE VIEW experiences_flat AS
SELECT x.id, r.run, r.strategy, r.round, r.phase, r.batch, x.world, x.family, x.project, x.split, x.level,
       x.outcome, x.verification, x.score, x.n_steps, x.n_evidence, x.model, x.small_world_id, x.created_at
FROM experiences x LEFT JOIN episode_runs r ON r.episode_id = x.id;

CREATE VIEW steps_flat AS
SELECT s.experience_id, s.idx, r.run, r.strategy, r.round, r.phase, x.world, x.split, x.outcome,
       s.requested_tool, s.tool, s.status, s.allowed, s.has_error, s.n_changes, s.model, s.prompt_tokens,
       s.completion_tokens, s.has_prompt
FROM steps s LEFT JOIN experiences x ON x.id = s.experience_id LEFT JOIN episode_runs r ON r.episode_id = s.experience_id;

CREATE VIEW updates_flat AS
SELECT u.id, u.carrier, u.op, u.item_id, i.carrier AS item_carrier, i.scope_level AS item_scope,
       u.body::jsonb ->> 'actor' AS actor, u.body::jsonb #>> '{gate,name}' AS gate,
       (u.body::jsonb #>> '{gate,passed}')::boolean::int AS gate_passed,
       jsonb_array_length(u.body::jsonb -> 'experience_ids') AS n_experiences, u.at
FROM updates u LEFT JOIN carrier_items i ON i.id = u.item_id;
