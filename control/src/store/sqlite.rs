//! The embedded default [`Store`]: SQLite in WAL mode, one `BEGIN IMMEDIATE`
//! transaction per group of batches (the plane's group commit), `synchronous=FULL` so a committed batch survives a
//! crash of the process or the machine. Schema changes are numbered
//! migrations recorded in `PRAGMA user_version`.

use std::path::Path;
use std::sync::Mutex;

use protocol::{Event, RunId};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{Batch, IdempotencyRecord, Store, StoreError, check_group};

/// Numbered migrations; `MIGRATIONS[i]` moves the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &["
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
"];

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
            }
        }
        tx.commit().map_err(backend)
    }

    fn replay(&self, visit: &mut dyn FnMut(Event) -> Result<(), StoreError>) -> Result<(), StoreError> {
        let conn = self.conn.lock().expect("store lock");
        // Runs in creation order (the seq of their first event), each in cursor order.
        let mut stmt = conn
            .prepare(
                "SELECT e.body FROM events e
                 JOIN (SELECT run_id, MIN(seq) AS first FROM events GROUP BY run_id) r ON r.run_id = e.run_id
                 ORDER BY r.first, e.cursor",
            )
            .map_err(backend)?;
        let mut rows = stmt.query([]).map_err(backend)?;
        while let Some(row) = rows.next().map_err(backend)? {
            visit(decode(row.get(0).map_err(backend)?)?)?;
        }
        Ok(())
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
