//! Executor bridge benchmarks (run: `cargo bench -p carrier-webext`). Prints
//! figures, asserts nothing. Everything runs in one process over loopback:
//! the control plane on SQLite, the bridge on a real axum listener, and the
//! fake executor on a real WebSocket client.
//!
//! - dispatch latency: `worker_spawn` committed → the executor receives the
//!   create command;
//! - ACK round trip: `worker_spawn` committed → the executor's ack is
//!   committed in the daemon's log;
//! - baseline: one WebSocket message echoed over the same loopback.
//!
//! Each at 1 and 16 workers spawned at once (16 threads calling `spawn`).
//!
//! - idle → resume (Execution Continuity, idle grace 0, no pacing gap): the
//!   executor reports a worker's turn ended → it receives the resume
//!   command, over repeated resumes of one worker; against the same echo.

use std::sync::Arc;
use std::time::{Duration, Instant};

use carrier_webext::{Bridge, BridgeConfig, Credentials};
use control::model::CommandPhase;
use control::queue::Limits;
use control::store::SqliteStore;
use control::{ControlPlane, Keyring, SystemClock};
use fake_executor::{FakeConfig, FakeExecutor};
use futures_util::{SinkExt, StreamExt};
use protocol::{Assignment, CommandId, CommandIntent};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(mut xs: Vec<Duration>) -> String {
    xs.sort();
    format!("p50 {:>9.3?}  p99 {:>9.3?}", percentile(&xs, 0.5), percentile(&xs, 0.99))
}

fn assignment() -> Assignment {
    Assignment::from_objective("bench")
}

/// Round trips of one echoed WebSocket message over loopback, `concurrency` clients at once.
async fn echo_baseline(concurrency: usize, rounds: usize) -> Vec<Duration> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                while let Some(Ok(m)) = ws.next().await {
                    if m.is_text() && ws.send(m).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let clients = (0..concurrency).map(|_| async move {
        let (mut ws, _) =
            tokio_tungstenite::connect_async_with_config(format!("ws://{addr}"), None, true).await.unwrap();
        let mut out = Vec::new();
        for _ in 0..rounds {
            let start = Instant::now();
            ws.send(Message::Text("{\"type\":\"ack\",\"commandId\":\"cmd_00000000000000000000000000000000\"}".into()))
                .await
                .unwrap();
            ws.next().await.unwrap().unwrap();
            out.push(start.elapsed());
        }
        out
    });
    futures_util::future::join_all(clients).await.into_iter().flatten().collect()
}

/// A control plane on SQLite in `dir`, on the system clock.
fn sqlite_plane(dir: &std::path::Path, seed: u8) -> Arc<ControlPlane> {
    let store = Arc::new(SqliteStore::open(&dir.join(format!("bench-{seed}.db"))).unwrap());
    Arc::new(ControlPlane::open(store, Arc::new(SystemClock), Keyring::new([seed; 32])).unwrap())
}

