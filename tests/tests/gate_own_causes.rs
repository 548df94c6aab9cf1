//! The crate's own cause wording is machinery: every sentence shape the runtime crate formats
//! into an error's `Display` (each `#[error("…")]`, each literal a `Display` impl writes) is
//! collected here from the sources, and the gate must block an answer that carries one
//! (`e.internal_cause()` pasted into a message, with or without `LLM request failed.` before it).
//!
//! A shape counts when one of its literal runs (the text between placeholders) holds at least
//! four words: shorter runs ("{what} is longer than {max}") are ordinary English, and a gate
//! that blocked them would eat good answers. Shapes that are ordinary English however long are
//! listed in `ORDINARY` with the benign sentence each would eat; the test fails when a listed
//! shape is no longer in the code, so the list cannot go stale.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use mesh_egress::gate::{GateVerdict, QualityGate};
use mesh_egress::{AgentMessage, Attribution, Turn};
use syn::visit::Visit;

/// Shapes (their longest literal run) left to the other rules, each with an answer it would
/// otherwise block.
const ORDINARY: &[(&str, &str)] = &[
    (
        "bytes is larger than the",
        "At 2,048 bytes is larger than the 1,024 the header allows.",
    ),
    (
        "is smaller than an unsplittable piece of",
        "A part limit of 3 is smaller than an unsplittable piece of text like a URL.",
    ),
    (
        "holds a character no",
        "The name holds a character no keyboard here has.",
    ),
    (
        "the event is not a",
        "Note the event is not a holiday: the office stays open.",
    ),
    (
        "the event is larger than",
        "This year the event is larger than ever, with 40 talks.",
    ),
    (
        "client cannot send to",
        "Your mail client cannot send to addresses outside the company.",
    ),
    (
        "the judge is unavailable",
        "The hearing moved because the judge is unavailable that week.",
    ),
    (
        "its body is not valid JSON",
        "The API answered 400 because its body is not valid JSON: a comma is missing.",
    ),
    (
        "was not the expected JSON",
        "The first reply was not the expected JSON, so the script stopped.",
    ),
    (
        "the message carries more than",
        "Read twice: the message carries more than one meaning.",
    ),
    (
        "did not accept the part after",
        "The dealer did not accept the part after the warranty ran out.",
    ),
];

fn runtime_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../mesh-egress/src")
}

/// Every `#[error("…")]` literal and every literal a `Display` impl writes.
#[derive(Default)]
struct Shapes(BTreeSet<String>);

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "test")
    })
}

impl Shapes {
    fn literals_in(&mut self, tokens: proc_macro2::TokenStream) {
        for tree in tokens {
            match tree {
                proc_macro2::TokenTree::Literal(lit) => {
                    if let Ok(syn::Lit::Str(s)) = syn::parse_str::<syn::Lit>(&lit.to_string()) {
                        self.0.insert(s.value());
                    }
                }
                proc_macro2::TokenTree::Group(g) => self.literals_in(g.stream()),
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Shapes {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident("error")
            && let Ok(list) = a.meta.require_list()
            && let Some(proc_macro2::TokenTree::Literal(lit)) =
                list.tokens.clone().into_iter().next()
            && let Ok(syn::Lit::Str(s)) = syn::parse_str::<syn::Lit>(&lit.to_string())
        {
            self.0.insert(s.value());
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let display = item
            .trait_
            .as_ref()
            .and_then(|(_, path, _)| path.segments.last())
            .is_some_and(|s| s.ident == "Display");
        if is_test(&item.attrs) {
            return;
        }
        if display {
            let mut writes = Writes(self);
            writes.visit_item_impl(item);
        }
        syn::visit::visit_item_impl(self, item);
    }
}

/// The literals of `write!`/`writeln!` and `write_str` calls.
struct Writes<'a>(&'a mut Shapes);

impl<'ast> Visit<'ast> for Writes<'_> {
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if m.path.is_ident("write") || m.path.is_ident("writeln") {
            self.0.literals_in(m.tokens.clone());
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        if call.method == "write_str"
            && let Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            })) = call.args.first()
        {
            self.0.0.insert(s.value());
        }
        syn::visit::visit_expr_method_call(self, call);
    }
}

fn collect(dir: &Path, shapes: &mut Shapes) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("src").flatten().collect();
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, shapes);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            shapes.visit_file(&file);
        }
    }
}

/// A shape's literal runs (placeholders cut out, `{{`/`}}` read as braces).
fn runs(shape: &str) -> Vec<String> {
    let mut runs = vec![String::new()];
    let mut chars = shape.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                runs.last_mut().unwrap().push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                runs.last_mut().unwrap().push('}');
            }
            '{' => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                runs.push(String::new());
            }
            c => runs.last_mut().unwrap().push(c),
        }
    }
    runs.into_iter().map(|r| r.trim().to_owned()).collect()
}

