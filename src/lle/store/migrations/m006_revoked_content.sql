-- m006: revocation by content (lle.store.content). An id names one record; a copy of the same
-- trajectory imported under a new id must stay revoked. Each stored experience keeps the hash of
-- its trajectory, and each revocation records the content and trajectory hashes of the experiences
-- it revokes, so the denylist finds copies with one indexed join.

CREATE TABLE trajectory_hashes (
  experience_id TEXT PRIMARY KEY,
  hash          TEXT NOT NULL    -- lle.store.content.trajectory_hash
) STRICT;
CREATE INDEX trajectory_hashes_hash ON trajectory_hashes(hash);
CREATE INDEX experiences_content_hash ON experiences(content_hash);

CREATE TABLE revoked_content (
  revocation_id TEXT NOT NULL,
  experience_id TEXT NOT NULL,   -- the revoked experience the hash was taken from
  kind          TEXT NOT NULL,   -- content or trajectory
  hash          TEXT NOT NULL,
  PRIMARY KEY (revocation_id, experience_id, kind)
) STRICT;
CREATE INDEX revoked_content_hash ON revoked_content(hash);

CREATE TRIGGER trajectory_hashes_no_update BEFORE UPDATE ON trajectory_hashes
BEGIN SELECT RAISE(ABORT, 'ledger table trajectory_hashes is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER trajectory_hashes_no_delete BEFORE DELETE ON trajectory_hashes
BEGIN SELECT RAISE(ABORT, 'ledger table trajectory_hashes is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER revoked_content_no_update BEFORE UPDATE ON revoked_content
BEGIN SELECT RAISE(ABORT, 'ledger table revoked_content is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER revoked_content_no_delete BEFORE DELETE ON revoked_content
BEGIN SELECT RAISE(ABORT, 'ledger table revoked_content is append-only: append a revocation instead of deleting rows'); END;
