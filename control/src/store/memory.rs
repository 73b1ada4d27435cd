//! An in-memory [`Store`]: the reference implementation of the contract, and
//! the base of fault-injecting stores in tests. Not durable.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use protocol::{Event, MessageId, RunId, WorkerId};

use super::{Batch, IdempotencyRecord, Pruned, Snapshot, Store, StoreError, check_group, message_entry, scope_owner};

#[derive(Default)]
struct Inner {
    /// Every event with its position (the count of events appended before
    /// it, plus one), in commit order.
    log: Vec<(u64, Event)>,
    /// Each run's last cursor.
    cursors: HashMap<RunId, u64>,
    appended: u64,
    keys: HashMap<(String, String), IdempotencyRecord>,
    messages: HashMap<MessageId, (RunId, WorkerId)>,
    snapshot: Option<Snapshot>,
}

/// Keeps everything in memory.
#[derive(Default)]
pub struct MemoryStore(Mutex<Inner>);

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Store for MemoryStore {
    fn append_group(&self, group: &[Batch]) -> Result<(), StoreError> {
        let mut inner = self.0.lock().expect("store lock");
        check_group(group, |run| Ok(inner.cursors.get(run).copied().unwrap_or(0)))?;
        let keys = group.iter().filter_map(|b| b.idempotency.as_ref());
        if keys.clone().any(|rec| inner.keys.contains_key(&(rec.scope.clone(), rec.key.clone()))) {
            return Err(StoreError::DuplicateKey);
        }
        for rec in keys {
            inner.keys.insert((rec.scope.clone(), rec.key.clone()), rec.clone());
        }
        for event in group.iter().flat_map(|b| &b.events) {
            if let Some((id, run, to)) = message_entry(event) {
                inner.messages.entry(id.clone()).or_insert_with(|| (run.clone(), to.clone()));
            }
            inner.appended += 1;
            let position = inner.appended;
            inner.cursors.insert(event.run_id.clone(), event.cursor);
            inner.log.push((position, event.clone()));
        }
        Ok(())
    }

    fn replay_after(
        &self,
        position: u64,
        visit: &mut dyn FnMut(Event) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let inner = self.0.lock().expect("store lock");
        for (_, event) in inner.log.iter().filter(|(p, _)| *p > position) {
            visit(event.clone())?;
        }
        Ok(())
    }

    fn events_after(&self, run: &RunId, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let inner = self.0.lock().expect("store lock");
        let events = inner.log.iter().map(|(_, e)| e).filter(|e| &e.run_id == run && e.cursor > after);
        Ok(events.take(limit).cloned().collect())
    }

    fn idempotency(&self, scope: &str, key: &str) -> Result<Option<IdempotencyRecord>, StoreError> {
        let inner = self.0.lock().expect("store lock");
        Ok(inner.keys.get(&(scope.to_owned(), key.to_owned())).cloned())
    }

    fn save_snapshot(&self, state: &[u8]) -> Result<(), StoreError> {
        let mut inner = self.0.lock().expect("store lock");
        let position = inner.log.last().map_or(0, |(p, _)| *p);
        inner.snapshot = Some(Snapshot { position, state: state.to_vec() });
        Ok(())
    }

    fn snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        Ok(self.0.lock().expect("store lock").snapshot.clone())
    }

    fn message(&self, id: &MessageId) -> Result<Option<(RunId, WorkerId)>, StoreError> {
        Ok(self.0.lock().expect("store lock").messages.get(id).cloned())
    }

    fn prune(&self, runs: &[RunId], owners: &HashSet<String>, dry: bool) -> Result<Pruned, StoreError> {
        let mut inner = self.0.lock().expect("store lock");
        let theirs = |scope: &str, response: &str| {
            if scope.contains(':') {
                owners.contains(scope_owner(scope))
            } else {
                runs.iter().any(|run| response.contains(run.as_str()))
            }
        };
        let pruned = Pruned {
            runs: runs.len(),
            events: inner.log.iter().filter(|(_, e)| runs.contains(&e.run_id)).count() as u64,
            idempotency_records: inner.keys.values().filter(|r| theirs(&r.scope, &r.response)).count() as u64,
        };
        if !dry {
            inner.log.retain(|(_, e)| !runs.contains(&e.run_id));
            inner.messages.retain(|_, (run, _)| !runs.contains(run));
            inner.keys.retain(|_, r| !theirs(&r.scope, &r.response));
            for run in runs {
                inner.cursors.remove(run);
            }
            inner.snapshot = None;
        }
        Ok(pruned)
    }
}
