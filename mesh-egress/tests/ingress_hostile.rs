//! Inbound events are untrusted input: an oversized event, ten thousand mentions, deep
//! nesting, invalid UTF-8 and absurd numbers each get a typed [`InboundError`], never a panic,
//! and every check is a bounded scan (the deep documents are refused before serde sees them).
#![cfg(feature = "ingress")]

use mesh_egress::Surface;
use mesh_egress::ingress::{
    Identity, InboundError, Ingress, MAX_DEPTH, MAX_EVENT_BYTES, MAX_MENTIONS,
};
use proptest::prelude::*;
use serde_json::json;

const SURFACES: [Surface; 3] = [Surface::Slack, Surface::Discord, Surface::Telegram];

fn ingress() -> Ingress {
    Ingress::builder(
        Identity::new("Atlas")
            .slack_user("U0BOTATLAS")
            .discord_user("1100000000000000001")
            .telegram("atlas_support_bot", 7_000_000_001),
    )
    .build()
    .expect("classifier")
}

fn slack(text: &str) -> serde_json::Value {
    json!({"type": "message", "channel": "C1", "channel_type": "channel", "user": "U1",
           "text": text, "ts": "1741078800.000100"})
}

fn discord(content: &str) -> serde_json::Value {
    json!({"op": 0, "t": "MESSAGE_CREATE", "s": 1, "d": {
        "id": "1346453000000000001", "channel_id": "1200000000000000001", "guild_id": "9",
        "author": {"id": "1300000000000000001", "username": "alice"}, "content": content,
        "type": 0, "mention_everyone": false}})
}

fn telegram(text: &str, entities: serde_json::Value) -> serde_json::Value {
    json!({"update_id": 1, "message": {"message_id": 5, "date": 1_741_078_800,
        "from": {"id": 1001, "is_bot": false, "first_name": "Alice"},
        "chat": {"id": -1_001_234_567_890_i64, "type": "supergroup", "title": "Ops"},
        "text": text, "entities": entities}})
}

fn parse(surface: Surface, event: &[u8]) -> Result<(), InboundError> {
    ingress().parse(surface, event).map(drop)
}

#[test]
fn a_one_megabyte_event_is_refused_before_it_is_read() {
    let big = "x".repeat(1024 * 1024);
    let events = [slack(&big), discord(&big), telegram(&big, json!([]))];
    for (surface, event) in SURFACES.into_iter().zip(events) {
        let bytes = serde_json::to_vec(&event).expect("json");
        assert!(bytes.len() > MAX_EVENT_BYTES);
        assert_eq!(
            parse(surface, &bytes),
            Err(InboundError::TooLarge {
                limit: MAX_EVENT_BYTES
            }),
            "{surface}"
        );
    }
}

#[test]
fn ten_thousand_mentions_are_a_typed_error_on_every_surface() {
    let slack_text = "<@U1> ".repeat(10_000);
    let discord_text = "<@1> ".repeat(10_000);
    // Ten thousand Telegram entities do not fit in an event (about 45 bytes each): refused
    // by size. Five thousand do, and are refused by count.
    let entities = |n: usize| -> serde_json::Value {
        (0..n)
            .map(|i| json!({"type": "mention", "offset": i * 3, "length": 2}))
            .collect()
    };
    let huge = telegram(&"@a ".repeat(10_000), entities(10_000));
    let bytes = serde_json::to_vec(&huge).expect("json");
    assert_eq!(
        parse(Surface::Telegram, &bytes),
        Err(InboundError::TooLarge {
            limit: MAX_EVENT_BYTES
        })
    );
    let events = [
        slack(&slack_text),
        discord(&discord_text),
        telegram(&"@a ".repeat(5_000), entities(5_000)),
    ];
    for (surface, event) in SURFACES.into_iter().zip(events) {
        let bytes = serde_json::to_vec(&event).expect("json");
        assert!(bytes.len() <= MAX_EVENT_BYTES, "{surface}: {}", bytes.len());
        assert_eq!(
            parse(surface, &bytes),
            Err(InboundError::TooManyMentions {
                limit: MAX_MENTIONS
            }),
            "{surface}"
        );
    }
    // At the bound, a message still reads.
    let at_limit = "<@U1> ".repeat(MAX_MENTIONS);
    let bytes = serde_json::to_vec(&slack(&at_limit)).expect("json");
    assert!(parse(Surface::Slack, &bytes).is_ok());
}

