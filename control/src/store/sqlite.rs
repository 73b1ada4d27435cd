//! The embedded default [`Store`]: SQLite in WAL mode, one `BEGIN IMMEDIATE`
//! transaction per group of batches (the plane's group commit), `synchronous=FULL` so a committed batch survives a
//! crash of the process or the machine. Schema changes are numbered
//! migrations recorded in `PRAGMA user_version`.

use std::path::Path;
use std::sync::Mutex;

use protocol::{Event, MessageId, RunId, WorkerId};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{Batch, IdempotencyRecord, Pruned, Snapshot, Store, StoreError, check_group, message_entry, scope_owner};

/// Numbered migrations; `MIGRATIONS[i]` moves the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE events (
        seq     INTEGER PRIMARY KEY,
        run_id  TEXT    NOT NULL,
        cursor  INTEGER NOT NULL,
        at_ms   INTEGER NOT NULL,
        kind    TEXT    NOT NULL,
        body    TEXT    NOT NULL,
        UNIQUE (run_id, cursor)
    );
    CREATE TABLE idempotency (
        scope        TEXT NOT NULL,
        key          TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        response     TEXT NOT NULL,
        PRIMARY KEY (scope, key)
    );
",
    "
    CREATE TABLE messages (
        message_id TEXT PRIMARY KEY,
        run_id     TEXT NOT NULL,
        recipient  TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX messages_by_run ON messages (run_id);
    INSERT OR IGNORE INTO messages (message_id, run_id, recipient)
        SELECT json_extract(body, '$.data.message_id'), run_id, json_extract(body, '$.data.to')
        FROM events WHERE kind = 'worker.message';
    CREATE TABLE snapshots (
        position INTEGER PRIMARY KEY,
        state    BLOB NOT NULL
    );
",
];

/// SQLite-backed store.
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        // The log holds message bodies and summaries: owner-only, like the
        // daemon secret. SQLite gives its -wal and -shm files the database's mode.
        private(path)?;
        let store = Self::init(Connection::open(path).map_err(backend)?)?;
        for suffix in ["-wal", "-shm"] {
            let side = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
            if side.exists() {
                private(&side)?;
            }
        }
        Ok(store)
    }

    /// A private in-memory database, for tests.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::init(Connection::open_in_memory().map_err(backend)?)
    }

    fn init(mut conn: Connection) -> Result<Self, StoreError> {
        conn.pragma_update(None, "journal_mode", "WAL").map_err(backend)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(backend)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(backend)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(backend)?;
        let version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(backend)?;
        let known = MIGRATIONS.len() as u32;
        if version > known {
            return Err(StoreError::SchemaTooNew { found: version, known });
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql).map_err(backend)?;
            tx.pragma_update(None, "user_version", i as u32 + 1).map_err(backend)?;
        }
        tx.commit().map_err(backend)?;
        Ok(Self { conn: Mutex::new(conn) })
    }

    /// The schema version on disk (for tests and diagnostics).
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let conn = self.conn.lock().expect("store lock");
        conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(backend)
    }
}

fn decode(body: String) -> Result<Event, StoreError> {
    serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(format!("undecodable event: {e}")))
}

impl Store for SqliteStore {
    fn append_group(&self, group: &[Batch]) -> Result<(), StoreError> {
        let mut conn = self.conn.lock().expect("store lock");
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
        check_group(group, |run| {
            tx.query_row("SELECT COALESCE(MAX(cursor), 0) FROM events WHERE run_id = ?1", [run.as_str()], |r| {
                r.get::<_, i64>(0)
            })
            .map(|c| c as u64)
            .map_err(backend)
        })?;
        for batch in group {
            if let Some(rec) = &batch.idempotency {
                let inserted = tx
                    .execute(
                        "INSERT OR IGNORE INTO idempotency (scope, key, request_hash, response) VALUES (?1, ?2, ?3, ?4)",
                        params![rec.scope, rec.key, rec.request_hash, rec.response],
                    )
                    .map_err(backend)?;
                if inserted == 0 {
                    return Err(StoreError::DuplicateKey);
                }
            }
            let mut insert = tx
                .prepare_cached("INSERT INTO events (run_id, cursor, at_ms, kind, body) VALUES (?1, ?2, ?3, ?4, ?5)")
                .map_err(backend)?;
            for event in &batch.events {
                let body = serde_json::to_string(event).map_err(|e| StoreError::Backend(e.to_string()))?;
                insert
                    .execute(params![
                        event.run_id.as_str(),
                        event.cursor as i64,
                        event.at_ms as i64,
                        event.body.kind(),
                        body
                    ])
                    .map_err(backend)?;
                if let Some((id, run, to)) = message_entry(event) {
                    tx.prepare_cached(
                        "INSERT OR IGNORE INTO messages (message_id, run_id, recipient) VALUES (?1, ?2, ?3)",
                    )
                    .and_then(|mut m| m.execute(params![id.as_str(), run.as_str(), to.as_str()]))
                    .map_err(backend)?;
                }
            }
        }
        tx.commit().map_err(backend)
    }

