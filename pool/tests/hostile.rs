//! The pool's hostile controls (seed G1 and WP2), on the control plane with
//! executor reports injected as the bridge would deliver them. Each test is
//! named after the control it proves.

use std::sync::Arc;

use control::model::Worker;
use control::store::{Batch, MemoryStore, SqliteStore, Store};
use control::{ControlPlane, Keyring, ManualClock};
use pool::{Pool, PoolConfig, Readiness};
use protocol::executor::{CommandOutcome, ExecutorFrame};
use protocol::{CommandIntent, ConversationId, ErrorCode, Event, EventBody, SlotHealth, WorkerId};

const EXEC: &str = "ext-1";

struct World {
    plane: Arc<ControlPlane>,
    pool: Arc<Pool>,
    clock: ManualClock,
    root: Worker,
    convs: u32,
}

fn world_on(store: Arc<dyn Store>) -> World {
    let clock = ManualClock::at(1_000_000);
    let plane = Arc::new(ControlPlane::open(store, Arc::new(clock.clone()), Keyring::new([4; 32])).unwrap());
    let (_, root) = plane.create_run("pool", None).unwrap();
    let root = plane.worker(&root).unwrap();
    let config = PoolConfig { max_workers: 8, pacing_ms: 0, provisioning_ttl_ms: 60_000 };
    World { pool: Arc::new(Pool::new(plane.clone(), config)), plane, clock, root, convs: 0 }
}

fn world() -> World {
    world_on(Arc::new(MemoryStore::new()))
}

impl World {
    fn slots(&self) -> Vec<pool::SlotStatus> {
        self.pool.status(&self.root.run_id, &[EXEC.to_string()], &every_session_alive).slots
    }

    fn worker_of(&self, slot: u32) -> WorkerId {
        self.slots().into_iter().find(|s| s.slot == slot).unwrap().worker_id
    }

    /// Plays the executor for everything dispatchable: creates conversations
    /// (binding each, completing the create), or settles opens and closes.
    fn executor_runs(&mut self) {
        for d in self.plane.next_dispatches(
            &[EXEC.to_string()],
            control::queue::Limits { max_launches: 16, max_active: 64, max_open_tabs: None },
        ) {
            let wire = self.plane.dispatch(&d, 60_000).unwrap();
            let intent = self.plane.command(&d.command_id).unwrap().intent;
            self.plane.report(EXEC, ExecutorFrame::Ack { command_id: d.command_id.clone() }).unwrap();
            let conversation_id = match intent {
                CommandIntent::Create => {
                    self.convs += 1;
                    let id: ConversationId = format!("0196b2c4-8e1f-7a3b-9c2d-{:012x}", self.convs).parse().unwrap();
                    self.plane
                        .report(
                            EXEC,
                            ExecutorFrame::ConversationBound {
                                worker_id: wire.worker_id.clone(),
                                conversation_id: id.clone(),
                                url: format!("https://chatgpt.com/c/{id}"),
                            },
                        )
                        .unwrap();
                    Some(id)
                }
                _ => None,
            };
            self.plane
                .report(
                    EXEC,
                    ExecutorFrame::Result { command_id: d.command_id, outcome: CommandOutcome::Ok { conversation_id } },
                )
                .unwrap();
        }
    }

    fn bootstrap(&self, worker: &WorkerId, peer: &str) -> Result<Worker, pool::Error> {
        self.pool.bootstrap(&self.plane.keys().attach_identity(worker), peer)
    }

    /// ensure(n), executor creates, each conversation bootstraps with its own peer.
    fn parked(&mut self, n: u32) {
        self.pool.ensure(&self.root, n).unwrap();
        self.executor_runs();
        for s in self.slots() {
            if !s.admitted {
                self.bootstrap(&s.worker_id, &format!("peer-{}", s.slot)).unwrap();
            }
        }
    }

