//! Hostile model text through the real renderers (issue 11): one test per symptom. Each of
//! these failed before rendering was bounded (a stack overflow, an error, a flood of parts, a
//! live forbidden link, a ping, a control character on the wire).

use crate::Markdown;
use crate::channel::{
    DEFAULT_MAX_PARTS, DiscordMarkdown, PlainText, Render, RenderError, RenderedParts, SlackMrkdwn,
    TelegramHtml, WebMarkdown,
};

/// Every built-in renderer with its defaults, by name.
fn renderers() -> Vec<(&'static str, Box<dyn Render>)> {
    vec![
        ("plain", Box::new(PlainText::new().with_limit(2_000))),
        ("slack", Box::new(SlackMrkdwn::new())),
        ("discord", Box::new(DiscordMarkdown::new())),
        ("telegram", Box::new(TelegramHtml::new())),
        ("web", Box::new(WebMarkdown::new())),
    ]
}

/// Runs `f` on a thread with a 256 KiB stack, as a small worker thread would have.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .expect("spawns")
        .join()
        .expect("renders without overflowing a 256 KiB stack")
}

fn render_all(src: String) -> Vec<(&'static str, Result<RenderedParts, RenderError>)> {
    on_small_stack(move || {
        let body = Markdown::new(src);
        renderers()
            .into_iter()
            .map(|(name, r)| (name, r.render_parts(&body)))
            .collect()
    })
}

fn parts_of(src: &str) -> Vec<(&'static str, Vec<String>)> {
    render_all(src.to_owned())
        .into_iter()
        .map(|(name, r)| match r {
            Ok(r) => (name, r.into_parts()),
            Err(e) => panic!("{name} failed on {:?}…: {e}", &src[..src.len().min(40)]),
        })
        .collect()
}

#[test]
fn three_thousand_nested_images_render_on_a_small_stack() {
    let src = format!("{}x{}", "![".repeat(3000), "](u)".repeat(3000));
    for (name, parts) in parts_of(&src) {
        assert!(
            parts.len() <= DEFAULT_MAX_PARTS,
            "{name}: {} parts",
            parts.len()
        );
        assert!(parts.concat().contains('x'), "{name} lost the words");
    }
}

#[test]
fn ten_thousand_nested_links_and_images_render_in_linear_size() {
    let src = format!(
        "{}x{}",
        "[![".repeat(5000),
        "](https://a.example)](https://b.example)".repeat(5000)
    );
    for (name, parts) in parts_of(&src) {
        let len: usize = parts.iter().map(String::len).sum();
        assert!(
            len <= 4 * src.len(),
            "{name}: {len} bytes from {}",
            src.len()
        );
    }
}

#[test]
fn deep_emphasis_quotes_and_lists_render_on_every_channel() {
    let emphasis = format!("{}deep{}", "*_".repeat(2000), "_*".repeat(2000));
    let strong = format!("{}deep{}", "**".repeat(3000), "**".repeat(3000));
    let quotes = format!("{} deep words here\n", "> ".repeat(5000));
    let lists: String = (0..3000)
        .map(|d| format!("{}- item {d}\n", "  ".repeat(d)))
        .collect();
    let ordered: String = (0..3000)
        .map(|d| format!("{}1. item {d}\n", "   ".repeat(d)))
        .collect();
    for src in [emphasis, strong, quotes, lists, ordered] {
        for (name, parts) in parts_of(&src) {
            assert!(!parts.is_empty(), "{name}");
            assert!(
                parts.len() <= DEFAULT_MAX_PARTS,
                "{name}: {} parts",
                parts.len()
            );
        }
    }
}

#[test]
fn nesting_past_sixteen_levels_keeps_the_words_not_the_structure() {
    let src = format!("{}deep words", "> ".repeat(40));
    let parts = PlainText::new().render(&Markdown::new(src)).unwrap();
    assert_eq!(parts, [format!("{}deep words", "> ".repeat(16))]);
    let styled = format!(
        "{}word{}",
        "<b>".repeat(0) + &"**".repeat(30),
        "**".repeat(30)
    );
    let slack = SlackMrkdwn::new().render(&Markdown::new(styled)).unwrap();
    assert!(slack[0].matches('*').count() <= 2 * 16, "{slack:?}");
    assert!(slack[0].contains("word"));
}

