//! The edge-case table: every case is rendered for every channel and must keep every
//! invariant of [`check`]; the tests after it pin the exact behaviour case by case.

use super::support::{ALL, Ch, check, telegram_entities};
use crate::render::RenderError;

const FAMILY: &str = "👨‍👩‍👧‍👦";
const FLAG: &str = "🇩🇪";
const SKIN: &str = "👍🏽";
const KEYCAP: &str = "1️⃣";

/// (name, Markdown, limit in the channel's unit)
fn cases() -> Vec<(&'static str, String, usize)> {
    let long_code: String = (0..40).map(|i| format!("let x{i} = {i};\n")).collect();
    vec![
        (
            "fence longer than the limit",
            format!("```rust\n{long_code}```"),
            80,
        ),
        (
            "fence whose body is one long line",
            format!("```\n{}\n```", "y".repeat(500)),
            60,
        ),
        (
            "unclosed fence",
            format!("text\n\n```python\n{long_code}"),
            70,
        ),
        (
            "tilde fence containing three backticks",
            "~~~\na ``` b\n```\nc\n~~~".to_owned(),
            40,
        ),
        (
            "four-backtick fence containing three backticks",
            "````md\n```\ninner\n```\n````".to_owned(),
            40,
        ),
        (
            "word longer than the limit",
            format!("short {} tail", "w".repeat(300)),
            50,
        ),
        (
            "URL longer than the limit",
            format!("see https://example.com/{} now", "p".repeat(300)),
            50,
        ),
        (
            "link with long URL and short label",
            format!("go [here](https://example.com/{}) now", "q".repeat(120)),
            200,
        ),
        (
            "ZWJ family at the boundary",
            format!("{}{FAMILY} after", "a".repeat(28)),
            30,
        ),
        (
            "flags at the boundary",
            format!("{}{FLAG}{FLAG}{FLAG}", "a".repeat(27)),
            30,
        ),
        (
            "skin tones at the boundary",
            format!("{}{SKIN}{SKIN}", "a".repeat(29)),
            30,
        ),
        (
            "keycaps at the boundary",
            format!("{}{KEYCAP}{KEYCAP}", "a".repeat(29)),
            30,
        ),
        (
            "surrogate pair at limit-1",
            format!("{}😀", "x".repeat(29)),
            30,
        ),
        ("combining marks", "e\u{301}\u{302}".repeat(40), 25),
        ("Indic conjuncts", "क्षत्रिय ".repeat(20), 25),
        (
            "RTL with bidi marks",
            "\u{202B}שלום עולם\u{202C} \u{200F}مرحبا بالعالم ".repeat(8),
            40,
        ),
        ("CJK without spaces", "漢字かな交じり文。".repeat(20), 30),
        (
            "Telegram escaping in code and URLs with )",
            "`a<b>&c` [x](https://e.com/a_(b)) <i>".to_owned(),
            100,
        ),
        ("4096 !", "!".repeat(4096), 4096),
        ("4096 <", "<".repeat(4096), 4096),
        ("more than 100 entities", "**b** ".repeat(150), 4096),
        (
            "bold cut by a boundary",
            format!("**{}**", "bold words ".repeat(20).trim_end()),
            50,
        ),
        (
            "nested lists across parts",
            "- one\n  - two two two\n    - three three three\n  - four four\n- five five five\n"
                .repeat(4),
            40,
        ),
        (
            "quotes across parts",
            "> quoted words that go on and on\n> and more words\n>\n> > nested quote here too\n"
                .repeat(3),
            40,
        ),
        (
            "wide table",
            format!(
                "| {} | b |\n|---|---|\n| {} | d |",
                "h".repeat(90),
                "c".repeat(90)
            ),
            60,
        ),
        (
            "CRLF input",
            "line one\r\nline two\r\n\r\n- item\r\n- item two\r\n".to_owned(),
            20,
        ),
        (
            "raw HTML",
            "<div class=\"x\">\n<b>bold?</b>\n</div>\n\ntext <span>inline</span>".to_owned(),
            30,
        ),
        (
            "image",
            "![a diagram](https://example.com/d.png) and ![](https://example.com/e.png)".to_owned(),
            60,
        ),
    ]
}

