//! A streamed answer under the policy's silence tokens: [`Unsilenced`] cuts them out of the
//! text deltas before the block cutter sees them, holding back a delta's end that could still
//! grow into one (`NO_RE` before `PLY`), so a token split across deltas never reaches a block.

use crate::egress::Attribution;
use crate::ledger::{Ledger, LedgerRecord, SilenceRecord};
use crate::silence::{SilenceFilter, SilenceTokens};
use crate::stream::TextSource;

/// A [`TextSource`] with the silence tokens cut out (a pass-through when none is declared).
#[derive(Debug)]
pub(crate) struct Unsilenced<S> {
    source: S,
    filter: Option<SilenceFilter>,
    ended: bool,
    restarted: bool,
}

impl<S: TextSource> Unsilenced<S> {
    pub(crate) fn new(source: S, tokens: &SilenceTokens) -> Self {
        Self {
            source,
            filter: (!tokens.is_empty()).then(|| tokens.filter()),
            ended: false,
            restarted: false,
        }
    }

    /// The token the stream answered with, when it ended and showed nothing but tokens.
    pub(crate) fn silence_token(&self) -> Option<&str> {
        self.filter.as_ref().and_then(SilenceFilter::first_token)
    }

    /// Records what was cut on `ledger`: the reply was only a token (`silent`), or tokens were
    /// cut from an answer.
    pub(crate) fn record(&self, ledger: &Ledger, attribution: &Attribution, silent: bool) {
        let Some(filter) = &self.filter else {
            return;
        };
        let record = match (silent, filter.first_token()) {
            (_, None) => return,
            (true, Some(token)) => SilenceRecord::Silent {
                token: token.to_owned(),
            },
            (false, Some(_)) => SilenceRecord::Removed {
                count: filter.removed(),
            },
        };
        ledger.record(attribution, LedgerRecord::Silence(record));
    }
}

/// Cancel-safe as its source is: each delta is filtered synchronously once the source gave it.
impl<S: TextSource> TextSource for Unsilenced<S> {
    type Error = S::Error;

    async fn next(&mut self) -> Option<Result<String, S::Error>> {
        let Some(filter) = self.filter.as_mut() else {
            return self.source.next().await;
        };
        loop {
            if self.ended {
                return None;
            }
            match self.source.next().await {
                Some(Ok(delta)) => {
                    if self.source.restarted() {
                        // What the filter held back was never shown either.
                        filter.restart();
                        self.restarted = true;
                    }
                    let shown = filter.push(&delta);
                    if !shown.is_empty() {
                        return Some(Ok(shown));
                    }
                }
                // A held-back tail was never shown; the failure goes on as it came.
                Some(Err(error)) => return Some(Err(error)),
                None => {
                    self.ended = true;
                    let rest = filter.finish();
                    return (!rest.is_empty()).then_some(Ok(rest));
                }
            }
        }
    }

    fn mark_delivered(&mut self, text: &str) {
        self.source.mark_delivered(text);
    }

    fn restarted(&mut self) -> bool {
        std::mem::take(&mut self.restarted) | self.source.restarted()
    }
}
