-- m001 (PostgreSQL): the append-only ledger, the same tables and columns as SQLite's m001. Rows are
-- never changed or deleted: triggers refuse UPDATE, DELETE and TRUNCATE (which skips row triggers).
-- Every table but lle_migrations has `rowid`, an identity column: the order of writing, which
-- SQLite gives every table for free and the store's incremental reads rely on. Writers hold one
-- advisory lock per transaction (lle.store.postgres), so rowids commit in increasing order.

CREATE FUNCTION lle_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger table % is append-only: append a revocation instead of %', TG_TABLE_NAME,
    CASE TG_OP WHEN 'UPDATE' THEN 'changing rows' ELSE 'deleting rows' END;
END $$;

-- One call per ledger table: its three refusing triggers, named like SQLite's.
CREATE FUNCTION lle_append_only(tbl text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE ON %I FOR EACH ROW EXECUTE FUNCTION lle_refuse_change()',
                 tbl || '_no_update', tbl);
  EXECUTE format('CREATE TRIGGER %I BEFORE DELETE ON %I FOR EACH ROW EXECUTE FUNCTION lle_refuse_change()',
                 tbl || '_no_delete', tbl);
  EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION lle_refuse_change()',
                 tbl || '_no_truncate', tbl);
END $$;

CREATE TABLE lle_migrations (
  number     bigint PRIMARY KEY,
  name       text NOT NULL,
  applied_at text NOT NULL
);

CREATE TABLE experiences (
  rowid          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id             text PRIMARY KEY,
  small_world_id text NOT NULL,
  world          text NOT NULL,
  family         text NOT NULL,
  project        text NOT NULL,
  split          text NOT NULL,
  outcome        text NOT NULL,
  verification   text NOT NULL,
  score          double precision,
  n_steps        bigint NOT NULL,
  n_evidence     bigint NOT NULL,
  content_hash   text NOT NULL,
  created_at     text NOT NULL,
  body           text NOT NULL  -- the experience without steps and evidence, JSON (text: stored as written)
);
CREATE INDEX experiences_world ON experiences(world, split);

CREATE TABLE steps (
  rowid         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  experience_id text NOT NULL,
  idx           bigint NOT NULL,
  body          text NOT NULL,
  PRIMARY KEY (experience_id, idx)
);

CREATE TABLE evidence (
  rowid         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id            text PRIMARY KEY,
  experience_id text NOT NULL,
  step          bigint,
  anchor        text NOT NULL,
  outcome       text NOT NULL,
  strength      text NOT NULL,
  body          text NOT NULL
);
CREATE INDEX evidence_experience ON evidence(experience_id, rowid);

CREATE TABLE updates (
  rowid   bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id      text PRIMARY KEY,
  carrier text NOT NULL,
  op      text NOT NULL,
  item_id text,
  at      text NOT NULL,
  body    text NOT NULL
);
CREATE INDEX updates_item ON updates(item_id);
CREATE INDEX updates_carrier ON updates(carrier, rowid);

CREATE TABLE revocations (
  rowid  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id     text PRIMARY KEY,
  target text NOT NULL,
  at     text NOT NULL,
  body   text NOT NULL
);
CREATE INDEX revocations_target ON revocations(target);

CREATE TABLE carrier_items (
  rowid       bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id          text PRIMARY KEY,
  carrier     text NOT NULL,
  scope_level text NOT NULL,
  family      text,
  project     text,
  created_at  text NOT NULL,
  body        text NOT NULL
);
CREATE INDEX carrier_items_carrier ON carrier_items(carrier, scope_level);

CREATE TABLE blobs (
  rowid  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  sha256 text PRIMARY KEY,
  size   bigint NOT NULL,
  data   text NOT NULL
);

-- Full-text search: SQLite's FTS5 table becomes a table with a tsvector ('english': Porter stemming,
-- like FTS5's porter tokenizer) under a GIN index. The store fills `tsv` from the text's words
-- (lle.store.pg_text), so a path like DD/MM/YYYY is three words here too, as FTS5 splits it.
CREATE TABLE search (
  rowid  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  ref_id text NOT NULL,
  kind   text NOT NULL,
  text   text NOT NULL,
  tsv    tsvector NOT NULL
);
CREATE INDEX search_tsv ON search USING gin(tsv);
CREATE INDEX search_kind ON search(kind, rowid);

SELECT lle_append_only(t) FROM unnest(ARRAY['lle_migrations', 'experiences', 'steps', 'evidence', 'updates',
                                            'revocations', 'carrier_items', 'blobs', 'search']) AS t;
