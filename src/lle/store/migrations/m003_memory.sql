-- m003: episodic memory (lle.carriers.memory). The items themselves are carrier_items rows (kind
-- memory) indexed by the search table; these tables hold what hybrid retrieval adds to them.

-- One embedding per item and model, float32 little-endian. Keyed by model too, so a new embedding
-- model adds rows beside the old ones instead of rewriting them.
CREATE TABLE memory_vectors (
  item_id    TEXT NOT NULL,
  model      TEXT NOT NULL,
  dim        INTEGER NOT NULL,
  vector     BLOB NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (item_id, model)
) STRICT;

-- Learned utility (MemRL): one row per update, Q <- Q + alpha (reward - Q). The current Q of an
-- item is its latest row; the history stays, so a bad reward signal can be audited and replayed.
CREATE TABLE memory_utility (
  seq           INTEGER PRIMARY KEY,
  item_id       TEXT NOT NULL,
  reward        REAL NOT NULL,
  alpha         REAL NOT NULL,
  q             REAL NOT NULL,
  experience_id TEXT,
  at            TEXT NOT NULL
) STRICT;
CREATE INDEX memory_utility_item ON memory_utility(item_id, seq);

CREATE TRIGGER memory_vectors_no_update BEFORE UPDATE ON memory_vectors
BEGIN SELECT RAISE(ABORT, 'ledger table memory_vectors is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER memory_vectors_no_delete BEFORE DELETE ON memory_vectors
BEGIN SELECT RAISE(ABORT, 'ledger table memory_vectors is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER memory_utility_no_update BEFORE UPDATE ON memory_utility
BEGIN SELECT RAISE(ABORT, 'ledger table memory_utility is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER memory_utility_no_delete BEFORE DELETE ON memory_utility
BEGIN SELECT RAISE(ABORT, 'ledger table memory_utility is append-only: append a revocation instead of deleting rows'); END;
