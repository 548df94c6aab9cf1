//! Rendering for chat channels through the public API: a renderer chosen at run time, and a
//! long mixed message arriving for every channel in parts that fit, read naturally and lose
//! nothing.

use mesh_egress::channel::{
    DiscordMarkdown, PlainText, Render, RenderError, SlackMrkdwn, TelegramHtml,
};
use mesh_egress::{AgentMessage, Attribution, Markdown, Outbound};

fn renderer(channel: &str) -> Box<dyn Render> {
    match channel {
        "slack" => Box::new(SlackMrkdwn::new()),
        "discord" => Box::new(DiscordMarkdown::new()),
        "telegram" => Box::new(TelegramHtml::new()),
        _ => Box::new(PlainText::new().with_limit(2000)),
    }
}

/// A long reply as an agent writes it: prose, code, emoji, a table and a long link.
fn long_mixed_message() -> String {
    let mut text = String::from("# Incident summary\n\n");
    for i in 0..30 {
        text.push_str(&format!(
            "Step {i}: the **worker** restarted after a *timeout*; family 👨‍👩‍👧‍👦 and flag 🇯🇵 noted. \
             Check <queue> & retry.\n\n"
        ));
    }
    text.push_str("```python\n");
    for i in 0..120 {
        text.push_str(&format!("print('line {i} with a ``` inside')\n"));
    }
    text.push_str("```\n\n| host | state |\n|---|---|\n");
    for i in 0..40 {
        text.push_str(&format!("| host-{i} | degraded |\n"));
    }
    text.push_str(&format!(
        "\nFull log: [download](https://logs.example.com/{}?token=a_b)\n",
        "x".repeat(300)
    ));
    text
}

fn telegram_units(part: &str) -> usize {
    let mut units = 0;
    let mut rest = part;
    while let Some(c) = rest.chars().next() {
        let skip = match c {
            '<' => rest.find('>').expect("tag closes") + 1,
            '&' => {
                units += 1;
                rest.find(';').expect("entity ends") + 1
            }
            c => {
                units += c.len_utf16();
                c.len_utf8()
            }
        };
        rest = &rest[skip..];
    }
    units
}

#[test]
fn a_long_mixed_message_arrives_in_parts_that_fit_for_every_channel() {
    let text = long_mixed_message();
    for (channel, limit) in [
        ("plain", 2000),
        ("slack", 3000),
        ("discord", 2000),
        ("telegram", 4096),
    ] {
        let parts = renderer(channel)
            .render(&Markdown::new(text.clone()))
            .expect("renders");
        assert!(parts.len() > 1, "{channel} needs several parts");
        for part in &parts {
            let len = if channel == "telegram" {
                telegram_units(part)
            } else {
                part.chars().count()
            };
            assert!(len <= limit, "{channel} part of {len} > {limit}");
            if channel == "slack" || channel == "discord" {
                assert_eq!(part.matches("```").count() % 2, 0, "{channel}: {part}");
            }
        }
        let joined = parts.concat();
        // Nothing is lost: every step, every code line, every host and the link are there.
        for i in 0..30 {
            assert!(
                joined.contains(&format!("Step {i}:")),
                "{channel} lost step {i}"
            );
        }
        for i in 0..120 {
            assert!(
                joined.contains(&format!("line {i} with")),
                "{channel} lost line {i}"
            );
        }
        for i in 0..40 {
            assert!(
                joined.contains(&format!("host-{i} ")),
                "{channel} lost host {i}"
            );
        }
        assert!(joined.contains(&"x".repeat(300)), "{channel} lost the link");
        assert_eq!(joined.matches("👨‍👩‍👧‍👦").count(), 30, "{channel} split an emoji");
    }
}

#[test]
fn a_renderer_chosen_at_run_time_renders_an_outbound_message() {
    let msg = AgentMessage::new("Deployed **v2** <ok>", Attribution::new("ops", "c1", "r1"));
    let rendered = Outbound::new(msg)
        .render(&renderer("telegram"))
        .expect("renders");
    assert_eq!(rendered.parts(), ["Deployed <b>v2</b> &lt;ok&gt;"]);
}