#[test]
fn every_edge_case_keeps_every_invariant_on_every_channel() {
    for (name, src, limit) in cases() {
        for ch in ALL {
            if let Err(e) = check(ch, &src, limit) {
                panic!("{name}: {ch:?} failed: {e}");
            }
        }
    }
}

#[test]
fn a_fence_longer_than_the_limit_is_closed_and_reopened_with_its_language() {
    let code: String = (0..40).map(|i| format!("let x{i} = {i};\n")).collect();
    let parts = Ch::Discord.texts(&format!("```rust\n{code}```"), 80);
    assert!(parts.len() > 1);
    for part in &parts {
        assert!(part.starts_with("```rust\n"), "{part:?}");
        assert!(part.ends_with("\n```"), "{part:?}");
    }
    let tg = Ch::Telegram.texts(&format!("```rust\n{code}```"), 80);
    for part in &tg {
        assert!(
            part.starts_with("<pre><code class=\"language-rust\">"),
            "{part:?}"
        );
        assert!(part.ends_with("</code></pre>"), "{part:?}");
    }
}

#[test]
fn a_fence_body_of_one_long_line_is_hard_cut_inside_the_fence() {
    let parts = Ch::Discord.texts(&format!("```\n{}\n```", "y".repeat(500)), 60);
    assert!(parts.len() >= 9);
    for part in &parts {
        let body = part
            .strip_prefix("```\n")
            .and_then(|p| p.strip_suffix("\n```"));
        assert!(
            body.is_some_and(|b| b.chars().all(|c| c == 'y')),
            "{part:?}"
        );
    }
    let ys: usize = parts.iter().map(|p| p.matches('y').count()).sum();
    assert_eq!(ys, 500);
}

#[test]
fn an_unclosed_fence_is_closed_at_the_end() {
    let parts = Ch::Discord.texts("```sh\necho hi", 2000);
    assert_eq!(parts, ["```sh\necho hi\n```"]);
}

#[test]
fn backticks_inside_a_fence_cannot_close_it() {
    for src in ["~~~\na ``` b\n~~~", "````\n```\n````"] {
        for ch in [Ch::Discord, Ch::Slack] {
            let parts = ch.texts(src, 2000);
            assert_eq!(parts.len(), 1);
            assert_eq!(parts[0].matches("```").count(), 2, "{ch:?}: {:?}", parts[0]);
        }
        let tg = Ch::Telegram.texts(src, 4096);
        assert!(
            tg[0].contains("```"),
            "Telegram keeps backticks verbatim: {:?}",
            tg[0]
        );
    }
}

#[test]
fn a_word_longer_than_the_limit_is_hard_cut_and_nothing_is_lost() {
    let word = "w".repeat(300);
    for ch in ALL {
        let parts = ch.texts(&format!("short {word} tail"), 50);
        let joined: String = parts.concat();
        assert_eq!(joined.matches('w').count(), 300, "{ch:?}");
        assert!(parts.iter().all(|p| ch.measure(p) <= 50));
        assert_eq!(
            parts[0], "short",
            "{ch:?} breaks at the space before the long word"
        );
    }
}

#[test]
fn a_link_with_a_long_url_and_short_label_stays_whole() {
    let url = format!("https://example.com/{}", "q".repeat(120));
    let src = format!("go [here](https://example.com/{}) now", "q".repeat(120));
    assert_eq!(
        Ch::Discord.texts(&src, 200),
        [format!("go [here](<{url}>) now")]
    );
    assert_eq!(Ch::Slack.texts(&src, 200), [format!("go <{url}|here> now")]);
    // Telegram measures after entity parsing: the href costs nothing.
    assert_eq!(
        Ch::Telegram.texts(&src, 11),
        [format!("go <a href=\"{url}\">here</a> now")]
    );
    assert_eq!(Ch::Plain.texts(&src, 200), [format!("go here ({url}) now")]);
}

#[test]
fn emoji_sequences_at_the_boundary_move_whole_to_the_next_part() {
    for emoji in [FAMILY, FLAG, SKIN, KEYCAP] {
        let width = emoji.chars().count();
        // The sequence would end one code point past the limit.
        let src = format!("{}{emoji}", "a".repeat(31 - width));
        let parts = Ch::Discord.texts(&src, 30);
        assert_eq!(parts, ["a".repeat(31 - width), emoji.to_owned()], "{emoji}");
        // Exactly at the limit it fits.
        let src = format!("{}{emoji}", "a".repeat(30 - width));
        assert_eq!(Ch::Discord.texts(&src, 30), vec![src.clone()], "{emoji}");
    }
}

