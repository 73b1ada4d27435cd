//! The control plane end to end over a real store: the root/worker flow,
//! idempotency, hostile inputs, restart, store faults and bounded waits.

use std::sync::Arc;
use std::time::Duration;

use control::decide::Request;
use control::plane::Viewer;
use control::store::{MemoryStore, SqliteStore, Store};
use control::{Clock, ControlPlane, Error, Keyring, ManualClock};
use protocol::{Assignment, ErrorCode, EventBody, MessageKind, RunState, WorkerState};

fn assignment(objective: &str) -> Assignment {
    Assignment {
        objective: objective.into(),
        constraints: vec!["stay in scope".into()],
        acceptance_criteria: vec!["tests pass".into()],
        dependencies: vec![],
        scope: Default::default(),
        artifact_refs: vec![],
        communication_policy: None,
        completion_protocol: None,
    }
}

fn plane_on(store: Arc<dyn Store>) -> ControlPlane {
    ControlPlane::open(store, Arc::new(ManualClock::at(1_000)), Keyring::new([3; 32])).unwrap()
}

fn plane() -> ControlPlane {
    plane_on(Arc::new(MemoryStore::new()))
}

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> ErrorCode {
    r.unwrap_err().code()
}

#[test]
fn root_and_two_workers_complete_a_run() {
    let p = plane();
    let (run, root_id) = p.create_run("ship it", None).unwrap();
    let root = p.authenticate(&p.keys().capability(&root_id)).unwrap();
    let a = p.spawn(&root, "a", &assignment("do A"), None).unwrap();
    let b = p.spawn(&root, "b", &assignment("do B"), None).unwrap();
    assert_eq!(p.worker(&a).unwrap().state, WorkerState::LaunchRequested);
    for w in [&a, &b] {
        let (id, _) = p.keys().verify_attach_identity(&p.keys().attach_identity(w)).unwrap();
        p.execute(Request::Attach { worker_id: id }).unwrap();
    }
    let wa = p.authenticate(&p.keys().capability(&a)).unwrap();
    assert_eq!(wa.state, WorkerState::Running);
    assert_eq!(wa.assignment.as_ref().unwrap().objective, "do A");
    let q = p.send(&wa, &root_id, MessageKind::Question, "which port?", None, None).unwrap();
    assert_eq!(p.worker(&a).unwrap().state, WorkerState::Waiting);
    let root = p.worker(&root_id).unwrap();
    p.send(&root, &a, MessageKind::Answer, "7777", Some(&q), None).unwrap();
    assert_eq!(p.worker(&a).unwrap().state, WorkerState::Running);
    // A sees the answer, not B's business.
    let page = p.events(&run, 0, 100, &Viewer::Worker(a.clone())).unwrap();
    assert!(page.events.iter().any(|e| matches!(&e.body, EventBody::WorkerMessage { kind: MessageKind::Answer, .. })));
    assert!(page.events.iter().all(|e| e.body.visible_to(&a)));
    p.execute(Request::Complete { actor: a.clone(), summary: "A done".into(), artifacts: vec![] }).unwrap();
    // Root completes while B still works: the run is completing.
    p.execute(Request::Complete { actor: root_id.clone(), summary: "all".into(), artifacts: vec![] }).unwrap();
    assert_eq!(p.run(&run).unwrap().state, RunState::Completing);
    assert_eq!(code(p.spawn(&root, "c", &assignment("late"), None)), ErrorCode::RunNotActive);
    p.execute(Request::Complete { actor: b.clone(), summary: "B done".into(), artifacts: vec![] }).unwrap();
    assert_eq!(p.run(&run).unwrap().state, RunState::Completed);
    // The log is gapless from 1.
    let all = p.events(&run, 0, 500, &Viewer::Root).unwrap();
    let cursors: Vec<u64> = all.events.iter().map(|e| e.cursor).collect();
    assert_eq!(cursors, (1..=all.cursor).collect::<Vec<_>>());
}

#[test]
fn spawn_replays_by_idempotency_key_and_conflicts_on_different_arguments() {
    let p = plane();
    let (run, root_id) = p.create_run("r", Some("run-1")).unwrap();
    assert_eq!(p.create_run("r", Some("run-1")).unwrap(), (run.clone(), root_id.clone()));
    assert_eq!(code(p.create_run("other", Some("run-1"))), ErrorCode::Conflict);
    let root = p.worker(&root_id).unwrap();
    let w = p.spawn(&root, "a", &assignment("x"), Some("k1")).unwrap();
    let cursor = p.run(&run).unwrap().cursor;
    assert_eq!(p.spawn(&root, "a", &assignment("x"), Some("k1")).unwrap(), w);
    assert_eq!(p.run(&run).unwrap().cursor, cursor, "a replay appends nothing");
    assert_eq!(code(p.spawn(&root, "a", &assignment("y"), Some("k1"))), ErrorCode::Conflict);
    assert_eq!(code(p.spawn(&root, "b", &assignment("x"), Some(""))), ErrorCode::InvalidArgument);
    assert_eq!(code(p.spawn(&root, "b", &assignment("x"), Some(&"k".repeat(129)))), ErrorCode::TooLarge);
    assert_eq!(p.workers_of(&run).len(), 2);
}

