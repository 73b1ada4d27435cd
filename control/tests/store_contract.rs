//! Every `Store` implementation passes the same contract, including a
//! fault-injecting one that fails appends on demand.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use control::store::{
    Batch, IdempotencyRecord, MemoryStore, Pruned, Snapshot, SqliteStore, Store, StoreError, contract,
};
use protocol::{Event, MessageId, RunId, WorkerId};

#[test]
fn memory_store_keeps_the_contract() {
    contract::check_all(MemoryStore::new);
}

#[test]
fn sqlite_store_keeps_the_contract() {
    contract::check_all(|| SqliteStore::open_in_memory().unwrap());
}

#[test]
fn sqlite_file_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicU32::new(0);
    contract::check_all(|| {
        SqliteStore::open(&dir.path().join(format!("{}.db", n.fetch_add(1, Ordering::SeqCst)))).unwrap()
    });
}

/// A store that refuses appends while `failing` is set, as a full disk would.
#[derive(Default)]
pub struct FlakyStore {
    inner: MemoryStore,
    failing: AtomicBool,
}

impl FlakyStore {
    /// Starts or stops refusing appends.
    pub fn set_failing(&self, on: bool) {
        self.failing.store(on, Ordering::SeqCst);
    }
}

impl Store for FlakyStore {
    fn append_group(&self, group: &[Batch]) -> Result<(), StoreError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Backend("injected: disk full".into()));
        }
        self.inner.append_group(group)
    }
    fn replay_after(
        &self,
        position: u64,
        visit: &mut dyn FnMut(Event) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.inner.replay_after(position, visit)
    }
    fn save_snapshot(&self, state: &[u8]) -> Result<(), StoreError> {
        self.inner.save_snapshot(state)
    }
    fn snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.inner.snapshot()
    }
    fn message(&self, id: &MessageId) -> Result<Option<(RunId, WorkerId)>, StoreError> {
        self.inner.message(id)
    }
    fn prune(&self, runs: &[RunId], owners: &HashSet<String>, dry: bool) -> Result<Pruned, StoreError> {
        self.inner.prune(runs, owners, dry)
    }
    fn events_after(&self, run: &RunId, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.inner.events_after(run, after, limit)
    }
    fn idempotency(&self, scope: &str, key: &str) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.inner.idempotency(scope, key)
    }
}

#[test]
fn flaky_store_keeps_the_contract_while_healthy() {
    contract::check_all(FlakyStore::default);
}

#[test]
fn sqlite_survives_reopen_and_refuses_a_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        contract::appended_events_read_back_in_order(&store);
        assert_eq!(store.schema_version().unwrap(), 2);
    }
    let store = SqliteStore::open(&path).unwrap();
    let run = RunId::from_uuid_bytes([1; 16]);
    assert_eq!(store.events_after(&run, 0, 10).unwrap().len(), 3);
    drop(store);
    mark_schema_version(&path, 99).unwrap();
    assert!(matches!(SqliteStore::open(&path), Err(StoreError::SchemaTooNew { found: 99, known: 2 })));
}

/// Marks the database as written by another schema version by patching the
/// header's user_version field (byte offset 60, big-endian).
fn mark_schema_version(path: &std::path::Path, version: u32) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    // The WAL was merged into the main file when the last connection closed.
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.seek(SeekFrom::Start(60))?;
    f.write_all(&version.to_be_bytes())?;
    f.sync_all()
}

/// A database written by schema 1 (before the message index) gets the
/// index of the messages it already holds when it is opened.
#[test]
fn an_upgraded_database_indexes_the_messages_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let run = RunId::from_uuid_bytes([1; 16]);
    let (id, to) = (MessageId::from_uuid_bytes([5; 16]), WorkerId::from_uuid_bytes([6; 16]));
    let body = protocol::EventBody::WorkerMessage {
        message_id: id.clone(),
        from: WorkerId::from_uuid_bytes([7; 16]),
        to: to.clone(),
        kind: protocol::MessageKind::Information,
        body: "hello".into(),
        in_reply_to: None,
    };
    let event = Event { cursor: 2, run_id: run.clone(), at_ms: 1, body };
    {
        // Schema 1 as it was released.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL, cursor INTEGER NOT NULL,
                 at_ms INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL, UNIQUE (run_id, cursor));
             CREATE TABLE idempotency (scope TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL,
                 response TEXT NOT NULL, PRIMARY KEY (scope, key));
             PRAGMA user_version = 1;",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO events (run_id, cursor, at_ms, kind, body) VALUES (?1, 2, 1, 'worker.message', ?2)",
            rusqlite::params![run.as_str(), serde_json::to_string(&event).unwrap()],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), 2);
    assert_eq!(store.message(&id).unwrap(), Some((run, to)));
}