#[test]
fn every_channel_refuses_a_blank_body_and_a_limit_too_small() {
    for channel in ["plain", "slack", "discord", "telegram"] {
        assert_eq!(
            renderer(channel).render(&Markdown::new(" \n\t ")),
            Err(RenderError::Empty)
        );
    }
    assert!(matches!(
        DiscordMarkdown::new()
            .with_limit(2)
            .render(&Markdown::new("😀 `x`")),
        Err(RenderError::LimitTooSmall {
            limit: 2,
            needed: 3
        })
    ));
}

/// Hostile replies through the public API, as a bot would meet them (issue 11).
mod hostile {
    use mesh_egress::channel::{
        DEFAULT_LINK_SCHEMES, DEFAULT_MAX_PARTS, Deliver, DiscordMarkdown, PlainText, Recorder,
        Render, RenderError, SlackMrkdwn, TelegramHtml,
    };
    use mesh_egress::{AgentMessage, Attribution, Markdown, Outbound};

    fn message(text: &str) -> AgentMessage {
        AgentMessage::new(text, Attribution::new("ops", "c1", "r1"))
    }

    #[test]
    fn three_thousand_nested_images_are_delivered_from_a_small_stack() {
        let text = format!("{}x{}", "![".repeat(3000), "](u)".repeat(3000));
        let sent = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("a runtime");
                runtime.block_on(async move {
                    let channel = Recorder::new();
                    let _receipt = channel.deliver(message(&text)).await.expect("delivered");
                    channel.sent()
                })
            })
            .expect("spawns")
            .join()
            .expect("no stack overflow");
        assert!(!sent.is_empty() && sent.len() <= DEFAULT_MAX_PARTS);
        assert!(sent.concat().contains('x'));
    }

    #[test]
    fn an_outbound_reply_to_slack_cannot_ping_the_channel() {
        let rendered = Outbound::new(message("[z](!channel) <!here> [u](@U1)"))
            .render(&SlackMrkdwn::new())
            .expect("renders");
        let wire = rendered.parts().concat();
        assert!(!wire.contains("<!") && !wire.contains("<@"), "{wire}");
    }

    #[test]
    fn the_budget_cut_is_reported_through_a_boxed_renderer() {
        let renderer: Box<dyn Render> = Box::new(DiscordMarkdown::new().with_max_parts(2));
        let long = "Words that keep going and going. ".repeat(400);
        let rendered = renderer
            .render_parts(&Markdown::new(long))
            .expect("renders");
        assert_eq!(rendered.parts().len(), 2);
        let cut = rendered.cut().expect("a cut");
        assert_eq!((cut.kept(), cut.budget()), (2, 2));
        assert!(rendered.parts()[1].ends_with("(reply shortened)"));
    }

    #[test]
    fn dangerous_links_are_text_and_controls_are_gone_on_every_renderer() {
        assert_eq!(DEFAULT_LINK_SCHEMES, ["http", "https", "mailto"]);
        let text = "[pay](javascript:pay()) [me](tg://user?id=7) x\u{1b}[2J\u{202e}y";
        let renderers: [Box<dyn Render>; 4] = [
            Box::new(PlainText::new()),
            Box::new(SlackMrkdwn::new()),
            Box::new(DiscordMarkdown::new()),
            Box::new(TelegramHtml::new()),
        ];
        for r in &renderers {
            let wire = r.render(&Markdown::new(text)).expect("renders").concat();
            assert!(!wire.contains("<a ") && !wire.contains("|pay>") && !wire.contains("](<"));
            assert!(
                !wire.contains('\u{1b}') && !wire.contains('\u{202e}'),
                "{wire:?}"
            );
            assert!(wire.contains("pay (javascript:pay())"), "{wire}");
        }
    }

    #[test]
    fn a_reply_with_nothing_visible_is_empty_for_every_renderer() {
        let renderers: [Box<dyn Render>; 4] = [
            Box::new(PlainText::new()),
            Box::new(SlackMrkdwn::new()),
            Box::new(DiscordMarkdown::new()),
            Box::new(TelegramHtml::new()),
        ];
        for src in ["```\n```\n", ">\n", "[foo]: /url\n", "\u{7}\u{1b}"] {
            for r in &renderers {
                let err = r
                    .render_parts(&Markdown::new(src))
                    .expect_err("nothing to show");
                assert_eq!(err, RenderError::Empty);
                assert_eq!(err.kind(), "empty");
            }
        }
    }
}