    fn cursor(&self) -> u64 {
        self.plane.run(&self.root.run_id).unwrap().cursor
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, pool::Error>) -> ErrorCode {
    r.unwrap_err().code()
}

#[test]
fn ensure_replay_creates_nothing_and_returns_the_same_workers() {
    let mut w = world();
    w.parked(3);
    let before = (w.slots().iter().map(|s| s.worker_id.clone()).collect::<Vec<_>>(), w.cursor());
    let out = w.pool.ensure(&w.root, 3).unwrap();
    assert!(out.provisioned.is_empty());
    assert_eq!(w.cursor(), before.1, "a replayed ensure appends nothing");
    assert_eq!(w.slots().iter().map(|s| s.worker_id.clone()).collect::<Vec<_>>(), before.0);
    assert_eq!(w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive).state, Readiness::Ready);
}

#[test]
fn an_unrelated_conversation_cannot_claim_a_managed_slot() {
    let mut w = world();
    w.pool.ensure(&w.root, 1).unwrap();
    let slot_worker = w.worker_of(0);
    // A forged attach identity, and one of a worker that is not a pool slot.
    assert_eq!(code(w.pool.bootstrap("att_nope", "p")), ErrorCode::Unauthorized);
    let plain =
        w.plane.spawn(&w.root, "plain", &protocol::Assignment { objective: "x".into(), ..assignment() }, None).unwrap();
    assert_eq!(code(w.bootstrap(&plain, "p")), ErrorCode::Forbidden);
    // Before the executor observed and bootstrapped the exact conversation, nobody is admitted.
    assert_eq!(code(w.bootstrap(&slot_worker, "early-bird")), ErrorCode::PeerIdentityUnresolved);
    w.executor_runs();
    w.bootstrap(&slot_worker, "the-conversation").unwrap();
}

fn assignment() -> protocol::Assignment {
    protocol::Assignment::from_objective(String::new())
}

#[test]
fn the_same_label_from_a_different_peer_is_refused_and_a_replay_from_the_same_peer_is_not() {
    let mut w = world();
    w.parked(1);
    let worker = w.worker_of(0);
    let again = w.bootstrap(&worker, "peer-0").unwrap();
    assert_eq!(again.id, worker, "a replayed bootstrap returns the same worker");
    assert_eq!(code(w.bootstrap(&worker, "impostor")), ErrorCode::PeerIdentityUnresolved);
}

#[test]
fn an_expired_provisioning_record_admits_nobody_and_holds_the_pool() {
    let mut w = world();
    w.pool.ensure(&w.root, 1).unwrap();
    w.executor_runs();
    w.clock.advance(60_001);
    assert_eq!(code(w.bootstrap(&w.worker_of(0), "late")), ErrorCode::InvalidTransition);
    assert_eq!(
        code(w.pool.ensure(&w.root, 2)),
        ErrorCode::ReconcileRequired,
        "nothing new while a record is uncertain"
    );
}

#[test]
fn a_changed_conversation_identity_under_one_operation_fences_the_slot_and_the_ensure() {
    let mut w = world();
    w.parked(2);
    let worker = w.worker_of(1);
    let other: ConversationId = "0196b2c4-8e1f-7a3b-9c2d-ffffffffffff".parse().unwrap();
    w.plane
        .report(
            EXEC,
            ExecutorFrame::ConversationBound { worker_id: worker.clone(), conversation_id: other, url: String::new() },
        )
        .unwrap();
    let status = w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive);
    assert_eq!(status.state, Readiness::ReconcileRequired);
    assert!(
        status.reasons.contains(&ErrorCode::ReconcileRequired)
            && status.reasons.contains(&ErrorCode::ConversationIdentityDrift)
    );
    let cursor = w.cursor();
    assert_eq!(code(w.pool.ensure(&w.root, 4)), ErrorCode::ReconcileRequired, "first-uncertain fail-fast");
    assert_eq!(w.cursor(), cursor);
}

#[test]
fn parallel_ensures_racing_for_the_same_slots_create_each_once() {
    let w = world();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (pool, root) = (w.pool.clone(), w.root.clone());
            std::thread::spawn(move || pool.ensure(&root, 3).unwrap().provisioned.len())
        })
        .collect();
    let created: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(created, 3);
    assert_eq!(w.slots().len(), 3);
}

