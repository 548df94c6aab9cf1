//! Telegram's 400 "Bad Request: can't parse entities" never drops a reply: the part goes once
//! more as the plain text a person reads, and the ledger records that it did, through the
//! front door (a turn's delivery, `Bot::send_to`) and through the outbox's resend (a worker's).

mod store_support;

use mesh_egress::channel::TelegramChannel;
use mesh_egress::degrade::{Mode, Reply};
use mesh_egress::ledger::{Ledger, LedgerRecord, RenderRecord};
use mesh_egress::store::{PartState, Store};
use mesh_egress::testing::{FakeApi, FakeResponse};
use mesh_egress::{Attribution, Bot, Outbound, Surface, Turn};

use store_support::Backend;

const TOKEN: &str = "123456:plain-SECRET";
const CANT_PARSE: &str = "Bad Request: can't parse entities: Unexpected end tag at byte offset 9";

fn plain_rows(ledger: &Ledger) -> Vec<RenderRecord> {
    ledger
        .entries()
        .into_iter()
        .filter_map(|entry| match entry.into_record() {
            LedgerRecord::Render(record @ RenderRecord::SentAsPlainText { .. }) => Some(record),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_reply_goes_as_plain_text_once_and_the_ledger_says_so() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    api.script([FakeResponse::chat_refusal(Surface::Telegram, CANT_PARSE)]);
    let channel = TelegramChannel::new(TOKEN, "-1001234567890").base_url(api.base_url());
    let turn = Turn::new(Attribution::new("bot", "conv-tg", "run-1")).with_mode(Mode::Interactive);
    let reply = Reply::Answer(turn.message("*Done* with `v2` & more"));

    let delivery = Bot::new()
        .send_to(&turn, &channel, reply)
        .await
        .expect("delivered, not dropped");
    let [receipt] = delivery.receipts() else {
        panic!("one delivery: {:?}", delivery.receipts());
    };

    assert_eq!(api.attempts(), 2);
    assert_eq!(api.texts(), ["Done with v2 & more"]);
    assert!(receipt.parts()[0].is_plain_text_fallback());
    assert_eq!(
        plain_rows(turn.ledger()),
        [RenderRecord::SentAsPlainText {
            surface: Surface::Telegram,
            message: receipt.parts()[0].id().to_owned(),
            delivery: receipt.delivery_id().map(|id| id.to_string()),
            part: Some(0),
        }]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_is_not_about_formatting_is_not_retried_as_plain_text() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    api.script([FakeResponse::chat_refusal(
        Surface::Telegram,
        "Bad Request: chat not found",
    )]);
    let channel = TelegramChannel::new(TOKEN, "-1001234567890").base_url(api.base_url());
    let turn = Turn::new(Attribution::new("bot", "conv-tg", "run-2")).with_mode(Mode::Interactive);
    let reply = Reply::Answer(turn.message("*Done*"));
    assert!(Bot::new().send_to(&turn, &channel, reply).await.is_err());
    assert_eq!(api.attempts(), 1);
    assert!(plain_rows(turn.ledger()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_part_goes_as_plain_text_and_the_outbox_ledger_says_so() {
    let place = Backend::Sqlite.place();
    let store = Store::open(&place.url).await.unwrap();
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    api.script([FakeResponse::chat_refusal(Surface::Telegram, CANT_PARSE)]);
    let ledger = Ledger::in_memory();
    let channel = store
        .channel(TelegramChannel::new(TOKEN, "-1001234567890").base_url(api.base_url()))
        .with_ledger(ledger.clone());
    // Committed by a process that died before sending; the next holder resends it.
    let message = Turn::new(Attribution::new("bot", "conv-tg", "run-3")).message("**late** <i>");
    let rendered = Outbound::new(message)
        .render(mesh_egress::channel::Channel::renderer(&channel))
        .unwrap();
    drop(rendered.commit(&channel).await.unwrap().into_parts());
    let lease = store
        .acquire("conv-tg", "w1", std::time::Duration::from_secs(30))
        .await
        .unwrap();

    let report = store.resend(&channel, &lease).await.unwrap();

    assert_eq!(report.sent, 1);
    assert_eq!(api.texts(), ["late <i>"]);
    let parts = store.parts("conv-tg").await.unwrap();
    assert_eq!(parts[0].state, PartState::Sent);
    let rows = plain_rows(&ledger);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(matches!(
        &rows[0],
        RenderRecord::SentAsPlainText { surface: Surface::Telegram, part: Some(0), delivery: Some(d), .. }
            if *d == parts[0].delivery
    ));
}
