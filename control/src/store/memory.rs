//! An in-memory [`Store`]: the reference implementation of the contract, and
//! the base of fault-injecting stores in tests. Not durable.

use std::collections::HashMap;
use std::sync::Mutex;

use protocol::{Event, RunId};

use super::{Batch, IdempotencyRecord, Store, StoreError, check_group};

#[derive(Default)]
struct Inner {
    runs: Vec<RunId>,
    logs: HashMap<RunId, Vec<Event>>,
    keys: HashMap<(String, String), IdempotencyRecord>,
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
        check_group(group, |run| Ok(inner.logs.get(run).map_or(0, |log| log.len() as u64)))?;
        let keys = group.iter().filter_map(|b| b.idempotency.as_ref());
        if keys.clone().any(|rec| inner.keys.contains_key(&(rec.scope.clone(), rec.key.clone()))) {
            return Err(StoreError::DuplicateKey);
        }
        for rec in keys {
            inner.keys.insert((rec.scope.clone(), rec.key.clone()), rec.clone());
        }
        for event in group.iter().flat_map(|b| &b.events) {
            if !inner.logs.contains_key(&event.run_id) {
                inner.runs.push(event.run_id.clone());
            }
            inner.logs.entry(event.run_id.clone()).or_default().push(event.clone());
        }
        Ok(())
    }

    fn replay(&self, visit: &mut dyn FnMut(Event) -> Result<(), StoreError>) -> Result<(), StoreError> {
        let inner = self.0.lock().expect("store lock");
        for run in &inner.runs {
            for event in &inner.logs[run] {
                visit(event.clone())?;
            }
        }
        Ok(())
    }

    fn events_after(&self, run: &RunId, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let inner = self.0.lock().expect("store lock");
        let log = inner.logs.get(run).map(Vec::as_slice).unwrap_or_default();
        Ok(log.iter().skip(after as usize).take(limit).cloned().collect())
    }

    fn idempotency(&self, scope: &str, key: &str) -> Result<Option<IdempotencyRecord>, StoreError> {
        let inner = self.0.lock().expect("store lock");
        Ok(inner.keys.get(&(scope.to_owned(), key.to_owned())).cloned())
    }
}
