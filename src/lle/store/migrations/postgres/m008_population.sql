-- m008 (PostgreSQL): a population's message bus and its shared-skill lineage, as SQLite's m008.

CREATE TABLE messages (
  rowid      bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id         text PRIMARY KEY,
  sender     text NOT NULL,
  intent     text NOT NULL,
  priority   bigint NOT NULL,
  created_at text NOT NULL,
  expires_at text,
  body       text NOT NULL
);
CREATE INDEX messages_created ON messages(created_at);

CREATE TABLE shared_copies (
  rowid        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  agent        text NOT NULL,
  item_id      text NOT NULL,
  source_agent text NOT NULL,
  source_item  text NOT NULL,
  message_id   text NOT NULL,
  at           text NOT NULL,
  PRIMARY KEY (agent, item_id)
);
CREATE INDEX shared_copies_source ON shared_copies(source_agent, source_item);

SELECT lle_append_only(t) FROM unnest(ARRAY['messages', 'shared_copies']) AS t;
