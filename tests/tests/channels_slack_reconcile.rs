//! Slack reconciliation over loopback HTTP: before trying again after a try whose outcome is
//! unknown, the connector looks the part up by its metadata (`conversations.history`, or
//! `conversations.replies` in a thread); found, it is not posted again; not found, it is;
//! when the lookup cannot tell, it is not posted blindly.

use std::time::{Duration, SystemTime};

use mesh_egress::Surface;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::{Channel, Deliver, DeliveryError, PartLookup, PlainText, SlackChannel};
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{AgentMessage, Attribution, Outbound};
use serde_json::json;

const TOKEN: &str = "xoxb-reconcile";

fn slack(api: &FakeApi, tries: u32) -> SlackChannel<PlainText> {
    SlackChannel::new(TOKEN, "C1")
        .with_renderer(PlainText::new().with_limit(10))
        .base_url(api.base_url())
        .policy(
            SendPolicy::new()
                .max_tries(tries)
                .backoff(Duration::from_millis(1))
                .max_wait(Duration::from_millis(200))
                .request_timeout(Duration::from_secs(5)),
        )
}

fn message(text: &str) -> AgentMessage {
    AgentMessage::new(text, Attribution::new("a", "c", "r"))
}

#[tokio::test]
async fn a_lost_response_is_found_by_its_metadata_and_not_posted_again() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    api.script([ChatStep::lost_response()]);

    let receipt = slack(&api, 3)
        .deliver(message("alpha one. bravo two."))
        .await
        .unwrap();

    assert_eq!(api.texts(), ["alpha one.", "bravo two."]);
    assert_eq!(api.attempts(), 2, "the lost part was not posted again");
    assert_eq!(api.lookups(), 1);
    let ids: Vec<String> = api.received().into_iter().map(|m| m.id).collect();
    assert_eq!(
        receipt.ids(),
        ids,
        "the receipt carries the found message's ts"
    );
}

#[tokio::test]
async fn in_a_thread_the_lookup_reads_the_threads_replies() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    // The fake's channel history leaves thread replies out, as Slack's does: reading it instead
    // of the thread's replies would miss the part and post it again.
    api.script([ChatStep::lost_response()]);
    let threaded = slack(&api, 3).in_thread("1600000000.000100");

    threaded.deliver(message("only once")).await.unwrap();

    assert_eq!(api.texts(), ["only once"]);
    assert_eq!(api.received()[0].body["thread_ts"], "1600000000.000100");
    assert_eq!((api.attempts(), api.lookups()), (1, 1));
}

#[tokio::test]
async fn a_failure_that_did_not_post_is_looked_up_then_sent_again() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    api.script([FakeResponse::chat_server_error(Surface::Slack, 503)]);

    slack(&api, 3).deliver(message("hello")).await.unwrap();

    assert_eq!(api.texts(), ["hello"]);
    assert_eq!((api.attempts(), api.lookups()), (2, 1));
}

#[tokio::test]
async fn without_the_history_scope_a_part_of_unknown_outcome_is_not_posted_blindly() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    api.deny_history();
    api.script([ChatStep::lost_response()]);

    let error = slack(&api, 3).deliver(message("hello")).await.unwrap_err();

    let DeliveryError::Send { source, .. } = &error else {
        panic!("expected a send failure: {error:?}");
    };
    assert!(source.retryable(), "later may work; the caller decides");
    assert_eq!(api.texts(), ["hello"], "posted once, not twice");
    assert_eq!((api.attempts(), api.lookups()), (1, 1));
}

#[tokio::test]
async fn a_full_page_without_the_part_cannot_prove_it_absent() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let page = json!({ "ok": true, "has_more": true, "messages": [
        { "type": "message", "ts": "1.1", "text": "someone else" },
    ]});
    api.script_lookups([FakeResponse::raw(200, page.to_string())]);
    api.script([FakeResponse::chat_server_error(Surface::Slack, 500)]);

    let error = slack(&api, 3).deliver(message("hello")).await;

    assert!(error.is_err());
    assert!(api.texts().is_empty());
    assert_eq!((api.attempts(), api.lookups()), (1, 1));
}

#[tokio::test]
async fn look_up_reads_only_from_a_minute_before_the_first_try() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api, 1);
    let committed = Outbound::new(message("hello"))
        .render(channel.renderer())
        .unwrap()
        .commit(&mesh_egress::Ownership::held())
        .await
        .unwrap();
    let part = committed.into_parts().next().unwrap();
    assert_eq!(
        channel.look_up(&part, SystemTime::now()).await,
        PartLookup::NotFound
    );
    api.script([ChatStep::lost_response()]);
    let lost = channel.send(part).await.unwrap_err();
    let part = lost.into_part().expect("the part comes back");

    let now = SystemTime::now();
    let ts = api.received()[0].id.clone();
    assert_eq!(
        channel.look_up(&part, now).await,
        PartLookup::Found(mesh_egress::channel::PartReceipt::new(ts))
    );
    // Asked about a first try an hour later, the lookup's window starts after the message.
    let later = now + Duration::from_secs(3600);
    assert_eq!(channel.look_up(&part, later).await, PartLookup::NotFound);
}
