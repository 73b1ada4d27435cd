//! Durable storage behind one small trait.
//!
//! The store keeps the per-run event logs and the idempotency records; a
//! [`Batch`] of both commits atomically or not at all, and the store itself
//! refuses a batch that would leave a gap or a repeat in a run's cursors,
//! so the log stays gapless even if a caller is wrong. Derived from the log
//! and kept with it: an index of messages (the state keeps none), and the
//! latest snapshot of the fold, so a start folds the snapshot's state and
//! only the events after it. Ended runs can be pruned whole.

mod memory;
mod sqlite;

pub mod contract;

pub use memory::MemoryStore;
pub use sqlite::SqliteStore;

use protocol::{Event, EventBody, MessageId, RunId, WorkerId};

/// A stored idempotency record: the request's hash and the response it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// Namespace, for example `worker_spawn:run_…`.
    pub scope: String,
    /// The caller's key.
    pub key: String,
    /// Hash of the canonical request arguments.
    pub request_hash: String,
    /// The response, as JSON, returned again on replay.
    pub response: String,
}

/// Everything one mutation commits: its events and, when the caller gave an
/// idempotency key, the record that makes a replay return the same response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Events in order; each run's cursors must continue its log.
    pub events: Vec<Event>,
    /// The idempotency record, if any.
    pub idempotency: Option<IdempotencyRecord>,
}

/// A saved state of the fold, and where in the log it stands: it holds
/// every event committed before it was saved, none after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The store's position of the last event it holds (opaque, increasing).
    pub position: u64,
    /// The state, serialized by the control plane.
    pub state: Vec<u8>,
}

/// What a prune removed (or, dry, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Runs removed.
    pub runs: usize,
    /// Their events.
    pub events: u64,
    /// Idempotency records of theirs.
    pub idempotency_records: u64,
}

/// Why the store refused or failed. A failed append committed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The batch does not continue a run's log exactly (gap or repeat).
    #[error("cursor {cursor} does not continue run {run}'s log")]
    CursorGap {
        /// The run.
        run: String,
        /// The offending cursor.
        cursor: u64,
    },
    /// The idempotency key already has a record.
    #[error("idempotency key already recorded")]
    DuplicateKey,
    /// The stored data cannot be read back as valid events.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// The database was written by a newer schema than this build knows.
    #[error("store schema version {found} is newer than this build's {known}")]
    SchemaTooNew {
        /// Version on disk.
        found: u32,
        /// Newest version this build knows.
        known: u32,
    },
    /// The backend failed (IO, locking, disk full).
    #[error("backend: {0}")]
    Backend(String),
}

/// Durable storage for event logs and idempotency records.
///
/// Implementations must be safe to share between threads; every method is
/// blocking and short.
pub trait Store: Send + Sync + 'static {
    /// Commits every event and the idempotency record of `batch`, or nothing.
    fn append(&self, batch: &Batch) -> Result<(), StoreError> {
        self.append_group(std::slice::from_ref(batch))
    }

    /// Commits the batches of a group, in order, as one transaction (one
    /// durable write for all of them), or nothing: a batch the store would
    /// refuse on its own fails the whole group. The plane's group commit.
    fn append_group(&self, group: &[Batch]) -> Result<(), StoreError>;

    /// Calls `visit` with every event in commit order (so each run's in
    /// cursor order). Used to rebuild state on start.
    fn replay(&self, visit: &mut dyn FnMut(Event) -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.replay_after(0, visit)
    }

    /// Like [`Store::replay`], with only the events committed after
    /// `position` (a [`Snapshot`]'s).
    fn replay_after(
        &self,
        position: u64,
        visit: &mut dyn FnMut(Event) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Saves `state` as the snapshot holding every event committed so far
    /// (the caller makes sure none is being committed), replacing any
    /// earlier one.
    fn save_snapshot(&self, state: &[u8]) -> Result<(), StoreError>;

    /// The latest snapshot, if any.
    fn snapshot(&self) -> Result<Option<Snapshot>, StoreError>;

    /// The run and recipient of a message in the log.
    fn message(&self, id: &MessageId) -> Result<Option<(RunId, WorkerId)>, StoreError>;

    /// Removes `runs` whole: their events, messages, and the idempotency
    /// records whose scope ends in `:<id>` for an id of `owners` (the runs'
    /// own and their workers'), and every snapshot (it holds those runs);
    /// with `dry`, only counts. Never called while a plane has the store open.
    fn prune(
        &self,
        runs: &[RunId],
        owners: &std::collections::HashSet<String>,
        dry: bool,
    ) -> Result<Pruned, StoreError>;

    /// Up to `limit` events of `run` with a cursor greater than `after`.
    fn events_after(&self, run: &RunId, after: u64, limit: usize) -> Result<Vec<Event>, StoreError>;

    /// The idempotency record for `scope` and `key`, if one was committed.
    fn idempotency(&self, scope: &str, key: &str) -> Result<Option<IdempotencyRecord>, StoreError>;
}

/// The index entry of a `worker.message` event: its id, run and recipient.
pub(crate) fn message_entry(event: &Event) -> Option<(&MessageId, &RunId, &WorkerId)> {
    match &event.body {
        EventBody::WorkerMessage { message_id, to, .. } => Some((message_id, &event.run_id, to)),
        _ => None,
    }
}

/// The id an idempotency scope ends with (`tool:<id>`).
pub(crate) fn scope_owner(scope: &str) -> &str {
    scope.rsplit(':').next().unwrap_or(scope)
}

/// Checks that the group's events continue each run's log and that no
/// idempotency key repeats within it, given a lookup of each run's last
/// committed cursor. Shared by every implementation.
pub(crate) fn check_group(
    group: &[Batch],
    mut last: impl FnMut(&RunId) -> Result<u64, StoreError>,
) -> Result<(), StoreError> {
    let mut next: std::collections::HashMap<&RunId, u64> = std::collections::HashMap::new();
    let mut keys = std::collections::HashSet::new();
    for batch in group {
        if let Some(rec) = &batch.idempotency
            && !keys.insert((&rec.scope, &rec.key))
        {
            return Err(StoreError::DuplicateKey);
        }
        for event in &batch.events {
            let expected = match next.get(&event.run_id) {
                Some(n) => *n,
                None => last(&event.run_id)? + 1,
            };
            if event.cursor != expected {
                return Err(StoreError::CursorGap { run: event.run_id.to_string(), cursor: event.cursor });
            }
            next.insert(&event.run_id, expected + 1);
        }
    }
    Ok(())
}
