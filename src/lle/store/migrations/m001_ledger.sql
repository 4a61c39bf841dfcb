-- m001: the append-only ledger. Rows are never changed or deleted: triggers refuse it, so even a
-- bug or a hand-written UPDATE cannot rewrite history. Revocations are new rows.

CREATE TABLE lle_migrations (
  number     INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at TEXT NOT NULL
) STRICT;

CREATE TABLE experiences (
  id             TEXT PRIMARY KEY,
  small_world_id TEXT NOT NULL,
  world          TEXT NOT NULL,
  family         TEXT NOT NULL,
  project        TEXT NOT NULL,
  split          TEXT NOT NULL,
  outcome        TEXT NOT NULL,
  verification   TEXT NOT NULL,
  score          REAL,
  n_steps        INTEGER NOT NULL,
  n_evidence     INTEGER NOT NULL,
  content_hash   TEXT NOT NULL,
  created_at     TEXT NOT NULL,
  body           TEXT NOT NULL  -- the experience without steps and evidence, JSON
) STRICT;
CREATE INDEX experiences_world ON experiences(world, split);

-- Steps may be committed one by one while an episode runs; an experience is visible only once its
-- experiences row exists, written in the same transaction as any steps not yet stored.
CREATE TABLE steps (
  experience_id TEXT NOT NULL,
  idx           INTEGER NOT NULL,
  body          TEXT NOT NULL,
  PRIMARY KEY (experience_id, idx)
) STRICT;

CREATE TABLE evidence (
  id            TEXT PRIMARY KEY,
  experience_id TEXT NOT NULL,
  step          INTEGER,
  anchor        TEXT NOT NULL,
  outcome       TEXT NOT NULL,
  strength      TEXT NOT NULL,
  body          TEXT NOT NULL
) STRICT;
CREATE INDEX evidence_experience ON evidence(experience_id);

CREATE TABLE updates (
  id      TEXT PRIMARY KEY,
  carrier TEXT NOT NULL,
  op      TEXT NOT NULL,
  item_id TEXT,
  at      TEXT NOT NULL,
  body    TEXT NOT NULL
) STRICT;
CREATE INDEX updates_item ON updates(item_id);

CREATE TABLE revocations (
  id     TEXT PRIMARY KEY,
  target TEXT NOT NULL,
  at     TEXT NOT NULL,
  body   TEXT NOT NULL
) STRICT;
CREATE INDEX revocations_target ON revocations(target);

CREATE TABLE carrier_items (
  id          TEXT PRIMARY KEY,
  carrier     TEXT NOT NULL,
  scope_level TEXT NOT NULL,
  family      TEXT,
  project     TEXT,
  created_at  TEXT NOT NULL,
  body        TEXT NOT NULL
) STRICT;
CREATE INDEX carrier_items_carrier ON carrier_items(carrier, scope_level);

-- Content-addressed large texts: a JSON string longer than the threshold is stored once here and
-- referenced from the row by its sha256.
CREATE TABLE blobs (
  sha256 TEXT PRIMARY KEY,
  size   INTEGER NOT NULL,
  data   TEXT NOT NULL
) STRICT;

CREATE VIRTUAL TABLE search USING fts5(ref_id UNINDEXED, kind UNINDEXED, text, tokenize = 'porter unicode61');

-- Append-only: refuse UPDATE and DELETE on every ledger table.
CREATE TRIGGER lle_migrations_no_update BEFORE UPDATE ON lle_migrations
BEGIN SELECT RAISE(ABORT, 'ledger table lle_migrations is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER lle_migrations_no_delete BEFORE DELETE ON lle_migrations
BEGIN SELECT RAISE(ABORT, 'ledger table lle_migrations is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER experiences_no_update BEFORE UPDATE ON experiences
BEGIN SELECT RAISE(ABORT, 'ledger table experiences is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER experiences_no_delete BEFORE DELETE ON experiences
BEGIN SELECT RAISE(ABORT, 'ledger table experiences is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER steps_no_update BEFORE UPDATE ON steps
BEGIN SELECT RAISE(ABORT, 'ledger table steps is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER steps_no_delete BEFORE DELETE ON steps
BEGIN SELECT RAISE(ABORT, 'ledger table steps is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence
BEGIN SELECT RAISE(ABORT, 'ledger table evidence is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER evidence_no_delete BEFORE DELETE ON evidence
BEGIN SELECT RAISE(ABORT, 'ledger table evidence is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER updates_no_update BEFORE UPDATE ON updates
BEGIN SELECT RAISE(ABORT, 'ledger table updates is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER updates_no_delete BEFORE DELETE ON updates
BEGIN SELECT RAISE(ABORT, 'ledger table updates is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER revocations_no_update BEFORE UPDATE ON revocations
BEGIN SELECT RAISE(ABORT, 'ledger table revocations is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER revocations_no_delete BEFORE DELETE ON revocations
BEGIN SELECT RAISE(ABORT, 'ledger table revocations is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER carrier_items_no_update BEFORE UPDATE ON carrier_items
BEGIN SELECT RAISE(ABORT, 'ledger table carrier_items is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER carrier_items_no_delete BEFORE DELETE ON carrier_items
BEGIN SELECT RAISE(ABORT, 'ledger table carrier_items is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER blobs_no_update BEFORE UPDATE ON blobs
BEGIN SELECT RAISE(ABORT, 'ledger table blobs is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER blobs_no_delete BEFORE DELETE ON blobs
BEGIN SELECT RAISE(ABORT, 'ledger table blobs is append-only: append a revocation instead of deleting rows'); END;