#[test]
fn a_response_lost_before_or_after_creation_is_reconciled_not_repeated() {
    let w = world();
    w.pool.ensure(&w.root, 2).unwrap();
    // Slot 0: dispatched, then the executor went silent (before creation or its result).
    let d = w.plane.next_dispatches(
        &[EXEC.to_string()],
        control::queue::Limits { max_launches: 16, max_active: 64, max_open_tabs: None },
    );
    w.plane.dispatch(&d[0], 60_000).unwrap();
    // Slot 1: created and bound, but the result was lost.
    w.plane.dispatch(&d[1], 60_000).unwrap();
    let conv: ConversationId = "0196b2c4-8e1f-7a3b-9c2d-00000000abcd".parse().unwrap();
    w.plane
        .report(
            EXEC,
            ExecutorFrame::ConversationBound { worker_id: w.worker_of(1), conversation_id: conv, url: String::new() },
        )
        .unwrap();
    let cursor = w.cursor();
    assert!(w.pool.ensure(&w.root, 2).unwrap().provisioned.is_empty());
    assert_eq!(w.cursor(), cursor, "no second create for either slot");
    // The reconnecting executor gets exactly these two commands back, for readback.
    let replay = w.plane.replay(EXEC, 60_000).unwrap();
    assert_eq!(replay.len(), 2);
    assert!(replay.iter().all(|c| c.idempotency_key.starts_with("create:")));
}

#[test]
fn a_response_lost_around_the_admission_commit_replays_to_the_same_worker() {
    let mut w = world();
    w.pool.ensure(&w.root, 1).unwrap();
    w.executor_runs();
    let worker = w.worker_of(0);
    // Before the commit: the call failed in transit; the retry admits.
    let first = w.bootstrap(&worker, "peer").unwrap();
    // After the commit: the response was lost; the retry returns the same worker, appends no admission.
    let admitted = w.plane.run(&w.root.run_id).unwrap().cursor;
    let second = w.bootstrap(&worker, "peer").unwrap();
    assert_eq!(first.id, second.id);
    let events = w.plane.events(&w.root.run_id, admitted, 100, &control::plane::Viewer::Root).unwrap().events;
    assert!(events.iter().all(|e| !matches!(e.body, EventBody::RuntimeSlotAdmitted { .. })));
}

#[test]
fn busy_targeted_and_uncertain_workers_are_never_scaled_down() {
    let mut w = world();
    w.parked(4);
    // Slot 3 targeted (task queued, not yet delivered); slot 2 busy (task delivered, not completed).
    w.pool.dispatch(&w.root, "task for 3", Some(3), None, &every_session_alive).unwrap();
    w.pool.dispatch(&w.root, "task for 2", Some(2), None, &every_session_alive).unwrap();
    let d = w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default());
    let to_two =
        d.iter().find(|d| w.plane.command(&d.command_id).unwrap().worker_id == w.worker_of(2)).unwrap().clone();
    w.plane.dispatch(&to_two, 60_000).unwrap();
    w.plane
        .report(
            EXEC,
            ExecutorFrame::Result {
                command_id: to_two.command_id,
                outcome: CommandOutcome::Ok { conversation_id: None },
            },
        )
        .unwrap();
    let out = w.pool.scale(&w.root, 1).unwrap();
    assert_eq!(out.retiring, vec![1, 0]);
    assert_eq!(out.protected, vec![3, 2]);
    let health: Vec<_> = w.slots().into_iter().map(|s| (s.slot, s.health)).collect();
    assert!(health.contains(&(3, SlotHealth::Parked)) && health.contains(&(2, SlotHealth::Parked)));
}

