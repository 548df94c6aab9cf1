//! What `Inbound` reads from each surface's documented event shapes, and the stateful rules
//! at their edges: the thread window in messages and in (event) time, the bot-to-bot cap, our
//! own messages opening a thread, duplicates across event types.
#![cfg(feature = "ingress")]

use mesh_egress::address::{SlackAddress, TelegramAddress};
use mesh_egress::engagement::{Decision, Reason};
use mesh_egress::ingress::{
    ChatKind, Identity, InboundId, Ingress, IngressBuilder, Mention, ThreadWindow,
};
use mesh_egress::{Address, Surface};
use serde_json::{Value, json};
use std::time::Duration;

const US: &str = "U0BOTATLAS";

fn identity() -> Identity {
    Identity::new("Atlas")
        .slack_user(US)
        .slack_bot("B0ATLAS")
        .discord_user("1100000000000000001")
        .telegram("atlas_support_bot", 7_000_000_001)
}

fn builder() -> IngressBuilder {
    Ingress::builder(identity())
}

fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("json")
}

/// A Slack message in `channel` at `second` past 2025-03-04 09:00 UTC, optionally in the
/// thread rooted at `thread` (started by `parent`).
fn slack(user: &str, text: &str, second: u64, thread: Option<(&str, &str)>) -> Vec<u8> {
    let mut event = json!({"type": "message", "channel": "C0OPS", "channel_type": "channel",
        "user": user, "text": text, "ts": format!("{}.000100", 1_741_078_800 + second)});
    if let Some((root, parent)) = thread {
        event["thread_ts"] = json!(root);
        event["parent_user_id"] = json!(parent);
    }
    bytes(&event)
}

async fn decide(ingress: &Ingress, surface: Surface, event: &[u8]) -> (Decision, Reason) {
    let inbound = ingress.parse(surface, event).expect("a message");
    let decided = ingress.decide(&inbound).await;
    (decided.decision(), decided.reason())
}

#[test]
fn a_slack_thread_reply_is_addressed_to_its_thread_and_replies_to_its_root() {
    let event = json!({"token": "XXYYZZ", "team_id": "T1", "api_app_id": "A1",
        "type": "event_callback", "event_id": "Ev0001", "event_time": 1_741_078_900,
        "event": {"type": "message", "channel": "C0OPS", "channel_type": "channel",
            "user": "U0CAROL", "text": "and the Hamburg one?", "ts": "1741078900.000200",
            "thread_ts": "1741078800.000100", "parent_user_id": US,
            "client_msg_id": "6d0c8a4e-1f2b-4c3d-9e8f-000000000001"}});
    let inbound = Ingress::builder(identity())
        .build()
        .expect("classifier")
        .parse(Surface::Slack, &bytes(&event))
        .expect("a message");
    assert_eq!(
        inbound.address(),
        &Address::from(SlackAddress::new("C0OPS").in_thread("1741078800.000100"))
    );
    assert_eq!(inbound.thread(), Some("1741078800.000100"));
    let reply = inbound.reply_to().expect("a thread reply answers its root");
    assert_eq!(reply.message(), "1741078800.000100");
    assert!(reply.is_us(), "the thread was started by our message");
    assert_eq!(inbound.chat(), ChatKind::Group);
    assert_eq!(
        inbound.deliveries(),
        [
            InboundId::Event("Ev0001".into()),
            InboundId::Message("C0OPS/1741078900.000200".into()),
            InboundId::Client("6d0c8a4e-1f2b-4c3d-9e8f-000000000001".into()),
        ]
    );
    assert_eq!(inbound.at_ms(), 1_741_078_900_000);
    assert!(!inbound.author().is_bot() && !inbound.author().is_us());
}

