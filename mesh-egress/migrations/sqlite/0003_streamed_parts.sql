-- Streamed replies (mesh_egress::store::stream): a part shown on a surface's own stream
-- (Slack's native streams, Telegram drafts, Discord post-then-edit) is marked as such.
--
-- A streamed part left `sending` by a crash was maybe shown inside a growing message: the
-- appends and edits that carry it have neither Slack's metadata nor Discord's nonce, so a
-- restart cannot look it up or dedupe it and settles it by the UnknownOutcome knob instead.
-- `platform_id` holds the id of the surface message that confirmed it (one growing message
-- holds several parts, so several rows share it).
ALTER TABLE mesh_outbox_parts
    ADD COLUMN streamed INTEGER NOT NULL DEFAULT 0 CHECK (streamed IN (0, 1));