    fn replay_after(
        &self,
        position: u64,
        visit: &mut dyn FnMut(Event) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let conn = self.conn.lock().expect("store lock");
        // Commit order: each run's cursor order, and the order the live
        // state folded them in (so a restart's state is the live one).
        let mut stmt = conn.prepare("SELECT body FROM events WHERE seq > ?1 ORDER BY seq").map_err(backend)?;
        let mut rows = stmt.query([position as i64]).map_err(backend)?;
        while let Some(row) = rows.next().map_err(backend)? {
            visit(decode(row.get(0).map_err(backend)?)?)?;
        }
        Ok(())
    }

    fn save_snapshot(&self, state: &[u8]) -> Result<(), StoreError> {
        let mut conn = self.conn.lock().expect("store lock");
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
        let position: i64 =
            tx.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0)).map_err(backend)?;
        tx.execute("DELETE FROM snapshots", []).map_err(backend)?;
        tx.execute("INSERT INTO snapshots (position, state) VALUES (?1, ?2)", params![position, state])
            .map_err(backend)?;
        tx.commit().map_err(backend)
    }

    fn snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        let conn = self.conn.lock().expect("store lock");
        conn.query_row("SELECT position, state FROM snapshots ORDER BY position DESC LIMIT 1", [], |r| {
            Ok(Snapshot { position: r.get::<_, i64>(0)? as u64, state: r.get(1)? })
        })
        .optional()
        .map_err(backend)
    }

    fn message(&self, id: &MessageId) -> Result<Option<(RunId, WorkerId)>, StoreError> {
        let conn = self.conn.lock().expect("store lock");
        let found = conn
            .prepare_cached("SELECT run_id, recipient FROM messages WHERE message_id = ?1")
            .and_then(|mut q| {
                q.query_row([id.as_str()], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).optional()
            })
            .map_err(backend)?;
        let Some((run, to)) = found else { return Ok(None) };
        let corrupt = |what: &str| StoreError::Corrupt(format!("message index: {what}"));
        Ok(Some((run.parse().map_err(|_| corrupt("run id"))?, to.parse().map_err(|_| corrupt("worker id"))?)))
    }

    fn prune(
        &self,
        runs: &[RunId],
        owners: &std::collections::HashSet<String>,
        dry: bool,
    ) -> Result<Pruned, StoreError> {
        let mut conn = self.conn.lock().expect("store lock");
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
        let mut pruned = Pruned { runs: runs.len(), ..Pruned::default() };
        for run in runs {
            let events: i64 = tx
                .query_row("SELECT COUNT(*) FROM events WHERE run_id = ?1", [run.as_str()], |r| r.get(0))
                .map_err(backend)?;
            pruned.events += events as u64;
            if !dry {
                tx.execute("DELETE FROM events WHERE run_id = ?1", [run.as_str()]).map_err(backend)?;
                tx.execute("DELETE FROM messages WHERE run_id = ?1", [run.as_str()]).map_err(backend)?;
            }
        }
        // A record is theirs when its scope names one of them, or (a scope
        // naming nothing, as `run_create`'s) its response names a pruned run.
        let records: Vec<(String, String, String)> = {
            let mut all = tx.prepare("SELECT scope, key, response FROM idempotency").map_err(backend)?;
            let rows = all.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(backend)?;
            rows.collect::<Result<_, _>>().map_err(backend)?
        };
        for (scope, key, response) in records {
            let theirs = if scope.contains(':') {
                owners.contains(scope_owner(&scope))
            } else {
                runs.iter().any(|run| response.contains(run.as_str()))
            };
            if theirs {
                pruned.idempotency_records += 1;
                if !dry {
                    tx.execute("DELETE FROM idempotency WHERE scope = ?1 AND key = ?2", [&scope, &key])
                        .map_err(backend)?;
                }
            }
        }
        if dry {
            return Ok(pruned);
        }
        tx.execute("DELETE FROM snapshots", []).map_err(backend)?;
        tx.commit().map_err(backend)?;
        // The space goes back to the file system, not only to SQLite's free list.
        conn.execute_batch("VACUUM").map_err(backend)?;
        Ok(pruned)
    }

    fn events_after(&self, run: &RunId, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let conn = self.conn.lock().expect("store lock");
        let mut stmt = conn
            .prepare_cached("SELECT body FROM events WHERE run_id = ?1 AND cursor > ?2 ORDER BY cursor LIMIT ?3")
            .map_err(backend)?;
        let rows = stmt
            .query_map(params![run.as_str(), after as i64, limit as i64], |r| r.get::<_, String>(0))
            .map_err(backend)?;
        rows.map(|body| decode(body.map_err(backend)?)).collect()
    }

    fn idempotency(&self, scope: &str, key: &str) -> Result<Option<IdempotencyRecord>, StoreError> {
        let conn = self.conn.lock().expect("store lock");
        conn.query_row(
            "SELECT request_hash, response FROM idempotency WHERE scope = ?1 AND key = ?2",
            [scope, key],
            |r| {
                Ok(IdempotencyRecord {
                    scope: scope.to_owned(),
                    key: key.to_owned(),
                    request_hash: r.get(0)?,
                    response: r.get(1)?,
                })
            },
        )
        .optional()
        .map_err(backend)
    }
}

/// Creates `path` empty with mode 0600 if absent; makes it 0600 if not.
fn private(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let io = |e: std::io::Error| StoreError::Backend(format!("{}: {e}", path.display()));
    if !path.exists() {
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(path).map_err(io)?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)
}
