-- m005 (PostgreSQL): dataset export snapshots and their rows, as SQLite's m005.

CREATE TABLE export_snapshots (
  rowid      bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id         text PRIMARY KEY,
  format     text NOT NULL,
  n_rows     bigint NOT NULL,
  sha256     text NOT NULL,
  path       text NOT NULL,
  created_at text NOT NULL,
  body       text NOT NULL
);

CREATE TABLE export_rows (
  rowid         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  snapshot_id   text NOT NULL,
  row_index     bigint NOT NULL,
  experience_id text NOT NULL,
  item_id       text NOT NULL,
  PRIMARY KEY (snapshot_id, row_index, experience_id)
);
CREATE INDEX export_rows_experience ON export_rows(experience_id);
CREATE INDEX export_rows_item ON export_rows(item_id);

SELECT lle_append_only(t) FROM unnest(ARRAY['export_snapshots', 'export_rows']) AS t;
