//! `who` over 10,000 worktree ownership records (issue 35). Prints figures,
//! asserts nothing; the comparison is a ratio against a baseline measured in
//! the same run: a plain SQLite table of the same records with an index on
//! the worktree path (and one on the landed commit), each lookup reading
//! the row's record back from its JSON.
//!
//! Ours is what the daemon does for `orchestrator who` and
//! `/admin/ownership` (`server::ownership::answer`): the path normalised,
//! the fold's index read, every holder's worker and conversation resolved
//! into the view. The HTTP hop and the CLI's own Git reads are not in it.
//!
//! `cargo bench -p server --bench who` (WHO_BENCH_RECORDS, default 10000);
//! under `cargo test` it is a quick pass of the same steps over 500.

use std::sync::Arc;
use std::time::{Duration, Instant};

use control::ownership::Op;
use control::store::MemoryStore;
use control::{ControlPlane, Keyring, SystemClock};
use protocol::ownership::{Labels, Record, Session, Worktree};
use server::ownership::{Query, answer};

fn sha(seed: &str) -> String {
    use sha2::Digest;
    // A 40-hex commit id.
    sha2::Sha256::digest(seed.as_bytes()).iter().take(20).map(|b| format!("{b:02x}")).collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn stats(label: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let (p50, p99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));
    println!("{label:<44} p50 {:>9.1} µs   p99 {:>9.1} µs", p50.as_secs_f64() * 1e6, p99.as_secs_f64() * 1e6);
    p50
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let n: usize = if quick {
        500
    } else {
        std::env::var("WHO_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
    };
    let samples = if quick { 200 } else { 20_000 };

    // The records: one root (its own chat, so each claim is active at once)
    // claims n worktrees; every other one is submitted and landed.
    let plane = ControlPlane::open(Arc::new(MemoryStore::default()), Arc::new(SystemClock), Keyring::new([7; 32]))
        .expect("a plane");
    let (_, root) = plane.create_run("who bench", None).expect("a run");
    let started = Instant::now();
    let mut landed = Vec::new();
    for i in 0..n {
        let id = ControlPlane::new_ownership_id();
        let worktree = Worktree {
            repo: "/bench/repo/.git".into(),
            path: format!("/bench/trees/wt-{i}"),
            branch: Some(format!("work/{i}")),
            head: Some(sha(&format!("base {i}"))),
        };
        let session = Session { id: format!("session-{i}"), parent: None };
        let labels = Labels { lane: Some("bench".into()), ..Labels::default() };
        plane.own(&root, Op::Claim { id: id.clone(), worktree, session, labels, projected: None }).expect("claimed");
        if i % 2 == 0 {
            let head = sha(&format!("head {i}"));
            let submit =
                Op::Submit { id: id.clone(), branch: format!("work/{i}"), head, session: format!("session-{i}") };
            plane.own(&root, submit).expect("submitted");
            let commit = sha(&format!("landed {i}"));
            plane.own(&root, Op::Land { id, into: "main".into(), commit: commit.clone() }).expect("landed");
            landed.push(commit);
        }
    }
    println!("{n} records ({} landed) recorded in {:.2?}", landed.len(), started.elapsed());

    // The baseline: the same records in a plain indexed SQLite table.
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = rusqlite::Connection::open(dir.path().join("owners.db")).expect("sqlite");
    db.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
         CREATE TABLE owners (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, landed TEXT, record TEXT NOT NULL);
         CREATE INDEX owners_worktree ON owners(worktree); CREATE INDEX owners_landed ON owners(landed);",
    )
    .expect("schema");
    {
        let tx = db.unchecked_transaction().expect("tx");
        for (record, _) in plane.owners(None) {
            tx.execute(
                "INSERT INTO owners VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![
                    record.id.to_string(),
                    record.worktree.path,
                    record.landed.as_ref().map(|l| l.commit.clone()),
                    serde_json::to_string(&record).expect("json"),
                ],
            )
            .expect("insert");
        }
        tx.commit().expect("commit");
    }

    // Lookups over a fixed spread of keys (no RNG: every run the same).
    let key = |k: usize| (k * 7919) % n;
    let mut ours = Vec::with_capacity(samples);
    let mut base = Vec::with_capacity(samples);
    let mut by_path = db.prepare("SELECT record FROM owners WHERE worktree = ?1").expect("prepare");
    for k in 0..samples {
        let path = format!("/bench/trees/wt-{}", key(k));
        let query = Query { worktree: Some(path.clone()), ..Query::default() };
        let t = Instant::now();
        let found = answer(&plane, &query).expect("answered");
        ours.push(t.elapsed());
        assert_eq!(found.records.len(), 1);
        let t = Instant::now();
        let rows: Vec<Record> = by_path
            .query_map([&path], |row| row.get::<_, String>(0))
            .expect("query")
            .map(|json| serde_json::from_str(&json.expect("row")).expect("a record"))
            .collect();
        base.push(t.elapsed());
        assert_eq!(rows.len(), 1);
    }
    let (ours_path, base_path) =
        (stats("who <worktree> (ours: index + view)", ours), stats("SQLite indexed lookup", base));

    let mut ours = Vec::with_capacity(samples);
    let mut base = Vec::with_capacity(samples);
    let mut by_commit = db.prepare("SELECT record FROM owners WHERE landed = ?1").expect("prepare");
    for k in 0..samples {
        let commit = &landed[key(k) % landed.len()];
        let query = Query { commit: Some(commit.clone()), ..Query::default() };
        let t = Instant::now();
        let found = answer(&plane, &query).expect("answered");
        ours.push(t.elapsed());
        assert_eq!(found.records.len(), 1);
        let t = Instant::now();
        let rows: Vec<Record> = by_commit
            .query_map([commit], |row| row.get::<_, String>(0))
            .expect("query")
            .map(|json| serde_json::from_str(&json.expect("row")).expect("a record"))
            .collect();
        base.push(t.elapsed());
        assert_eq!(rows.len(), 1);
    }
    let (ours_commit, base_commit) = (stats("who <landed commit> (ours)", ours), stats("SQLite indexed lookup", base));
    println!(
        "ratio ours/SQLite at p50: by worktree {:.2}×, by landed commit {:.2}× ({n} records)",
        ours_path.as_secs_f64() / base_path.as_secs_f64(),
        ours_commit.as_secs_f64() / base_commit.as_secs_f64()
    );
}