/// Serves `bridge` on a loopback listener (TCP_NODELAY, as the daemon does); its address.
async fn serve_bridge(bridge: Arc<Bridge>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, carrier_webext::router(bridge)).await });
    addr
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let rounds = if quick { 2 } else { 40 };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plane = sqlite_plane(dir.path(), 2);
    let credentials = Credentials::open_or_create(&dir.path().join("executors")).unwrap();
    let credential = credentials.issue("bench").unwrap();
    // Finished workers free their slots: raise the limits so only the bridge is measured.
    let config = BridgeConfig {
        limits: Limits { max_launches: 64, max_active: 100_000, max_open_tabs: None },
        ..BridgeConfig::default()
    };
    let (fake, addr) = rt.block_on(async {
        let bridge = Bridge::start(plane.clone(), config, credentials.clone(), CancellationToken::new());
        let addr = serve_bridge(bridge).await;
        let fake = FakeExecutor::start(FakeConfig::new(format!("ws://{addr}/executor"), credential.clone(), "bench"));
        fake.wait_for(|s| s.connections == 1, Duration::from_secs(10)).await;
        (fake, addr)
    });
    let _ = addr;

    for concurrency in [1usize, 16] {
        let mut dispatch = Vec::new();
        let mut acked = Vec::new();
        for round in 0..rounds {
            // The executor may send 100 frames per second (bursts of 200), and
            // each create costs it six: let the bucket refill between rounds.
            if round > 0 {
                std::thread::sleep(Duration::from_millis(100 * concurrency as u64));
            }
            let (_, root) = plane.create_run(&format!("bench {concurrency}/{round}"), None).unwrap();
            let root = plane.worker(&root).unwrap();
            // The spawns arrive at once, as from `concurrency` callers.
            let spawned: Vec<(CommandId, Instant)> = std::thread::scope(|scope| {
                let callers: Vec<_> = (0..concurrency)
                    .map(|i| {
                        let (plane, root) = (&plane, &root);
                        scope.spawn(move || {
                            let worker = plane.spawn(root, &format!("w{i}"), &assignment(), None).unwrap();
                            let at = Instant::now();
                            let create = plane.with_state(|s| {
                                let mut creates = s.commands.values().filter(|c| c.worker_id == worker);
                                creates.find(|c| c.intent == CommandIntent::Create).map(|c| c.id.clone()).unwrap()
                            });
                            (create, at)
                        })
                    })
                    .collect();
                callers.into_iter().map(|c| c.join().unwrap()).collect()
            });
            let ids: Vec<CommandId> = spawned.iter().map(|(c, _)| c.clone()).collect();
            // Watch the log for the acks, timestamping each as it is committed.
            let mut changes = plane.subscribe_changes();
            let mut ack_at: std::collections::HashMap<CommandId, Instant> = Default::default();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            rt.block_on(async {
                while ack_at.len() < ids.len() {
                    for id in &ids {
                        if !ack_at.contains_key(id)
                            && plane
                                .command(id)
                                .is_some_and(|c| matches!(c.phase, CommandPhase::Acked | CommandPhase::Completed))
                        {
                            ack_at.insert(id.clone(), Instant::now());
                        }
                    }
                    if ack_at.len() < ids.len() && tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
                        let missing: Vec<_> = ids.iter().filter(|id| !ack_at.contains_key(*id)).collect();
                        let phases: Vec<_> = missing.iter().map(|id| plane.command(id).map(|c| c.phase)).collect();
                        panic!(
                            "no ack within 30 s for {} commands ({phases:?}); the fake received {} frames; closes {:?}",
                            missing.len(),
                            fake.stats().commands.len(),
                            fake.stats().closes.iter().take(3).collect::<Vec<_>>()
                        );
                    }
                }
            });
            let stats = fake.stats();
            for (id, at) in spawned {
                dispatch.push(stats.first_received[&id].duration_since(at));
                acked.push(ack_at[&id].duration_since(at));
            }
        }
        let echo = rt.block_on(echo_baseline(concurrency, rounds));
        let echo_p50 = {
            let mut e = echo.clone();
            e.sort();
            percentile(&e, 0.5)
        };
        let p50 = |xs: &Vec<Duration>| {
            let mut x = xs.clone();
            x.sort();
            percentile(&x, 0.5)
        };
        println!(
            "bridge {concurrency:>2} workers: dispatch {}  ack round trip {}  | baseline ws echo {}  | ratios to echo p50: dispatch {:.1}x, ack {:.1}x",
            summary(dispatch.clone()),
            summary(acked.clone()),
            summary(echo),
            p50(&dispatch).as_secs_f64() / echo_p50.as_secs_f64(),
            p50(&acked).as_secs_f64() / echo_p50.as_secs_f64(),
        );
    }
    rt.block_on(fake.stop());
    idle_to_resume(&rt, if quick { 3 } else { 1000 });
}