#[test]
fn a_surrogate_pair_at_limit_minus_one_moves_to_the_next_telegram_part() {
    let parts = Ch::Telegram.texts(&format!("{}😀", "x".repeat(29)), 30);
    assert_eq!(parts, ["x".repeat(29), "😀".to_owned()]);
    let parts = Ch::Telegram.texts(&format!("{}😀", "x".repeat(28)), 30);
    assert_eq!(parts.len(), 1);
}

#[test]
fn cjk_without_spaces_breaks_after_sentence_punctuation() {
    let parts = Ch::Discord.texts(&"漢字かな交じり文。".repeat(20), 30);
    assert!(parts.len() > 1);
    for part in &parts[..parts.len() - 1] {
        assert!(part.ends_with('。'), "{part:?}");
    }
}

#[test]
fn telegram_escapes_code_and_urls_exactly() {
    let parts = Ch::Telegram.texts("`a<b>&c` [x](https://e.com/a_(b)?q=\"1\"&r=2) <i>", 4096);
    assert_eq!(
        parts,
        [
            "<code>a&lt;b&gt;&amp;c</code> <a href=\"https://e.com/a_(b)?q=&quot;1&quot;&amp;r=2\">x</a> &lt;i&gt;"
        ]
    );
}

#[test]
fn telegram_shows_a_relative_link_as_text() {
    assert_eq!(
        Ch::Telegram.texts("see [notes](docs/a<b>.md)", 4096),
        ["see notes (docs/a&lt;b&gt;.md)"]
    );
}

#[test]
fn slack_escapes_exactly_ampersand_and_angle_brackets() {
    let parts = Ch::Slack.texts("a & b < c > d \"e\" 'f' `<&>`", 3000);
    assert_eq!(parts, ["a &amp; b &lt; c &gt; d \"e\" 'f' `&lt;&amp;&gt;`"]);
}

#[test]
fn telegram_counts_entities_as_one_character() {
    assert_eq!(Ch::Telegram.texts(&"!".repeat(4096), 4096).len(), 1);
    let lt = Ch::Telegram.texts(&"<".repeat(4096), 4096);
    assert_eq!(lt, ["&lt;".repeat(4096)]);
    assert_eq!(Ch::Telegram.texts(&"<".repeat(4097), 4096).len(), 2);
}

#[test]
fn telegram_parts_hold_at_most_one_hundred_entities() {
    let parts = Ch::Telegram.texts(&"**b** ".repeat(150), 4096);
    assert_eq!(parts.len(), 2);
    assert_eq!(telegram_entities(&parts[0]), 100);
    assert_eq!(telegram_entities(&parts[1]), 50);
}

#[test]
fn bold_cut_by_a_boundary_is_closed_and_reopened() {
    let parts = Ch::Discord.texts(&format!("**{}**", "bold words ".repeat(20).trim_end()), 50);
    assert!(parts.len() > 1);
    for part in &parts {
        assert!(part.starts_with("**") && part.ends_with("**"), "{part:?}");
        assert!(part.chars().count() <= 50);
    }
    let tg = Ch::Telegram.texts(&format!("**{}**", "bold words ".repeat(20).trim_end()), 50);
    assert!(
        tg.iter()
            .all(|p| p.starts_with("<b>") && p.ends_with("</b>"))
    );
}

#[test]
fn quotes_keep_their_prefix_across_parts() {
    let src = "> one two three four five six seven eight nine ten eleven twelve";
    let parts = Ch::Discord.texts(src, 30);
    assert!(parts.len() > 1);
    assert!(parts.iter().all(|p| p.starts_with("> ")), "{parts:?}");
    let tg = Ch::Telegram.texts(src, 30);
    assert!(
        tg.iter()
            .all(|p| p.starts_with("<blockquote>") && p.ends_with("</blockquote>"))
    );
}

