use super::*;
use proptest::prelude::*;

fn cutter(min_block: usize) -> BlockCutter {
    BlockCutter::new(CutterConfig {
        min_block,
        max_block: 100_000,
    })
}

fn all_blocks(c: &mut BlockCutter, deltas: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for d in deltas {
        out.extend(c.push(d));
    }
    out.extend(c.finish());
    out
}

#[test]
fn paragraphs_are_cut_after_the_blank_line() {
    let blocks = all_blocks(&mut cutter(1), &["One.\n\nTwo.\n\nThree."]);
    assert_eq!(blocks, vec!["One.\n\n", "Two.\n\n", "Three."]);
}

#[test]
fn a_fence_is_never_split_even_by_blank_lines_inside_it() {
    let text = "Intro.\n\n```rust\nfn a() {}\n\nfn b() {}\n```\nAfter.";
    let blocks = all_blocks(&mut cutter(1), &[text]);
    assert_eq!(
        blocks,
        vec![
            "Intro.\n\n",
            "```rust\nfn a() {}\n\nfn b() {}\n```\n",
            "After."
        ]
    );
}

#[test]
fn list_items_start_blocks() {
    let blocks = all_blocks(&mut cutter(1), &["Steps:\n- one\n- two\n1. three\n"]);
    assert_eq!(blocks, vec!["Steps:\n", "- one\n", "- two\n", "1. three\n"]);
}

#[test]
fn the_minimum_size_joins_short_paragraphs() {
    let blocks = all_blocks(&mut cutter(12), &["A.\n\nB.\n\nC is longer.\n\nD."]);
    assert_eq!(blocks, vec!["A.\n\nB.\n\nC is longer.\n\n", "D."]);
}

#[test]
fn nothing_is_cut_inside_an_open_reasoning_tag() {
    let text = "<think>\nplan a\n\nplan b\n</think>\n\nAnswer.\n\nMore.";
    let blocks = all_blocks(&mut cutter(1), &[text]);
    assert_eq!(
        blocks,
        vec![
            "<think>\nplan a\n\nplan b\n</think>\n\n",
            "Answer.\n\n",
            "More."
        ]
    );
}

#[test]
fn an_idle_flush_cuts_at_a_word_outside_code_links_and_entities() {
    let mut c = cutter(1);
    assert!(
        c.push("see [the docs here](http://x y) and `a b` &amp; more")
            .is_empty()
    );
    let block = c.flush_idle().expect("a safe word boundary exists");
    assert_eq!(block, "see [the docs here](http://x y) and `a b` &amp; ");
    assert_eq!(c.pending(), "more");
}

#[test]
fn an_idle_flush_waits_inside_a_fence() {
    let mut c = cutter(1);
    c.push("```\ncode line\nmore ");
    assert_eq!(c.flush_idle(), None);
}

#[test]
fn the_cap_cuts_a_long_fence_and_reopens_it() {
    let mut c = BlockCutter::new(CutterConfig {
        min_block: 1,
        max_block: 64,
    });
    let body: String = (0..10).map(|i| format!("line {i} of code\n")).collect();
    let blocks = all_blocks(&mut c, &["```py\n", &body, "```\n"]);
    assert!(blocks.len() > 1);
    for b in &blocks {
        assert!(b.len() <= 64 + 8, "{b:?}");
        let mut check = cutter(1);
        check.push(b);
        check.push("\n");
        assert!(check.fence.is_none(), "unbalanced fence in {b:?}");
    }
    assert!(blocks[1].starts_with("```py\n"));
}

#[test]
fn the_cap_never_splits_a_grapheme() {
    let mut c = BlockCutter::new(CutterConfig {
        min_block: 1,
        max_block: 64,
    });
    let family = "👨\u{200d}👩\u{200d}👧";
    let text = family.repeat(20);
    let blocks = all_blocks(&mut c, &[&text]);
    assert_eq!(blocks.concat(), text);
    for b in &blocks {
        assert!(b.len() % family.len() == 0, "split cluster in {b:?}");
    }
}

const PIECES: &[&str] = &[
    "Plain words here. ",
    "\n\n",
    "\n",
    "- item one\n",
    "2. second\n",
    "```rust\nlet x = 1;\n\nlet y = 2;\n```\n",
    "~~~\n~~~\n",
    "[a link](http://a.b/c d) ",
    "`code span` ",
    "&amp; ",
    "e\u{301} ",
    "👨\u{200d}👩\u{200d}👧 ",
    "<think>\nhidden\n\nstill\n</think>\n",
    "x",
];

fn text_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|p| p.concat())
}

proptest! {
    #[test]
    fn random_chunkings_give_the_same_blocks(
        text in text_strategy(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..30),
        min_block in 1usize..60,
    ) {
        let whole = all_blocks(&mut cutter(min_block), &[&text]);
        let mut offsets: Vec<usize> = cuts
            .iter()
            .map(|i| floor_char_boundary(&text, i.index(text.len() + 1)))
            .collect();
        offsets.sort_unstable();
        offsets.dedup();
        let mut deltas = Vec::new();
        let mut last = 0;
        for o in offsets {
            deltas.push(&text[last..o]);
            last = o;
        }
        deltas.push(&text[last..]);
        let chunked = all_blocks(&mut cutter(min_block), &deltas);
        prop_assert_eq!(&chunked, &whole);
        prop_assert_eq!(whole.concat(), text.clone());
        let mut at = 0;
        for (n, b) in whole.iter().enumerate() {
            prop_assert!(!b.is_empty());
            at += b.len();
            prop_assert!(at == text.len() || grapheme_boundary(&text, at));
            // The last block may hold a fence the text itself never closes.
            if n + 1 < whole.len() {
                let mut check = cutter(1);
                check.push(b);
                check.push("\n");
                prop_assert!(check.fence.is_none(), "block splits a fence: {:?}", b);
            }
        }
    }
}