#[test]
fn deep_nesting_is_refused_without_recursion() {
    // Far past serde_json's own limit of 128, and past anything a stack would survive if it
    // were parsed recursively.
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    let deep = &deep[..MAX_EVENT_BYTES.min(deep.len())];
    for surface in SURFACES {
        assert_eq!(
            parse(surface, deep.as_bytes()),
            Err(InboundError::TooDeep { limit: MAX_DEPTH }),
            "{surface}"
        );
    }
    // Nesting inside a real event, one level past the bound: a reply of a reply of a reply…
    let mut reply = json!({"message_id": 1, "date": 1, "chat": {"id": 1, "type": "private"}});
    for i in 0..MAX_DEPTH {
        reply = json!({"message_id": i + 2, "date": 1, "chat": {"id": 1, "type": "private"},
                       "text": "x", "reply_to_message": reply});
    }
    let event = serde_json::to_vec(&json!({"update_id": 1, "message": reply})).expect("json");
    assert_eq!(
        parse(Surface::Telegram, &event),
        Err(InboundError::TooDeep { limit: MAX_DEPTH })
    );
}

#[test]
fn invalid_utf8_is_a_typed_error() {
    for surface in SURFACES {
        let mut event = serde_json::to_vec(&slack("hello")).expect("json");
        let at = event
            .windows(5)
            .position(|w| w == b"hello")
            .expect("the text");
        event[at] = 0xff;
        assert_eq!(parse(surface, &event), Err(InboundError::InvalidUtf8));
        assert_eq!(
            parse(surface, b"\xc0\xaf{}"),
            Err(InboundError::InvalidUtf8),
            "an overlong encoding"
        );
    }
    // A lone surrogate escape is valid UTF-8 but not a string: serde refuses it, typed.
    let lone = br#"{"type":"message","channel":"C1","user":"U1","text":"\ud800","ts":"1.0"}"#;
    assert!(matches!(
        parse(Surface::Slack, lone),
        Err(InboundError::Malformed { .. })
    ));
}

#[test]
fn absurd_numbers_and_ids_are_typed_errors() {
    let cases: [(Surface, serde_json::Value); 7] = [
        (
            Surface::Slack,
            json!({"type": "message", "channel": "C1", "user": "U1", "text": "x",
                   "ts": "99999999999999999999999.000001"}),
        ),
        (
            Surface::Slack,
            json!({"type": "message", "channel": "C 1", "user": "U1", "text": "x", "ts": "1.0"}),
        ),
        (
            Surface::Discord,
            json!({"id": "99999999999999999999999", "channel_id": "1", "author": {"id": "2"},
                   "content": "x"}),
        ),
        (
            Surface::Discord,
            json!({"op": 99999, "t": "MESSAGE_CREATE", "d": {}}),
        ),
        (
            Surface::Telegram,
            json!({"update_id": 1, "message": {"message_id": 1, "date": 1e300,
                   "chat": {"id": 1, "type": "private"}, "text": "x",
                   "from": {"id": 1, "is_bot": false}}}),
        ),
        (
            Surface::Telegram,
            json!({"update_id": 1, "message": {"message_id": 1, "date": -5,
                   "chat": {"id": 1, "type": "private"}, "text": "x",
                   "from": {"id": 1, "is_bot": false}}}),
        ),
        (
            Surface::Telegram,
            telegram(
                "hi",
                json!([{"type": "mention", "offset": 18_446_744_073_709_551_615u64, "length": 3}]),
            ),
        ),
    ];
    for (surface, event) in cases {
        let bytes = serde_json::to_vec(&event).expect("json");
        let error = parse(surface, &bytes).expect_err("refused");
        assert!(
            matches!(
                error,
                InboundError::Malformed { .. }
                    | InboundError::NotAMessage { .. }
                    | InboundError::Address(_)
            ),
            "{surface}: {error:?}"
        );
    }
}