#[test]
fn a_telegram_topic_message_carries_the_topic_in_its_address_and_is_not_a_reply() {
    let root = json!({"message_id": 77, "date": 1_741_078_000, "message_thread_id": 77,
        "chat": {"id": -1_009_876_543_210_i64, "type": "supergroup", "is_forum": true},
        "from": {"id": 1001, "is_bot": false, "first_name": "Alice"},
        "forum_topic_created": {"name": "Delays", "icon_color": 7_322_096},
        "is_topic_message": true});
    let text = "/status@atlas_support_bot please";
    let event = json!({"update_id": 9, "message": {"message_id": 80, "date": 1_741_078_800,
        "message_thread_id": 77, "is_topic_message": true, "reply_to_message": root,
        "chat": {"id": -1_009_876_543_210_i64, "type": "supergroup", "is_forum": true},
        "from": {"id": 1002, "is_bot": false, "first_name": "Bob", "username": "bob_nw"},
        "text": text, "entities": [{"type": "bot_command", "offset": 0, "length": 25}]}});
    let inbound = Ingress::builder(identity())
        .build()
        .expect("classifier")
        .parse(Surface::Telegram, &bytes(&event))
        .expect("a message");
    assert_eq!(
        inbound.address(),
        &Address::from(TelegramAddress::new("-1009876543210").in_topic(77))
    );
    assert_eq!(
        inbound.reply_to(),
        None,
        "the topic's creation message is no reply"
    );
    assert_eq!(
        inbound.thread(),
        None,
        "a topic is a conversation, not a thread"
    );
    let command = inbound.command().expect("a leading command");
    assert_eq!(
        (command.name(), command.bot()),
        ("status", Some("atlas_support_bot"))
    );
    assert_eq!(
        inbound.deliveries(),
        [
            InboundId::Event("9".into()),
            InboundId::Message("-1009876543210/80".into()),
        ]
    );
}

#[test]
fn discord_mentions_are_what_the_structured_fields_confirm() {
    let event = json!({"op": 0, "t": "MESSAGE_CREATE", "s": 4, "d": {
        "id": "1346453000000000001", "channel_id": "1200000000000000001", "guild_id": "9",
        "author": {"id": "1300000000000000001", "username": "alice"}, "type": 0,
        "content": "<@!1100000000000000001> `<@1300000000000000002>` @everyone",
        "mentions": [{"id": "1100000000000000001", "username": "atlas", "bot": true}],
        "mention_roles": [], "mention_everyone": false}});
    let inbound = Ingress::builder(identity())
        .build()
        .expect("classifier")
        .parse(Surface::Discord, &bytes(&event))
        .expect("a message");
    assert_eq!(
        inbound.mentions(),
        [Mention::User("1100000000000000001".into())]
    );
    assert!(inbound.mentions_us() && !inbound.mentions_others());
    let dm = json!({"id": "1346453000000000002", "channel_id": "1200000000000000099",
        "author": {"id": "1300000000000000001", "username": "alice"}, "content": "hi"});
    let inbound = Ingress::builder(identity())
        .build()
        .expect("classifier")
        .parse(Surface::Discord, &bytes(&dm))
        .expect("a message");
    assert_eq!(inbound.chat(), ChatKind::Direct, "no guild_id: a DM");
}

#[tokio::test]
async fn a_thread_stays_ours_for_the_window_in_messages_and_in_event_time() {
    let ingress = builder()
        .thread_window(ThreadWindow::new(2, Duration::from_secs(600)))
        .build()
        .expect("classifier");
    let root = "1741078800.000100";
    let thread = Some((root, "U0CAROL"));
    let engage = (
        Decision::Engage {
            complexity: mesh_egress::engagement::Complexity::Quick,
        },
        Reason::Thread,
    );
    let mention = slack("U0CAROL", &format!("<@{US}> status?"), 0, None);
    assert_eq!(
        decide(&ingress, Surface::Slack, &mention).await.1,
        Reason::Mention
    );
    // Exactly at the age bound (600 s after the mention we answered) it is still ours.
    let at_bound = slack("U0CAROL", "and Hamburg", 600, thread);
    assert_eq!(decide(&ingress, Surface::Slack, &at_bound).await, engage);
    // 600.001 s after that answer: past the window.
    let mut late = serde_json::from_slice::<Value>(&slack("U0CAROL", "and Leeds", 1200, thread))
        .expect("json");
    late["ts"] = json!(format!("{}.001100", 1_741_078_800 + 1200));
    assert_eq!(
        decide(&ingress, Surface::Slack, &bytes(&late)).await,
        (Decision::Observe, Reason::Ambient)
    );

    // In messages: two from others after our answer are allowed, the third is not.
    let ingress = builder()
        .thread_window(ThreadWindow::new(2, Duration::from_secs(3600)))
        .build()
        .expect("classifier");
    decide(&ingress, Surface::Slack, &mention).await;
    for (i, text) in ["<@U0DAVE> check this", "<@U0DAVE> and this"]
        .iter()
        .enumerate()
    {
        let other = slack("U0CAROL", text, 10 + i as u64, thread);
        assert_eq!(
            decide(&ingress, Surface::Slack, &other).await.1,
            Reason::OtherMention
        );
    }
    let third = slack("U0CAROL", "ok so what now", 20, thread);
    assert_eq!(
        decide(&ingress, Surface::Slack, &third).await.0,
        Decision::Observe,
        "two messages since our answer: the window is spent"
    );
}