#[test]
fn nested_lists_keep_their_bullets_and_indentation() {
    let parts = Ch::Discord.texts("- one\n  - two\n    - three\n- four", 2000);
    assert_eq!(parts, ["- one\n  - two\n    - three\n- four"]);
    let plain = Ch::Plain.texts("1. one\n2. two\n   - inner", 2000);
    assert_eq!(plain, ["1. one\n2. two\n   ◦ inner"]);
}

#[test]
fn a_table_becomes_a_code_block() {
    let src = "| a | bb |\n|---|---:|\n| ccc | d |";
    assert_eq!(
        Ch::Discord.texts(src, 2000),
        ["```\na   | bb\n----+---\nccc |  d\n```"]
    );
    assert_eq!(
        Ch::Telegram.texts(src, 4096),
        ["<pre>a   | bb\n----+---\nccc |  d</pre>"]
    );
}

#[test]
fn crlf_input_renders_like_lf() {
    for ch in ALL {
        let crlf = ch.texts("a\r\nb\r\n\r\n- c\r\n", 2000);
        let lf = ch.texts("a\nb\n\n- c\n", 2000);
        assert_eq!(crlf, lf, "{ch:?}");
        assert!(!crlf[0].contains('\r'));
    }
}

#[test]
fn output_exactly_at_the_limit_is_one_part_and_one_more_is_two() {
    for ch in ALL {
        let at = "abcd ".repeat(8) + "abc"; // 43
        assert_eq!(ch.texts(&at, 43).len(), 1, "{ch:?}");
        assert_eq!(ch.texts(&at, 42).len(), 2, "{ch:?}");
    }
    // Escapes count as sent on Slack and Discord.
    assert_eq!(Ch::Slack.texts("a&b", 7).len(), 1);
    assert_eq!(Ch::Slack.texts("a&b", 6), ["a&amp;", "b"]);
    assert_eq!(Ch::Discord.texts("a*b", 4).len(), 1);
}

#[test]
fn raw_html_is_shown_as_text_not_passed_through() {
    let src = "<b>bold?</b>\n\ntext <span>x</span>";
    assert_eq!(
        Ch::Telegram.texts(src, 4096),
        ["&lt;b&gt;bold?&lt;/b&gt;\n\ntext &lt;span&gt;x&lt;/span&gt;"]
    );
    assert_eq!(
        Ch::Plain.texts(src, 4096),
        ["<b>bold?</b>\n\ntext <span>x</span>"]
    );
    assert_eq!(
        Ch::Discord.texts(src, 2000),
        ["\\<b\\>bold?\\</b\\>\n\ntext \\<span\\>x\\</span\\>"]
    );
}

#[test]
fn images_render_as_links() {
    let src = "![a diagram](https://e.com/d.png)";
    assert_eq!(
        Ch::Discord.texts(src, 2000),
        ["[a diagram](<https://e.com/d.png>)"]
    );
    assert_eq!(
        Ch::Plain.texts(src, 2000),
        ["a diagram (https://e.com/d.png)"]
    );
    assert_eq!(
        Ch::Plain.texts("![](https://e.com/e.png)", 2000),
        ["https://e.com/e.png"]
    );
}

#[test]
fn a_limit_smaller_than_an_atom_is_a_typed_error() {
    assert_eq!(
        Ch::Slack.parts("<", 3),
        Err(RenderError::LimitTooSmall {
            limit: 3,
            needed: 4
        })
    );
    assert_eq!(
        Ch::Telegram.parts("😀", 1),
        Err(RenderError::LimitTooSmall {
            limit: 1,
            needed: 2
        })
    );
    assert_eq!(
        Ch::Discord.parts("**x**", 4),
        Err(RenderError::LimitTooSmall {
            limit: 4,
            needed: 5
        })
    );
    for ch in ALL {
        assert!(matches!(
            ch.parts("hello", 0),
            Err(RenderError::LimitTooSmall { .. })
        ));
    }
}

#[test]
fn an_empty_or_whitespace_body_is_a_typed_error() {
    for ch in ALL {
        for src in ["", "   ", "\n\t\r\n", "<!-- -->\n"] {
            let got = ch.parts(src, 100);
            if src.contains("<!--") {
                // A comment is raw HTML: shown, never dropped.
                assert!(got.is_ok(), "{ch:?}");
            } else {
                assert_eq!(got, Err(RenderError::Empty), "{ch:?} {src:?}");
            }
        }
    }
}