#[test]
fn a_lost_close_acknowledgement_is_reconcile_required() {
    let mut w = world();
    w.parked(2);
    w.pool.scale(&w.root, 1).unwrap();
    let d = w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default());
    w.plane.dispatch(&d[0], 60_000).unwrap();
    let unknown = CommandOutcome::Error { code: ErrorCode::OutcomeUnknown, detail: "socket dropped".into() };
    w.plane.report(EXEC, ExecutorFrame::Result { command_id: d[0].command_id.clone(), outcome: unknown }).unwrap();
    let slot1 = w.slots().into_iter().find(|s| s.slot == 1).unwrap();
    assert_eq!(slot1.health, SlotHealth::ReconcileRequired);
    assert_eq!(code(w.pool.ensure(&w.root, 3)), ErrorCode::ReconcileRequired);
}

#[test]
fn a_lost_target_recovers_the_same_logical_worker_and_touches_nothing_else() {
    let mut w = world();
    w.parked(3);
    let lost = w.worker_of(1);
    w.plane.report(EXEC, ExecutorFrame::ConversationClosed { worker_id: lost.clone() }).unwrap();
    assert_eq!(w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive).state, Readiness::Degraded);
    let cursor_events = w.cursor();
    let out = w.pool.recover(&w.root).unwrap();
    assert_eq!(out.recovering, vec![1]);
    let d = w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default());
    assert_eq!(d.len(), 1, "only the lost slot gets a command");
    let wire = w.plane.dispatch(&d[0], 60_000).unwrap();
    assert!(
        matches!(wire.op, protocol::executor::CommandOp::ConversationOpen { .. }),
        "the exact conversation is reopened, not recreated"
    );
    w.plane
        .report(
            EXEC,
            ExecutorFrame::Result {
                command_id: d[0].command_id.clone(),
                outcome: CommandOutcome::Ok { conversation_id: None },
            },
        )
        .unwrap();
    let slot = w.slots().into_iter().find(|s| s.slot == 1).unwrap();
    assert_eq!((slot.worker_id, slot.health, slot.continuation_epoch), (lost, SlotHealth::Parked, 1));
    assert_eq!(w.slots().len(), 3, "no new logical worker was minted");
    assert!(w.cursor() > cursor_events);
}

/// Reliability #2: an executor that reports `conversationState{closed}` and
/// then `conversationClosed` (both documented) lost the slot exactly as
/// `conversationClosed` alone does: the pool is degraded and recover reopens it.
/// Before, the state report alone left the slot parked and READY.
#[test]
fn a_tab_reported_closed_either_way_is_a_lost_slot_that_recover_reopens() {
    let mut w = world();
    w.parked(2);
    let lost = w.worker_of(0);
    let closed = ExecutorFrame::ConversationState {
        worker_id: lost.clone(),
        state: protocol::executor::ConversationState::Closed,
        error: None,
    };
    w.plane.report(EXEC, closed).unwrap();
    w.plane.report(EXEC, ExecutorFrame::ConversationClosed { worker_id: lost.clone() }).unwrap();
    assert_eq!(w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive).state, Readiness::Degraded);
    let slot = w.slots().into_iter().find(|s| s.slot == 0).unwrap();
    assert_eq!(slot.health, SlotHealth::Lost);
    assert_eq!(w.pool.recover(&w.root).unwrap().recovering, vec![0]);
}

/// Issue 44: a lost slot's worker is parked, so a prompt to it first
/// reopens its exact conversation (the daemon's own reopen, no recover);
/// once reopened the slot is parked (live) again, not still lost.
#[test]
fn a_lost_slot_reopened_before_a_prompt_is_live_again() {
    let mut w = world();
    w.parked(2);
    let lost = w.worker_of(0);
    w.plane.report(EXEC, ExecutorFrame::ConversationClosed { worker_id: lost.clone() }).unwrap();
    assert_eq!(w.slots().into_iter().find(|s| s.slot == 0).unwrap().health, SlotHealth::Lost);
    w.plane.followup(&w.root, &lost, "one more", None).unwrap();
    let uncapped = control::tabs::TabPolicy { max_open: usize::MAX, idle_grace_ms: 60_000 };
    assert_eq!(w.plane.tabs(uncapped).unwrap(), 1, "a reopen before the prompt");
    w.executor_runs();
    let slot = w.slots().into_iter().find(|s| s.slot == 0).unwrap();
    assert_eq!(slot.health, SlotHealth::Parked, "its tab is back");
    assert!(!w.plane.worker(&lost).unwrap().parked);
}