#[tokio::test]
async fn a_thread_our_message_started_is_ours_and_a_reply_to_it_is_a_reply() {
    let ingress = builder().build().expect("classifier");
    let ours = bytes(
        &json!({"type": "message", "channel": "C0OPS", "channel_type": "channel",
        "user": US, "bot_id": "B0ATLAS", "text": "Daily report: 3 delays.",
        "ts": "1741078800.000100"}),
    );
    assert_eq!(
        decide(&ingress, Surface::Slack, &ours).await,
        (Decision::Ignore, Reason::OwnMessage)
    );
    let reply = slack("U0ERIN", "which ones?", 60, Some(("1741078800.000100", US)));
    assert_eq!(
        decide(&ingress, Surface::Slack, &reply).await.1,
        Reason::ReplyToUs
    );
}

#[tokio::test]
async fn an_allowed_bot_gets_the_capped_number_of_turns_until_a_person_writes() {
    let ingress = builder()
        .allow_bot("U0RELEASEBOT")
        .bot_turn_cap(2)
        .build()
        .expect("classifier");
    let bot = |second: u64| {
        bytes(
            &json!({"type": "message", "channel": "C0ENG", "channel_type": "channel",
            "user": "U0RELEASEBOT", "bot_id": "B0RELEASE", "text": format!("<@{US}> ping {second}"),
            "ts": format!("{}.000100", 1_741_078_800 + second)}),
        )
    };
    let other_bot = bytes(&json!({"type": "message", "subtype": "bot_message",
        "channel": "C0ENG", "bot_id": "B0OTHER", "username": "other",
        "text": format!("<@{US}> ping"), "ts": "1741078801.000100"}));
    assert_eq!(
        decide(&ingress, Surface::Slack, &other_bot).await,
        (Decision::Ignore, Reason::Bot),
        "not on the allow-list"
    );
    assert_eq!(
        decide(&ingress, Surface::Slack, &bot(2)).await.1,
        Reason::Mention
    );
    assert_eq!(
        decide(&ingress, Surface::Slack, &bot(3)).await.1,
        Reason::Mention
    );
    assert_eq!(
        decide(&ingress, Surface::Slack, &bot(4)).await,
        (Decision::Ignore, Reason::Bot),
        "the cap of two bot-to-bot turns"
    );
    let person = bytes(
        &json!({"type": "message", "channel": "C0ENG", "channel_type": "channel",
        "user": "U0ERIN", "text": "carry on", "ts": "1741078805.000100"}),
    );
    decide(&ingress, Surface::Slack, &person).await;
    assert_eq!(
        decide(&ingress, Surface::Slack, &bot(6)).await.1,
        Reason::Mention,
        "a person writing resets the run"
    );
}

#[tokio::test]
async fn one_mention_delivered_as_app_mention_and_as_message_is_answered_once() {
    let ingress = builder().build().expect("classifier");
    let event = |kind: &str, id: &str| {
        bytes(&json!({"type": "event_callback", "event_id": id, "event": {
            "type": kind, "channel": "C0OPS", "user": "U0CAROL", "text": format!("<@{US}> hi"),
            "ts": "1741078800.000100", "client_msg_id": "c1"}}))
    };
    // Either order: the first delivery engages, the second is a duplicate.
    assert_eq!(
        decide(&ingress, Surface::Slack, &event("message", "Ev1"))
            .await
            .1,
        Reason::Mention
    );
    assert_eq!(
        decide(&ingress, Surface::Slack, &event("app_mention", "Ev2"))
            .await
            .1,
        Reason::Duplicate
    );
    let ingress = builder().build().expect("classifier");
    assert_eq!(
        decide(&ingress, Surface::Slack, &event("app_mention", "Ev2"))
            .await
            .1,
        Reason::Mention
    );
    assert_eq!(
        decide(&ingress, Surface::Slack, &event("message", "Ev1"))
            .await
            .1,
        Reason::Duplicate
    );
}
