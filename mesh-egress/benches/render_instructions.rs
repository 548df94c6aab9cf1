//! Render+chunk (or pulldown-cmark's bare parse) of the `render` bench's document, a given
//! number of times, for counting instructions under callgrind: deterministic where wall time on
//! a shared machine is not. Not a criterion bench; `cargo bench` runs it with no work.
//!
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null BIN SUBJECT BYTES ITERATIONS`,
//! SUBJECT one of `parse`, `plain`, `slack`, `discord`, `telegram`; the instructions of one
//! render are (count at N iterations − count at 0) / N. BENCHMARKS.md has the loop.

use mesh_egress::Markdown;
use mesh_egress::channel::{DiscordMarkdown, PlainText, Render, SlackMrkdwn, TelegramHtml};
use pulldown_cmark::{Options, Parser};
use std::hint::black_box;
const BLOCK: &str = "## Deploy report\n\nThe **v2** rollout finished in *12 minutes*; two ~~flaky~~ checks were \
retried. See [the dashboard](https://example.com/dash?run=42&view=full) for details.\n\n\
- api: healthy 👍🏽\n- worker: healthy\n  - queue depth `0`\n1. first step\n2. second step\n\n\
```rust\nfn main() {\n    println!(\"deployed <v2> & done\");\n}\n```\n\n\
> Note: the 🇩🇪 region lags by a few seconds.\n\n\
| service | p99 ms |\n|---|---:|\n| api | 41 |\n| worker | 120 |\n\n\
Family 👨‍👩‍👧‍👦 says 漢字かな交じり文。 Done!\n\n";
/// The same text as `benches/render.rs`.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(subject), Some(Ok(bytes)), Some(Ok(iters))) = (
        args.first().map(String::as_str),
        args.get(1).map(|a| a.parse::<usize>()),
        args.get(2).map(|a| a.parse::<usize>()),
    ) else {
        // `cargo bench` passes `--bench`: nothing to count.
        eprintln!("usage: render_instructions SUBJECT BYTES ITERATIONS");
        return;
    };
    let mut text = String::new();
    while text.len() < bytes {
        text.push_str(BLOCK);
    }
    let body = Markdown::new(text.clone());
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let r: Box<dyn Render> = match subject {
        "plain" => Box::new(PlainText::new().with_limit(4000).with_max_parts(usize::MAX)),
        "slack" => Box::new(SlackMrkdwn::new().with_max_parts(usize::MAX)),
        "discord" => Box::new(DiscordMarkdown::new().with_max_parts(usize::MAX)),
        _ => Box::new(TelegramHtml::new().with_max_parts(usize::MAX)),
    };
    for _ in 0..iters {
        if subject == "parse" {
            black_box(Parser::new_ext(black_box(&text), options).count());
        } else {
            black_box(r.render(black_box(&body)).unwrap());
        }
    }
}
