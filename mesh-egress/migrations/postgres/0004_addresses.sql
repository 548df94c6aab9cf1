-- Every part and commitment is stored with its conversation's destination (mesh_egress::store):
-- the Address of the channel it was committed through, as JSON (`{"surface":"slack",
-- "channel":"C0123456789","thread_ts":"…"}`), so whoever sends it later sends it there.
--
-- Rows written before this migration have no address (NULL). They are never sent to a
-- guessed destination: a worker marks such a part `failed` and ends such a commitment
-- `cancelled`, each with `unaddressed = 1`, and Store::readdress gives a conversation's
-- rows their address and puts what was ended for want of one back to `pending`.
ALTER TABLE mesh_outbox_parts ADD COLUMN address TEXT;
ALTER TABLE mesh_outbox_parts
    ADD COLUMN unaddressed BIGINT NOT NULL DEFAULT 0 CHECK (unaddressed IN (0, 1));
ALTER TABLE mesh_commitments ADD COLUMN address TEXT;
ALTER TABLE mesh_commitments
    ADD COLUMN unaddressed BIGINT NOT NULL DEFAULT 0 CHECK (unaddressed IN (0, 1));

-- A worker looks for open parts surface by surface (the surfaces it has a client for),
-- grouped by conversation and address, oldest first.
CREATE INDEX mesh_outbox_parts_open_surface
    ON mesh_outbox_parts (surface, seq)
    WHERE state IN ('pending', 'sending');