#[test]
fn a_three_kilobyte_nested_quote_is_not_a_flood() {
    // Before: 1001 Discord messages, the prefix repeated on every line for every level.
    let src = format!("{} x\n{}", ">".repeat(1000), "y\n".repeat(1000));
    for (name, parts) in parts_of(&src) {
        assert!(
            parts.len() <= DEFAULT_MAX_PARTS,
            "{name}: {} parts",
            parts.len()
        );
        for part in &parts {
            for line in part.lines() {
                assert!(line.matches("> ").count() <= 16, "{name}: {line:?}");
            }
        }
    }
}

#[test]
fn past_the_part_budget_a_reply_is_cut_with_a_visible_marker() {
    let src = "A sentence of moderate length that fills the parts.\n\n".repeat(400);
    let body = Markdown::new(src);
    for (name, _) in renderers() {
        let r: Box<dyn Render> = match name {
            "slack" => Box::new(SlackMrkdwn::new().with_limit(300)),
            "discord" => Box::new(DiscordMarkdown::new().with_limit(300)),
            "telegram" => Box::new(TelegramHtml::new().with_limit(300)),
            "web" => Box::new(WebMarkdown::new().with_limit(300)),
            _ => Box::new(PlainText::new().with_limit(300)),
        };
        let rendered = r.render_parts(&body).unwrap();
        assert_eq!(rendered.parts().len(), DEFAULT_MAX_PARTS, "{name}");
        let last = rendered.parts().last().unwrap();
        assert!(last.ends_with("… (reply shortened)"), "{name}: {last:?}");
        assert!(last.chars().count() <= 300, "{name}: {last:?}");
        let cut = rendered.cut().expect("a cut is reported");
        assert_eq!((cut.kept(), cut.budget()), (10, 10));
        assert!(cut.omitted_bytes() > 15_000, "{name}: {cut:?}");
        assert_eq!(r.render(&body).unwrap(), rendered.parts(), "{name}");
    }
    let three = SlackMrkdwn::new().with_limit(300).with_max_parts(3);
    let rendered = three.render_parts(&body).unwrap();
    assert_eq!(rendered.parts().len(), 3);
    assert_eq!(rendered.cut().map(|c| c.budget()), Some(3));
    let short = SlackMrkdwn::new()
        .render_parts(&Markdown::new("short"))
        .unwrap();
    assert_eq!(
        (short.parts(), short.cut()),
        (&["short".to_owned()][..], None)
    );
}

#[test]
fn forbidden_link_targets_are_shown_as_text_on_every_surface() {
    for target in [
        "javascript:alert(1)",
        "data:text/html,<script>x</script>",
        "file:///etc/passwd",
        "vbscript:msgbox(1)",
        "tg://user?id=123",
        "/relative/url",
        "#fragment",
        "!channel",
        "@U123",
    ] {
        let src = format!("see [the link]({target}) now");
        for (name, parts) in parts_of(&src) {
            let text = parts.concat();
            match name {
                "slack" => assert!(!text.contains("|the link>"), "{name}: {text}"),
                "discord" | "web" => assert!(!text.contains("[the link]("), "{name}: {text}"),
                "telegram" => assert!(!text.contains("<a "), "{name}: {text}"),
                _ => {}
            }
            assert!(text.contains("the link"), "{name} lost the label: {text}");
        }
    }
    let live = parts_of("[docs](https://docs.example/a) [mail](mailto:a@b.example)");
    assert!(live[1].1[0].contains("<https://docs.example/a|docs>"));
    assert!(live[2].1[0].contains("[docs](<https://docs.example/a>)"));
    assert!(live[3].1[0].contains("<a href=\"mailto:a@b.example\">mail</a>"));
    assert!(live[4].1[0].contains("[docs](<https://docs.example/a>) [mail](<mailto:a@b.example>)"));
}

#[test]
fn slack_links_never_produce_mention_or_channel_syntax() {
    let src =
        "[z](!channel) [y](@U123) [x](#fragment) [s](!subteam^S1) [h](<!here>) <!channel> <@U1>";
    let slack = SlackMrkdwn::new()
        .render(&Markdown::new(src))
        .unwrap()
        .concat();
    for forbidden in ["<!", "<@", "<#"] {
        assert!(!slack.contains(forbidden), "{forbidden} in {slack}");
    }
    assert!(slack.contains("&lt;!channel&gt;"), "{slack}");
    // Even with every scheme allowed, a target opening `<!…>` is no link.
    let open = SlackMrkdwn::new().with_link_schemes(&["http", "https", "mailto", "tg"]);
    let slack = open
        .render(&Markdown::new("[z](!channel)"))
        .unwrap()
        .concat();
    assert!(!slack.contains("<!"), "{slack}");
}

