//! Control-plane benchmarks (run: `cargo bench -p control`). Prints figures,
//! asserts nothing; each comparison is a ratio against a baseline measured in
//! the same run on the same machine.
//!
//! 1. `events_wait` wake latency: from the start of an append until each of
//!    N parked waiters has returned its page (N = 1, 100, 1000). Over the
//!    in-memory store this is the broker's wake path alone; over SQLite it
//!    includes the durable commit (printed beside it).
//! 2. Durable mutation throughput: `ControlPlane` commands on SQLite against
//!    a raw rusqlite insert+commit loop with the same pragmas, from 1 thread
//!    and from 16 at once (the raw baseline then uses 16 connections; each
//!    of our threads reports progress for its own worker).
//! 3. Execution Continuity's scheduler tick (`continue_due` and
//!    `next_continue_at`, nothing due) over 256 running workers whose turns
//!    ended inside the idle grace, against a plain read of the same state
//!    (counting the running workers).

use std::sync::Arc;
use std::time::{Duration, Instant};

use control::decide::Request;
use control::plane::Viewer;
use control::store::{MemoryStore, SqliteStore, Store};
use control::{ControlPlane, Keyring, SystemClock};
use protocol::{Assignment, RunId, WorkerId};

fn plane(store: Arc<dyn Store>) -> (Arc<ControlPlane>, RunId, WorkerId) {
    let plane = Arc::new(ControlPlane::open(store, Arc::new(SystemClock), Keyring::new([1; 32])).unwrap());
    let (run, root) = plane.create_run("bench", None).unwrap();
    let root_w = plane.worker(&root).unwrap();
    let assignment = Assignment::from_objective("bench");
    let w = plane.spawn(&root_w, "w", &assignment, None).unwrap();
    plane.execute(Request::Attach { worker_id: w.clone() }).unwrap();
    (plane, run, w)
}

fn progress(plane: &ControlPlane, w: &WorkerId, i: usize) {
    plane
        .execute(Request::Progress {
            actor: w.clone(),
            summary: format!("step {i} of the benchmark run"),
            percent: None,
        })
        .unwrap();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn wake_latency(rt: &tokio::runtime::Runtime, label: &str, store: Arc<dyn Store>, waiters: usize, rounds: usize) {
    let (plane, run, w) = plane(store);
    let mut samples = Vec::with_capacity(waiters * rounds);
    let mut commits = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let head = plane.run(&run).unwrap().cursor;
        let handles: Vec<_> = (0..waiters)
            .map(|_| {
                let (plane, run) = (plane.clone(), run.clone());
                rt.spawn(async move {
                    let page = plane.wait(&run, head, Duration::from_secs(30), 10, &Viewer::Root).await.unwrap();
                    assert!(!page.timed_out);
                    Instant::now()
                })
            })
            .collect();
        // Let every waiter park on the feed before the append.
        std::thread::sleep(Duration::from_millis(20 + waiters as u64 / 20));
        let append = Instant::now();
        progress(&plane, &w, round);
        commits.push(append.elapsed());
        for h in handles {
            let returned = rt.block_on(h).unwrap();
            samples.push(returned.duration_since(append));
        }
    }
    samples.sort();
    commits.sort();
    println!(
        "wake latency  {label:<7} {waiters:>5} waiters: p50 {:>9.3?}  p99 {:>9.3?}  max {:>9.3?}  (append start -> waiter returns, {} samples; the append itself: p50 {:.3?})",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples[samples.len() - 1],
        samples.len(),
        percentile(&commits, 0.5),
    );
}

/// `threads` connections each committing `n / threads` one-row transactions
/// into one table, concurrently.
fn raw_sqlite(path: &std::path::Path, n: usize, threads: usize) -> Duration {
    let open = || {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", "FULL").unwrap();
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        conn
    };
    open()
        .execute_batch("CREATE TABLE t (seq INTEGER PRIMARY KEY, run_id TEXT, cursor INTEGER, at_ms INTEGER, kind TEXT, body TEXT, UNIQUE(run_id, cursor))")
        .unwrap();
    let body = "x".repeat(260);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (mut conn, body) = (open(), &body);
            scope.spawn(move || {
                for i in 0..n / threads {
                    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
                    tx.execute(
                        "INSERT INTO t (run_id, cursor, at_ms, kind, body) VALUES (?1, ?2, ?3, 'worker.progress', ?4)",
                        rusqlite::params![format!("run{t}"), i as i64, i as i64, body],
                    )
                    .unwrap();
                    tx.commit().unwrap();
                }
            });
        }
    });
    start.elapsed()
}

fn throughput(n: usize, threads: usize) {
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_sqlite(&dir.path().join("raw.db"), n, threads);
    let (plane, run, w) = plane(Arc::new(SqliteStore::open(&dir.path().join("plane.db")).unwrap()));
    let root = plane.workers_of(&run)[0].clone();
    let mut workers = vec![w];
    while workers.len() < threads {
        let assignment = Assignment::from_objective("bench");
        let w = plane.spawn(&root, &format!("w{}", workers.len()), &assignment, None).unwrap();
        plane.execute(Request::Attach { worker_id: w.clone() }).unwrap();
        workers.push(w);
    }
    let start = Instant::now();
    std::thread::scope(|scope| {
        for w in &workers {
            let plane = &plane;
            scope.spawn(move || {
                for i in 0..n / threads {
                    progress(plane, w, i);
                }
            });
        }
    });
    let ours = start.elapsed();
    let rate = |d: Duration| (n / threads * threads) as f64 / d.as_secs_f64();
    println!(
        "throughput {threads:>2} thread(s): raw rusqlite insert+commit {:>8.0}/s   control plane {:>8.0}/s   ratio {:.2}x  ({n} commits each, WAL, synchronous=FULL)",
        rate(raw),
        rate(ours),
        rate(ours) / rate(raw)
    );
}

