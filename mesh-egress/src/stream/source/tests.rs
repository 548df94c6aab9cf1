use super::*;
use crate::stream::CutterConfig;

fn reader(
    source: ChunkSource<&'static str>,
    idle: Option<Duration>,
) -> BlockReader<ChunkSource<&'static str>> {
    let cutter = BlockCutter::new(CutterConfig {
        min_block: 1,
        max_block: 4000,
    });
    BlockReader::new(source, cutter, idle)
}

#[tokio::test(start_paused = true)]
async fn the_first_block_is_given_out_before_the_source_ends() {
    let start = Instant::now();
    let source = ChunkSource::delayed([
        (Duration::from_millis(100), "First.\n\n"),
        (Duration::from_millis(100), "Sec"),
        (Duration::from_secs(5), "ond.\n"),
    ]);
    let mut r = reader(source, None);
    // The blank line completes the block: it goes out at 100 ms, not when the source ends.
    assert_eq!(r.next_block().await.unwrap().unwrap(), "First.\n\n");
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert_eq!(r.next_block().await.unwrap().unwrap(), "Second.\n");
    assert_eq!(start.elapsed(), Duration::from_millis(5200));
    assert!(r.next_block().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_quiet_stream_flushes_at_a_word_after_the_idle_period() {
    let start = Instant::now();
    let source = ChunkSource::delayed([
        (Duration::ZERO, "A slow sentence "),
        (Duration::ZERO, "keeps"),
        (Duration::from_secs(10), " going.\n"),
    ]);
    let mut r = reader(source, Some(Duration::from_millis(700)));
    assert_eq!(r.next_block().await.unwrap().unwrap(), "A slow sentence ");
    assert_eq!(start.elapsed(), Duration::from_millis(700));
    assert_eq!(r.next_block().await.unwrap().unwrap(), "keeps going.\n");
    assert_eq!(start.elapsed(), Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn an_error_after_two_blocks_ends_the_stream_with_the_error() {
    let source = ChunkSource::new(["One.\n\n", "Two.\n\n", "Thr"]).then_fail("reset");
    let mut r = reader(source, None);
    assert_eq!(r.next_block().await.unwrap().unwrap(), "One.\n\n");
    r.source_mut().mark_delivered("One.\n\n");
    assert_eq!(r.next_block().await.unwrap().unwrap(), "Two.\n\n");
    r.source_mut().mark_delivered("Two.\n\n");
    assert_eq!(r.next_block().await.unwrap().unwrap_err(), "reset");
    assert!(r.next_block().await.is_none());
    assert_eq!(r.source_mut().delivered(), "One.\n\nTwo.\n\n");
}

/// A hold as the boundary's: a block's end from a `<call>` with nothing after it.
fn held_from(text: &str) -> Option<usize> {
    let at = text.rfind("<call>")?;
    text[at + "<call>".len()..].trim().is_empty().then_some(at)
}

#[tokio::test(start_paused = true)]
async fn an_undecided_end_waits_for_the_next_block_whatever_flushed_it() {
    let start = Instant::now();
    let source = ChunkSource::delayed([
        (Duration::ZERO, "Found it for you.\n<call>\n"),
        (Duration::from_secs(1), "{\"name\": \"search\"}\n\nDone.\n"),
    ]);
    let mut r = reader(source, Some(Duration::from_millis(500))).with_hold(held_from);
    // The idle flush at 500 ms gives the line before the marker; the marker waits.
    assert_eq!(
        r.next_block().await.unwrap().unwrap(),
        "Found it for you.\n"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    assert_eq!(
        r.next_block().await.unwrap().unwrap(),
        "<call>\n{\"name\": \"search\"}\n\n"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(r.next_block().await.unwrap().unwrap(), "Done.\n");
    assert!(r.next_block().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_held_end_goes_out_at_the_end_and_an_error_drops_it() {
    let mut r = reader(ChunkSource::new(["Text.\n\n<call>\n\n"]), None).with_hold(held_from);
    assert_eq!(r.next_block().await.unwrap().unwrap(), "Text.\n\n");
    // Nothing more came: the held end is the last block, for its check to decide.
    assert_eq!(r.next_block().await.unwrap().unwrap(), "<call>\n\n");
    assert!(r.next_block().await.is_none());
    let source = ChunkSource::new(["Text.\n\n", "<call>\n\n", "x"]).then_fail("reset");
    let mut r = reader(source, None).with_hold(held_from);
    assert_eq!(r.next_block().await.unwrap().unwrap(), "Text.\n\n");
    assert_eq!(r.next_block().await.unwrap().unwrap_err(), "reset");
    assert!(r.next_block().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_hold_is_bounded() {
    let long = format!("<call>{}", " ".repeat(MAX_HELD));
    let source = ChunkSource::new([
        Box::leak(format!("{long}\n\n").into_boxed_str()) as &str,
        "Next.\n\n",
    ]);
    let mut r = reader(source, None).with_hold(held_from);
    // Past MAX_HELD the block goes to its check whole.
    assert!(r.next_block().await.unwrap().unwrap().starts_with("<call>"));
}

/// A source that begins its answer again at the `restart_at`th item (as a routed stream does
/// when an attempt fails before anything was shown).
struct Restarting {
    items: VecDeque<&'static str>,
    at: usize,
    restart_at: usize,
    restarted: bool,
}

impl TextSource for Restarting {
    type Error = &'static str;

    async fn next(&mut self) -> Option<Result<String, &'static str>> {
        let item = self.items.pop_front()?;
        self.restarted = self.at == self.restart_at;
        self.at += 1;
        Some(Ok(item.to_owned()))
    }

    fn mark_delivered(&mut self, _text: &str) {}

    fn restarted(&mut self) -> bool {
        std::mem::take(&mut self.restarted)
    }
}

#[tokio::test(start_paused = true)]
async fn a_restarted_source_drops_every_block_and_byte_it_had_not_given_out() {
    let cutter = BlockCutter::new(CutterConfig {
        min_block: 1,
        max_block: 4000,
    });
    let source = Restarting {
        // "One.\n\n" is cut but not given out before the restart; "The dep" is pending.
        items: ["One.\n\nThe dep", "Deploys are green.\n\n", "Done.\n"].into(),
        at: 0,
        restart_at: 1,
        restarted: false,
    };
    let mut r = BlockReader::new(source, cutter, None);
    let mut blocks = Vec::new();
    while let Some(block) = r.next_block().await {
        blocks.push(block.expect("no failure"));
    }
    // The first block went out before the restart was known: only what was still held goes.
    assert_eq!(blocks, ["One.\n\n", "Deploys are green.\n\n", "Done.\n"]);
}
