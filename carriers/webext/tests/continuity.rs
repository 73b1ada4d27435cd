//! Execution Continuity end to end below the browser (seed §26.4 with the
//! fake executor): the control plane on a manual clock, the real bridge on
//! a loopback listener, and the fake executor on a real WebSocket running
//! the extension's executor core. The test plays the worker's MCP side
//! (attach, complete, await a person) and moves the clock; what reaches
//! the page is read from the fake's submissions, the oracle for
//! exactly-once.

use std::sync::Arc;
use std::time::Duration;

use carrier_webext::{Bridge, BridgeConfig, Credentials};
use control::continuity::Pacing;
use control::decide::Request;
use control::schedule::Policy;
use control::store::MemoryStore;
use control::{ControlPlane, Keyring, ManualClock};
use fake_executor::{FakeConfig, FakeExecutor, Fault, Op};
use protocol::continuity::{AttemptReason, ContinuationMode, ContinuationPolicy, Hold};
use protocol::executor::ConversationState;
use protocol::{Assignment, ErrorCode, EventBody, WorkerId};
use tokio_util::sync::CancellationToken;

const PACING: Pacing =
    Pacing { min_gap_ms: 5_000, rate_limit_wait_ms: 15 * 60_000, stalled_turn_after_ms: 24 * 60 * 60_000 };
const WAIT: Duration = Duration::from_secs(10);

struct Rig {
    store: Arc<MemoryStore>,
    plane: Arc<ControlPlane>,
    clock: ManualClock,
    fake: FakeExecutor,
    root: WorkerId,
    daemon: Daemon,
    dir: tempfile::TempDir,
}

/// The daemon's side: the bridge and its listener, stopped by `shutdown`.
struct Daemon {
    addr: std::net::SocketAddr,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<()>,
}

/// A control plane over `store` (whatever it already holds, as after a
/// restart) and the real bridge on `addr` (port 0: any).
async fn daemon(
    store: &Arc<MemoryStore>,
    clock: &ManualClock,
    dir: &std::path::Path,
    addr: std::net::SocketAddr,
) -> (Arc<ControlPlane>, Daemon) {
    let plane = Arc::new(ControlPlane::open(store.clone(), Arc::new(clock.clone()), Keyring::new([7; 32])).unwrap());
    let credentials = Credentials::open_or_create(&dir.join("executors")).unwrap();
    let recheck = Policy { pacing: PACING, ..Policy::default() };
    let config = BridgeConfig { recheck, ..BridgeConfig::default() };
    let shutdown = CancellationToken::new();
    let bridge = Bridge::start(plane.clone(), config, credentials, shutdown.clone());
    // The port a stopped daemon held is free once its server task is gone.
    let until = std::time::Instant::now() + WAIT;
    let listener = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => break listener,
            Err(e) if std::time::Instant::now() < until => retry_soon(e).await,
            Err(e) => panic!("cannot listen on {addr}: {e}"),
        }
    };
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(listener, carrier_webext::router(bridge)).await.unwrap();
    });
    (plane, Daemon { addr, shutdown, server })
}

async fn retry_soon(_: std::io::Error) {
    tokio::time::sleep(Duration::from_millis(10)).await;
}

async fn rig(faults: Vec<(usize, Fault)>) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    // Started at the wall clock and only moved forward: command deadlines
    // stay in the fake's future.
    let clock = ManualClock::at(wall);
    let store = Arc::new(MemoryStore::new());
    let token = Credentials::open_or_create(&dir.path().join("executors")).unwrap().issue("fake-1").unwrap();
    let (plane, daemon) = daemon(&store, &clock, dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let mut config = FakeConfig::new(format!("ws://{}/executor", daemon.addr), token, "fake-1");
    config.faults = faults;
    let fake = FakeExecutor::start(config);
    fake.wait_for(|s| s.connections == 1, WAIT).await;
    let (_, root) = plane.create_run("continuity e2e", None).unwrap();
    let policy = ContinuationPolicy { mode: ContinuationMode::Auto, ..ContinuationPolicy::default() };
    plane.execute(Request::SetContinuation { actor: root.clone(), target: None, policy }).unwrap();
    Rig { store, plane, clock, fake, root, daemon, dir }
}

