//! Links and images as the walk writes them: the label collected once, replayed with nested
//! links and images flattened (so the call depth never follows the input's nesting), live only
//! when the link policy allows the target.

use pulldown_cmark::{Event, LinkType};

use super::Dialect;
use super::link::{is_reference, label_disguises, plain_label};
use super::walker::Walker;
use crate::channel::atom::Level;

impl<'a, D: Dialect> Walker<'_, D> {
    /// A link or image (outside any label). Live only when the policy allows its target; a
    /// label that reads as another address shows the target beside it.
    pub(super) fn link(&mut self, url: &str, label: Vec<Event<'a>>, link_type: LinkType) {
        if is_reference(link_type) {
            if self.inline.reference_bytes < url.len() {
                self.inline.in_link = true;
                self.replay(label);
                self.inline.in_link = false;
                return;
            }
            self.inline.reference_bytes -= url.len();
        }
        let shown = plain_label(&label);
        let bare = matches!(link_type, LinkType::Autolink | LinkType::Email);
        if bare || shown.trim().is_empty() || shown == url {
            if !url.is_empty() {
                self.flush();
                self.word(url, true);
            }
            return;
        }
        let live = if self.links.allows(url) {
            self.d.link(url).filter(|pair| {
                pair.open.chars().count() + pair.close.chars().count() <= self.link_markup_cap
            })
        } else {
            None
        };
        self.inline.in_link = true;
        match live {
            Some(pair) => {
                self.flush();
                let id = self.open(pair);
                self.replay(label);
                self.out.close(id);
                if label_disguises(&shown, url) {
                    self.beside(url);
                }
            }
            None => {
                self.replay(label);
                if !url.is_empty() {
                    self.beside(url);
                }
            }
        }
        self.inline.in_link = false;
    }

    /// A URL in parentheses after a label, as text.
    fn beside(&mut self, url: &str) {
        self.out.space(" ", Level::Word, false);
        self.word(&format!("({url})"), true);
    }

    /// Writes a label's events. Called only with `in_link` set, so links and images inside
    /// are not collected again: the call depth stays constant.
    fn replay(&mut self, label: Vec<Event<'a>>) {
        debug_assert!(self.inline.in_link);
        let mut events = label.into_iter();
        while let Some(mut event) = events.next() {
            self.event(&mut event, &mut events);
        }
    }
}