#[test]
fn host_and_setup_states_are_readiness_reasons_not_worker_failures() {
    let mut w = world();
    w.parked(2);
    for code in [ErrorCode::ChatgptSignedOut, ErrorCode::HostAppDisabled] {
        w.plane
            .report(EXEC, ExecutorFrame::ConversationError { worker_id: w.worker_of(0), code, detail: String::new() })
            .unwrap();
        let status = w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive);
        assert!(status.reasons.contains(&code), "{status:?}");
    }
    let worker = w.plane.worker(&w.worker_of(0)).unwrap();
    assert_eq!(worker.state, protocol::WorkerState::Running, "the worker did not fail");
    assert!(
        w.pool
            .status(&w.root.run_id, &[], &every_session_alive)
            .reasons
            .contains(&ErrorCode::BrowserControlUnavailable)
    );
}

#[test]
fn a_create_refused_for_setup_is_retried_by_recover_under_a_new_key_and_nothing_else_is() {
    let w = world();
    w.pool.ensure(&w.root, 1).unwrap();
    let create = |w: &World| {
        let d = w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default());
        assert_eq!(d.len(), 1);
        let wire = w.plane.dispatch(&d[0], 60_000).unwrap();
        assert!(matches!(wire.op, protocol::executor::CommandOp::ConversationCreate { .. }));
        wire
    };
    let first = create(&w);
    // Before any refusal there is nothing to retry.
    assert!(w.pool.recover(&w.root).unwrap().recovering.is_empty());
    let refused = CommandOutcome::Error { code: ErrorCode::HostAppBindingNotReady, detail: String::new() };
    w.plane.report(EXEC, ExecutorFrame::Result { command_id: first.command_id.clone(), outcome: refused }).unwrap();
    let status = w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive);
    assert!(status.reasons.contains(&ErrorCode::HostAppBindingNotReady), "{status:?}");
    // The operator may take longer than the provisioning TTL: waiting for the
    // setup is not an uncertain effect, so the pool does not fence.
    w.clock.advance(60_001);
    assert!(w.pool.ensure(&w.root, 1).is_ok(), "no RECONCILE_REQUIRED for a slot awaiting setup");
    assert_eq!(w.pool.recover(&w.root).unwrap().recovering, vec![0]);
    let second = create(&w);
    assert_ne!(second.idempotency_key, first.idempotency_key, "the executor's journal would answer the old key");
    assert!(w.pool.recover(&w.root).unwrap().recovering.is_empty(), "one retry in flight at a time");
    assert!(w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default()).is_empty());
}

#[test]
fn a_disconnect_never_requeues_a_started_task() {
    let mut w = world();
    w.parked(1);
    let task = w.pool.dispatch(&w.root, "only once", Some(0), None, &every_session_alive).unwrap();
    let d = w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default());
    w.plane.dispatch(&d[0], 60_000).unwrap();
    w.plane.report(EXEC, ExecutorFrame::Ack { command_id: d[0].command_id.clone() }).unwrap();
    // The executor disconnects and reconnects: the same command is replayed, nothing is requeued.
    assert!(w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default()).is_empty());
    let replay = w.plane.replay(EXEC, 60_000).unwrap();
    assert_eq!(replay.iter().map(|c| c.command_id.clone()).collect::<Vec<_>>(), vec![d[0].command_id.clone()]);
    assert_eq!(w.pool.collect(&w.root, &task.task_id).unwrap().status, pool::TaskState::Pending);
}