#[test]
fn a_parse_error_never_quotes_the_event() {
    let event = telegram(
        "hi",
        json!([{"type": "mention", "offset": "my secret plan", "length": 3}]),
    );
    let bytes = serde_json::to_vec(&event).expect("json");
    let error = parse(Surface::Telegram, &bytes).expect_err("refused");
    assert!(matches!(error, InboundError::Malformed { .. }), "{error:?}");
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains("line 1 column"), "{shown}");
}

#[test]
fn events_that_are_not_messages_say_so() {
    let cases = [
        (
            Surface::Slack,
            json!({"token": "t", "challenge": "c", "type": "url_verification"}),
        ),
        (
            Surface::Slack,
            json!({"type": "event_callback", "event_id": "Ev1",
                   "event": {"type": "reaction_added", "user": "U1"}}),
        ),
        (
            Surface::Slack,
            json!({"type": "message", "subtype": "channel_join", "channel": "C1",
                   "user": "U1", "text": "<@U1> has joined", "ts": "1.0"}),
        ),
        (Surface::Discord, json!({"op": 11})),
        (
            Surface::Discord,
            json!({"op": 0, "t": "GUILD_CREATE", "d": {}}),
        ),
        (
            Surface::Discord,
            json!({"id": "1346453000000000001", "channel_id": "1", "author": {"id": "2"},
                   "content": "", "type": 7}),
        ),
        (
            Surface::Telegram,
            json!({"update_id": 3, "callback_query": {"id": "1"}}),
        ),
        (
            Surface::Telegram,
            json!({"update_id": 4, "message": {"message_id": 1, "date": 1,
                   "chat": {"id": -1, "type": "group"}, "from": {"id": 1, "is_bot": false},
                   "new_chat_members": [{"id": 2, "is_bot": false}]}}),
        ),
    ];
    for (surface, event) in cases {
        let bytes = serde_json::to_vec(&event).expect("json");
        assert!(
            matches!(
                parse(surface, &bytes),
                Err(InboundError::NotAMessage { .. })
            ),
            "{surface}: {event}"
        );
    }
    assert_eq!(
        parse(Surface::Web, b"{}"),
        Err(InboundError::Unsupported(Surface::Web))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let ingress = ingress();
        for surface in SURFACES {
            if let Ok(inbound) = ingress.parse(surface, &bytes) {
                // Decided without a judge: resolves on the first poll.
                let rt = tokio::runtime::Builder::new_current_thread().build().expect("rt");
                rt.block_on(ingress.decide(&inbound));
            }
        }
    }

    #[test]
    fn mutated_real_events_never_panic(cut in 0usize..400, byte in any::<u8>(), text in ".{0,64}") {
        let ingress = ingress();
        let events = [
            serde_json::to_vec(&slack(&format!("<@U0BOTATLAS> {text}"))).expect("json"),
            serde_json::to_vec(&discord(&format!("<@1100000000000000001> {text}"))).expect("json"),
            serde_json::to_vec(&telegram(&format!("@atlas_support_bot {text}"),
                json!([{"type": "mention", "offset": 0, "length": 18}]))).expect("json"),
        ];
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("rt");
        for (surface, mut event) in SURFACES.into_iter().zip(events) {
            if let Ok(inbound) = ingress.parse(surface, &event) {
                rt.block_on(ingress.decide(&inbound));
            }
            let at = cut % event.len();
            event[at] = byte;
            if let Ok(inbound) = ingress.parse(surface, &event) {
                rt.block_on(ingress.decide(&inbound));
            }
            // A strict prefix of a JSON object is never a document.
            event.truncate(at);
            prop_assert!(ingress.parse(surface, &event).is_err());
        }
    }
}