/// 256 attached workers, each bound to a conversation that went idle at
/// `now`, under Auto Resume with a ten-minute grace: every tick evaluates
/// every worker and finds nothing due.
fn idle_workers(n: usize) -> Arc<ControlPlane> {
    use control::queue::Limits;
    use protocol::continuity::{ContinuationMode, ContinuationPolicy};
    use protocol::executor::{CommandOutcome, ConversationState, ExecutorFrame};
    let clock = control::ManualClock::at(1_000_000);
    let plane =
        Arc::new(ControlPlane::open(Arc::new(MemoryStore::new()), Arc::new(clock), Keyring::new([3; 32])).unwrap());
    // Two runs: a run holds at most 256 workers, its root among them.
    let mut workers: Vec<WorkerId> = Vec::with_capacity(n);
    for run in 0..2 {
        let (_, root) = plane.create_run("tick", None).unwrap();
        let policy = ContinuationPolicy {
            mode: ContinuationMode::Auto,
            idle_grace_ms: 600_000,
            ..ContinuationPolicy::default()
        };
        plane.execute(Request::SetContinuation { actor: root.clone(), target: None, policy }).unwrap();
        let root_w = plane.worker(&root).unwrap();
        let assignment = Assignment::from_objective("tick");
        workers.extend((0..n / 2).map(|i| plane.spawn(&root_w, &format!("w{run}-{i}"), &assignment, None).unwrap()));
    }
    let limits = Limits { max_launches: n, max_active: n, max_open_tabs: None };
    for d in plane.next_dispatches(&["ext".to_owned()], limits) {
        plane.dispatch(&d, 60_000).unwrap();
    }
    let report = |frame| plane.report("ext", frame).unwrap();
    for (i, worker) in workers.iter().enumerate() {
        let command = plane.with_state(|s| {
            s.open_commands.iter().find(|c| &s.commands[*c].worker_id == worker).cloned().expect("its create")
        });
        let conversation: protocol::ConversationId = format!("{i:08x}-0000-4000-8000-{i:012x}").parse().unwrap();
        report(ExecutorFrame::Ack { command_id: command.clone() });
        report(ExecutorFrame::ConversationBound {
            worker_id: worker.clone(),
            url: format!("https://chatgpt.com/c/{conversation}"),
            conversation_id: conversation.clone(),
        });
        let outcome = CommandOutcome::Ok { conversation_id: Some(conversation) };
        report(ExecutorFrame::Result { command_id: command, outcome });
        plane.execute(Request::Attach { worker_id: worker.clone() }).unwrap();
        for state in [ConversationState::Generating, ConversationState::Idle] {
            report(ExecutorFrame::ConversationState { worker_id: worker.clone(), state, error: None });
        }
    }
    plane
}

fn scheduler_tick(workers: usize, rounds: usize) {
    let plane = idle_workers(workers);
    let pacing = control::continuity::Pacing::default();
    assert_eq!(plane.continue_due(pacing).unwrap(), 0, "nothing is due inside the grace");
    assert!(plane.next_continue_at(pacing).is_some());
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..rounds {
            f();
        }
        start.elapsed() / rounds as u32
    };
    let tick = time(&|| {
        std::hint::black_box(plane.continue_due(pacing).unwrap());
        std::hint::black_box(plane.next_continue_at(pacing));
    });
    let read = time(&|| {
        std::hint::black_box(
            plane.with_state(|s| s.workers.values().filter(|w| w.state == protocol::WorkerState::Running).count()),
        );
    });
    println!(
        "scheduler tick, {workers} workers: {:>8.1} µs; plain state read {:>6.1} µs; ratio {:.1}x",
        tick.as_secs_f64() * 1e6,
        read.as_secs_f64() * 1e6,
        tick.as_secs_f64() / read.as_secs_f64()
    );
}

fn main() {
    // `cargo test --benches` runs this with --bench absent; keep that fast.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let rounds = if quick { 2 } else { 50 };
    for waiters in [1, 100, 1000] {
        let rounds = if waiters == 1000 { rounds.min(10) } else { rounds };
        wake_latency(&rt, "memory", Arc::new(MemoryStore::new()), waiters, rounds);
    }
    let dir = tempfile::tempdir().unwrap();
    for waiters in [1, 100, 1000] {
        let rounds = if waiters == 1000 { rounds.min(10) } else { rounds };
        let store = Arc::new(SqliteStore::open(&dir.path().join(format!("wake-{waiters}.db"))).unwrap());
        wake_latency(&rt, "sqlite", store, waiters, rounds);
    }
    for threads in [1, 16] {
        throughput(if quick { 64 } else { 2000 }, threads);
    }
    scheduler_tick(256, if quick { 5 } else { 2000 });
}
