//! The control plane end to end over a real store: the root/worker flow,
//! idempotency, hostile inputs, restart, store faults and bounded waits.

use std::sync::Arc;
use std::time::Duration;

use control::decide::Request;
use control::plane::Viewer;
use control::store::{MemoryStore, SqliteStore, Store};
use control::{ControlPlane, Error, Keyring, ManualClock};
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
        let id = p.keys().verify_attach_identity(&p.keys().attach_identity(w)).unwrap();
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
    fn replay(
        &self,
        visit: &mut dyn FnMut(protocol::Event) -> Result<(), control::store::StoreError>,
    ) -> Result<(), control::store::StoreError> {
        self.inner.replay(visit)
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
