-- m003 (PostgreSQL): episodic memory, as SQLite's m003. Vectors are float32 little-endian bytes
-- written and read by the application (no pgvector: ranking happens in lle.carriers.memory).

CREATE TABLE memory_vectors (
  rowid      bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  item_id    text NOT NULL,
  model      text NOT NULL,
  dim        bigint NOT NULL,
  vector     bytea NOT NULL,
  created_at text NOT NULL,
  PRIMARY KEY (item_id, model)
);

CREATE TABLE memory_utility (
  seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  item_id       text NOT NULL,
  reward        double precision NOT NULL,
  alpha         double precision NOT NULL,
  q             double precision NOT NULL,
  experience_id text,
  at            text NOT NULL
);
CREATE INDEX memory_utility_item ON memory_utility(item_id, seq);

SELECT lle_append_only(t) FROM unnest(ARRAY['memory_vectors', 'memory_utility']) AS t;