/// The renderers' fuzz check (`fuzz/src/render_check.rs`), run here on stable.
#[path = "../../fuzz/src/render_check.rs"]
mod render_check;

#[test]
fn the_fuzz_seed_corpus_passes_the_fuzz_check_on_a_small_stack() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/render_chunk");
    let mut seeds: Vec<_> = std::fs::read_dir(dir)
        .expect("the seed corpus is committed")
        .map(|entry| entry.expect("a seed").path())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 10, "seeds: {seeds:?}");
    for seed in seeds {
        let data = std::fs::read(&seed).expect("a readable seed");
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || render_check::run(&data))
            .expect("spawns")
            .join()
            .unwrap_or_else(|_| panic!("{} fails the fuzz check", seed.display()));
    }
}

/// Renders `src` on every surface into one text per surface.
fn on_every_surface(src: &str) -> [(String, String); 4] {
    ["plain", "slack", "discord", "telegram"].map(|channel| {
        let parts = renderer(channel)
            .render(&Markdown::new(src))
            .expect("renders");
        (channel.to_owned(), parts.concat())
    })
}

#[test]
fn a_quote_inside_a_list_item_is_its_own_line_marked_as_a_quote() {
    // Was "• ab" on plain and Slack, "- ab" on Discord: the quote glued to the item's text.
    let rendered = on_every_surface("* a\n  > b\n* c");
    let want = [
        "• a\n  > b\n\n• c",
        "• a\n>   b\n\n• c",
        "- a\n  > b\n\n- c",
        "• a\n  <blockquote>b</blockquote>\n\n• c",
    ];
    for ((channel, got), want) in rendered.iter().zip(want) {
        assert_eq!(got, want, "{channel}");
    }
}

#[test]
fn a_fence_after_a_quote_inside_a_list_item_keeps_both_apart() {
    let rendered = on_every_surface("- a\n  > b\n  ```\n  code\n  ```\n- d");
    let want = [
        "• a\n  > b\n\n  code\n\n• d",
        "• a\n>   b\n\n  ```\n  code\n  ```\n\n• d",
        "- a\n  > b\n\n  ```\n  code\n  ```\n\n- d",
        "• a\n  <blockquote>b</blockquote>\n\n  <pre>  code</pre>\n\n• d",
    ];
    for ((channel, got), want) in rendered.iter().zip(want) {
        assert_eq!(got, want, "{channel}");
    }
    // A fence straight after the item's text, and a heading, start their own lines too.
    for (channel, got) in on_every_surface("- a\n  ```\n  code\n  ```\n- d") {
        assert!(
            !got.contains("acode") && !got.contains("a```"),
            "{channel}: {got:?}"
        );
    }
}

#[test]
fn digits_and_a_dot_starting_a_line_stay_text_on_discord() {
    // `1\. not a list` is text; unescaped on Discord it is an ordered list and the 1 is gone.
    let parts = DiscordMarkdown::new()
        .render(&Markdown::new(
            "1\\. not a list\n2\\) nor this\n\\&ouml; literally",
        ))
        .expect("renders");
    assert_eq!(
        parts,
        ["1\\. not a list\n2\\) nor this\n\\&ouml; literally"]
    );
}
