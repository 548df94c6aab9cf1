//! Every path `DESIGN.md` names stays importable (issue 24: "every name DESIGN.md lists still
//! compiles"). This file imports each one under the path the page gives, and uses each in a
//! way the compiler checks against what the page says it is (a type, a trait, a function of
//! that shape), so a rename or a move fails to compile here first. (The third round's deprecated
//! aliases, `degrade::resolve` and `FollowUpRunner`, are gone: the fourth round lets them go.)

use std::error::Error;

use mesh_egress::boundary::resolve;
use mesh_egress::channel::{
    Channel, Deliver, Deliverable, DeliveryError, DiscordChannel, DynChannel, PartReceipt, Receipt,
    Recorder, Render, RenderError, SendError, SlackChannel, Stdout, TelegramChannel,
};
use mesh_egress::degrade::{Commitment, DegradationPolicy, Mode, Reply as LayerCReply};
use mesh_egress::gate::{Confidence, Finding, GateVerdict, Judge, QualityGate};
use mesh_egress::model::{
    ModelConnector, ModelError, OpenAiCompatible, RecoveryReport, RetryConfig, Router, classify,
};
use mesh_egress::state::{Committed, Rendered, Unrendered};
use mesh_egress::{
    AgentMessage, AnswerStream, Attribution, CommittedPart, Egress, EgressError, EgressResultExt,
    FailureClass, Markdown, Outbound, Reply, Turn, egress_boundary,
};

fn is_type<T: ?Sized>() {}
fn is_deliverable<T: Deliverable>() {}
fn is_channel<C: Channel>() {}

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(AgentMessage::new("Deployed.", turn.attribution().clone()))
}

#[test]
fn every_type_and_trait_design_md_names_is_there_under_its_path() {
    is_type::<Markdown>();
    is_type::<Attribution>();
    is_type::<AgentMessage>();
    is_type::<EgressError>();
    is_type::<Egress>();
    is_type::<Turn>();
    is_type::<Outbound<Unrendered>>();
    is_type::<Outbound<Rendered>>();
    is_type::<Outbound<Committed>>();
    is_type::<CommittedPart>();
    is_type::<AnswerStream>();
    is_type::<dyn DynChannel>();
    is_type::<PartReceipt>();
    is_type::<SendError>();
    is_type::<RenderError>();
    is_type::<Receipt>();
    is_type::<DeliveryError>();
    is_type::<Commitment>();
    is_type::<RecoveryReport>();
    is_type::<ModelError>();
    is_type::<Finding>();
    is_type::<Confidence>();
    is_type::<GateVerdict>();
    is_type::<QualityGate>();
    is_type::<OpenAiCompatible>();
    is_type::<Router<OpenAiCompatible>>();
    fn is_judge<J: Judge>() {}
    is_judge::<mesh_egress::gate::ModelJudge<OpenAiCompatible>>();
    is_channel::<Recorder>();
    is_channel::<Stdout>();
    is_channel::<SlackChannel>();
    is_channel::<DiscordChannel>();
    is_channel::<TelegramChannel>();
    is_deliverable::<AgentMessage>();
    is_deliverable::<Reply>();
    fn renders<R: Render>(_: &R) {}
    renders(&Recorder::new().renderer());
    fn connector<C: ModelConnector>(_: &C) {}
    connector(&OpenAiCompatible::new("http://127.0.0.1:9").expect("a valid base URL"));
    // `classify` is the one classifier of a model failure.
    let _: fn(&ModelError) -> _ = classify;
    // The root `Reply` and Layer C's are one type.
    let same: fn(LayerCReply) -> Reply = |reply| reply;
    let _ = same;
    assert!(matches!(FailureClass::Transport, FailureClass::Transport));
    assert_ne!(Mode::Interactive, Mode::Proactive);
}

#[test]
fn the_values_behave_as_the_page_says() {
    let attribution = Attribution::new("ops", "conv-1", "run-1");
    let message = AgentMessage::new("hi", attribution.clone());
    assert_eq!(message.body().as_str(), "hi");
    assert_eq!(message.attribution(), &attribution);
    assert_eq!(Markdown::from(String::from("x")).as_str(), "x");
    assert_eq!(Markdown::new("y").as_str(), "y");

    let error = EgressError::semantic("a refusal", attribution.clone());
    assert_eq!(error.class(), FailureClass::Semantic);
    assert_eq!(error.attempt(), 1);
    assert_eq!(error.internal_cause().to_string(), "a refusal");
    let error = EgressError::transport("503", attribution.clone());
    assert_eq!(error.class(), FailureClass::Transport);

    let turn = Turn::new(attribution.clone());
    let io: Result<(), std::io::Error> = Err(std::io::Error::other("disk"));
    let wrapped = io.egress(&turn).expect_err("an error stays an error");
    assert_eq!(wrapped.class(), FailureClass::Transport);
    assert!(
        wrapped.retryable(),
        "the extension trait wraps as a retryable transport error"
    );

    // `boundary::resolve`: a proactive failure is silence.
    let policy = DegradationPolicy::default();
    let silent = resolve(Mode::Proactive, &policy, Err(wrapped));
    assert!(matches!(silent, Reply::Silence));

    let config = RetryConfig::from_lookup(|_| None);
    assert_eq!(
        config.attempts(),
        3,
        "MESH_MODEL_RETRY_ATTEMPTS defaults to 3"
    );
    let _: fn() -> RetryConfig = RetryConfig::from_env;
}

#[tokio::test]
async fn outbound_goes_unrendered_rendered_committed_and_deliver_sends_it()
-> Result<(), Box<dyn Error>> {
    let recorder = Recorder::new();
    let turn = Turn::new(Attribution::new("ops", "conv-2", "run-1"));
    let reply: Reply = answer(&turn).await;
    let receipt = recorder.deliver(reply).await?;
    assert_eq!(receipt.len(), 1);
    let rendered = Outbound::new(AgentMessage::new("Two.", turn.attribution().clone()))
        .render(&recorder.renderer())?;
    let _: Outbound<Rendered> = rendered;
    assert_eq!(recorder.sent(), ["Deployed."]);
    Ok(())
}
