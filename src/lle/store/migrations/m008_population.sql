-- m008: a population's message bus and its shared-skill lineage (lle.population). Agents talk only
-- through typed messages appended here; a message is never changed, it expires (expires_at) or is
-- answered by another message. A skill one agent imported from another is a row of shared_copies, so
-- revoking the source reaches every copy even though each agent keeps its carriers in its own store.

CREATE TABLE messages (
  id         TEXT PRIMARY KEY,  -- msg_…
  sender     TEXT NOT NULL,     -- agent name
  intent     TEXT NOT NULL,     -- lle.population.types.Intent
  priority   INTEGER NOT NULL,
  created_at TEXT NOT NULL,     -- ISO 8601, UTC
  expires_at TEXT,              -- created_at + ttl; NULL: it never expires
  body       TEXT NOT NULL      -- the whole message, JSON
) STRICT;
CREATE INDEX messages_created ON messages(created_at);

CREATE TABLE shared_copies (
  agent        TEXT NOT NULL,   -- the importer
  item_id      TEXT NOT NULL,   -- the copy, in the importer's store
  source_agent TEXT NOT NULL,
  source_item  TEXT NOT NULL,   -- the original, in the source agent's store
  message_id   TEXT NOT NULL,   -- the message that offered it
  at           TEXT NOT NULL,
  PRIMARY KEY (agent, item_id)
) STRICT;
CREATE INDEX shared_copies_source ON shared_copies(source_agent, source_item);

CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages
BEGIN SELECT RAISE(ABORT, 'ledger table messages is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER messages_no_delete BEFORE DELETE ON messages
BEGIN SELECT RAISE(ABORT, 'ledger table messages is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER shared_copies_no_update BEFORE UPDATE ON shared_copies
BEGIN SELECT RAISE(ABORT, 'ledger table shared_copies is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER shared_copies_no_delete BEFORE DELETE ON shared_copies
BEGIN SELECT RAISE(ABORT, 'ledger table shared_copies is append-only: append a revocation instead of deleting rows'); END;
