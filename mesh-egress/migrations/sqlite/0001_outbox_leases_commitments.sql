-- The durable outbox, conversation leases and follow-up commitments (mesh_egress::store).
-- Times are milliseconds since the Unix epoch, from the database's clock.

-- One row per rendered part of a committed message. `seq` orders a conversation's parts:
-- commits are serialised per conversation, so seq order is commit order.
CREATE TABLE mesh_outbox_parts (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery         TEXT    NOT NULL,
    part_index       INTEGER NOT NULL CHECK (part_index >= 0),
    total            INTEGER NOT NULL CHECK (total > part_index),
    conversation     TEXT    NOT NULL,
    agent            TEXT    NOT NULL,
    run              TEXT    NOT NULL,
    surface          TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    idempotency_key  TEXT    NOT NULL UNIQUE,
    state            TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'sending', 'sent', 'uncertain', 'failed')),
    -- An earlier attempt may have reached the surface (its outcome is unknown).
    maybe_delivered  INTEGER NOT NULL DEFAULT 0 CHECK (maybe_delivered IN (0, 1)),
    platform_id      TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    -- The lease the part was committed under (NULL: committed without one).
    lease_holder     TEXT,
    lease_token      INTEGER,
    last_error       TEXT,
    created_ms       INTEGER NOT NULL,
    updated_ms       INTEGER NOT NULL,
    first_attempt_ms INTEGER,
    UNIQUE (delivery, part_index)
);

CREATE INDEX mesh_outbox_parts_open
    ON mesh_outbox_parts (conversation, seq)
    WHERE state IN ('pending', 'sending');

-- One row per conversation ever leased. The row is never deleted (a release only ends its
-- expiry), so the fencing token only grows.
CREATE TABLE mesh_leases (
    conversation TEXT    PRIMARY KEY,
    holder       TEXT    NOT NULL,
    token        INTEGER NOT NULL CHECK (token > 0),
    expires_ms   INTEGER NOT NULL,
    updated_ms   INTEGER NOT NULL
);

-- A holding line's promise, with what a worker needs to keep it. Never in ledger rows.
CREATE TABLE mesh_commitments (
    id               TEXT    PRIMARY KEY,
    conversation     TEXT    NOT NULL,
    surface          TEXT    NOT NULL,
    agent            TEXT    NOT NULL,
    run              TEXT    NOT NULL,
    handler          TEXT    NOT NULL,
    input            TEXT    NOT NULL,
    mode             TEXT    NOT NULL,
    gate             TEXT,
    system_prompt    TEXT,
    plan             TEXT    NOT NULL,
    due_ms           INTEGER NOT NULL,
    attempts_made    INTEGER NOT NULL DEFAULT 0,
    state            TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'claimed', 'fulfilled', 'handed_off', 'cancelled')),
    claim_holder     TEXT,
    claim_token      INTEGER,
    claim_expires_ms INTEGER,
    -- The follow-up message's delivery, once committed: at most one per commitment.
    delivery         TEXT    UNIQUE,
    created_ms       INTEGER NOT NULL,
    updated_ms       INTEGER NOT NULL,
    ended_ms         INTEGER
);

CREATE INDEX mesh_commitments_due ON mesh_commitments (state, due_ms);
