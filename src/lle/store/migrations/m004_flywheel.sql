-- m004: the flywheel marks each experience once it has been routed, so a resumed run never
-- routes the same experience twice.

CREATE TABLE routed (
  experience_id TEXT PRIMARY KEY,
  run_id        TEXT NOT NULL,
  at            TEXT NOT NULL
) STRICT;

CREATE TRIGGER routed_no_update BEFORE UPDATE ON routed
BEGIN SELECT RAISE(ABORT, 'ledger table routed is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER routed_no_delete BEFORE DELETE ON routed
BEGIN SELECT RAISE(ABORT, 'ledger table routed is append-only: append a revocation instead of deleting rows'); END;
