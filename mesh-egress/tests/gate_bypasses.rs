//! Disguised leaks: each is text a person reads as plain failure text or reasoning, written so
//! that a byte-level matcher misses it (issue 11, "Gate bypasses"). The gate reads the
//! normalised projection, so each is caught, and sanitising cuts the source bytes.
#![cfg(feature = "gate")]

use mesh_egress::gate::{GateVerdict, QualityGate};
use mesh_egress::verdict::Rule;
use mesh_egress::{AgentMessage, Attribution, Turn};

const USER: &str = "Can you check on shipment NW-4471?";

/// The gate as `turn --gate on` builds it (no judge: high findings fail closed).
fn gate() -> QualityGate {
    QualityGate::builder().build().expect("gate")
}

async fn verdict_on(candidate: &str) -> (GateVerdict, Option<String>, Vec<Rule>) {
    let turn = Turn::new(Attribution::new("atlas", "c1", "r1"));
    let message = AgentMessage::new(candidate, turn.attribution().clone());
    let e = gate().evaluate(&turn, USER, message).await;
    let rules = e.findings().iter().map(|f| f.rule()).collect();
    (
        e.verdict(),
        e.message().map(|m| m.body().as_str().to_owned()),
        rules,
    )
}

async fn assert_blocked(candidate: &str) {
    let (verdict, sent, rules) = verdict_on(candidate).await;
    assert!(
        matches!(verdict, GateVerdict::Blocked { .. }),
        "{candidate:?} was delivered: {verdict:?} {sent:?} {rules:?}"
    );
    assert!(sent.is_none());
    assert!(rules.contains(&Rule::LlmRequestFailed), "{rules:?}");
}

#[tokio::test]
async fn an_html_entity_inside_a_word_does_not_hide_llm_request_failed() {
    assert_blocked("LLM request f&#97;iled: upstream 503").await;
    assert_blocked("LLM request f&#x61;iled").await;
}

#[tokio::test]
async fn full_width_letters_do_not_hide_llm_request_failed() {
    assert_blocked("ＬＬＭ ｒｅｑｕｅｓｔ ｆａｉｌｅｄ").await;
}

#[tokio::test]
async fn emphasis_inside_a_word_does_not_hide_llm_request_failed() {
    assert_blocked("LLM re**quest** failed").await;
    assert_blocked("LLM _request_ ~~failed~~").await;
}

#[tokio::test]
async fn a_line_break_between_words_does_not_hide_llm_request_failed() {
    assert_blocked("LLM request\nfailed").await;
    // Inside a longer reply too, where the whole-reply checks do not run.
    let long = format!(
        "{}LLM request\nfailed while loading the manifest.",
        "The consignment cleared customs on Tuesday and is now with the haulier. ".repeat(6)
    );
    assert_blocked(&long).await;
}

#[tokio::test]
async fn a_double_space_between_words_does_not_hide_llm_request_failed() {
    assert_blocked("LLM  request failed").await;
    assert_blocked("LLM request \t failed").await;
}

#[tokio::test]
async fn zero_width_characters_and_homoglyphs_do_not_hide_llm_request_failed() {
    assert_blocked("LLM req\u{200B}uest fa\u{2060}iled").await;
    // Cyrillic е (U+0435) for both e's.
    assert_blocked("LLM r\u{435}qu\u{435}st failed").await;
}

#[tokio::test]
async fn an_entity_encoded_think_block_is_stripped_like_a_think_block() {
    let candidate =
        "&lt;think&gt;The user is annoyed; keep it short.&lt;/think&gt;Your parcel arrives Friday.";
    let (verdict, sent, rules) = verdict_on(candidate).await;
    assert!(rules.contains(&Rule::ReasoningBlock), "{rules:?}");
    assert!(
        matches!(verdict, GateVerdict::Sanitised { .. }),
        "{verdict:?}"
    );
    assert_eq!(sent.as_deref(), Some("Your parcel arrives Friday."));
}

#[tokio::test]
async fn a_canary_written_with_homoglyphs_or_full_width_digits_is_blocked() {
    let canary = "mesh-canary-3f9a1c7e";
    let gate = QualityGate::builder().canary(canary).build().expect("gate");
    for disguised in [
        // Cyrillic а (U+0430) and с (U+0441).
        "mesh-c\u{430}n\u{430}ry-3f9a1\u{441}7e",
        "mesh-canary-３f９a１c７e",
        "MESH-CANARY-3F9A1C7E",
        "mesh-canary-3f9\u{200B}a1c7e",
    ] {
        let turn = Turn::new(Attribution::new("atlas", "c1", "r1"));
        let reply = format!("Sure: {disguised}");
        let message = AgentMessage::new(reply.as_str(), turn.attribution().clone());
        let e = gate.evaluate(&turn, USER, message).await;
        assert_eq!(
            e.verdict(),
            GateVerdict::Blocked { retryable: false },
            "{disguised}"
        );
        assert!(e.findings().iter().any(|f| f.rule() == Rule::Canary));
    }
}

#[tokio::test]
async fn a_per_request_canary_written_with_homoglyphs_is_blocked() {
    let gate = gate();
    let canaries = ["c4n4ry-7f1e"];
    let turn = Turn::new(Attribution::new("atlas", "c1", "r1"));
    // Cyrillic у for y, full-width 7.
    let message = AgentMessage::new("token c4n4r\u{443}-７f1e", turn.attribution().clone());
    let input = mesh_egress::gate::GateInput::new(USER).with_canaries(&canaries);
    let e = gate.evaluate(&turn, input, message).await;
    assert_eq!(e.verdict(), GateVerdict::Blocked { retryable: false });
}

#[tokio::test]
async fn a_disguised_leak_is_cut_at_its_source_bytes_when_the_rest_is_sanitised() {
    // A reasoning block written with entities inside a reply with Markdown around it: the cut
    // lands on the source bytes, and the Markdown outside it is kept as written.
    let candidate =
        "**Update:** &lt;thinking&gt;stall them&lt;/thinking&gt;\n\nYour *parcel* arrives Friday.";
    let (verdict, sent, _) = verdict_on(candidate).await;
    assert!(
        matches!(verdict, GateVerdict::Sanitised { .. }),
        "{verdict:?}"
    );
    assert_eq!(
        sent.as_deref(),
        Some("**Update:** \n\nYour *parcel* arrives Friday.")
    );
}

#[tokio::test]
async fn benign_markdown_and_entities_still_arrive_intact() {
    for candidate in [
        "Your **parcel** arrives *Friday*; the &amp; in the address is fine.",
        "Use `request_id` from the receipt, and type&nbsp;NW-4471 in the search box.",
        "Ｈｅｌｌｏ! Your order is on its way.\n\nIt left  the depot at 10:00.",
        "Café Noir’s shipment cleared customs.",
    ] {
        let (verdict, sent, rules) = verdict_on(candidate).await;
        assert_eq!(verdict, GateVerdict::Pass, "{candidate:?}: {rules:?}");
        assert_eq!(sent.as_deref(), Some(candidate));
    }
}
