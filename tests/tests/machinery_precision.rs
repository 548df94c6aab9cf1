//! Machinery told from answers at the edges, both ways: tool-trace lines whatever symbol an
//! agent gives its tool, and answers that only look like machinery (an emoji changelog, data
//! with emoji labels, prose naming Llama's `<|python_tag|>`) delivered whole.

use mesh_egress::bot::Outcome;
use mesh_egress::channel::Recorder;
use mesh_egress::gate::{GateVerdict, QualityGate};
use mesh_egress::model::text_tool_format;
use mesh_egress::{Address, AgentMessage, Attribution, Bot, EgressError, Turn, egress_boundary};

const USER: &str = "Is the deploy done?";

fn gate() -> QualityGate {
    QualityGate::builder().build().expect("the default gate")
}

/// The verdict, and the text that would be sent.
async fn judged(text: &str) -> (GateVerdict, Option<String>) {
    let turn = Turn::new(Attribution::new("atlas", "c1", "r1"));
    let message = AgentMessage::new(text, turn.attribution().clone());
    let e = gate().evaluate(&turn, USER, message).await;
    (
        e.verdict(),
        e.message().map(|m| m.body().as_str().to_owned()),
    )
}

/// Progress lines as agents write them, each tool with its own symbol (hermes-agent's
/// `tool_progress` lines, NousResearch/hermes-agent#13584 and #6646, use one emoji per tool).
const TRACES: &[&str] = &[
    "🔍 search_web: \"deploy status\"\n📖 read_file: /etc/app.conf",
    "🌐 browser_navigate: https://status.example.com/deploys",
    "📝 write_file: ./notes/deploy.md",
    "🔎 web_search: 'latest release of tokio'",
    "📂 list_directory: ~/projects/app",
    "🧪 run_tests: cargo test --workspace",
];

/// Answers whose lines open with a pictograph and describe: headings, changelog bullets,
/// labelled values.
const DESCRIBING: &[&str] = &[
    "## 🚀 What's new in 2.0\n\n- 🔧 Fixed the search tool timing out\n- 📖 Docs for read_file",
    "🌡️ max_temp: 18°C\n💧 humidity: 60%\n🌬️ wind_speed: 12 km/h",
    "📅 Tuesday: standup at 10, then the release review.",
    "✅ Deploy finished at 09:12.\n🔗 Details are on the status page.",
    "部署已完成。🔧 修复了 3 个问题。",
];

#[tokio::test]
async fn a_trace_line_is_caught_whatever_symbol_leads_it() {
    for trace in TRACES {
        let answer = format!("{trace}\nThe deploy finished at 09:12.");
        let (verdict, sent) = judged(&answer).await;
        assert!(!matches!(verdict, GateVerdict::Pass), "{answer:?} passed");
        if let Some(sent) = sent {
            assert_eq!(sent.trim(), "The deploy finished at 09:12.", "{answer:?}");
        }
    }
}

#[tokio::test]
async fn a_line_that_describes_is_delivered_whole() {
    for answer in DESCRIBING {
        let (verdict, sent) = judged(answer).await;
        assert_eq!(verdict, GateVerdict::Pass, "{answer:?}");
        assert_eq!(sent.as_deref(), Some(*answer));
    }
}

#[tokio::test]
async fn prose_naming_the_python_tag_is_an_answer() {
    for answer in [
        "Llama 3.1 starts a code-interpreter call with <|python_tag|>, then the code.",
        "The token is <|python_tag|>. After it comes the code to run.",
    ] {
        assert_eq!(text_tool_format(answer), None, "{answer:?}");
        let (verdict, _) = judged(answer).await;
        assert_eq!(verdict, GateVerdict::Pass, "{answer:?}");
    }
    // The call itself is still one.
    assert!(text_tool_format("<|python_tag|>print(1)").is_some());
}

#[egress_boundary(interactive)]
async fn said(turn: &Turn, text: &str) -> Result<AgentMessage, EgressError> {
    Ok(turn.message(text))
}

#[tokio::test]
async fn through_the_bot_the_trace_goes_and_the_answer_stays() {
    let recorder = Recorder::new();
    let bot = Bot::new().with_client(recorder.clone()).with_gate(gate());
    let turn = bot.turn(Address::Plain, Attribution::new("atlas", "c1", "r1"));
    let answer = format!("{}\nThe deploy finished at 09:12.", TRACES[0]);
    let delivery = bot
        .send(&turn, said(&turn, &answer).await)
        .await
        .expect("sent");
    let sent = recorder.sent();
    assert!(
        sent.iter()
            .all(|s| !s.contains("search_web") && !s.contains("read_file")),
        "{sent:#?}"
    );
    assert_eq!(delivery.outcome(), Outcome::Answered, "{sent:#?}");
    let turn = bot.turn(Address::Plain, Attribution::new("atlas", "c2", "r2"));
    let delivery = bot
        .send(&turn, said(&turn, DESCRIBING[0]).await)
        .await
        .expect("sent");
    assert_eq!(delivery.delivered(), DESCRIBING[0]);
}
