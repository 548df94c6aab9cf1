//! A chat's delivered messages as the AI SDK's `UIMessage`s (`GET /api/chat/{id}/messages`),
//! and the same transcript as the history a turn's agent reads.
//!
//! Each turn is the person's message, then the answer: one assistant message per run, named
//! by the run, holding every delivered part of it (blocks, Layer C's line) as a text part of
//! its own, as the stream showed them; then each follow-up that kept the run's promise, a
//! message of its own named by its delivery. Only `sent` parts are listed: what was delivered.

use serde::Serialize;

use super::agent::{ChatLine, ChatRole};
use super::protocol::MessageMetadata;
use crate::store::Transcript;

/// The longest line of history a turn's agent reads, in bytes (cut at a character boundary).
const MAX_HISTORY_LINE: usize = 8 << 10;

/// One `UIMessage`: `{ id, role, parts: [{ type: "text", text, state: "done" }], metadata? }`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(super) struct UiMessage {
    id: String,
    role: Role,
    parts: Vec<TextPart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<MessageMetadata>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
struct TextPart {
    #[serde(rename = "type")]
    kind: PartKind,
    text: String,
    state: PartState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum PartKind {
    Text,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum PartState {
    Done,
}

impl UiMessage {
    fn new(id: impl Into<String>, role: Role, texts: impl IntoIterator<Item = String>) -> Self {
        Self {
            id: id.into(),
            role,
            parts: texts
                .into_iter()
                .map(|text| TextPart {
                    kind: PartKind::Text,
                    text,
                    state: PartState::Done,
                })
                .collect(),
            metadata: None,
        }
    }
}

/// The transcript's messages, oldest first (see the [module docs](self)).
pub(super) fn ui_messages(transcript: &Transcript) -> Vec<UiMessage> {
    let by_run = transcript.deliveries_by_run();
    let mut messages = Vec::new();
    for turn in &transcript.turns {
        if let Some(body) = &turn.body {
            let id = turn
                .message_id
                .clone()
                .unwrap_or_else(|| format!("user-{}", turn.run));
            messages.push(UiMessage::new(id, Role::User, [body.clone()]));
        }
        let Some(deliveries) = by_run.get(turn.run.as_str()) else {
            continue;
        };
        let (follow_ups, answer): (Vec<_>, Vec<_>) = deliveries
            .iter()
            .partition(|(delivery, _)| transcript.follow_ups.contains(*delivery));
        if !answer.is_empty() {
            let texts = answer
                .iter()
                .flat_map(|(_, parts)| parts.iter().map(|p| (*p).to_owned()));
            let mut message = UiMessage::new(turn.run.clone(), Role::Assistant, texts);
            if transcript.open_promises.contains(&turn.run) {
                message.metadata = Some(MessageMetadata { follow_up: true });
            }
            messages.push(message);
        }
        for (delivery, parts) in follow_ups {
            let texts = parts.iter().map(|p| (*p).to_owned());
            messages.push(UiMessage::new(*delivery, Role::Assistant, texts));
        }
    }
    messages
}

/// The transcript as the history a turn's agent reads: the person's messages and what was
/// delivered, each line bounded.
pub(super) fn history(transcript: &Transcript) -> Vec<ChatLine> {
    ui_messages(transcript)
        .into_iter()
        .map(|message| {
            let role = match message.role {
                Role::User => ChatRole::User,
                Role::Assistant => ChatRole::Assistant,
            };
            let text = message
                .parts
                .into_iter()
                .map(|p| p.text)
                .collect::<Vec<_>>()
                .join("\n\n");
            ChatLine::new(role, bounded(text))
        })
        .collect()
}

fn bounded(mut text: String) -> String {
    if text.len() > MAX_HISTORY_LINE {
        let mut cut = MAX_HISTORY_LINE;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{DeliveredRow, TurnRow};

    fn turn(run: &str, message_id: Option<&str>, body: Option<&str>) -> TurnRow {
        TurnRow {
            run: run.to_owned(),
            message_id: message_id.map(str::to_owned),
            body: body.map(str::to_owned),
        }
    }

    fn delivered(delivery: &str, run: &str, body: &str) -> DeliveredRow {
        DeliveredRow {
            delivery: delivery.to_owned(),
            run: run.to_owned(),
            body: body.to_owned(),
        }
    }

    #[test]
    fn a_turn_lists_its_question_its_answer_and_its_kept_promise_apart() {
        let transcript = Transcript {
            turns: vec![
                turn("r1", Some("u1"), Some("Is it green?")),
                turn("r2", None, None),
            ],
            delivered: vec![
                delivered("d1", "r1", "One moment."),
                delivered("d2", "r1", "It is green."),
                delivered("d3", "r2", "Again: green."),
                delivered("d0", "r9", "not this chat's turn"),
            ],
            follow_ups: ["d2".to_owned()].into(),
            open_promises: ["r2".to_owned()].into(),
        };
        let json = serde_json::to_value(ui_messages(&transcript)).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Is it green?", "state": "done"}]},
                {"id": "r1", "role": "assistant", "parts": [{"type": "text", "text": "One moment.", "state": "done"}]},
                {"id": "d2", "role": "assistant", "parts": [{"type": "text", "text": "It is green.", "state": "done"}]},
                {"id": "r2", "role": "assistant", "parts": [{"type": "text", "text": "Again: green.", "state": "done"}],
                 "metadata": {"followUp": true}},
            ])
        );
        let lines = history(&transcript);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0].role(), ChatRole::User);
        assert_eq!(lines[2].text(), "It is green.");
    }
}