impl Rig {
    /// A worker whose bootstrap was submitted and which attached during its
    /// first turn; that turn then ends (idle) with the work unfinished.
    async fn working(&self, name: &str) -> WorkerId {
        self.working_under(&self.root.clone(), name).await
    }

    /// [`Rig::working`], spawned by `root`.
    async fn working_under(&self, root: &WorkerId, name: &str) -> WorkerId {
        let root = self.plane.worker(root).unwrap();
        let worker = self.plane.spawn(&root, name, &Assignment::from_objective("needs several turns"), None).unwrap();
        self.attached_in_first_turn(&worker).await;
        worker
    }

    /// `worker`'s bootstrap went in, it attached during that turn, and the
    /// turn ended (idle) with the work unfinished.
    async fn attached_in_first_turn(&self, worker: &WorkerId) {
        let w = worker.clone();
        self.fake.wait_for(move |s| s.submissions_for(&w).len() == 1, WAIT).await;
        self.recorded(worker, ConversationState::Generating, None).await;
        self.plane.execute(Request::Attach { worker_id: worker.clone() }).unwrap();
        self.turn_ends(worker, ConversationState::Idle, None).await;
        self.turn_over(worker).await;
    }

    /// The daemon stops (its sessions close, its tasks end) and starts
    /// again on the same store and port: a new control plane rebuilt from
    /// the log, a new bridge; the executor reconnects and resyncs.
    async fn restart(&mut self) {
        self.daemon.shutdown.cancel();
        self.daemon.server.abort();
        let connections = self.fake.stats().connections;
        let until = std::time::Instant::now() + WAIT;
        while self.fake.is_connected() {
            assert!(std::time::Instant::now() < until, "the executor never saw the daemon go");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (plane, daemon) = daemon(&self.store, &self.clock, self.dir.path(), self.daemon.addr).await;
        (self.plane, self.daemon) = (plane, daemon);
        self.fake.wait_for(move |s| s.connections > connections, WAIT).await;
    }

    /// The page reports `state` and the daemon has recorded it.
    async fn turn_ends(&self, worker: &WorkerId, state: ConversationState, error: Option<ErrorCode>) {
        assert!(self.fake.report_state(worker, state, error));
        self.recorded(worker, state, error).await;
    }

    /// The daemon has recorded `state` (with `error`) for `worker`'s page.
    async fn recorded(&self, worker: &WorkerId, state: ConversationState, error: Option<ErrorCode>) {
        let until = std::time::Instant::now() + WAIT;
        while self.plane.worker(worker).unwrap().conversation_state != Some(state)
            || !self.recorded_error(worker, error)
        {
            assert!(std::time::Instant::now() < until, "the daemon never recorded {state:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn recorded_error(&self, worker: &WorkerId, error: Option<ErrorCode>) -> bool {
        error.is_none()
            || self.plane.with_state(|s| {
                s.workers[worker].last_error == error
                    || (error == Some(ErrorCode::RateLimited) && s.rate_limited_at_ms.is_some())
            })
    }

    /// The daemon has seen `worker`'s latest prompt go in and its turn end.
    async fn turn_over(&self, worker: &WorkerId) {
        let until = std::time::Instant::now() + WAIT;
        loop {
            let c = self.plane.worker(worker).unwrap().continuity;
            let open = self.plane.with_state(|s| s.open_commands.iter().any(|c| &s.commands[c].worker_id == worker));
            if !open && c.in_flight.is_none() && c.idle_since_ms.is_some() {
                return;
            }
            assert!(std::time::Instant::now() < until, "the turn of {worker} never ended: {c:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Moves the clock and runs the scheduler's rules once (the bridge's
    /// scheduler task sleeps by real time; the test drives the manual one).
    fn advance(&self, ms: u64) {
        self.clock.advance(ms);
        self.plane.recheck(&["fake-1".to_owned()], Policy { pacing: PACING, ..Policy::default() }).unwrap();
        self.plane.continue_due(PACING).unwrap();
    }

    async fn submissions(&self, worker: &WorkerId, n: usize) -> Vec<String> {
        let w = worker.clone();
        self.fake.wait_for(move |s| s.submissions_for(&w).len() >= n, WAIT).await.submissions_for(worker)
    }

    /// Nothing more reaches `worker`'s page: once the queue holds nothing
    /// for it, the fake saw exactly `n` prompts.
    async fn settled(&self, worker: &WorkerId, n: usize) {
        let until = std::time::Instant::now() + WAIT;
        while self.plane.with_state(|s| s.open_commands.iter().any(|c| &s.commands[c].worker_id == worker)) {
            assert!(std::time::Instant::now() < until, "a command for {worker} stays open");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(self.fake.stats().submissions_for(worker).len(), n);
    }

    /// The reasons of `worker`'s execution attempts, in order.
    fn reasons(&self, worker: &WorkerId) -> Vec<AttemptReason> {
        use control::store::Store;
        let mut out = Vec::new();
        self.store
            .replay(&mut |event| {
                if let EventBody::ExecutionScheduled { worker_id, reason, .. } = event.body
                    && &worker_id == worker
                {
                    out.push(reason);
                }
                Ok(())
            })
            .unwrap();
        out
    }
}

/// Seed §26.4, primary: attempt after attempt in the same conversation with
/// nobody typing, until the worker completes; no attempt after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_is_resumed_turn_after_turn_until_it_completes() {
    let rig = rig(vec![(0, Fault::LoseIdleReport(Op::Create))]).await;
    let a = rig.working("a").await;
    rig.advance(3_000);
    let sent = rig.submissions(&a, 2).await;
    assert!(sent[1].starts_with("[orchestrator resume v2 attempt 1]"), "{}", sent[1]);
    rig.turn_over(&a).await;
    rig.advance(3_000);
    rig.advance(PACING.min_gap_ms);
    let sent = rig.submissions(&a, 3).await;
    assert!(sent[2].starts_with("[orchestrator resume v2 attempt 2]"), "{}", sent[2]);
    let conversations: Vec<_> = rig.fake.stats().conversations.into_iter().filter(|(w, _)| *w == a).collect();
    assert_eq!(conversations.len(), 1, "the same conversation throughout");
    rig.plane.execute(Request::Complete { actor: a.clone(), summary: "done".into(), artifacts: vec![] }).unwrap();
    for _ in 0..5 {
        rig.advance(20 * 60_000);
    }
    assert_eq!(rig.plane.next_continue_at(PACING), None, "nothing is scheduled after completion");
    rig.settled(&a, 3).await;
    assert_eq!(rig.reasons(&a), [AttemptReason::AutoResume, AttemptReason::AutoResume]);
}

/// Human-block and pause: a worker waiting for a person, or paused, is not
/// resumed when its turn ends; continue now resumes it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_worker_waits_and_continue_now_resumes_it_once() {
    let rig = rig(vec![(0, Fault::LoseIdleReport(Op::Create)), (1, Fault::LoseIdleReport(Op::Create))]).await;
    let human = rig.working("human").await;
    let hold = Hold::AwaitingHuman;
    rig.plane
        .execute(Request::SetHold {
            actor: human.clone(),
            target: human.clone(),
            hold,
            reason: "which db?".into(),
            ask: None,
        })
        .unwrap();
    let paused = rig.working("paused").await;
    let root = rig.root.clone();
    rig.plane
        .execute(Request::SetHold {
            actor: root.clone(),
            target: paused.clone(),
            hold: Hold::Paused,
            reason: "look".into(),
            ask: None,
        })
        .unwrap();
    for _ in 0..3 {
        rig.advance(20 * 60_000);
    }
    rig.settled(&human, 1).await;
    rig.settled(&paused, 1).await;
    let waiting = rig.plane.worker(&human).unwrap();
    assert_eq!(waiting.continuity.disposition(waiting.state), protocol::WorkerDisposition::AwaitingHuman);
    rig.plane.execute(Request::ContinueNow { actor: root.clone(), target: paused.clone() }).unwrap();
    rig.plane.execute(Request::ContinueNow { actor: root, target: paused.clone() }).unwrap();
    rig.advance(0);
    rig.submissions(&paused, 2).await;
    rig.settled(&paused, 2).await;
    rig.settled(&human, 1).await;
}

/// "Message delivery timed out": the next submission is a fresh resume
/// prompt (reason recovery) through a new command. The executor protocol
/// has no operation that could click Retry (see protocol's op list test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_timeout_is_answered_by_a_fresh_continue() {
    let rig = rig(vec![(0, Fault::LoseIdleReport(Op::Create)), (0, Fault::DeliveryTimeout(Op::Send))]).await;
    let a = rig.working("a").await;
    rig.advance(3_000);
    rig.submissions(&a, 2).await;
    rig.recorded(&a, ConversationState::Error, Some(ErrorCode::DeliveryTimeout)).await;
    rig.turn_over(&a).await;
    rig.advance(3_000);
    rig.advance(PACING.min_gap_ms);
    let sent = rig.submissions(&a, 3).await;
    assert!(sent[2].starts_with("[orchestrator resume v2 attempt 2]"), "{}", sent[2]);
    assert_eq!(rig.reasons(&a), [AttemptReason::AutoResume, AttemptReason::Recovery]);
    let commands: std::collections::HashSet<_> =
        rig.fake.stats().commands.iter().filter(|c| c.worker_id == a).map(|c| c.command_id.clone()).collect();
    assert_eq!(commands.len(), 3, "create, resume, and a new command for the recovery");
}

/// "Too many requests" on one tab: no worker is resumed automatically until
/// the wait has passed, then both are, paced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_on_one_tab_holds_every_automatic_continuation_for_the_wait() {
    let faults = vec![
        (0, Fault::LoseIdleReport(Op::Create)),
        (1, Fault::LoseIdleReport(Op::Create)),
        (0, Fault::RateLimited(Op::Send)),
    ];
    let rig = rig(faults).await;
    let a = rig.working("a").await;
    rig.advance(3_000);
    rig.submissions(&a, 2).await;
    rig.recorded(&a, ConversationState::Error, Some(ErrorCode::RateLimited)).await;
    rig.turn_over(&a).await;
    let b = rig.working("b").await;
    for _ in 0..14 {
        rig.advance(60_000);
    }
    rig.settled(&a, 2).await;
    rig.settled(&b, 1).await;
    rig.advance(60_000);
    rig.advance(PACING.min_gap_ms);
    rig.submissions(&a, 3).await;
    rig.submissions(&b, 2).await;
}

/// Seed §26.4, restart: the daemon dies after a resume was submitted and
/// before its result came back. The new daemon, rebuilt from the log,
/// replays the command; the executor's journal answers it from its record
/// without typing it again; the next attempt follows as usual. One
/// submission per attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_restart_while_a_resume_is_in_flight_submits_it_exactly_once() {
    let mut rig = rig(vec![(0, Fault::LoseIdleReport(Op::Create)), (0, Fault::DropResult(Op::Send))]).await;
    let a = rig.working("a").await;
    rig.advance(3_000);
    rig.submissions(&a, 2).await;
    rig.restart().await;
    rig.settled(&a, 2).await;
    let deliveries = rig.fake.stats().commands.iter().filter(|c| c.idempotency_key == format!("resume:{a}:1")).count();
    assert_eq!(deliveries, 2, "the new daemon replayed the resume it found in flight, and it was not typed again");
    // Whether or not the old daemon heard that turn run and end before it
    // died, the new one goes on: it heard, or it asks the page once the
    // bound has passed (30 s) and finds the turn ended. Attempt 2 follows.
    rig.advance(30_000);
    rig.turn_over(&a).await;
    rig.advance(3_000);
    let sent = rig.submissions(&a, 3).await;
    assert!(sent[1].starts_with("[orchestrator resume v2 attempt 1]"), "{}", sent[1]);
    assert!(sent[2].starts_with("[orchestrator resume v2 attempt 2]"), "{}", sent[2]);
    rig.plane.execute(Request::Complete { actor: a.clone(), summary: "done".into(), artifacts: vec![] }).unwrap();
    rig.advance(30 * 60_000);
    rig.settled(&a, 3).await;
    assert_eq!(rig.reasons(&a), [AttemptReason::AutoResume, AttemptReason::AutoResume]);
}

/// Seed §26.4, restart at another boundary: the turn ended and the daemon
/// dies inside the idle grace, before anything was scheduled. The new
/// daemon finds the idle worker in the log and resumes it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_restart_inside_the_idle_grace_resumes_exactly_once() {
    let mut rig = rig(vec![(0, Fault::LoseIdleReport(Op::Create))]).await;
    let a = rig.working("a").await;
    rig.advance(1_000);
    rig.settled(&a, 1).await;
    rig.restart().await;
    rig.advance(2_000);
    let sent = rig.submissions(&a, 2).await;
    assert!(sent[1].starts_with("[orchestrator resume v2 attempt 1]"), "{}", sent[1]);
    rig.turn_over(&a).await;
    rig.restart().await;
    rig.advance(0);
    rig.settled(&a, 2).await;
    assert_eq!(rig.reasons(&a), [AttemptReason::AutoResume]);
}

/// Seed §26.4, root: a root the daemon launched into a managed
/// conversation coordinates two children; its turn ends while the run is
/// active and it is resumed in the same conversation; the children
/// complete, root integrates and completes, and no root continuation
/// follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_root_is_resumed_while_its_run_is_active_and_never_after_it_completes() {
    let faults = (0..3).map(|n| (n, Fault::LoseIdleReport(Op::Create))).collect();
    let rig = rig(faults).await;
    let objective = Assignment::from_objective("split the goal across two workers");
    let (_, root, created) = rig.plane.create_managed_run("managed root", &objective, None).unwrap();
    assert!(created);
    let policy = ContinuationPolicy { mode: ContinuationMode::Auto, ..ContinuationPolicy::default() };
    let target = Some(root.clone());
    rig.plane.execute(Request::SetContinuation { actor: root.clone(), target, policy }).unwrap();
    rig.attached_in_first_turn(&root).await;
    let sent = rig.submissions(&root, 1).await;
    assert!(sent[0].starts_with("[orchestrator root bootstrap v1]"), "{}", sent[0]);
    assert_eq!(rig.plane.worker(&root).unwrap().state, protocol::WorkerState::Running);

