-- m004 (PostgreSQL): routed marks, as SQLite's m004.

CREATE TABLE routed (
  rowid         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  experience_id text PRIMARY KEY,
  run_id        text NOT NULL,
  at            text NOT NULL
);

SELECT lle_append_only('routed');
