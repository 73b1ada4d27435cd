//! Bounded waits on a run's log.
//!
//! Each run has a feed: a `watch` channel carrying the run's latest cursor and
//! a short tail of recent events. A waiter subscribes, checks, then sleeps on
//! the channel until the cursor moves or its deadline passes: no polling, and
//! any number of waiters share one wake-up. The tail lets woken waiters read
//! what they missed without a trip to the store.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use protocol::{Event, RunId};
use tokio::sync::watch;

/// Recent events kept per run for waiters.
const TAIL: usize = 1024;

struct Feed {
    cursor: watch::Sender<u64>,
    tail: VecDeque<Arc<Event>>,
}

/// Wakes waiters when a run's log grows.
#[derive(Default)]
pub struct Broker {
    feeds: Mutex<HashMap<RunId, Feed>>,
}

impl Broker {
    /// An empty broker.
    pub fn new() -> Self {
        Self::default()
    }

    fn feed<'a>(feeds: &'a mut HashMap<RunId, Feed>, run: &RunId) -> &'a mut Feed {
        feeds.entry(run.clone()).or_insert_with(|| Feed { cursor: watch::Sender::new(0), tail: VecDeque::new() })
    }

    /// Records committed events and wakes their runs' waiters.
    pub fn publish(&self, events: &[Event]) {
        let mut feeds = self.feeds.lock().expect("broker lock");
        for event in events {
            let feed = Self::feed(&mut feeds, &event.run_id);
            if feed.tail.len() == TAIL {
                feed.tail.pop_front();
            }
            feed.tail.push_back(Arc::new(event.clone()));
            feed.cursor.send_replace(event.cursor);
        }
    }

    /// Sets a run's cursor without events (after a restart, from the store).
    pub fn prime(&self, run: &RunId, cursor: u64) {
        let mut feeds = self.feeds.lock().expect("broker lock");
        Self::feed(&mut feeds, run).cursor.send_replace(cursor);
    }

    /// A receiver of `run`'s cursor. Subscribe *before* reading so that an
    /// append between the read and the sleep still wakes the waiter.
    pub fn subscribe(&self, run: &RunId) -> watch::Receiver<u64> {
        let mut feeds = self.feeds.lock().expect("broker lock");
        Self::feed(&mut feeds, run).cursor.subscribe()
    }

    /// Events of `run` after `after`, up to `limit`, if the tail still holds
    /// all of them; `None` means read the store.
    pub fn tail_after(&self, run: &RunId, after: u64, limit: usize) -> Option<Vec<Arc<Event>>> {
        let feeds = self.feeds.lock().expect("broker lock");
        let feed = feeds.get(run)?;
        let first = feed.tail.front()?.cursor;
        if after + 1 < first {
            return None;
        }
        Some(feed.tail.iter().filter(|e| e.cursor > after).take(limit).cloned().collect())
    }
}
