//! A start over a long log (run: `cargo bench -p control --bench start`):
//! builds a store of `START_BENCH_EVENTS` events (default 1,000,000; 20,000
//! in quick mode) through the control plane, as a daemon's history would
//! be written (1,000 runs of a root and three workers exchanging progress,
//! questions and answers; three in four runs completed, snapshots saved as
//! the daemon saves them), then times the fold a start does: from the
//! latest snapshot and the events after it, against the whole log folded
//! from nothing in the same run (the baseline), and `prune` of the ended
//! runs. The store lives on tmpfs (`/dev/shm`) when there is one, so
//! writing the history does not wait on a disk; the read is the same.
//! Prints figures, asserts nothing.

use std::sync::Arc;
use std::time::Instant;

use control::decide::Request;
use control::model::State;
use control::store::{SqliteStore, Store};
use control::{Clock, ControlPlane, Keyring, ManualClock};
use protocol::{Assignment, MessageKind};

const RUNS: usize = 1_000;

/// One run's history, about `events` events long.
fn run_history(plane: &ControlPlane, clock: &ManualClock, n: usize, events: usize, complete: bool) {
    let (_, root_id) = plane.create_run(&format!("run {n}"), None).unwrap();
    let root = plane.worker(&root_id).unwrap();
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let w = plane.spawn(&root, &format!("w{i}"), &Assignment::from_objective("work"), None).unwrap();
            plane.execute(Request::Attach { worker_id: w.clone() }).unwrap();
            w
        })
        .collect();
    // Spawn and attach: about 5 events a worker; each round below: 5.
    let rounds = events.saturating_sub(20) / 5;
    for round in 0..rounds {
        let w = &workers[round % workers.len()];
        let me = plane.worker(w).unwrap();
        let summary = format!("round {round}: a progress report of a realistic length, about one sentence");
        plane.execute(Request::Progress { actor: w.clone(), summary, percent: None }).unwrap();
        let q = plane.send(&me, &root_id, MessageKind::Question, "which way next?", None, None).unwrap();
        let root = plane.worker(&root_id).unwrap();
        plane.send(&root, w, MessageKind::Answer, "the left one", Some(&q), None).unwrap();
        clock.advance(1_000);
    }
    if complete {
        for w in workers.iter().chain([&root_id]) {
            plane.execute(Request::Complete { actor: w.clone(), summary: "done".into(), artifacts: vec![] }).unwrap();
        }
    }
}

fn count(store: &dyn Store) -> u64 {
    let mut n = 0;
    store
        .replay(&mut |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
    n
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let total: usize = std::env::var("START_BENCH_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(if quick {
        20_000
    } else {
        1_000_000
    });
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let path = dir.path().join("state.db");
    let clock = Arc::new(ManualClock::at(1_000));
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let started = Instant::now();
    {
        let plane = ControlPlane::open(store.clone(), clock.clone(), Keyring::new([1; 32])).unwrap();
        for n in 0..RUNS {
            run_history(&plane, &clock, n, total / RUNS, n % 4 != 0);
        }
    }
    let events = count(store.as_ref());
    let size = std::fs::metadata(&path).map_or(0, |m| m.len()) as f64 / 1_048_576.0;
    println!(
        "a log of {events} events ({RUNS} runs; {size:.0} MiB) written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let snapshot = store.snapshot().unwrap().expect("the plane saved snapshots");
    let mut tail = 0;
    store
        .replay_after(snapshot.position, &mut |_| {
            tail += 1;
            Ok(())
        })
        .unwrap();

    let started = Instant::now();
    let mut whole = State::default();
    store
        .replay(&mut |e| {
            whole.apply(&e).unwrap();
            Ok(())
        })
        .unwrap();
    let from_nothing = started.elapsed();
    let started = Instant::now();
    let folded = control::plane::fold_store(store.as_ref()).unwrap();
    let from_snapshot = started.elapsed();
    assert!(folded == whole, "the snapshot and its tail fold to the whole log");
    let started = Instant::now();
    let plane = ControlPlane::open(store.clone(), clock.clone(), Keyring::new([1; 32])).unwrap();
    let open = started.elapsed();
    drop(plane);
    println!(
        "start: the whole log folded from nothing {:.3} s (baseline); from the snapshot ({:.1} MiB) and its {tail} \
         later events {:.3} s ({:.3}× the baseline); ControlPlane::open {:.3} s",
        from_nothing.as_secs_f64(),
        snapshot.state.len() as f64 / 1_048_576.0,
        from_snapshot.as_secs_f64(),
        from_snapshot.as_secs_f64() / from_nothing.as_secs_f64(),
        open.as_secs_f64()
    );
    let started = Instant::now();
    let report =
        control::plane::prune(store.as_ref(), clock.now_ms() + 31 * 86_400_000, 30 * 86_400_000, false).unwrap();
    let after = std::fs::metadata(&path).map_or(0, |m| m.len()) as f64 / 1_048_576.0;
    println!(
        "prune: {} ended runs, {} events, in {:.1} s; the file {size:.0} → {after:.0} MiB; {} events left",
        report.runs.len(),
        report.pruned.events,
        started.elapsed().as_secs_f64(),
        count(store.as_ref())
    );
}
