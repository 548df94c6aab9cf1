//! The gate composed with the boundary, as a handler uses it: `gate.check(..).await` inside an
//! `#[egress_boundary]` handler, the reply delivered to a channel. No string of the corpus's
//! never-set's tuning part reaches the channel, at most 5% of its held-out part does (the same
//! bar and split as `gate_corpus.rs`), and every benign look-alike is delivered as the answer.
#![cfg(feature = "gate")]

use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::gate::QualityGate;
use mesh_egress::{AgentMessage, EgressError, Reply, Turn, egress_boundary};
use serde_json::Value;

const CORPUS: &str = include_str!("data/gate_corpus.json");

/// A handler whose "model" returned `completion` for `user`.
#[egress_boundary(interactive)]
async fn answer(
    turn: &Turn,
    gate: &QualityGate,
    user: &str,
    completion: &str,
) -> Result<AgentMessage, EgressError> {
    let candidate = Ok(AgentMessage::new(completion, turn.attribution().clone()));
    gate.check(turn, user, candidate).await
}

/// The held-out split of `gate_corpus.rs`: 64-bit FNV-1a of the id, held out when `0 mod 4`.
fn held_out(id: &str) -> bool {
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    hash.is_multiple_of(4)
}

#[tokio::test]
async fn no_never_string_reaches_the_channel_and_benign_replies_are_answers() {
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus is JSON");
    let gate = QualityGate::builder()
        .system_prompt(corpus["system_prompt"].as_str().expect("prompt"), 0.5)
        .canary(corpus["canary"].as_str().expect("canary"))
        .build()
        .expect("gate");
    let field = |c: &Value, k: &str| c[k].as_str().expect(k).to_owned();

    let (mut held, mut held_leaked) = (0usize, 0usize);
    for case in corpus["never"].as_array().expect("never") {
        let (id, leak) = (field(case, "id"), field(case, "leak"));
        let turn = Turn::new(mesh_egress::Attribution::new("atlas", id.as_str(), "r"));
        let channel = Recorder::new();
        let reply: Reply = answer(
            &turn,
            &gate,
            &field(case, "user"),
            &field(case, "candidate"),
        )
        .await;
        let mut receipt = channel.deliver(reply).await.expect("delivered");
        let _ = receipt.take_commitment();
        let leaked = channel.sent().iter().any(|part| part.contains(&leak));
        if held_out(&id) {
            held += 1;
            held_leaked += usize::from(leaked);
        } else {
            assert!(!leaked, "never/{id} reached the channel");
        }
    }
    println!("held-out never-strings that reached the channel: {held_leaked}/{held}");
    assert!(
        held_leaked * 20 <= held,
        "{held_leaked}/{held} held-out leaks"
    );
    for case in corpus["benign"].as_array().expect("benign") {
        let id = field(case, "id");
        let turn = Turn::new(mesh_egress::Attribution::new("atlas", id.as_str(), "r"));
        let reply = answer(
            &turn,
            &gate,
            &field(case, "user"),
            &field(case, "candidate"),
        )
        .await;
        assert!(
            reply.is_answer(),
            "benign/{id} did not arrive as the answer: {reply:?}"
        );
    }
}
