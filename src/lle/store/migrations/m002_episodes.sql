-- m002: episodes. A row is written when an episode starts, before its first step, so a killed run
-- can be resumed: it says which small world, which policy and which world options to rebuild.
-- The episode is finished once the experiences row with the same id exists; nothing here changes.

CREATE TABLE episodes (
  id             TEXT PRIMARY KEY,  -- the experience id its steps and final record use (exp_…)
  small_world_id TEXT NOT NULL,
  batch          TEXT,              -- run_many batch name, so a restarted batch finds its episodes
  batch_key      TEXT,
  small_world    TEXT NOT NULL,     -- SmallWorld, JSON
  policy         TEXT NOT NULL,     -- PolicyInfo, JSON
  runtime        TEXT NOT NULL,     -- policy spec, world options, limits, initial observation; JSON
  started_at     TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX episodes_batch ON episodes(batch, batch_key) WHERE batch IS NOT NULL;
CREATE INDEX episodes_small_world ON episodes(small_world_id);

CREATE TRIGGER episodes_no_update BEFORE UPDATE ON episodes
BEGIN SELECT RAISE(ABORT, 'ledger table episodes is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER episodes_no_delete BEFORE DELETE ON episodes
BEGIN SELECT RAISE(ABORT, 'ledger table episodes is append-only: append a revocation instead of deleting rows'); END;
