//! A client's rate budgets, one per chat, bounded: the least recently used is forgotten first.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use crate::channel::stream::{BudgetConfig, RateBudget};

/// How many chats' rate budgets a client remembers by default (see each client's
/// `with_budget_capacity`). A budget is a few hundred bytes; ten thousand of them are a few
/// megabytes, whatever the number of chats the bot is in.
pub(crate) const DEFAULT_BUDGET_CAPACITY: usize = 10_000;

/// The budgets of one client's chats, shared by the client and every channel made from it.
///
/// Bounded: past its capacity, the budget used longest ago is forgotten. A channel still
/// holding a forgotten budget keeps spending it; the next channel made for that chat starts
/// a fresh one, so at worst one surface answer (a 429) is learnt again.
#[derive(Clone)]
pub(crate) struct Budgets(Arc<Mutex<Lru>>);

struct Lru {
    capacity: usize,
    /// Counts every use: the order in which budgets were last used.
    tick: u64,
    entries: HashMap<String, (RateBudget, u64)>,
    /// Each entry's last use, oldest first.
    order: BTreeMap<u64, String>,
}

impl Budgets {
    /// An empty map keeping at most `capacity` budgets (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self(Arc::new(Mutex::new(Lru {
            capacity: capacity.max(1),
            tick: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The budget of `chat`, made with `config` when none is remembered.
    pub(crate) fn get_or_make(
        &self,
        chat: &str,
        config: impl FnOnce() -> BudgetConfig,
    ) -> RateBudget {
        let mut lru = self.lock();
        if let Some(budget) = lru.touch(chat) {
            return budget;
        }
        let budget = RateBudget::new(config());
        lru.insert(chat, budget.clone());
        budget
    }

    /// Makes `budget` the one remembered for `chat` (a channel that set a budget of its own).
    pub(crate) fn replace(&self, chat: &str, budget: RateBudget) {
        let mut lru = self.lock();
        if let Some((_, used)) = lru.entries.remove(chat) {
            lru.order.remove(&used);
        }
        lru.insert(chat, budget);
    }

    /// How many budgets are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

impl Lru {
    fn next_tick(&mut self) -> u64 {
        self.tick = self.tick.wrapping_add(1);
        self.tick
    }

    /// The remembered budget of `chat`, marked as just used.
    fn touch(&mut self, chat: &str) -> Option<RateBudget> {
        let tick = self.next_tick();
        let (budget, used) = self.entries.get_mut(chat)?;
        let old = std::mem::replace(used, tick);
        let budget = budget.clone();
        self.order.remove(&old);
        self.order.insert(tick, chat.to_owned());
        Some(budget)
    }

    fn insert(&mut self, chat: &str, budget: RateBudget) {
        while self.entries.len() >= self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        let tick = self.next_tick();
        self.entries.insert(chat.to_owned(), (budget, tick));
        self.order.insert(tick, chat.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config() -> BudgetConfig {
        BudgetConfig::new(Duration::from_secs(1))
    }

    #[test]
    fn one_chat_has_one_budget() {
        let budgets = Budgets::new(8);
        let first = budgets.get_or_make("C1", config);
        let again = budgets.get_or_make("C1", || panic!("made twice"));
        assert!(first.shares_with(&again));
        assert!(!first.shares_with(&budgets.get_or_make("C2", config)));
    }

    #[test]
    fn the_map_never_holds_more_than_its_capacity_and_forgets_the_least_recently_used() {
        let budgets = Budgets::new(3);
        let a = budgets.get_or_make("a", config);
        budgets.get_or_make("b", config);
        budgets.get_or_make("c", config);
        // `a` is used again: `b` is now the one used longest ago.
        budgets.get_or_make("a", config);
        budgets.get_or_make("d", config);
        assert_eq!(budgets.len(), 3);
        assert!(budgets.get_or_make("a", config).shares_with(&a));
        let mut made = false;
        budgets.get_or_make("b", || {
            made = true;
            config()
        });
        assert!(made, "b was forgotten and made afresh");
        for chat in 0..10_000 {
            budgets.get_or_make(&format!("chat-{chat}"), config);
        }
        assert_eq!(budgets.len(), 3, "a million chats would not grow it either");
    }

    #[test]
    fn a_replaced_budget_is_the_one_later_channels_share() {
        let budgets = Budgets::new(2);
        budgets.get_or_make("C1", config);
        let custom = RateBudget::new(BudgetConfig::new(Duration::from_millis(5)));
        budgets.replace("C1", custom.clone());
        assert!(budgets.get_or_make("C1", config).shares_with(&custom));
        budgets.replace("C2", RateBudget::new(config()));
        budgets.replace("C3", RateBudget::new(config()));
        assert_eq!(budgets.len(), 2);
    }

    #[test]
    fn a_capacity_of_zero_keeps_one() {
        let budgets = Budgets::new(0);
        budgets.get_or_make("a", config);
        budgets.get_or_make("b", config);
        assert_eq!(budgets.len(), 1);
    }
}
