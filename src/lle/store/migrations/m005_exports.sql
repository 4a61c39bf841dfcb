-- m005: dataset export snapshots (lle.carriers.dataset). A snapshot is one exported file; its rows
-- name the experiences (and dataset items) they were built from, so revoking any of them marks the
-- snapshot tainted at read time (ledger minus denylist) without rewriting a row.

CREATE TABLE export_snapshots (
  id         TEXT PRIMARY KEY,  -- snap_…
  format     TEXT NOT NULL,     -- sft, dpo or rl
  n_rows     INTEGER NOT NULL,
  sha256     TEXT NOT NULL,     -- of the JSONL file as written
  path       TEXT NOT NULL,
  created_at TEXT NOT NULL,
  body       TEXT NOT NULL      -- the manifest, JSON
) STRICT;

CREATE TABLE export_rows (
  snapshot_id   TEXT NOT NULL,
  row_index     INTEGER NOT NULL,
  experience_id TEXT NOT NULL,
  item_id       TEXT NOT NULL,  -- the dataset item that admitted the experience
  PRIMARY KEY (snapshot_id, row_index, experience_id)
) STRICT;
CREATE INDEX export_rows_experience ON export_rows(experience_id);
CREATE INDEX export_rows_item ON export_rows(item_id);

CREATE TRIGGER export_snapshots_no_update BEFORE UPDATE ON export_snapshots
BEGIN SELECT RAISE(ABORT, 'ledger table export_snapshots is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER export_snapshots_no_delete BEFORE DELETE ON export_snapshots
BEGIN SELECT RAISE(ABORT, 'ledger table export_snapshots is append-only: append a revocation instead of deleting rows'); END;
CREATE TRIGGER export_rows_no_update BEFORE UPDATE ON export_rows
BEGIN SELECT RAISE(ABORT, 'ledger table export_rows is append-only: append a revocation instead of changing rows'); END;
CREATE TRIGGER export_rows_no_delete BEFORE DELETE ON export_rows
BEGIN SELECT RAISE(ABORT, 'ledger table export_rows is append-only: append a revocation instead of deleting rows'); END;