#[test]
fn a_corrupted_registry_fails_closed_without_deleting_truth() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let (run, second_worker) = {
        let mut w = world_on(Arc::new(SqliteStore::open(&path).unwrap()));
        w.parked(1);
        (w.root.run_id.clone(), w.worker_of(0))
    };
    let store = SqliteStore::open(&path).unwrap();
    let head = store.events_after(&run, 0, 10_000).unwrap().len() as u64;
    // A second provisioning of the held slot 0: a conflicting registry.
    let bogus = Event {
        cursor: head + 1,
        run_id: run.clone(),
        at_ms: 1,
        body: EventBody::RuntimeSlotProvisioning {
            operation_id: "rogue".into(),
            slot: 0,
            worker_id: second_worker,
            expires_at_ms: 9,
        },
    };
    store.append(&Batch { events: vec![bogus], idempotency: None }).unwrap();
    let err = ControlPlane::open(Arc::new(store), Arc::new(ManualClock::at(0)), Keyring::new([4; 32])).err().unwrap();
    assert_eq!(err.code(), ErrorCode::ReconcileRequired);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.events_after(&run, 0, 10_000).unwrap().len() as u64, head + 1, "nothing was deleted");
}

#[test]
fn the_registry_and_log_hold_no_secret_and_no_tab_handle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let keys = Keyring::new([4; 32]);
    {
        let mut w = world_on(Arc::new(SqliteStore::open(&path).unwrap()));
        w.parked(2);
    }
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let secret_hex: String = keys.secret().iter().map(|b| format!("{b:02x}")).collect();
    for needle in ["cap_", "att_", &secret_hex, "token", "cookie", "tabId", "targetId"] {
        assert!(!text.contains(needle), "the store contains {needle}");
    }
}

#[test]
fn an_unknown_bootstrap_acknowledgement_creates_no_duplicate_conversation_or_worker() {
    let w = world();
    w.pool.ensure(&w.root, 1).unwrap();
    let d = w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default());
    w.plane.dispatch(&d[0], 60_000).unwrap();
    let unknown =
        CommandOutcome::Error { code: ErrorCode::AmbiguousSubmission, detail: "submission not observed".into() };
    w.plane.report(EXEC, ExecutorFrame::Result { command_id: d[0].command_id.clone(), outcome: unknown }).unwrap();
    assert_eq!(w.slots()[0].health, SlotHealth::ReconcileRequired);
    let cursor = w.cursor();
    assert_eq!(code(w.pool.ensure(&w.root, 1)), ErrorCode::ReconcileRequired);
    assert!(w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default()).is_empty());
    assert_eq!(w.cursor(), cursor, "no second create, no new worker");
}

#[test]
fn an_operation_on_one_target_never_reaches_another() {
    let mut w = world();
    w.parked(3);
    let conversations: Vec<Option<String>> = w.slots().iter().map(|s| s.conversation_id.clone()).collect();
    w.pool.scale(&w.root, 2).unwrap();
    let d = w.plane.next_dispatches(&[EXEC.to_string()], control::queue::Limits::default());
    assert_eq!(d.len(), 1);
    let wire = w.plane.dispatch(&d[0], 60_000).unwrap();
    let protocol::executor::CommandOp::ConversationClose { conversation_id, park: false } = wire.op else {
        panic!("a close")
    };
    assert_eq!(Some(conversation_id.to_string()), conversations[2], "the close names exactly slot 2's conversation");
    assert_eq!(wire.worker_id, w.worker_of(2));
    // Another executor cannot report on this slot's conversation.
    let err = w.plane.report("ext-2", ExecutorFrame::ConversationClosed { worker_id: w.worker_of(0) }).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Forbidden);
    assert_eq!(w.slots()[0].health, SlotHealth::Parked);
}

#[test]
fn one_conversation_reported_for_two_slots_is_drift_not_a_second_mapping() {
    let mut w = world();
    w.parked(2);
    let first = w.slots()[0].conversation_id.clone().unwrap();
    let events = w
        .plane
        .report(
            EXEC,
            ExecutorFrame::ConversationBound {
                worker_id: w.worker_of(1),
                conversation_id: first.parse().unwrap(),
                url: String::new(),
            },
        )
        .unwrap();
    assert!(matches!(&events[0].body, EventBody::ConversationError { code: ErrorCode::ConversationIdentityDrift, .. }));
    // Recorded as drift (no panic, no second mapping); the slot is fenced.
    assert_eq!(w.slots()[1].health, SlotHealth::ReconcileRequired);
}

