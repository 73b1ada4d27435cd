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
    _dir: tempfile::TempDir,
}

async fn rig(faults: Vec<(usize, Fault)>) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    // Started at the wall clock and only moved forward: command deadlines
    // stay in the fake's future.
    let clock = ManualClock::at(wall);
    let store = Arc::new(MemoryStore::new());
    let plane = Arc::new(ControlPlane::open(store.clone(), Arc::new(clock.clone()), Keyring::new([7; 32])).unwrap());
    let credentials = Credentials::open_or_create(&dir.path().join("executors")).unwrap();
    let token = credentials.issue("fake-1").unwrap();
    let recheck = Policy { pacing: PACING, ..Policy::default() };
    let config = BridgeConfig { recheck, ..BridgeConfig::default() };
    let bridge = Bridge::start(plane.clone(), config, credentials, CancellationToken::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, carrier_webext::router(bridge)).await });
    let mut config = FakeConfig::new(format!("ws://{addr}/executor"), token, "fake-1");
    config.faults = faults;
    let fake = FakeExecutor::start(config);
    fake.wait_for(|s| s.connections == 1, WAIT).await;
    let (_, root) = plane.create_run("continuity e2e", None).unwrap();
    let policy = ContinuationPolicy { mode: ContinuationMode::Auto, ..ContinuationPolicy::default() };
    plane.execute(Request::SetContinuation { actor: root.clone(), target: None, policy }).unwrap();
    Rig { store, plane, clock, fake, root, _dir: dir }
}

impl Rig {
    /// A worker whose bootstrap was submitted and which attached during its
    /// first turn; that turn then ends (idle) with the work unfinished.
    async fn working(&self, name: &str) -> WorkerId {
        let root = self.plane.worker(&self.root).unwrap();
        let worker = self.plane.spawn(&root, name, &Assignment::from_objective("needs several turns"), None).unwrap();
        let w = worker.clone();
        self.fake.wait_for(move |s| s.submissions_for(&w).len() == 1, WAIT).await;
        self.recorded(&worker, ConversationState::Generating, None).await;
        self.plane.execute(Request::Attach { worker_id: worker.clone() }).unwrap();
        self.turn_ends(&worker, ConversationState::Idle, None).await;
        self.turn_over(&worker).await;
        worker
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

    /// Moves the clock and runs the continuity rules once (the bridge's
    /// scheduler task sleeps by real time; the test drives the manual one).
    fn advance(&self, ms: u64) {
        self.clock.advance(ms);
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
    assert!(sent[1].starts_with("[orchestrator resume v1 attempt 1]"), "{}", sent[1]);
    rig.turn_over(&a).await;
    rig.advance(3_000);
    rig.advance(PACING.min_gap_ms);
    let sent = rig.submissions(&a, 3).await;
    assert!(sent[2].starts_with("[orchestrator resume v1 attempt 2]"), "{}", sent[2]);
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
        .execute(Request::SetHold { actor: human.clone(), target: human.clone(), hold, reason: "which db?".into() })
        .unwrap();
    let paused = rig.working("paused").await;
    let root = rig.root.clone();
    rig.plane
        .execute(Request::SetHold {
            actor: root.clone(),
            target: paused.clone(),
            hold: Hold::Paused,
            reason: "look".into(),
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
    assert!(sent[2].starts_with("[orchestrator resume v1 attempt 2]"), "{}", sent[2]);
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
