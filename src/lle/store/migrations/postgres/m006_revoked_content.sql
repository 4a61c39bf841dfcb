-- m006 (PostgreSQL): revocation by content, as SQLite's m006.

CREATE TABLE trajectory_hashes (
  rowid         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  experience_id text PRIMARY KEY,
  hash          text NOT NULL
);
CREATE INDEX trajectory_hashes_hash ON trajectory_hashes(hash);
CREATE INDEX experiences_content_hash ON experiences(content_hash);

CREATE TABLE revoked_content (
  rowid         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  revocation_id text NOT NULL,
  experience_id text NOT NULL,
  kind          text NOT NULL,
  hash          text NOT NULL,
  PRIMARY KEY (revocation_id, experience_id, kind)
);
CREATE INDEX revoked_content_hash ON revoked_content(hash);

SELECT lle_append_only(t) FROM unnest(ARRAY['trajectory_hashes', 'revoked_content']) AS t;