/// Every admitted peer's transport session is still open (no restart here).
fn every_session_alive(_: &str) -> bool {
    true
}

/// Issue 15 #3: every wake makes a pool worker re-attach, and only its
/// admitted peer is let back in. A worker admitted over a session that is
/// gone (a daemon restart ends every session) or over no session at all can
/// never be recognized again: it is not reported ready and gets no task, and
/// a task aimed at it is refused (`PEER_IDENTITY_UNRESOLVED`) with nothing
/// recorded, instead of waiting forever on a wake it cannot answer.
#[test]
fn a_parked_worker_that_cannot_be_recognized_again_is_not_ready_and_gets_no_task() {
    let mut w = world();
    w.pool.ensure(&w.root, 2).unwrap();
    w.executor_runs();
    w.bootstrap(&w.worker_of(0), "peer-0").unwrap();
    w.bootstrap(&w.worker_of(1), admission::SESSIONLESS).unwrap();
    let before_restart = |peer: &str| peer == "peer-0";
    let status = w.pool.status(&w.root.run_id, &[EXEC.into()], &before_restart);
    assert_eq!(status.state, Readiness::Degraded, "a parked worker that cannot act is not READY");
    assert!(status.reasons.contains(&ErrorCode::PeerIdentityUnresolved));
    assert_eq!(status.slots.iter().map(|s| (s.slot, s.can_act)).collect::<Vec<_>>(), [(0, true), (1, false)]);

    let cursor = w.cursor();
    let refused = w.pool.dispatch(&w.root, "for the sessionless one", Some(1), None, &before_restart);
    assert_eq!(code(refused), ErrorCode::PeerIdentityUnresolved);
    assert_eq!(w.cursor(), cursor, "nothing recorded for a task no wake could deliver");
    let task = w.pool.dispatch(&w.root, "anyone", None, None, &before_restart).unwrap();
    assert_eq!(task.slot, 0, "an untargeted task goes to a worker that can act");

    // After a restart no session of the old process lives.
    let after_restart = |_: &str| false;
    let status = w.pool.status(&w.root.run_id, &[EXEC.into()], &after_restart);
    assert!(status.slots.iter().all(|s| s.admitted && !s.can_act));
    assert_ne!(status.state, Readiness::Ready);
    assert_eq!(
        code(w.pool.dispatch(&w.root, "more", Some(0), None, &after_restart)),
        ErrorCode::PeerIdentityUnresolved
    );
    assert_eq!(code(w.pool.dispatch(&w.root, "more", None, None, &after_restart)), ErrorCode::LimitReached);
}