    // Root spawned its children during that turn (they stay manual).
    let a = rig.working_under(&root, "a").await;
    let b = rig.working_under(&root, "b").await;
    rig.advance(3_000);
    let sent = rig.submissions(&root, 2).await;
    assert!(sent[1].starts_with("[orchestrator resume v2 attempt 1]"), "{}", sent[1]);
    rig.turn_over(&root).await;

    // The children complete; root is resumed to integrate, and completes.
    for child in [&a, &b] {
        rig.plane
            .execute(Request::Complete { actor: child.clone(), summary: "done".into(), artifacts: vec![] })
            .unwrap();
    }
    rig.advance(3_000);
    rig.advance(PACING.min_gap_ms);
    rig.submissions(&root, 3).await;
    rig.plane
        .execute(Request::Complete { actor: root.clone(), summary: "integrated".into(), artifacts: vec![] })
        .unwrap();
    for _ in 0..5 {
        rig.advance(20 * 60_000);
    }
    assert_eq!(rig.plane.next_continue_at(PACING), None, "nothing is scheduled after the run completed");
    rig.settled(&root, 3).await;
    rig.settled(&a, 1).await;
    rig.settled(&b, 1).await;
    assert_eq!(rig.reasons(&root), [AttemptReason::AutoResume, AttemptReason::AutoResume]);
    let run = rig.plane.run(&rig.plane.worker(&root).unwrap().run_id).unwrap();
    assert_eq!(run.state, protocol::RunState::Completed);
}

/// The page's movement reaches the daemon over the executor protocol,
/// paced by the executor core (one `conversationProgress` per 30 s per
/// worker), and is recorded for a turn the daemon sees running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_turns_movement_is_paced_by_the_executor_and_recorded() {
    let rig = rig(vec![(0, Fault::LoseIdleReport(Op::Create))]).await;
    let root = rig.plane.worker(&rig.root).unwrap();
    let a = rig.plane.spawn(&root, "a", &Assignment::from_objective("streams"), None).unwrap();
    rig.submissions(&a, 1).await;
    rig.recorded(&a, ConversationState::Generating, None).await;
    assert!(rig.fake.report_progress(&a));
    assert!(!rig.fake.report_progress(&a), "paced by the executor core");
    let until = std::time::Instant::now() + WAIT;
    while rig.plane.worker(&a).unwrap().continuity.page_progress_at_ms.is_none() {
        assert!(std::time::Instant::now() < until, "the daemon never recorded the page moving on");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