/// A worker resumed `rounds` times: each turn's end is reported by hand
/// (the fake loses its own idle report), and the resume command's arrival
/// at the fake is timed against it.
fn idle_to_resume(rt: &tokio::runtime::Runtime, rounds: usize) {
    use control::continuity::Pacing;
    use control::decide::Request;
    use fake_executor::{Fault, Op};
    use protocol::continuity::{ContinuationMode, ContinuationPolicy};
    use protocol::executor::ConversationState;
    let dir = tempfile::tempdir().unwrap();
    let plane = sqlite_plane(dir.path(), 4);
    let credentials = Credentials::open_or_create(&dir.path().join("executors")).unwrap();
    let credential = credentials.issue("resume").unwrap();
    let recheck =
        control::schedule::Policy { pacing: Pacing { min_gap_ms: 0, ..Pacing::default() }, ..Default::default() };
    let config = BridgeConfig { recheck, ..BridgeConfig::default() };
    let (_, root) = plane.create_run("idle to resume", None).unwrap();
    let policy = ContinuationPolicy {
        mode: ContinuationMode::Auto,
        idle_grace_ms: 0,
        stall_warning_after_no_progress_attempts: 0,
        stall_pause_after_no_progress_attempts: 0,
        stall_warning_after_no_progress_ms: 0,
        stall_pause_after_no_progress_ms: 0,
        ..ContinuationPolicy::default()
    };
    plane.execute(Request::SetContinuation { actor: root.clone(), target: None, policy }).unwrap();
    let samples = rt.block_on(async {
        let bridge = Bridge::start(plane.clone(), config, credentials, CancellationToken::new());
        let addr = serve_bridge(bridge).await;
        let mut config = FakeConfig::new(format!("ws://{addr}/executor"), credential, "resume");
        // Every turn's own idle report is lost: the bench reports it, timed.
        config.faults = std::iter::once((0, Fault::LoseIdleReport(Op::Create)))
            .chain((0..rounds).map(|i| (i, Fault::LoseIdleReport(Op::Send))))
            .collect();
        let fake = FakeExecutor::start(config);
        fake.wait_for(|s| s.connections == 1, Duration::from_secs(10)).await;
        let root_w = plane.worker(&root).unwrap();
        let worker = plane.spawn(&root_w, "w", &assignment(), None).unwrap();
        let w = worker.clone();
        fake.wait_for(move |s| s.submissions_for(&w).len() == 1, Duration::from_secs(10)).await;
        plane.execute(Request::Attach { worker_id: worker.clone() }).unwrap();
        let mut samples = Vec::with_capacity(rounds);
        for round in 1..=rounds {
            // The turn is under way and its prompt's result recorded.
            while plane.with_state(|s| {
                let w = &s.workers[&worker];
                w.conversation_state != Some(ConversationState::Generating)
                    || s.open_commands.iter().any(|c| s.commands[c].worker_id == worker)
            }) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // The executor's frame budget (100 a second) is not what is measured.
            tokio::time::sleep(Duration::from_millis(40)).await;
            let before = fake.stats().commands.len();
            let ended = Instant::now();
            fake.report_state(&worker, ConversationState::Idle, None);
            let stats = fake.wait_for(move |s| s.commands.len() > before, Duration::from_secs(10)).await;
            let resume = &stats.commands[before];
            samples.push(stats.first_received[&resume.command_id].duration_since(ended));
            let w = worker.clone();
            fake.wait_for(move |s| s.submissions_for(&w).len() == round + 1, Duration::from_secs(10)).await;
        }
        fake.stop().await;
        samples
    });
    let echo = rt.block_on(echo_baseline(1, rounds));
    let p = |xs: &[Duration], q: f64| {
        let mut x = xs.to_vec();
        x.sort();
        percentile(&x, q)
    };
    println!(
        "idle -> resume received, {rounds} resumes (grace 0): {}  | baseline ws echo {}  | ratios to echo: p50 {:.1}x, p99 {:.1}x",
        summary(samples.clone()),
        summary(echo.clone()),
        p(&samples, 0.5).as_secs_f64() / p(&echo, 0.5).as_secs_f64(),
        p(&samples, 0.99).as_secs_f64() / p(&echo, 0.99).as_secs_f64(),
    );
}
