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
