-- The run ledger on the store, and the indexes retention (Store::prune) reads.
-- Times are milliseconds since the Unix epoch, from the database's clock.

-- One row per ledger entry: the same rows the in-memory ledger holds (LedgerEntry as JSON),
-- never a cause, never a request body. The attribution is copied into columns so a
-- conversation's or a run's rows are read by index.
CREATE TABLE mesh_ledger (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation TEXT    NOT NULL,
    agent        TEXT    NOT NULL,
    run          TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    entry        TEXT    NOT NULL,
    created_ms   BIGINT  NOT NULL
);

CREATE INDEX mesh_ledger_conversation ON mesh_ledger (conversation, run, seq);
CREATE INDEX mesh_ledger_created ON mesh_ledger (created_ms);

-- Retention deletes only final rows: sent parts and ended commitments.
CREATE INDEX mesh_outbox_parts_sent ON mesh_outbox_parts (updated_ms) WHERE state = 'sent';
CREATE INDEX mesh_commitments_ended ON mesh_commitments (ended_ms) WHERE ended_ms IS NOT NULL;
