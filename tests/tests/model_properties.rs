//! Property: over random fault schedules, recovery never outlives the total deadline, never
//! makes more attempts than configured, never retries a terminal error, and always ends in a
//! usable completion or an `EgressError`.

use std::time::Duration;

use mesh_egress::model::{ChatMessage, ChatRequest, Jitter, RetryConfig, Route, Router};
use mesh_egress::testing::{ScriptedConnector, Step};
use mesh_egress::{Attribution, Turn};
use proptest::prelude::*;
use tokio::time::Instant;

#[derive(Clone, Copy, Debug)]
enum Fault {
    Answer,
    AnswerAfter(u64),
    Server,
    RateLimited(u64),
    Reset,
    Empty,
    Stall,
    Unauthorised,
    BadRequest,
}

impl Fault {
    fn terminal(self) -> bool {
        matches!(self, Self::Unauthorised | Self::BadRequest)
    }

    fn step(self) -> Step {
        match self {
            Self::Answer => Step::answer("ok"),
            Self::AnswerAfter(ms) => Step::answer("ok").after(Duration::from_millis(ms)),
            Self::Server => Step::status(503),
            Self::RateLimited(ms) => Step::rate_limited(Duration::from_millis(ms)),
            Self::Reset => Step::connection_reset(),
            Self::Empty => Step::empty(),
            Self::Stall => Step::stall(),
            Self::Unauthorised => Step::status(401),
            Self::BadRequest => Step::status(400),
        }
    }
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::Answer),
        (0u64..90_000).prop_map(Fault::AnswerAfter),
        Just(Fault::Server),
        (0u64..3_600_000).prop_map(Fault::RateLimited),
        Just(Fault::Reset),
        Just(Fault::Empty),
        Just(Fault::Stall),
        Just(Fault::Unauthorised),
        Just(Fault::BadRequest),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn recovery_stays_within_its_bounds(
        schedules in prop::collection::vec(prop::collection::vec(fault(), 0..6), 1..4),
        attempts in 1u32..5,
        attempt_timeout_ms in prop_oneof![Just(0u64), 1u64..120_000],
        total_ms in 1u64..300_000,
        max_delay_ms in 1u64..30_000,
        jitter in 0.0f64..1.0,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let models: Vec<String> = (0..schedules.len()).map(|i| format!("m{i}")).collect();
            let mut connector = ScriptedConnector::new().otherwise(Step::stall());
            for (model, schedule) in models.iter().zip(&schedules) {
                connector = connector.on(model, schedule.iter().map(|f| f.step()));
            }
            let config = RetryConfig::default()
                .with_attempts(attempts)
                .with_attempt_timeout((attempt_timeout_ms > 0).then(|| Duration::from_millis(attempt_timeout_ms)))
                .with_total_deadline(Duration::from_millis(total_ms))
                .with_max_delay(Duration::from_millis(max_delay_ms));
            let router = Router::with_routes(
                connector.clone(),
                Route::new(models[0].as_str()),
                models[1..].iter().map(|m| Route::new(m.as_str())),
                config,
            )
            .with_jitter(Jitter::fixed(jitter));
            let turn = Turn::new(Attribution::new("a", "c", "r"));
            let start = Instant::now();
            let result = router
                .complete(&turn, ChatRequest::new(vec![ChatMessage::user("q")]))
                .await;

            prop_assert!(Instant::now() - start <= Duration::from_millis(total_ms));
            let calls = connector.calls();
            for model in &models {
                let n = calls.iter().filter(|c| &c.model == model).count();
                prop_assert!(n <= attempts as usize, "{model}: {n} calls > {attempts}");
            }
            // The i-th call to a model played the i-th step of its schedule (or a stall).
            let mut seen = vec![0usize; models.len()];
            let mut terminal_at = None;
            for (index, call) in calls.iter().enumerate() {
                let route = models.iter().position(|m| *m == call.model).expect("known model");
                let fault = schedules[route].get(seen[route]).copied().unwrap_or(Fault::Stall);
                seen[route] += 1;
                if fault.terminal() {
                    terminal_at = Some(index);
                }
            }
            if let Some(index) = terminal_at {
                prop_assert_eq!(index, calls.len() - 1, "nothing runs after a terminal error");
                prop_assert!(result.as_ref().is_err_and(|e| !e.retryable()));
            }
            match result {
                Ok(completion) => prop_assert!(!completion.is_empty()),
                Err(error) => prop_assert!(error.attempt() as usize >= calls.len().min(1)),
            }
            Ok(())
        })?;
    }
}