/// Issue 29 items 17 and 19, the seed's G6 as it is worded: the browser
/// dies (every conversation reports BROWSER_CONTROL_UNAVAILABLE) and comes
/// back as a new generation (every target lost). While the browser is gone
/// the pool is not READY, whatever its slots' records say; once the tabs are
/// known lost the reason clears with its cause; and one `runtime_ensure`
/// reopens every exact conversation in a new target, with no new worker,
/// no create and no prompt. Before, the pool read READY with the reason, the
/// reason stood until a recover, and ensure reopened nothing.
#[test]
fn after_a_browser_restart_one_ensure_reopens_every_exact_conversation() {
    let mut w = world();
    w.parked(3);
    let before: Vec<_> = w.slots().into_iter().map(|s| (s.slot, s.worker_id, s.conversation_id)).collect();
    for slot in 0..3 {
        let gone = ExecutorFrame::ConversationError {
            worker_id: w.worker_of(slot),
            code: ErrorCode::BrowserControlUnavailable,
            detail: "the browser process exited".into(),
        };
        w.plane.report(EXEC, gone).unwrap();
    }
    let status = w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive);
    assert_ne!(status.state, Readiness::Ready, "no pool is ready without its browser: {status:?}");
    assert!(status.reasons.contains(&ErrorCode::BrowserControlUnavailable));

    // The new generation: the agent finds every target gone.
    for slot in 0..3 {
        w.plane.report(EXEC, ExecutorFrame::ConversationClosed { worker_id: w.worker_of(slot) }).unwrap();
    }
    let status = w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive);
    assert!(!status.reasons.contains(&ErrorCode::BrowserControlUnavailable), "the cause is over: {status:?}");
    assert_eq!(status.state, Readiness::Degraded, "three lost slots");

    let creates_before = w.convs;
    let out = w.pool.ensure(&w.root, 3).unwrap();
    assert_eq!(out.recovering, vec![0, 1, 2], "{out:?}");
    assert!(out.provisioned.is_empty(), "no new logical worker: {out:?}");
    let ops: Vec<_> = w
        .plane
        .next_dispatches(
            &[EXEC.to_string()],
            control::queue::Limits { max_launches: 16, max_active: 64, max_open_tabs: None },
        )
        .iter()
        .map(|d| w.plane.dispatch(d, 60_000).unwrap().op)
        .collect();
    assert_eq!(ops.len(), 3);
    assert!(ops.iter().all(|op| matches!(op, protocol::executor::CommandOp::ConversationOpen { .. })), "{ops:?}");
    for d in w.plane.with_state(|s| s.open_commands.clone()) {
        let outcome = CommandOutcome::Ok { conversation_id: None };
        w.plane.report(EXEC, ExecutorFrame::Result { command_id: d, outcome }).unwrap();
    }
    assert_eq!(w.convs, creates_before, "no conversation created");
    let after: Vec<_> = w.slots().into_iter().map(|s| (s.slot, s.worker_id, s.conversation_id)).collect();
    assert_eq!(after, before, "the same workers in their exact conversations");
    assert_eq!(w.pool.status(&w.root.run_id, &[EXEC.into()], &every_session_alive).state, Readiness::Ready);
    assert!(w.pool.ensure(&w.root, 3).unwrap().recovering.is_empty(), "a replay reopens nothing");
}

/// Issue 29 item 18: a pool worker that finished its task keeps its tab
/// open (parked), so it still counts toward its executor's declared
/// capacity and toward --max-active-workers: a host of capacity 2 with two
/// parked conversations takes no third. Before, a finished task freed its
/// place and the host was overfilled.
#[test]
fn a_parked_pool_conversation_holds_its_place_after_its_task() {
    let mut w = world();
    w.plane
        .execute(control::decide::Request::ExecutorConnected {
            executor_id: EXEC.into(),
            executor_instance_id: "i1".into(),
            executor_kind: protocol::executor::ExecutorKind::Fake,
            capabilities: vec![],
            host: protocol::executor::MachineFacts { capacity: Some(2), ..Default::default() },
        })
        .unwrap();
    w.parked(2);
    let task = w.pool.dispatch(&w.root, "do a thing", None, None, &every_session_alive).unwrap();
    let done =
        control::decide::Request::Complete { actor: task.worker_id.clone(), summary: "done".into(), artifacts: vec![] };
    w.plane.execute(done).unwrap();
    w.pool.ensure(&w.root, 3).unwrap();
    let creates = |max_active| {
        let limits = control::queue::Limits { max_launches: 16, max_active, max_open_tabs: None };
        let dispatches = w.plane.next_dispatches(&[EXEC.to_string()], limits);
        dispatches
            .into_iter()
            .filter(|d| w.plane.command(&d.command_id).unwrap().intent == CommandIntent::Create)
            .count()
    };
    assert_eq!(creates(64), 0, "the host holds two conversations already");
    // Without a declared capacity, --max-active-workers counts them the same way.
    w.plane
        .execute(control::decide::Request::ExecutorConnected {
            executor_id: EXEC.into(),
            executor_instance_id: "i2".into(),
            executor_kind: protocol::executor::ExecutorKind::Fake,
            capabilities: vec![],
            host: Default::default(),
        })
        .unwrap();
    assert_eq!(creates(2), 0, "nor past --max-active-workers");
    assert_eq!(creates(3), 1, "room for one more");
}