#[test]
fn hostile_inputs_get_typed_errors_and_change_nothing() {
    let p = plane();
    let (run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    let a = p.spawn(&root, "a", &assignment("x"), None).unwrap();
    let b = p.spawn(&root, "b", &assignment("y"), None).unwrap();
    for w in [&a, &b] {
        p.execute(Request::Attach { worker_id: w.clone() }).unwrap();
    }
    let wa = p.worker(&a).unwrap();
    let before = p.run(&run).unwrap().cursor;

    assert_eq!(code(p.authenticate("cap_nonsense")), ErrorCode::Unauthorized);
    assert_eq!(code(p.authenticate(&Keyring::new([4; 32]).capability(&a))), ErrorCode::Unauthorized);
    // Workers cannot use root-only powers.
    assert_eq!(code(p.spawn(&wa, "c", &assignment("z"), None)), ErrorCode::Forbidden);
    assert_eq!(code(p.followup(&wa, &b, "go", None)), ErrorCode::Forbidden);
    assert_eq!(
        code(p.execute(Request::Interrupt { actor: a.clone(), target: b.clone(), reason: "x".into() })),
        ErrorCode::Forbidden
    );
    assert_eq!(code(p.execute(Request::CancelRun { actor: a.clone(), reason: "x".into() })), ErrorCode::Forbidden);
    assert_eq!(code(p.broadcast(&wa, MessageKind::Information, "hi", None)), ErrorCode::Forbidden);
    // Workers talk to root, not to each other.
    assert_eq!(code(p.send(&wa, &b, MessageKind::Information, "psst", None, None)), ErrorCode::Forbidden);
    assert_eq!(code(p.send(&wa, &a, MessageKind::Information, "me", None, None)), ErrorCode::InvalidArgument);
    // Bad names and oversized fields.
    assert_eq!(code(p.spawn(&root, "Bad Name", &assignment("x"), None)), ErrorCode::InvalidArgument);
    assert_eq!(code(p.spawn(&root, "a", &assignment("dup"), None)), ErrorCode::InvalidArgument);
    assert_eq!(code(p.spawn(&root, "big", &assignment(&"x".repeat(40_000)), None)), ErrorCode::TooLarge);
    assert_eq!(code(p.spawn(&root, "empty", &assignment("  "), None)), ErrorCode::InvalidArgument);
    assert_eq!(
        code(p.send(&wa, &root_id, MessageKind::Information, &"x".repeat(40_000), None, None)),
        ErrorCode::TooLarge
    );
    assert_eq!(
        code(p.execute(Request::Progress { actor: a.clone(), summary: "x".into(), percent: Some(101) })),
        ErrorCode::InvalidArgument
    );
    assert_eq!(code(p.create_run(&"t".repeat(300), None)), ErrorCode::TooLarge);
    // Illegal transitions.
    p.execute(Request::Interrupt { actor: root_id.clone(), target: b.clone(), reason: "stop".into() }).unwrap();
    let after_interrupt = p.run(&run).unwrap().cursor;
    assert_eq!(
        code(p.execute(Request::Complete { actor: b.clone(), summary: "done".into(), artifacts: vec![] })),
        ErrorCode::InvalidTransition
    );
    assert_eq!(code(p.execute(Request::Attach { worker_id: b.clone() })), ErrorCode::InvalidTransition);
    assert_eq!(code(p.followup(&root, &b, "again", None)), ErrorCode::InvalidTransition);
    assert_eq!(
        code(p.execute(Request::Interrupt { actor: root_id.clone(), target: root_id.clone(), reason: "x".into() })),
        ErrorCode::InvalidArgument
    );
    assert_eq!(p.run(&run).unwrap().cursor, after_interrupt, "refused calls append nothing");
    assert!(after_interrupt > before);
    // A reply must answer a message addressed to the replier.
    let q = p.send(&wa, &root_id, MessageKind::Question, "q", None, None).unwrap();
    assert_eq!(code(p.send(&wa, &root_id, MessageKind::Answer, "a", Some(&q), None)), ErrorCode::Forbidden);
}

#[test]
fn restart_rebuilds_everything_and_cursors_continue() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let (run, root_id, a, before) = {
        let p = plane_on(Arc::new(SqliteStore::open(&path).unwrap()));
        let (run, root_id) = p.create_run("r", None).unwrap();
        let root = p.worker(&root_id).unwrap();
        let a = p.spawn(&root, "a", &assignment("x"), Some("k")).unwrap();
        p.execute(Request::Attach { worker_id: a.clone() }).unwrap();
        p.execute(Request::Progress { actor: a.clone(), summary: "half".into(), percent: Some(50) }).unwrap();
        let before = (p.run(&run).unwrap(), p.workers_of(&run), p.events(&run, 0, 500, &Viewer::Root).unwrap());
        (run, root_id, a, before)
    };
    let p = plane_on(Arc::new(SqliteStore::open(&path).unwrap()));
    assert_eq!(p.run(&run).unwrap(), before.0);
    assert_eq!(p.workers_of(&run), before.1);
    assert_eq!(p.events(&run, 0, 500, &Viewer::Root).unwrap(), before.2);
    let root = p.worker(&root_id).unwrap();
    assert_eq!(p.spawn(&root, "a", &assignment("x"), Some("k")).unwrap(), a);
    assert_eq!(code(p.spawn(&root, "a", &assignment("other"), Some("k"))), ErrorCode::Conflict);
    let events = p.execute(Request::Progress { actor: a.clone(), summary: "more".into(), percent: None }).unwrap();
    assert_eq!(events[0].cursor, before.0.cursor + 1);
}