#[test]
fn telegram_user_links_are_not_live_unless_allowed() {
    let src = "[admin](tg://user?id=42)";
    let default = TelegramHtml::new().render(&Markdown::new(src)).unwrap();
    assert_eq!(default, ["admin (tg://user?id=42)"]);
    let allowed = TelegramHtml::new().with_link_schemes(&["https", "tg"]);
    assert_eq!(
        allowed.render(&Markdown::new(src)).unwrap(),
        ["<a href=\"tg://user?id=42\">admin</a>"]
    );
}

#[test]
fn a_label_naming_another_address_shows_the_real_target() {
    let src = "[https://bank.example](https://evil.example/login)";
    for (name, parts) in parts_of(src) {
        let text = parts.concat();
        // The address opened is visible as text, not only inside the link markup.
        let visible = match name {
            "slack" => text.replace("<https://evil.example/login|", ""),
            "discord" | "web" => text.replace("](<https://evil.example/login>)", ""),
            "telegram" => text.replace("<a href=\"https://evil.example/login\">", ""),
            _ => text.clone(),
        };
        assert!(visible.contains("evil.example/login"), "{name}: {text}");
    }
    let honest = SlackMrkdwn::new()
        .render(&Markdown::new("[bank.example](https://bank.example/login)"))
        .unwrap();
    assert_eq!(honest, ["<https://bank.example/login|bank.example>"]);
}

#[test]
fn no_surface_gets_nested_links() {
    let src = "![see [inner](https://b.example) and ![img](https://c.example)](https://a.example) [outer [in](https://d.example)](https://e.example)";
    for (name, parts) in parts_of(src) {
        let text = parts.concat();
        match name {
            "telegram" => {
                let mut open = 0i32;
                for piece in text.split('<').skip(1) {
                    if piece.starts_with("a ") {
                        open += 1;
                        assert!(open <= 1, "nested <a> in {text}");
                    } else if piece.starts_with("/a>") {
                        open -= 1;
                    }
                }
            }
            "slack" => assert_eq!(text.matches("<https://").count(), 2, "{text}"),
            "discord" | "web" => assert_eq!(text.matches("](<https://").count(), 2, "{text}"),
            _ => {}
        }
        assert!(
            text.contains("inner") && text.contains("img"),
            "{name}: {text}"
        );
    }
}

#[test]
fn discord_mass_mentions_are_defused_in_text_and_code() {
    let src = "@everyone look `@here` and <@123> <@&456>\n\n```\n@everyone\n```";
    let text = DiscordMarkdown::new()
        .render(&Markdown::new(src))
        .unwrap()
        .concat();
    assert!(
        !text.contains("@everyone") && !text.contains("@here"),
        "{text}"
    );
    assert!(text.contains("@\u{200b}everyone") && text.contains("@\u{200b}here"));
    // In text `<` is backslash-escaped, so no mention syntax is left.
    assert_eq!(
        text.matches("<@").count(),
        text.matches("\\<@").count(),
        "{text}"
    );
    assert!(text.contains("\\<@123\\>"), "{text}");
    let url = DiscordMarkdown::new()
        .render(&Markdown::new("[x](a<@1>b)"))
        .unwrap()
        .concat();
    assert!(!url.contains("<@"), "{url}");
}

#[test]
fn control_characters_never_reach_a_surface() {
    let src = "bell\u{7} esc\u{1b}[31mred\u{1b}[0m back\u{8}space nul\u{0} c1\u{85}\u{9b} \
               txt\u{202e}exe.txt \u{2066}iso\u{2069} `code\u{1b}` [l\u{202e}](https://a.example/\u{7})\n\n\
               entity&#x1b;[2J &#x202E;x\n\n```\nfenced\u{1b}\u{0}\n```";
    for (name, parts) in parts_of(src) {
        for part in &parts {
            let bad: Vec<char> = part
                .chars()
                .filter(|&c| crate::render::is_hostile_control(c))
                .collect();
            assert!(bad.is_empty(), "{name}: {bad:?} in {part:?}");
        }
        assert!(
            parts.concat().contains("[31mred"),
            "{name}: the printable rest stays"
        );
    }
    let only = "\u{1b}\u{7}\u{202e}";
    for (name, r) in render_all(only.to_owned()) {
        assert_eq!(r.err(), Some(RenderError::Empty), "{name}");
    }
}

