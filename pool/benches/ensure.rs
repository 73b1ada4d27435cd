//! Runtime pool benchmarks (run: `cargo bench -p pool`). Prints figures,
//! asserts nothing. In one process: the control plane on SQLite, the bridge
//! on a loopback listener, the fake executor over a real WebSocket, and each
//! conversation's bootstrap played in process.
//!
//! - ensure(16) wall time against the configured pacing (15 gaps): the
//!   overhead beyond pacing is what the orchestrator adds;
//! - replay ensure(16) on a healthy pool: latency and effects (must be 0),
//!   against a `run_get`-equivalent read in the same run as the baseline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use carrier_webext::{Bridge, BridgeConfig, Credentials};
use control::queue::Limits;
use control::store::SqliteStore;
use control::{ControlPlane, Keyring, SystemClock};
use fake_executor::{FakeConfig, FakeExecutor};
use pool::{Pool, PoolConfig, Readiness};
use tokio_util::sync::CancellationToken;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let (workers, pacing_ms) = if quick { (4u32, 20u64) } else { (16, 100) };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plane = Arc::new(
        ControlPlane::open(
            Arc::new(SqliteStore::open(&dir.path().join("p.db")).unwrap()),
            Arc::new(SystemClock),
            Keyring::generate(),
        )
        .unwrap(),
    );
    let pool =
        Arc::new(Pool::new(plane.clone(), PoolConfig { max_workers: 16, pacing_ms, provisioning_ttl_ms: 600_000 }));
    let credentials = Credentials::open_or_create(&dir.path().join("executors")).unwrap();
    let credential = credentials.issue("bench").unwrap();
    let config = BridgeConfig {
        limits: Limits { max_launches: 4, max_active: 64, max_open_tabs: None },
        ..BridgeConfig::default()
    };
    let fake = rt.block_on(async {
        let bridge = Bridge::start(plane.clone(), config, credentials.clone(), CancellationToken::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, carrier_webext::router(bridge)).await });
        let fake = Arc::new(FakeExecutor::start(FakeConfig::new(
            format!("ws://{addr}/executor"),
            credential.clone(),
            "bench",
        )));
        fake.wait_for(|s| s.connections == 1, Duration::from_secs(10)).await;
        fake
    });
    // Each conversation bootstraps as soon as its prompt lands.
    {
        let (fake, pool) = (fake.clone(), pool.clone());
        rt.spawn(async move {
            let mut done = 0;
            loop {
                let stats = fake.stats();
                for (conversation, prompt) in stats.submissions.iter().skip(done) {
                    let attach = prompt.split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
                    // Until the executor's create result lands, admission is unresolved: retry.
                    if pool.bootstrap(&attach, &format!("peer-{conversation}")).is_err() {
                        break;
                    }
                    done += 1;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
    }
    let (_, root) = plane.create_run("bench", None).unwrap();
    let root = plane.worker(&root).unwrap();
    let connected = vec!["bench".to_string()];

    let start = Instant::now();
    pool.ensure(&root, workers).unwrap();
    while pool.status(&root.run_id, &connected, &every_session_alive).state != Readiness::Ready
        || pool.status(&root.run_id, &connected, &every_session_alive).slots.len() != workers as usize
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let wall = start.elapsed();
    let pacing = Duration::from_millis(pacing_ms * (workers as u64 - 1));
    println!(
        "ensure({workers}) wall {:>8.1?}  pacing floor {:>8.1?}  overhead {:>7.1?}  ratio to pacing {:.3}x",
        wall,
        pacing,
        wall.saturating_sub(pacing),
        wall.as_secs_f64() / pacing.as_secs_f64()
    );

    let rounds = if quick { 10 } else { 200 };
    let cursor = plane.run(&root.run_id).unwrap().cursor;
    let commands = fake.stats().commands.len();
    let mut replay = Vec::new();
    let mut read = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let out = pool.ensure(&root, workers).unwrap();
        replay.push(t.elapsed());
        assert!(out.provisioned.is_empty());
        let t = Instant::now();
        std::hint::black_box(plane.workers_of(&root.run_id));
        read.push(t.elapsed());
    }
    replay.sort();
    read.sort();
    let effects =
        (plane.run(&root.run_id).unwrap().cursor - cursor) as usize + (fake.stats().commands.len() - commands);
    println!(
        "replay ensure({workers}) p50 {:>9.3?} p99 {:>9.3?}  effects {effects}  | baseline state read p50 {:>9.3?}  ratio {:.1}x",
        percentile(&replay, 0.5),
        percentile(&replay, 0.99),
        percentile(&read, 0.5),
        percentile(&replay, 0.5).as_secs_f64() / percentile(&read, 0.5).as_secs_f64()
    );
}

/// Every admitted peer's transport session is still open (no restart here).
fn every_session_alive(_: &str) -> bool {
    true
}
