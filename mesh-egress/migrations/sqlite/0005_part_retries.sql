-- Per-part retries (mesh_egress::store): a part a surface did not take is tried again after
-- an exponential backoff with jitter, and marked `failed` after its last attempt, so a
-- surface failing with a 5xx is never re-sent on every worker pass.
--
-- `next_attempt_ms` is when the part may be tried again, in milliseconds since the Unix
-- epoch on the store's clock as its processes count it: each process reads the database's
-- clock once when it opens the store and counts on with its own monotonic clock (so hosts
-- whose wall clocks disagree agree on it, and a paused test clock moves it). 0, the default,
-- is "at once": every row written before this migration is due.
ALTER TABLE mesh_outbox_parts ADD COLUMN next_attempt_ms INTEGER NOT NULL DEFAULT 0;

-- A worker walks the destinations with open parts of one surface in (conversation, address)
-- order, a page at a time from where its last page ended (a cursor), so every conversation is
-- reached within a bounded number of passes however many others are busy.
CREATE INDEX mesh_outbox_parts_open_destination
    ON mesh_outbox_parts (surface, conversation, COALESCE(address, ''), seq)
    WHERE state IN ('pending', 'sending');