#[test]
fn replies_that_render_to_nothing_visible_are_empty_on_every_renderer() {
    // The CommonMark spec examples (0.31.2: 79, 126, 129, 130, 144, 207, 239, 240, 284, 334,
    // 487) that render to nothing a person could read.
    let examples = [
        "## \n#\n### ###\n",
        "```\n",
        "```\n\n  \n```\n",
        "```\n```\n",
        "````;\n````\n",
        "[foo]: /url\n",
        ">\n",
        ">\n>  \n> \n",
        "*\n",
        "`\u{a0}`\n`  `\n",
        "[]()\n",
    ];
    for src in examples {
        for (name, r) in render_all(src.to_owned()) {
            assert_eq!(r.err(), Some(RenderError::Empty), "{name} on {src:?}");
        }
    }
}

#[test]
fn reference_links_cannot_multiply_the_output() {
    let url = format!("https://a.example/{}", "x".repeat(4000));
    let src = format!("[r]: {url}\n\n{}", "[a][r] ".repeat(5000));
    for (name, r) in render_all(src.clone()) {
        let r = r.unwrap_or_else(|e| panic!("{name}: {e}"));
        let len: usize = r.parts().iter().map(String::len).sum();
        assert!(
            len <= 4 * src.len(),
            "{name}: {len} bytes from {}",
            src.len()
        );
    }
    let plain = PlainText::new()
        .render(&Markdown::new(src.clone()))
        .unwrap()
        .concat();
    assert!(
        plain.len() <= 4 * src.len(),
        "{} from {}",
        plain.len(),
        src.len()
    );
}

#[test]
fn a_wide_table_over_many_rows_is_not_padded_without_bound() {
    let src = format!(
        "| {} | b |\n|---|---|\n{}",
        "w".repeat(4000),
        "| a | b |\n".repeat(4000)
    );
    let plain = PlainText::new()
        .render(&Markdown::new(src.clone()))
        .unwrap()
        .concat();
    assert!(
        plain.len() <= 4 * src.len(),
        "{} from {}",
        plain.len(),
        src.len()
    );
}

#[test]
fn a_reply_that_fills_the_budget_exactly_is_not_cut() {
    let renderer = PlainText::new().with_limit(10).with_max_parts(3);
    let exact = renderer
        .render_parts(&Markdown::new("aaaaaaaaaa bbbbbbbbbb cccccccccc"))
        .unwrap();
    assert_eq!(exact.parts(), ["aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc"]);
    assert_eq!(exact.cut(), None);
    let over = renderer
        .render_parts(&Markdown::new("aaaaaaaaaa bbbbbbbbbb cccccccccc dddd"))
        .unwrap();
    assert_eq!(over.parts(), ["aaaaaaaaaa", "bbbbbbbbbb", "ccccccccc…"]);
    assert_eq!(
        over.cut(),
        Some(&crate::render::PartBudgetCut::new(3, 3, 6))
    );
}

#[test]
fn a_kilobyte_fence_language_is_not_repeated_on_every_part() {
    // Found by `bounded.rs`'s property: the info string was re-emitted on each part of a long
    // fence, so 3.5 KB of input filled 7 Discord parts (14,000 bytes).
    let src = format!("~~~~{}\n{}", "_".repeat(1743), "_".repeat(1743));
    for (name, parts) in parts_of(&src) {
        let total: usize = parts.iter().map(String::len).sum();
        assert!(
            total <= 2 * src.len(),
            "{name}: {total} bytes from {}",
            src.len()
        );
        assert!(
            parts.iter().all(|p| p.matches('_').count() <= 1800),
            "{name}: the language tag repeated in a part"
        );
    }
    // A real tag is kept.
    for (name, parts) in parts_of("```rust\nfn main() {}\n```") {
        if name == "discord" {
            assert!(parts[0].starts_with("```rust\n"), "{name}: {parts:?}");
        }
    }
}
