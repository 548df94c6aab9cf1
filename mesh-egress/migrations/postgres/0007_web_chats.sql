-- Web chats (mesh_egress::web): who may read and write each chat, and what its person said.
-- The model's side of a chat is the outbox: the `sent` parts of the chat's conversation, one
-- assistant message per run (and one per kept promise's follow-up delivery).

-- One row per chat: the identity that created it is its only reader and writer.
CREATE TABLE mesh_web_chats (
    chat       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    created_ms BIGINT  NOT NULL
);

-- One row per turn, in order: the person's message (NULL for a regenerated answer, which has
-- none) and the run whose parts are its answer.
CREATE TABLE mesh_web_turns (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chat       TEXT    NOT NULL REFERENCES mesh_web_chats (chat),
    run        TEXT    NOT NULL UNIQUE,
    message_id TEXT,
    body       TEXT,
    created_ms BIGINT  NOT NULL
);

CREATE INDEX mesh_web_turns_chat ON mesh_web_turns (chat, seq);
-- A chat's delivered answers are read by conversation, in commit order.
CREATE INDEX mesh_web_outbox_history ON mesh_outbox_parts (conversation, seq);