#[test]
fn a_failed_append_leaves_state_untouched_and_the_next_one_works() {
    #[path = "store_contract.rs"]
    #[allow(dead_code)]
    mod shared;
    let store = Arc::new(shared::FlakyStore::default());
    let p = plane_on(store.clone());
    let (run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    store.set_failing(true);
    assert_eq!(code(p.spawn(&root, "a", &assignment("x"), Some("k"))), ErrorCode::StoreUnavailable);
    assert_eq!(p.workers_of(&run).len(), 1);
    assert_eq!(p.run(&run).unwrap().cursor, 3);
    store.set_failing(false);
    p.spawn(&root, "a", &assignment("x"), Some("k")).unwrap();
    assert_eq!(p.workers_of(&run).len(), 2);
    assert_eq!(p.run(&run).unwrap().cursor, 6);
}

#[test]
fn a_corrupt_log_fails_closed_as_reconcile_required() {
    use control::store::Batch;
    let store = Arc::new(MemoryStore::new());
    let p = plane_on(store.clone());
    let (run, _) = p.create_run("r", None).unwrap();
    drop(p);
    // An event for a worker that was never created.
    let bogus = protocol::Event {
        cursor: 4,
        run_id: run,
        at_ms: 1,
        body: EventBody::WorkerProgress {
            worker_id: protocol::WorkerId::from_uuid_bytes([9; 16]),
            summary: "?".into(),
            percent: None,
        },
    };
    store.append(&Batch { events: vec![bogus], idempotency: None }).unwrap();
    let err = ControlPlane::open(store, Arc::new(ManualClock::at(0)), Keyring::new([3; 32])).err().unwrap();
    assert_eq!(err.code(), ErrorCode::ReconcileRequired);
}

#[tokio::test(start_paused = true)]
async fn wait_times_out_at_its_bound_and_wakes_on_append() {
    let p = Arc::new(plane());
    let (run, root_id) = p.create_run("r", None).unwrap();
    let head = p.run(&run).unwrap().cursor;
    let start = tokio::time::Instant::now();
    let page = p.wait(&run, head, Duration::from_secs(5), 100, &Viewer::Root).await.unwrap();
    assert!(page.timed_out && page.events.is_empty());
    assert_eq!(page.cursor, head);
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    // Caps at WAIT_MAX_MS even when asked for longer.
    let start = tokio::time::Instant::now();
    p.wait(&run, head, Duration::from_secs(600), 100, &Viewer::Root).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(protocol::limits::WAIT_MAX_MS));

    let waiter = tokio::spawn({
        let p = p.clone();
        let run = run.clone();
        async move { p.wait(&run, head, Duration::from_secs(30), 100, &Viewer::Root).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let root = p.worker(&root_id).unwrap();
    p.spawn(&root, "a", &assignment("x"), None).unwrap();
    let page = waiter.await.unwrap();
    assert!(!page.timed_out);
    assert_eq!(page.events[0].cursor, head + 1);
    assert!(matches!(page.events[0].body, EventBody::WorkerCreated { .. }));
}

#[tokio::test(start_paused = true)]
async fn a_worker_wait_skips_events_it_may_not_see() {
    let p = Arc::new(plane());
    let (run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    let a = p.spawn(&root, "a", &assignment("x"), None).unwrap();
    let b = p.spawn(&root, "b", &assignment("y"), None).unwrap();
    p.execute(Request::Attach { worker_id: a.clone() }).unwrap();
    let head = p.run(&run).unwrap().cursor;
    let waiter = tokio::spawn({
        let (p, run, a) = (p.clone(), run.clone(), a.clone());
        async move { p.wait(&run, head, Duration::from_secs(30), 100, &Viewer::Worker(a)).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    p.execute(Request::Attach { worker_id: b.clone() }).unwrap(); // not A's business
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiter.is_finished());
    p.send(&root, &a, MessageKind::Information, "hello A", None, None).unwrap();
    let page = waiter.await.unwrap();
    assert_eq!(page.events.len(), 1);
    assert!(matches!(&page.events[0].body, EventBody::WorkerMessage { to, .. } if *to == a));
}

#[test]
fn root_failure_cancels_workers_and_fails_the_run() {
    let p = plane();
    let (run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    let a = p.spawn(&root, "a", &assignment("x"), None).unwrap();
    p.execute(Request::Fail { actor: root_id.clone(), reason: "gave up".into() }).unwrap();
    assert_eq!(p.run(&run).unwrap().state, RunState::Failed);
    assert_eq!(p.worker(&a).unwrap().state, WorkerState::Cancelled);
    assert_eq!(code(p.execute(Request::CancelRun { actor: root_id, reason: "x".into() })), ErrorCode::RunNotActive);
}

#[test]
fn followup_reopens_a_completed_worker() {
    let p = plane();
    let (_run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    let a = p.spawn(&root, "a", &assignment("x"), None).unwrap();
    p.execute(Request::Attach { worker_id: a.clone() }).unwrap();
    p.execute(Request::Complete { actor: a.clone(), summary: "done".into(), artifacts: vec![] }).unwrap();
    assert_eq!(p.followup(&root, &a, "also do y", Some("f1")).unwrap(), 1);
    assert_eq!(p.followup(&root, &a, "also do y", Some("f1")).unwrap(), 1);
    let w = p.worker(&a).unwrap();
    assert_eq!(w.state, WorkerState::Running);
    assert_eq!(w.followups, vec!["also do y".to_string()]);
}

#[test]
fn racing_followups_get_distinct_numbers() {
    let p = Arc::new(plane());
    let (_run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    let a = p.spawn(&root, "a", &assignment("x"), None).unwrap();
    p.execute(Request::Attach { worker_id: a.clone() }).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (p, root, a) = (p.clone(), root.clone(), a.clone());
            std::thread::spawn(move || p.followup(&root, &a, &format!("step {i}"), None).unwrap())
        })
        .collect();
    let mut seqs: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    seqs.sort();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
}

#[test]
fn a_replayed_broadcast_returns_the_same_message_ids() {
    let p = plane();
    let (_run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    for name in ["a", "b"] {
        let w = p.spawn(&root, name, &assignment("x"), None).unwrap();
        p.execute(Request::Attach { worker_id: w }).unwrap();
    }
    let first = p.broadcast(&root, MessageKind::Information, "hello all", Some("b1")).unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(p.broadcast(&root, MessageKind::Information, "hello all", Some("b1")).unwrap(), first);
}

/// Reliability #4: a late `worker_complete` from the previous turn lands
/// just after `worker_followup`. Naming the work it reports on, it is
/// refused as superseded, and the woken worker's own progress and completion
/// for follow-up #1 go through. (Unfenced, the late completion closed the
/// worker and the new turn's reports were refused.)
#[test]
fn a_late_completion_of_earlier_work_never_closes_a_newer_follow_up() {
    let p = plane();
    let (_, root_id) = p.create_run("r", None).unwrap();
    let root = p.authenticate(&p.keys().capability(&root_id)).unwrap();
    let a = p.spawn(&root, "a", &assignment("do A"), None).unwrap();
    p.execute(Request::Attach { worker_id: a.clone() }).unwrap();
    assert_eq!(p.followup(&root, &a, "also do B", None).unwrap(), 1);
    let answering = |followup, report| Request::Answering { followup: Some(followup), report: Box::new(report) };
    let late = answering(0, Request::Complete { actor: a.clone(), summary: "A done".into(), artifacts: vec![] });
    let err = p.execute(late).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Conflict, "{err}");
    assert!(err.to_string().contains("follow-up #1 is waiting"), "{err}");
    assert_eq!(p.worker(&a).unwrap().state, WorkerState::Running, "the newer work stays open");
    let progress = answering(1, Request::Progress { actor: a.clone(), summary: "on B".into(), percent: None });
    p.execute(progress).unwrap();
    let done = answering(1, Request::Complete { actor: a.clone(), summary: "B done".into(), artifacts: vec![] });
    p.execute(done).unwrap();
    assert_eq!(p.worker(&a).unwrap().state, WorkerState::Completed);
    let future = answering(2, Request::Fail { actor: a.clone(), reason: "x".into() });
    assert_eq!(p.execute(future).unwrap_err().code(), ErrorCode::InvalidArgument);
}

/// Issue 29 item 2: a late `worker_complete` that names no follow-up,
/// from the turn that was running when root gave a follow-up, is that
/// turn's (older) work: refused as superseded, never completing the worker,
/// so the follow-up's own completion is accepted. Caller attribution knows
/// the turn (its first attributed call). Before, the unnamed report
/// completed the worker and the follow-up's completion was refused.
#[test]
fn an_unnamed_late_report_from_an_older_turn_is_that_turns_work() {
    let p = plane();
    let (_, root_id) = p.create_run("r", None).unwrap();
    let root = p.authenticate(&p.keys().capability(&root_id)).unwrap();
    let a = p.spawn(&root, "a", &assignment("do A"), None).unwrap();
    p.execute(Request::Attach { worker_id: a.clone() }).unwrap();
    let attributed = |turn: &str| {
        p.execute(Request::Attributed {
            worker_id: a.clone(),
            request_id: turn.into(),
            tool: "worker_progress".into(),
        })
        .unwrap();
    };
    let unnamed = |report| Request::Answering { followup: None, report: Box::new(report) };
    let complete = |summary: &str| Request::Complete { actor: a.clone(), summary: summary.into(), artifacts: vec![] };
    // Turn 1 works on the assignment; root adds follow-up #1 meanwhile.
    attributed("wfr_turn1");
    p.execute(unnamed(Request::Progress { actor: a.clone(), summary: "on A".into(), percent: None })).unwrap();
    assert_eq!(p.followup(&root, &a, "also do B", None).unwrap(), 1);
    let err = p.execute(unnamed(complete("A done"))).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Conflict, "{err}");
    assert_eq!(p.worker(&a).unwrap().state, WorkerState::Running, "follow-up #1 stays open");
    // The wake's turn (turn 2) began after follow-up #1: its unnamed report is #1's.
    attributed("wfr_turn2");
    let events = p.execute(unnamed(complete("A and B done"))).unwrap();
    assert!(
        events.iter().any(|e| matches!(e.body, EventBody::WorkerCompleted { followup: Some(1), .. })),
        "{events:?}"
    );
    assert_eq!(p.worker(&a).unwrap().state, WorkerState::Completed);

    // Without attribution (no turn known), an unnamed report is the newest work, as before.
    let b = p.spawn(&root, "b", &assignment("do C"), None).unwrap();
    p.execute(Request::Attach { worker_id: b.clone() }).unwrap();
    p.followup(&root, &b, "also do D", None).unwrap();
    let done = Request::Complete { actor: b.clone(), summary: "C, D done".into(), artifacts: vec![] };
    p.execute(unnamed(done)).unwrap();
    assert_eq!(p.worker(&b).unwrap().state, WorkerState::Completed);
}

/// A store whose group writes take `delay` (an fsync's stand-in), can be
/// held at a gate, fail on demand, and count how many writes there were.
#[derive(Default)]
struct SlowStore {
    inner: MemoryStore,
    delay: Duration,
    writes: std::sync::atomic::AtomicUsize,
    batches: std::sync::atomic::AtomicUsize,
    /// While set, a write waits until it is cleared, then fails if `fail` is set.
    gate: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
    fail: std::sync::atomic::AtomicBool,
}

impl SlowStore {
    fn hold(&self, held: bool) {
        *self.gate.lock().unwrap() = held;
        self.opened.notify_all();
    }
}

impl Store for SlowStore {
    fn append_group(&self, group: &[control::store::Batch]) -> Result<(), control::store::StoreError> {
        use std::sync::atomic::Ordering::SeqCst;
        let _held = self.opened.wait_while(self.gate.lock().unwrap(), |held| *held).unwrap();
        if self.fail.load(SeqCst) {
            return Err(control::store::StoreError::Backend("injected: disk full".into()));
        }
        std::thread::sleep(self.delay);
        self.writes.fetch_add(1, SeqCst);
        self.batches.fetch_add(group.len(), SeqCst);
        self.inner.append_group(group)
    }
    fn replay_after(
        &self,
        position: u64,
        visit: &mut dyn FnMut(protocol::Event) -> Result<(), control::store::StoreError>,
    ) -> Result<(), control::store::StoreError> {
        self.inner.replay_after(position, visit)
    }
    fn save_snapshot(&self, state: &[u8]) -> Result<(), control::store::StoreError> {
        self.inner.save_snapshot(state)
    }
    fn snapshot(&self) -> Result<Option<control::store::Snapshot>, control::store::StoreError> {
        self.inner.snapshot()
    }
    fn message(
        &self,
        id: &protocol::MessageId,
    ) -> Result<Option<(protocol::RunId, protocol::WorkerId)>, control::store::StoreError> {
        self.inner.message(id)
    }
    fn prune(
        &self,
        runs: &[protocol::RunId],
        owners: &std::collections::HashSet<String>,
        dry: bool,
    ) -> Result<control::store::Pruned, control::store::StoreError> {
        self.inner.prune(runs, owners, dry)
    }
    fn events_after(
        &self,
        run: &protocol::RunId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<protocol::Event>, control::store::StoreError> {
        self.inner.events_after(run, after, limit)
    }
    fn idempotency(
        &self,
        scope: &str,
        key: &str,
    ) -> Result<Option<control::store::IdempotencyRecord>, control::store::StoreError> {
        self.inner.idempotency(scope, key)
    }
}

#[test]
fn concurrent_commits_share_durable_writes_and_every_one_is_durable() {
    use std::sync::atomic::Ordering::SeqCst;
    let store = Arc::new(SlowStore { delay: Duration::from_millis(2), ..SlowStore::default() });
    let p = Arc::new(plane_on(store.clone()));
    let (run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    let workers: Vec<_> = (0..16)
        .map(|i| {
            let w = p.spawn(&root, &format!("w{i}"), &assignment("x"), None).unwrap();
            p.execute(Request::Attach { worker_id: w.clone() }).unwrap();
            w
        })
        .collect();
    let (writes, batches) = (store.writes.load(SeqCst), store.batches.load(SeqCst));
    std::thread::scope(|scope| {
        for w in &workers {
            let p = &p;
            scope.spawn(move || {
                for i in 0..20 {
                    let summary = format!("step {i}");
                    p.execute(Request::Progress { actor: w.clone(), summary, percent: None }).unwrap();
                }
            });
        }
    });
    let (writes, batches) = (store.writes.load(SeqCst) - writes, store.batches.load(SeqCst) - batches);
    assert_eq!(batches, 16 * 20, "every commit was written, once");
    assert!(writes < batches / 2, "concurrent commits shared writes: {writes} writes for {batches} commits");
    // What readers see is what a restart rebuilds: the log is gapless and whole.
    let reopened = plane_on(store.clone());
    assert_eq!(reopened.run(&run).unwrap().cursor, p.run(&run).unwrap().cursor);
    let mut cursors = Vec::new();
    store
        .replay(&mut |e| {
            if e.run_id == run {
                cursors.push(e.cursor);
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(cursors, (1..=cursors.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_failed_group_write_fails_what_was_decided_on_top_of_it_and_the_next_commit_works() {
    use std::sync::atomic::Ordering::SeqCst;
    let store = Arc::new(SlowStore::default());
    let p = Arc::new(plane_on(store.clone()));
    let (run, root_id) = p.create_run("r", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    let before = p.run(&run).unwrap().cursor;
    store.hold(true);
    let first = std::thread::spawn({
        let (p, root) = (p.clone(), root.clone());
        move || p.spawn(&root, "a", &assignment("x"), Some("a"))
    });
    // The first write is held; the second is decided on top of it and queues.
    while p.pending_commits() < 1 {
        std::thread::yield_now();
    }
    let second = std::thread::spawn({
        let (p, root) = (p.clone(), root.clone());
        move || p.spawn(&root, "b", &assignment("y"), Some("b"))
    });
    while p.pending_commits() < 2 {
        std::thread::yield_now();
    }
    store.fail.store(true, SeqCst);
    store.hold(false);
    assert_eq!(code(first.join().unwrap()), ErrorCode::StoreUnavailable);
    assert_eq!(code(second.join().unwrap()), ErrorCode::StoreUnavailable);
    assert_eq!(p.run(&run).unwrap().cursor, before, "readers never saw either");
    store.fail.store(false, SeqCst);
    p.spawn(&root, "c", &assignment("z"), Some("c")).unwrap();
    assert_eq!(p.workers_of(&run).len(), 2, "root and c: the failed two left nothing behind");
    assert_eq!(plane_on(store.clone()).run(&run).unwrap().cursor, p.run(&run).unwrap().cursor);
}

/// Two runs with interleaved histories: spawns (and their create commands),
/// a question and its answer, follow-ups, attributed turns, a broadcast;
/// the first completes, the second is cancelled when `end_both`.
fn history(p: &ControlPlane, clock: &ManualClock, end_both: bool) -> (protocol::RunId, protocol::RunId) {
    let (one, root1) = p.create_run("one", None).unwrap();
    let (two, root2) = p.create_run("two", None).unwrap();
    let mut workers = Vec::new();
    for (root_id, name) in [(&root1, "a"), (&root2, "b"), (&root1, "c")] {
        let root = p.worker(root_id).unwrap();
        let w = p.spawn(&root, name, &assignment(name), None).unwrap();
        p.execute(Request::Attach { worker_id: w.clone() }).unwrap();
        workers.push(w);
        clock.advance(10);
    }
    for turn in 0..3 {
        for (w, root_id) in workers.iter().zip([&root1, &root2, &root1]) {
            let me = p.worker(w).unwrap();
            let request_id = format!("req-{w}-{turn}");
            p.execute(Request::Attributed { worker_id: w.clone(), request_id, tool: "message_send".into() }).unwrap();
            let q = p.send(&me, root_id, MessageKind::Question, &format!("turn {turn}?"), None, None).unwrap();
            let root = p.worker(root_id).unwrap();
            p.send(&root, w, MessageKind::Answer, "yes", Some(&q), None).unwrap();
            clock.advance(10);
        }
    }
    let root = p.worker(&root1).unwrap();
    p.broadcast(&root, MessageKind::Information, "all hands", None).unwrap();
    p.followup(&root, &workers[0], "and one more thing", None).unwrap();
    for w in [&workers[0], &workers[2], &root1] {
        p.execute(Request::Complete { actor: w.clone(), summary: "done".into(), artifacts: vec![] }).unwrap();
    }
    if end_both {
        p.execute(Request::CancelRun { actor: root2.clone(), reason: "enough".into() }).unwrap();
    }
    (one, two)
}

fn whole_log(store: &dyn Store) -> control::model::State {
    let mut state = control::model::State::default();
    store
        .replay(&mut |e| {
            state.apply(&e).unwrap();
            Ok(())
        })
        .unwrap();
    state
}

/// The state a start folds from the latest snapshot and the events after
/// it is the state the whole log folds to, and the live plane's; a snapshot
/// this build cannot read, or that the log after it does not fold onto, is
/// passed over for the whole log.
#[test]
fn a_snapshot_and_the_events_after_it_fold_to_the_whole_log() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("state.db")).unwrap());
    let clock = Arc::new(ManualClock::at(1_000));
    let p = ControlPlane::open(store.clone(), clock.clone(), Keyring::new([3; 32])).unwrap().with_snapshot_every(7);
    let (_, two) = history(&p, &clock, false);
    let snapshot = store.snapshot().unwrap().expect("snapshots were taken");
    let mut after = 0;
    store
        .replay_after(snapshot.position, &mut |_| {
            after += 1;
            Ok(())
        })
        .unwrap();
    assert!(after < 7, "a start folds only the events after the snapshot ({after})");
    let whole = whole_log(store.as_ref());
    assert_eq!(p.with_state(Clone::clone), whole, "the live plane's state");
    assert_eq!(control::plane::fold_store(store.as_ref()).unwrap(), whole);
    drop(p);
    assert_eq!(plane_on(store.clone()).with_state(Clone::clone), whole, "a restart");
    let other = serde_json::to_vec(&serde_json::json!({"format": 0, "state": {}})).unwrap();
    for passed_over in [other, b"not json".to_vec()] {
        store.save_snapshot(&passed_over).unwrap();
        assert_eq!(control::plane::fold_store(store.as_ref()).unwrap(), whole);
    }
    // A snapshot the events after it do not fold onto (an empty state, and
    // then an event of a run it lacks).
    control::plane::save_snapshot(store.as_ref(), &control::model::State::default()).unwrap();
    let run = &whole.runs[&two];
    let progress = EventBody::WorkerProgress { worker_id: run.workers[1].clone(), summary: "on".into(), percent: None };
    let next = protocol::Event { cursor: run.cursor + 1, run_id: two.clone(), at_ms: 2_000, body: progress };
    store.append(&control::store::Batch { events: vec![next], idempotency: None }).unwrap();
    let whole = whole_log(store.as_ref());
    assert_eq!(whole.runs[&two].cursor, run.cursor + 1);
    assert_eq!(control::plane::fold_store(store.as_ref()).unwrap(), whole);
}

/// The retention policy: ended runs older than the cutoff go whole (a dry
/// run only lists them); a run still active, or ended too recently, stays,
/// and a restart rebuilds every kept run as it was.
#[test]
fn prune_takes_the_ended_runs_and_a_restart_rebuilds_the_kept_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("state.db")).unwrap());
    let clock = Arc::new(ManualClock::at(1_000));
    let p = ControlPlane::open(store.clone(), clock.clone(), Keyring::new([3; 32])).unwrap();
    let (old, cancelled) = history(&p, &clock, true);
    clock.advance(86_400_000);
    let (active, _) = history(&p, &clock, false);
    let before = p.with_state(Clone::clone);
    drop(p);
    let day = 86_400_000;
    let now = clock.now_ms();
    let listed = control::plane::prune(store.as_ref(), now, day, true).unwrap();
    let names: Vec<&protocol::RunId> = listed.runs.iter().map(|r| &r.run_id).collect();
    assert_eq!(names, [&old, &cancelled], "the ended runs older than a day");
    assert_eq!(whole_log(store.as_ref()), before, "a dry run changes nothing");
    let pruned = control::plane::prune(store.as_ref(), now, day, false).unwrap();
    assert_eq!(pruned.runs, listed.runs);
    assert_eq!(pruned.pruned, listed.pruned);
    assert!(pruned.pruned.events > 40, "{:?}", pruned.pruned);
    let after = plane_on(store.clone()).with_state(Clone::clone);
    assert!(!after.runs.contains_key(&old) && !after.runs.contains_key(&cancelled));
    for (id, run) in &before.runs {
        if *id == old || *id == cancelled {
            continue;
        }
        assert_eq!(after.runs.get(id), Some(run), "every kept run as it was");
        for w in run.workers.iter().chain([&run.root]) {
            assert_eq!(after.workers.get(w), before.workers.get(w));
        }
    }
    assert!(after.runs.contains_key(&active));
    assert!(store.snapshot().unwrap().is_some(), "the next start folds from a snapshot");
    assert_eq!(control::plane::prune(store.as_ref(), now, day, false).unwrap().runs, vec![]);
}

/// A worker's attributed turns are kept to the last `ATTRIBUTED_KEPT`: the
/// state stays bounded however long it lives, its newest turn's id still
/// attributes its calls, and every kept earlier one is still refused.
#[test]
fn attributed_request_ids_are_kept_per_worker_within_a_bound() {
    use control::model::ATTRIBUTED_KEPT;
    let p = plane();
    let (_, root_id) = p.create_run("long", None).unwrap();
    let root = p.worker(&root_id).unwrap();
    let w = p.spawn(&root, "w", &assignment("talk a lot"), None).unwrap();
    let turns = ATTRIBUTED_KEPT + 6;
    for turn in 0..turns {
        let request_id = format!("turn-{turn}");
        p.execute(Request::Attributed { worker_id: w.clone(), request_id, tool: "worker_progress".into() }).unwrap();
    }
    p.with_state(|s| {
        assert_eq!(s.attributed_requests.len(), ATTRIBUTED_KEPT);
        assert_eq!(s.attributed_by_worker[&w].len(), ATTRIBUTED_KEPT);
        assert!(s.request_usable(&format!("turn-{}", turns - 1), &w), "the current turn");
        assert!(!s.request_usable(&format!("turn-{}", turns - ATTRIBUTED_KEPT), &w), "a kept earlier turn");
    });
    let replay = Request::Attributed { worker_id: w.clone(), request_id: "turn-10".into(), tool: "x".into() };
    assert_eq!(code(p.execute(replay)), ErrorCode::UnidentifiedCaller, "a kept earlier turn is a replay");
}

/// The events since the last snapshot are counted across restarts: a
/// daemon that never lives through a whole interval still snapshots.
#[test]
fn snapshots_are_due_across_restarts() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    {
        let p = plane_on(store.clone()).with_snapshot_every(6);
        p.create_run("one", None).unwrap();
    }
    assert!(store.snapshot().unwrap().is_none(), "fewer than six events: none due yet");
    let p = plane_on(store.clone()).with_snapshot_every(6);
    p.create_run("two", None).unwrap();
    assert!(store.snapshot().unwrap().is_some(), "due after events of two lifetimes");
}