/// The shape with each placeholder filled as a failure would fill it.
fn instance(shape: &str) -> String {
    let runs = runs(shape);
    let fills = [
        "503",
        "upstream overloaded",
        "llm-7f9c",
        "3",
        "conversation-1",
    ];
    let mut out = String::new();
    for (i, run) in runs.iter().enumerate() {
        if i > 0 {
            out.push(' ');
            out.push_str(fills[(i - 1) % fills.len()]);
            out.push(' ');
        }
        out.push_str(run);
    }
    out.trim().to_owned()
}

/// The words of `run`: its blank-separated pieces with a letter or digit in them.
fn words(run: &str) -> usize {
    run.split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count()
}

/// A shape's longest literal run, without the punctuation at its ends: what the gate looks
/// for.
fn longest_run(shape: &str) -> String {
    runs(shape)
        .into_iter()
        .max_by_key(|r| words(r))
        .unwrap_or_default()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_owned()
}

/// The shapes this test holds the gate to.
fn own_causes() -> Vec<String> {
    let mut shapes = Shapes::default();
    collect(&runtime_src(), &mut shapes);
    shapes
        .0
        .into_iter()
        .filter(|s| words(&longest_run(s)) >= 4)
        .filter(|s| !ORDINARY.iter().any(|(run, _)| longest_run(s) == *run))
        .collect()
}

async fn verdict(text: &str) -> GateVerdict {
    let gate = QualityGate::builder().build().expect("the default gate");
    let turn = Turn::new(Attribution::new("atlas", "c1", "r1"));
    let message = AgentMessage::new(text, turn.attribution().clone());
    gate.evaluate(&turn, "Is the deploy done?", message)
        .await
        .verdict()
}

#[test]
fn the_shapes_are_found_in_the_code() {
    let causes = own_causes();
    if std::env::var("MESH_OWN_CAUSES").as_deref() == Ok("list") {
        // The gate's list (`gate/rules.rs`, `OWN_CAUSES`) is these runs, lower-cased.
        let runs: BTreeSet<String> = causes
            .iter()
            .map(|c| longest_run(c).to_lowercase())
            .collect();
        for run in runs {
            println!("OWN {run:?},");
        }
    }
    // The issue's own example, and a few of every layer's.
    for expected in [
        "model provider answered HTTP {status}",
        "model returned an empty completion",
        "the streamed answer had nothing to show",
        "the message could not be committed",
    ] {
        assert!(
            causes.iter().any(|c| c == expected),
            "{expected:?} not collected"
        );
    }
    assert!(causes.len() > 40, "{} shapes: {causes:#?}", causes.len());
    let mut all = Shapes::default();
    collect(&runtime_src(), &mut all);
    for (run, _) in ORDINARY {
        assert!(
            all.0.iter().any(|s| longest_run(s) == *run),
            "{run:?} is no longer in the code: drop it from ORDINARY"
        );
    }
}

#[tokio::test]
async fn every_cause_the_crate_writes_is_blocked_in_an_answer() {
    let mut passed = Vec::new();
    for shape in own_causes() {
        let cause = instance(&shape);
        for answer in [
            format!("Sorry, I couldn't finish that: {cause}"),
            format!("{cause}."),
            format!("LLM request failed. {cause}"),
        ] {
            if !matches!(verdict(&answer).await, GateVerdict::Blocked { .. }) {
                passed.push(answer);
            }
        }
    }
    assert!(passed.is_empty(), "{} delivered: {passed:#?}", passed.len());
}

#[tokio::test]
async fn ordinary_english_that_shares_a_run_is_delivered() {
    for (_, benign) in ORDINARY {
        assert!(
            matches!(verdict(benign).await, GateVerdict::Pass),
            "{benign:?} was not delivered"
        );
    }
}

/// The case through the Bot: a handler that pastes `internal_cause()` into its answer.
#[tokio::test]
async fn a_pasted_cause_reaches_no_one_through_the_bot() {
    use mesh_egress::bot::Outcome;
    use mesh_egress::channel::Recorder;
    use mesh_egress::{Address, Bot, EgressError, egress_boundary};

    const CAUSE: &str = "model provider answered HTTP 503 (server_error): upstream overloaded: pod llm-7f9c OOMKilled";

    #[egress_boundary(interactive)]
    async fn pasted(turn: &Turn) -> Result<AgentMessage, EgressError> {
        Ok(turn.message(format!("I hit a problem: {CAUSE}")))
    }

    let recorder = Recorder::new();
    let bot = Bot::new()
        .with_client(recorder.clone())
        .with_gate(QualityGate::builder().build().expect("the default gate"));
    let turn = bot.turn(Address::Plain, Attribution::new("atlas", "c1", "r1"));
    let delivery = bot.send(&turn, pasted(&turn).await).await.expect("sent");
    assert_eq!(delivery.outcome(), Outcome::Holding);
    let sent = recorder.sent();
    assert!(
        sent.iter()
            .all(|s| !s.contains("503") && !s.contains("llm-7f9c")),
        "{sent:#?}"
    );
}
