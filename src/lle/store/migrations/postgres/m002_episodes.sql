-- m002 (PostgreSQL): episodes, as SQLite's m002. A row is written when an episode starts, before its
-- first step; the episode is finished once the experiences row with the same id exists.

CREATE TABLE episodes (
  rowid          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id             text PRIMARY KEY,
  small_world_id text NOT NULL,
  batch          text,
  batch_key      text,
  small_world    text NOT NULL,
  policy         text NOT NULL,
  runtime        text NOT NULL,
  started_at     text NOT NULL
);
CREATE UNIQUE INDEX episodes_batch ON episodes(batch, batch_key) WHERE batch IS NOT NULL;
CREATE INDEX episodes_small_world ON episodes(small_world_id);

SELECT lle_append_only('episodes');
