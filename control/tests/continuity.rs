//! Execution Continuity through the plane on a manual clock (seed §26):
//! a worker whose turn ends unfinished is resumed in the same conversation,
//! exactly once per turn, never after it completed, never while it is held;
//! restarts at each boundary converge without a second submission; the
//! account-wide pacing spreads simultaneous resumes.

use std::sync::Arc;

use control::continuity::Pacing;
use control::decide::Request;
use control::queue::Limits;
use control::store::{MemoryStore, Store};
use control::{ControlPlane, Keyring, ManualClock};
use protocol::continuity::{AttemptReason, ContinuationMode, ContinuationPolicy, Hold, StallLevel};
use protocol::executor::{CommandOp, CommandOutcome, ConversationState, ExecutorFrame};
use protocol::{Assignment, EventBody, WorkerId, WorkerState};

/// Stalled turns are reported after a day here, except where a test says otherwise.
const PACING: Pacing =
    Pacing { min_gap_ms: 5_000, rate_limit_wait_ms: 15 * MINUTE, stalled_turn_after_ms: 24 * 60 * MINUTE };
const MINUTE: u64 = 60_000;

struct World {
    store: Arc<MemoryStore>,
    plane: ControlPlane,
    root: WorkerId,
    clock: ManualClock,
}

fn world() -> World {
    let store = Arc::new(MemoryStore::new());
    let clock = ManualClock::at(1_000_000);
    let plane = ControlPlane::open(store.clone(), Arc::new(clock.clone()), Keyring::new([5; 32])).unwrap();
    let (_, root) = plane.create_run("continuity", None).unwrap();
    World { store, plane, root, clock }
}

fn auto() -> ContinuationPolicy {
    ContinuationPolicy { mode: ContinuationMode::Auto, ..ContinuationPolicy::default() }
}

impl World {
    /// The daemon restarted: the plane is rebuilt from the same store.
    fn restart(&mut self) {
        let store: Arc<dyn Store> = self.store.clone();
        self.plane = ControlPlane::open(store, Arc::new(self.clock.clone()), Keyring::new([5; 32])).unwrap();
    }

    fn set_default(&self, policy: ContinuationPolicy) {
        self.plane.execute(Request::SetContinuation { actor: self.root.clone(), target: None, policy }).unwrap();
    }

    /// A worker whose bootstrap was submitted, which attached, and whose first turn is generating.
    fn working(&self, name: &str, conversation: &str) -> WorkerId {
        let root = self.plane.worker(&self.root).unwrap();
        let worker = self.plane.spawn(&root, name, &Assignment::from_objective("x"), None).unwrap();
        let ops = self.pump();
        assert!(matches!(ops[..], [CommandOp::ConversationCreate { .. }]), "{ops:?}");
        let command = self.open_send_or_create(&worker);
        self.report(ExecutorFrame::Ack { command_id: command.clone() });
        let conversation_id: protocol::ConversationId = conversation.parse().unwrap();
        self.report(ExecutorFrame::ConversationBound {
            worker_id: worker.clone(),
            conversation_id: conversation_id.clone(),
            url: format!("https://chatgpt.com/c/{conversation}"),
        });
        self.report(ExecutorFrame::Result {
            command_id: command,
            outcome: CommandOutcome::Ok { conversation_id: Some(conversation_id) },
        });
        self.plane.execute(Request::Attach { worker_id: worker.clone() }).unwrap();
        self.observe(&worker, ConversationState::Generating);
        worker
    }

    fn report(&self, frame: ExecutorFrame) {
        self.plane.report("ext", frame).unwrap();
    }

    fn observe(&self, worker: &WorkerId, state: ConversationState) {
        self.report(ExecutorFrame::ConversationState { worker_id: worker.clone(), state, error: None });
    }

    /// Dispatches what the queue allows; the ops sent.
    fn pump(&self) -> Vec<CommandOp> {
        let connected = vec!["ext".to_owned()];
        self.plane
            .next_dispatches(&connected, Limits::default())
            .iter()
            .map(|d| self.plane.dispatch(d, 60_000).unwrap().op)
            .collect()
    }

    fn open_send_or_create(&self, worker: &WorkerId) -> protocol::CommandId {
        self.plane.with_state(|s| {
            s.open_commands
                .iter()
                .rev()
                .find(|id| &s.commands[*id].worker_id == worker)
                .cloned()
                .expect("an open command")
        })
    }

    /// The executor submits the open send of `worker` and its turn starts.
    fn submit(&self, worker: &WorkerId) {
        let command = self.open_send_or_create(worker);
        self.report(ExecutorFrame::Ack { command_id: command.clone() });
        self.report(ExecutorFrame::Result {
            command_id: command,
            outcome: CommandOutcome::Ok { conversation_id: None },
        });
        self.observe(worker, ConversationState::Generating);
    }

    fn tick(&self) -> usize {
        self.plane.continue_due(PACING).unwrap()
    }

    fn advance(&self, ms: u64) {
        self.clock.advance(ms);
    }

    fn progress(&self, worker: &WorkerId) {
        self.plane.execute(Request::Progress { actor: worker.clone(), summary: "step".into(), percent: None }).unwrap();
    }

    /// Every event in the store, in log order.
    fn events(&self) -> Vec<protocol::Event> {
        let mut events = Vec::new();
        self.store
            .replay(&mut |event| {
                events.push(event);
                Ok(())
            })
            .unwrap();
        events
    }

    /// Moves the clock forward to `at_ms`.
    fn advance_to(&self, at_ms: u64) {
        self.clock.advance(at_ms - self.plane.now_ms());
    }

    /// Every execution.scheduled of the run, as (worker, attempt, reason).
    fn attempts(&self) -> Vec<(WorkerId, u32, AttemptReason)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.body {
                EventBody::ExecutionScheduled { worker_id, attempt, reason, .. } => Some((worker_id, attempt, reason)),
                _ => None,
            })
            .collect()
    }

    /// Prompts submitted into `worker`'s conversation that resume or checkpoint it.
    fn resume_sends(ops: &[CommandOp]) -> Vec<String> {
        ops.iter()
            .filter_map(|op| match op {
                CommandOp::ConversationSend { prompt, .. } => Some(prompt.clone()),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn a_worker_is_resumed_turn_after_turn_until_it_completes_and_never_after() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "11111111-1111-4111-8111-111111111111");
    for attempt in 1..=2 {
        w.progress(&a);
        w.observe(&a, ConversationState::Idle);
        assert_eq!(w.tick(), 0, "the idle grace first");
        w.advance(3_000);
        assert_eq!(w.tick(), 1, "attempt {attempt} after the grace");
        assert_eq!(w.tick(), 0, "once");
        let prompts = World::resume_sends(&w.pump());
        assert_eq!(prompts.len(), 1);
        assert!(prompts[0].starts_with(&format!("[orchestrator resume v2 attempt {attempt}]")), "{}", prompts[0]);
        w.submit(&a);
        w.advance(10 * MINUTE);
    }
    w.plane.execute(Request::Complete { actor: a.clone(), summary: "done".into(), artifacts: vec![] }).unwrap();
    w.observe(&a, ConversationState::Idle);
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "no attempt after completion");
    let attempts: Vec<u32> = w.attempts().into_iter().map(|(_, n, _)| n).collect();
    assert_eq!(attempts, [1, 2]);
    assert_eq!(w.plane.worker(&a).unwrap().state, WorkerState::Completed);
}

#[test]
fn manual_mode_waits_for_continue_now_and_a_hold_for_a_person_blocks_both() {
    let w = world();
    let a = w.working("a", "22222222-2222-4222-8222-222222222222");
    w.observe(&a, ConversationState::Idle);
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "manual: no resume");
    w.plane.execute(Request::ContinueNow { actor: w.root.clone(), target: a.clone() }).unwrap();
    assert_eq!(w.tick(), 1);
    assert_eq!(w.attempts(), [(a.clone(), 1, AttemptReason::ManualResume)]);
    w.pump();
    w.submit(&a);

    w.plane
        .execute(Request::SetHold {
            actor: a.clone(),
            target: a.clone(),
            hold: Hold::AwaitingHuman,
            reason: "which database?".into(),
            ask: None,
        })
        .unwrap();
    w.observe(&a, ConversationState::Idle);
    w.advance(MINUTE);
    let refused = w.plane.execute(Request::ContinueNow { actor: w.root.clone(), target: a.clone() });
    assert_eq!(refused.unwrap_err().code(), protocol::ErrorCode::InvalidTransition);
    assert_eq!(w.tick(), 0);
    assert_eq!(
        w.plane.worker(&a).unwrap().continuity.disposition(WorkerState::Running),
        protocol::WorkerDisposition::AwaitingHuman
    );
}

#[test]
fn pause_lets_the_turn_finish_and_continue_now_resumes_exactly_once() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "33333333-3333-4333-8333-333333333333");
    let root = w.root.clone();
    w.plane
        .execute(Request::SetHold {
            actor: root.clone(),
            target: a.clone(),
            hold: Hold::Paused,
            reason: "look".into(),
            ask: None,
        })
        .unwrap();
    w.observe(&a, ConversationState::Idle);
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "paused: no automatic turn");
    w.plane.execute(Request::ContinueNow { actor: root.clone(), target: a.clone() }).unwrap();
    w.plane.execute(Request::ContinueNow { actor: root, target: a.clone() }).unwrap();
    assert_eq!(w.tick(), 1);
    assert_eq!(World::resume_sends(&w.pump()).len(), 1, "exactly once");
    assert_eq!(w.tick(), 0);
}

#[test]
fn the_stall_guard_warns_then_pauses_and_resume_goes_on() {
    let mut w = world();
    w.set_default(ContinuationPolicy {
        stall_warning_after_no_progress_attempts: 2,
        stall_pause_after_no_progress_attempts: 3,
        ..auto()
    });
    let a = w.working("a", "55555555-5555-4555-8555-555555555555");
    for _ in 0..3 {
        w.observe(&a, ConversationState::Idle);
        w.advance(3_000);
        w.tick();
        w.pump();
        w.submit(&a);
        w.advance(MINUTE);
    }
    w.observe(&a, ConversationState::Idle);
    w.advance(3_000);
    w.restart();
    assert_eq!(w.tick(), 1, "the pause, not a fourth attempt");
    let levels: Vec<StallLevel> = w
        .events()
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::ContinuationStalled { level, .. } => Some(level),
            _ => None,
        })
        .collect();
    assert_eq!(levels, [StallLevel::Warning, StallLevel::Paused]);
    assert_eq!(w.attempts().len(), 3);
    assert_eq!(w.plane.worker(&a).unwrap().continuity.hold, Some(Hold::Stalled));
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "held");
    w.plane.execute(Request::ReleaseHold { actor: w.root.clone(), target: a.clone() }).unwrap();
    assert_eq!(w.tick(), 1, "continue anyway: the idle conversation is resumed");
    assert_eq!(w.attempts().len(), 4);
}

#[test]
fn simultaneous_idles_share_the_accounts_pacing() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "66666666-6666-4666-8666-666666666666");
    let b = w.working("b", "77777777-7777-4777-8777-777777777777");
    w.observe(&a, ConversationState::Idle);
    w.observe(&b, ConversationState::Idle);
    w.advance(3_000);
    assert_eq!(w.tick(), 1, "one automatic resume per gap");
    let next = w.plane.next_continue_at(PACING).expect("the second is scheduled");
    assert_eq!(next, w.plane.now_ms() + PACING.min_gap_ms);
    w.advance(PACING.min_gap_ms);
    assert_eq!(w.tick(), 1);
    let workers: Vec<WorkerId> = w.attempts().into_iter().map(|(w, _, _)| w).collect();
    assert_eq!(workers.len(), 2);
    assert!(workers.contains(&a) && workers.contains(&b));
}

#[test]
fn the_keepalive_checkpoints_an_active_worker_and_the_floor_defers_an_event_wake() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "88888888-8888-4888-8888-888888888888");
    // The first resume sets the floor's start.
    w.observe(&a, ConversationState::Idle);
    w.advance(3_000);
    assert_eq!(w.tick(), 1);
    w.pump();
    w.submit(&a);
    // Root messages the worker 1 minute later: kept, delivered at the 15-minute floor.
    w.advance(MINUTE);
    let root = w.plane.worker(&w.root).unwrap();
    w.plane.send(&root, &a, protocol::MessageKind::Information, "new contract", None, None).unwrap();
    assert_eq!(w.tick(), 0);
    let at = w.plane.next_continue_at(PACING).unwrap();
    w.advance_to(at);
    assert_eq!(w.tick(), 1, "the event wake at the floor");
    assert!(w.pump().is_empty(), "a send waits for the turn to end (this executor declared no steering seam)");
    w.observe(&a, ConversationState::Idle);
    assert_eq!(World::resume_sends(&w.pump()).len(), 1);
    w.submit(&a);
    assert_eq!(w.tick(), 0, "the idle it waited for rode with it");
    w.progress(&a);
    // Still generating 20–21 minutes after that: the keepalive's checkpoint.
    let keepalive = w.plane.next_continue_at(PACING).unwrap();
    let since = w.plane.now_ms();
    assert!((since + 20 * MINUTE..=since + 21 * MINUTE).contains(&keepalive), "{}", keepalive - since);
    w.advance_to(keepalive);
    assert_eq!(w.tick(), 1);
    w.observe(&a, ConversationState::Idle);
    let prompts = World::resume_sends(&w.pump());
    assert!(prompts[0].starts_with("[orchestrator checkpoint v2 attempt 3]"), "{}", prompts[0]);
}

/// A resume was submitted but its page was never seen running, and shows
/// idle (its reports were lost, e.g. the daemon died between the
/// submission and its result). Idle blocks nothing, so only the bound asks
/// the page: after it, one inspect; the page still idle ends the turn and
/// the worker is resumed, instead of waiting silently on a turn that is over.
#[test]
fn a_submitted_turn_never_seen_running_is_confirmed_with_the_page_and_not_waited_on_forever() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "9b9b9b9b-9999-4999-8999-999999999999");
    w.observe(&a, ConversationState::Idle);
    w.advance(3_000);
    assert_eq!(w.tick(), 1);
    w.pump();
    let command = w.open_send_or_create(&a);
    w.report(ExecutorFrame::Ack { command_id: command.clone() });
    w.report(ExecutorFrame::Result { command_id: command, outcome: CommandOutcome::Ok { conversation_id: None } });
    let connected = ["ext".to_owned()];
    let policy = control::schedule::Policy { pacing: PACING, ..Default::default() };
    w.advance(policy.recheck_after_ms - 1);
    assert_eq!(w.plane.recheck(&connected, policy).unwrap(), 0, "the turn may still be starting");
    assert_eq!(w.tick(), 0);
    w.advance(1);
    assert_eq!(w.plane.recheck(&connected, policy).unwrap(), 1, "the bound asks the page once");
    assert_eq!(w.plane.recheck(&connected, policy).unwrap(), 0);
    let ops = w.pump();
    assert!(matches!(ops[..], [CommandOp::ConversationInspect { .. }]), "{ops:?}");
    // An inspect that failed (the page did not answer) confirms nothing.
    let inspect = w.open_send_or_create(&a);
    w.report(ExecutorFrame::Ack { command_id: inspect.clone() });
    let failed = CommandOutcome::Error { code: protocol::ErrorCode::BrowserControlUnavailable, detail: "no".into() };
    w.report(ExecutorFrame::Result { command_id: inspect, outcome: failed });
    w.advance(3_000);
    assert_eq!(w.tick(), 0, "a failed inspect ends no turn");
    w.advance(policy.recheck_after_ms);
    assert_eq!(w.plane.recheck(&connected, policy).unwrap(), 1, "asked again at the bound");
    let ops = w.pump();
    assert!(matches!(ops[..], [CommandOp::ConversationInspect { .. }]), "{ops:?}");
    let inspect = w.open_send_or_create(&a);
    w.report(ExecutorFrame::Ack { command_id: inspect.clone() });
    w.observe(&a, ConversationState::Idle);
    w.report(ExecutorFrame::Result { command_id: inspect, outcome: CommandOutcome::Ok { conversation_id: None } });
    w.advance(3_000);
    assert_eq!(w.tick(), 1, "the ended turn is resumed after the grace");
    let prompts = World::resume_sends(&w.pump());
    assert!(prompts[0].starts_with("[orchestrator resume v2 attempt 2]"), "{}", prompts[0]);
}

/// A steer is decided again when sent: an executor that reconnected
/// without the seam gets the queued checkpoint as a plain send, after the
/// turn ends, never a steer it would refuse.
#[test]
fn a_steer_queued_before_the_executor_lost_its_seam_goes_as_a_send() {
    let w = world();
    let connect = |capabilities: Vec<String>, instance: &str| {
        w.plane
            .execute(Request::ExecutorConnected {
                executor_id: "ext".into(),
                executor_instance_id: instance.into(),
                executor_kind: protocol::executor::ExecutorKind::Fake,
                capabilities,
                host: Default::default(),
            })
            .unwrap();
    };
    connect(vec![protocol::executor::STEER.to_owned()], "i1");
    w.set_default(auto());
    let a = w.working("a", "8b8b8b8b-8888-4888-8888-888888888888");
    w.progress(&a);
    let keepalive = w.plane.next_continue_at(PACING).unwrap();
    w.advance_to(keepalive);
    assert_eq!(w.tick(), 1);
    connect(vec![], "i2");
    assert!(w.pump().is_empty(), "no seam now: it waits for the turn to end");
    w.observe(&a, ConversationState::Idle);
    let prompts = World::resume_sends(&w.pump());
    assert!(prompts[0].starts_with("[orchestrator checkpoint v2 attempt 1]"), "{prompts:?}");
}

/// Seed §12.2: a checkpoint due mid-turn goes through the executor's
/// steering seam when it declared one, while the page generates; an
/// executor without the seam gets a plain send that waits for the turn to
/// end (the intent stays durable, nothing is lost or interrupted).
#[test]
fn a_checkpoint_due_mid_turn_steers_only_through_an_executor_that_declared_the_seam() {
    for steers in [true, false] {
        let w = world();
        let capabilities = if steers { vec![protocol::executor::STEER.to_owned()] } else { vec![] };
        w.plane
            .execute(Request::ExecutorConnected {
                executor_id: "ext".into(),
                executor_instance_id: "i1".into(),
                executor_kind: protocol::executor::ExecutorKind::Fake,
                capabilities,
                host: Default::default(),
            })
            .unwrap();
        w.set_default(auto());
        let a = w.working("a", "8a8a8a8a-8888-4888-8888-888888888888");
        w.progress(&a);
        let keepalive = w.plane.next_continue_at(PACING).unwrap();
        w.advance_to(keepalive);
        assert_eq!(w.tick(), 1, "the keepalive's checkpoint is scheduled while the turn runs");
        let ops = w.pump();
        if steers {
            let [CommandOp::ConversationSteer { prompt, .. }] = &ops[..] else { panic!("a steer mid-turn: {ops:?}") };
            assert!(prompt.starts_with("[orchestrator checkpoint v2 attempt 1]"), "{prompt}");
            let command = w.open_send_or_create(&a);
            w.report(ExecutorFrame::Ack { command_id: command.clone() });
            w.report(ExecutorFrame::Result {
                command_id: command,
                outcome: CommandOutcome::Ok { conversation_id: None },
            });
            // The turn it joined ends: that is the end of this attempt, and
            // the worker is resumed after the grace (and the account's pacing) as usual.
            w.observe(&a, ConversationState::Idle);
            w.advance(PACING.min_gap_ms);
            assert_eq!(w.tick(), 1);
            let prompts = World::resume_sends(&w.pump());
            assert!(prompts[0].starts_with("[orchestrator resume v2 attempt 2]"), "{}", prompts[0]);
        } else {
            assert!(ops.is_empty(), "no seam: the checkpoint waits for the turn to end: {ops:?}");
            w.observe(&a, ConversationState::Idle);
            let prompts = World::resume_sends(&w.pump());
            assert!(prompts[0].starts_with("[orchestrator checkpoint v2 attempt 1]"), "{}", prompts[0]);
        }
    }
}

#[test]
fn a_worker_whose_question_is_answered_is_resumed_after_the_grace_not_the_floor() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "99999999-9999-4999-8999-999999999999");
    // One resume first, so the spacing floor would apply to a non-idle wake.
    w.observe(&a, ConversationState::Idle);
    w.advance(3_000);
    assert_eq!(w.tick(), 1);
    w.pump();
    w.submit(&a);
    let me = w.plane.worker(&a).unwrap();
    let question = w.plane.send(&me, &w.root, protocol::MessageKind::Question, "which port?", None, None).unwrap();
    w.observe(&a, ConversationState::Idle);
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "waiting for its answer");
    let root = w.plane.worker(&w.root).unwrap();
    w.plane.send(&root, &a, protocol::MessageKind::Answer, "7777", Some(&question), None).unwrap();
    assert_eq!(w.plane.worker(&a).unwrap().state, WorkerState::Running);
    assert_eq!(w.tick(), 1, "its idle turn is resumed at once, inside the floor");
}

#[test]
fn a_continuation_whose_submission_failed_is_asked_for_again_never_dropped() {
    let w = world();
    let a = w.ended_turn("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa");
    let command = w.resume_acked(&a);
    let outcome = CommandOutcome::Error { code: protocol::ErrorCode::DeadlineExceeded, detail: "not submitted".into() };
    w.report(ExecutorFrame::Result { command_id: command, outcome });
    assert_eq!(w.tick(), 0, "the account's pacing first");
    w.advance(PACING.min_gap_ms);
    assert_eq!(w.tick(), 1, "a fresh attempt, not a silent stop");
    assert_eq!(w.attempts().len(), 2);
    assert_eq!(w.plane.worker(&a).unwrap().continuity.progress.attempts_without, 1, "counted by the stall guard");
}

impl World {
    /// The page of `worker` shows an incident (`state: error` with `code`).
    fn incident(&self, worker: &WorkerId, code: protocol::ErrorCode) {
        self.report(ExecutorFrame::ConversationState {
            worker_id: worker.clone(),
            state: ConversationState::Error,
            error: Some(code),
        });
    }

    /// The open continuation of `worker` ends with `code`.
    fn fail_open(&self, worker: &WorkerId, code: protocol::ErrorCode) {
        let command = self.open_send_or_create(worker);
        self.report(ExecutorFrame::Ack { command_id: command.clone() });
        let outcome = CommandOutcome::Error { code, detail: String::new() };
        self.report(ExecutorFrame::Result { command_id: command, outcome });
    }

    fn hold(&self, worker: &WorkerId) -> Option<Hold> {
        self.plane.worker(worker).unwrap().continuity.hold
    }
}

/// "Message delivery timed out" ends the attempt; the next is a fresh
/// `continue` (reason recovery, a new command through the same path).
/// Issue 29 item 1: when the executor cannot deliver it (an executor that
/// refuses to submit on an incident page answers `DEADLINE_EXCEEDED` or
/// `DELIVERY_TIMEOUT`), the recovery is asked for again, up to
/// `RECOVERY_ATTEMPTS_MAX` in a row; then the worker is paused with the
/// reason, an event root and the operator surfaces read, and nothing more
/// is sent until a person continues it. Before, the first undelivered
/// recovery stranded the worker silently while the page kept its incident.
#[test]
fn a_delivery_timeout_is_recovered_by_a_fresh_continue_and_an_undeliverable_one_is_surfaced() {
    use control::continuity::RECOVERY_ATTEMPTS_MAX;
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb");
    w.incident(&a, protocol::ErrorCode::DeliveryTimeout);
    w.advance(2_000);
    assert_eq!(w.tick(), 0, "the idle grace first");
    w.advance(1_000);
    for attempt in 1..=RECOVERY_ATTEMPTS_MAX {
        assert_eq!(w.tick(), 1, "recovery {attempt}");
        let sends = World::resume_sends(&w.pump());
        assert_eq!(sends.len(), 1, "one fresh user turn");
        assert!(sends[0].starts_with(&format!("[orchestrator resume v2 attempt {attempt}] Continue")), "{}", sends[0]);
        assert_eq!(w.attempts().last().unwrap().2, AttemptReason::Recovery);
        assert_eq!(w.hold(&a), None, "recovery {attempt}: not held yet");
        w.fail_open(&a, protocol::ErrorCode::DeadlineExceeded);
        w.advance(MINUTE);
    }
    assert_eq!(w.hold(&a), Some(Hold::Paused), "surfaced for a person");
    let reason = w
        .events()
        .into_iter()
        .rev()
        .find_map(|e| match e.body {
            EventBody::WorkerHoldChanged { hold: Some(Hold::Paused), reason, .. } => reason,
            _ => None,
        })
        .unwrap();
    assert!(reason.contains("DEADLINE_EXCEEDED") && reason.contains("incident"), "{reason}");
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "the same error page is not spun against");
    assert_eq!(w.attempts().len(), RECOVERY_ATTEMPTS_MAX as usize);

    // A recovery that goes in resets the count: the next incident gets its tries again.
    let w = world();
    w.set_default(auto());
    let b = w.working("b", "cccccccc-cccc-4ccc-8ccc-cccccccccccc");
    w.incident(&b, protocol::ErrorCode::DeliveryTimeout);
    w.advance(3_000);
    assert_eq!(w.tick(), 1);
    w.pump();
    w.fail_open(&b, protocol::ErrorCode::DeliveryTimeout);
    w.advance(MINUTE);
    assert_eq!(w.tick(), 1, "asked again");
    w.pump();
    w.submit(&b);
    assert_eq!(w.plane.worker(&b).unwrap().continuity.recoveries_undelivered, 0);
    assert_eq!(w.hold(&b), None);
}

/// A continuation that may have gone in is never sent again on its own:
/// the worker is paused with the reason, and resumed only when asked.
#[test]
fn an_ambiguous_continuation_pauses_the_worker_and_resends_nothing() {
    let w = world();
    let a = w.ended_turn("cccccccc-cccc-4ccc-8ccc-cccccccccccc");
    w.advance(3_000);
    assert_eq!(w.tick(), 1);
    w.pump();
    w.fail_open(&a, protocol::ErrorCode::AmbiguousSubmission);
    assert_eq!(w.hold(&a), Some(Hold::Paused));
    let reason = w.events().into_iter().rev().find_map(|e| match e.body {
        EventBody::WorkerHoldChanged { reason, .. } => reason,
        _ => None,
    });
    assert!(reason.unwrap().starts_with("AMBIGUOUS_SUBMISSION"));
    w.observe(&a, ConversationState::Generating);
    w.observe(&a, ConversationState::Idle);
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "no automatic resend");
    w.plane.execute(Request::ReleaseHold { actor: w.root.clone(), target: a.clone() }).unwrap();
    w.advance(PACING.min_gap_ms);
    assert_eq!(w.tick(), 1, "resumed once released");
    assert_eq!(w.attempts().len(), 2);
}

/// A page the adapter does not recognise pauses that worker only.
#[test]
fn an_unrecognised_page_pauses_that_worker_and_keeps_a_wait_for_a_person() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "dddddddd-dddd-4ddd-8ddd-dddddddddddd");
    let b = w.working("b", "eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee");
    // One reading of the page during a re-render pauses nothing.
    w.incident(&b, protocol::ErrorCode::HostUiChanged);
    assert_eq!(w.hold(&b), None);
    // A resume refused because the adapter did not recognise the page does.
    w.observe(&a, ConversationState::Idle);
    w.resume_acked(&a);
    w.fail_open(&a, protocol::ErrorCode::HostUiChanged);
    assert_eq!(w.hold(&a), Some(Hold::Paused));
    w.observe(&b, ConversationState::Idle);
    w.advance(PACING.min_gap_ms);
    assert_eq!(w.tick(), 1);
    assert_eq!(w.attempts()[1].0, b, "the other worker goes on");
    w.pump();
    w.plane
        .execute(Request::SetHold {
            actor: b.clone(),
            target: b.clone(),
            hold: Hold::AwaitingHuman,
            reason: "?".into(),
            ask: None,
        })
        .unwrap();
    w.fail_open(&b, protocol::ErrorCode::HostUiChanged);
    assert_eq!(w.hold(&b), Some(Hold::AwaitingHuman), "a wait for a person is kept");
}

/// "Too many requests" on one tab holds every automatic continuation of the
/// account for the wait (recorded as an event), then they go on, paced.
#[test]
fn a_rate_limit_on_one_tab_pauses_every_automatic_continuation_for_the_wait() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "f0f0f0f0-f0f0-40f0-80f0-f0f0f0f0f0f0");
    let b = w.working("b", "f1f1f1f1-f1f1-41f1-81f1-f1f1f1f1f1f1");
    w.incident(&a, protocol::ErrorCode::RateLimited);
    let seen_at = w.plane.now_ms();
    assert!(
        w.events()
            .iter()
            .any(|e| matches!(&e.body, EventBody::ContinuationRateLimited { worker_id, .. } if *worker_id == a))
    );
    w.observe(&a, ConversationState::Idle);
    w.observe(&b, ConversationState::Idle);
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "nobody is resumed during the wait");
    assert_eq!(w.plane.next_continue_at(PACING), Some(seen_at + PACING.rate_limit_wait_ms));
    w.advance_to(seen_at + PACING.rate_limit_wait_ms);
    assert_eq!(w.tick(), 1, "then one");
    w.advance(PACING.min_gap_ms);
    assert_eq!(w.tick(), 1, "and the other, paced");
}

/// The page's reports and the submission's result travel separately: a
/// turn seen to run and end before its prompt's result arrives is still an
/// ended turn, resumed after the grace (not a turn left open forever).
#[test]
fn a_turn_that_ends_before_its_submissions_result_is_still_resumed() {
    let w = world();
    let a = w.ended_turn("f2f2f2f2-f2f2-42f2-82f2-f2f2f2f2f2f2");
    let command = w.resume_acked(&a);
    w.observe(&a, ConversationState::Generating);
    w.observe(&a, ConversationState::Idle);
    w.report(ExecutorFrame::Result { command_id: command, outcome: CommandOutcome::Ok { conversation_id: None } });
    w.advance(PACING.min_gap_ms);
    assert_eq!(w.tick(), 1, "the ended turn is resumed");
    assert_eq!(w.attempts().len(), 2);
}

/// Seed §26.2: the daemon restarts at one of the nine boundaries of an
/// automatic resume; each converges with one submission per attempt and
/// the worker's state intact. `World::resumed_once` finishes the story the
/// same way for each: the turn in flight ends, and exactly the next
/// attempt follows.
impl World {
    /// After the grace, `a`'s resume is scheduled, dispatched and acknowledged; its command.
    fn resume_acked(&self, a: &WorkerId) -> protocol::CommandId {
        self.advance(3_000);
        assert_eq!(self.tick(), 1);
        self.pump();
        let command = self.open_send_or_create(a);
        self.report(ExecutorFrame::Ack { command_id: command.clone() });
        command
    }

    /// A worker whose first turn ended idle and whose resume is due.
    fn ended_turn(&self, conversation: &str) -> WorkerId {
        self.set_default(auto());
        let a = self.working("a", conversation);
        self.observe(&a, ConversationState::Idle);
        a
    }

    /// From wherever the resume of `a` stands: it goes in once, its turn
    /// ends, and the next end is resumed by attempt 2 and nothing else.
    fn resumed_once(&self, a: &WorkerId) {
        if let Some(command) =
            self.plane.with_state(|s| s.open_commands.iter().find(|c| &s.commands[*c].worker_id == a).cloned())
        {
            self.report(ExecutorFrame::Ack { command_id: command.clone() });
            let ok = CommandOutcome::Ok { conversation_id: None };
            self.report(ExecutorFrame::Result { command_id: command, outcome: ok });
        }
        self.observe(a, ConversationState::Generating);
        self.observe(a, ConversationState::Idle);
        self.advance(PACING.min_gap_ms);
        assert_eq!(self.tick(), 1, "the next turn's end is resumed");
        let attempts: Vec<u32> = self.attempts().into_iter().map(|(_, n, _)| n).collect();
        assert_eq!(attempts, [1, 2], "one submission per attempt");
        let commands = self.plane.with_state(|s| {
            s.commands
                .values()
                .filter(|c| &c.worker_id == a && matches!(c.intent, protocol::CommandIntent::Send { .. }))
                .count()
        });
        assert_eq!(commands, 2, "one command per attempt");
    }
}

#[test]
fn restart_1_after_idle_before_the_resume_is_scheduled() {
    let mut w = world();
    let a = w.ended_turn("40000001-4444-4444-8444-444444444444");
    w.restart();
    w.advance(3_000);
    assert_eq!(w.tick(), 1);
    assert_eq!(World::resume_sends(&w.pump()).len(), 1);
    w.resumed_once(&a);
}

#[test]
fn restart_2_after_the_resume_is_scheduled_before_the_executor_has_it() {
    let mut w = world();
    let a = w.ended_turn("40000002-4444-4444-8444-444444444444");
    w.advance(3_000);
    assert_eq!(w.tick(), 1);
    w.restart();
    assert_eq!(w.tick(), 0, "not scheduled again");
    assert_eq!(World::resume_sends(&w.pump()).len(), 1);
    w.resumed_once(&a);
}

#[test]
fn restart_3_after_the_executor_has_it_before_its_ack() {
    let mut w = world();
    let a = w.ended_turn("40000003-4444-4444-8444-444444444444");
    w.advance(3_000);
    w.tick();
    let sent = World::resume_sends(&w.pump());
    w.restart();
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0);
    let replayed = w.plane.replay("ext", 60_000).unwrap();
    assert_eq!(replayed.len(), 1, "the same command is replayed");
    assert_eq!(World::resume_sends(&[replayed[0].op.clone()]), sent, "with the same prompt");
    w.resumed_once(&a);
}

#[test]
fn restart_4_after_the_submission_started() {
    let mut w = world();
    let a = w.ended_turn("40000004-4444-4444-8444-444444444444");
    w.resume_acked(&a);
    w.restart();
    assert_eq!(w.tick(), 0);
    w.resumed_once(&a);
}

#[test]
fn restart_5_after_the_submission_before_its_result() {
    let mut w = world();
    let a = w.ended_turn("40000005-4444-4444-8444-444444444444");
    w.resume_acked(&a);
    // The page shows the new turn running; its result has not come.
    w.observe(&a, ConversationState::Generating);
    w.restart();
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0);
    w.resumed_once(&a);
}

#[test]
fn restart_6_after_the_result_before_generating_is_seen() {
    let mut w = world();
    let a = w.ended_turn("40000006-4444-4444-8444-444444444444");
    let command = w.resume_acked(&a);
    w.report(ExecutorFrame::Result { command_id: command, outcome: CommandOutcome::Ok { conversation_id: None } });
    w.restart();
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "an idle seen before the submission is not the new turn's end");
    w.resumed_once(&a);
}

#[test]
fn restart_7_while_generating_before_idle() {
    let mut w = world();
    let a = w.ended_turn("40000007-4444-4444-8444-444444444444");
    w.advance(3_000);
    w.tick();
    w.pump();
    w.submit(&a);
    w.restart();
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0);
    w.resumed_once(&a);
}

#[test]
fn restart_8_during_the_idle_grace() {
    let mut w = world();
    let a = w.ended_turn("40000008-4444-4444-8444-444444444444");
    w.advance(1_000);
    w.restart();
    assert_eq!(w.tick(), 0, "the grace survives a restart");
    w.advance(2_000);
    assert_eq!(w.tick(), 1);
    w.pump();
    w.resumed_once(&a);
}

#[test]
fn restart_9_after_the_stall_guard_warned_and_after_it_paused() {
    let mut w = world();
    w.set_default(ContinuationPolicy {
        stall_warning_after_no_progress_attempts: 1,
        stall_pause_after_no_progress_attempts: 2,
        ..auto()
    });
    let a = w.working("a", "40000009-4444-4444-8444-444444444444");
    let stalls =
        |w: &World| w.events().into_iter().filter(|e| matches!(e.body, EventBody::ContinuationStalled { .. })).count();
    w.observe(&a, ConversationState::Idle);
    w.advance(3_000);
    w.tick();
    w.pump();
    w.submit(&a);
    w.observe(&a, ConversationState::Idle);
    w.advance(PACING.min_gap_ms);
    w.tick();
    assert_eq!(stalls(&w), 1, "warned");
    w.restart();
    w.tick();
    assert_eq!(stalls(&w), 1, "the warning is not raised again after a restart");
    w.pump();
    w.submit(&a);
    w.observe(&a, ConversationState::Idle);
    w.advance(PACING.min_gap_ms);
    w.tick();
    assert_eq!(w.plane.worker(&a).unwrap().continuity.hold, Some(Hold::Stalled));
    w.restart();
    w.advance(MINUTE);
    assert_eq!(w.tick(), 0, "still paused after a restart");
    assert_eq!(w.plane.worker(&a).unwrap().continuity.hold, Some(Hold::Stalled));
    assert_eq!(w.attempts().len(), 2);
}

/// Seed §26.1: policy changes append events and survive a restart.
#[test]
fn policy_changes_append_events_and_survive_a_restart() {
    let mut w = world();
    w.set_default(auto());
    let a = w.working("a", "4000000a-4444-4444-8444-444444444444");
    let quick = ContinuationPolicy { idle_grace_ms: 500, ..auto() };
    let root = w.root.clone();
    w.plane.execute(Request::SetContinuation { actor: root, target: Some(a.clone()), policy: quick }).unwrap();
    let changes =
        w.events().into_iter().filter(|e| matches!(e.body, EventBody::ContinuationPolicyChanged { .. })).count();
    assert_eq!(changes, 2, "the run's default and the worker's own");
    w.restart();
    assert_eq!(w.plane.worker(&a).unwrap().continuity.policy, quick);
    w.observe(&a, ConversationState::Idle);
    w.advance(500);
    assert_eq!(w.tick(), 1, "the worker's own grace applies after the restart");
}

/// A turn that never ends (generating with no progress from the worker), or
/// a prompt whose turn never starts, is reported once as a stalled turn with
/// what was seen; nothing is submitted into it or reloaded; progress from
/// the worker restarts the count, a new turn re-arms the report.
#[test]
fn a_turn_that_never_ends_is_reported_once_and_nothing_is_sent_into_it() {
    let pacing = Pacing { stalled_turn_after_ms: 10 * MINUTE, ..PACING };
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "5f5f5f5f-5f5f-45f5-85f5-5f5f5f5f5f5f");
    let stalls = |w: &World| -> Vec<(protocol::continuity::TurnStall, u64)> {
        w.events()
            .into_iter()
            .filter_map(|e| match e.body {
                EventBody::ContinuationTurnStalled { stall, for_ms, .. } => Some((stall, for_ms)),
                _ => None,
            })
            .collect()
    };
    w.advance(5 * MINUTE);
    w.progress(&a);
    w.advance(9 * MINUTE);
    assert_eq!(w.plane.continue_due(pacing).unwrap(), 0, "progress restarted the count");
    assert_eq!(w.plane.next_continue_at(pacing), Some(w.plane.now_ms() + MINUTE));
    w.advance(MINUTE);
    assert_eq!(w.plane.continue_due(pacing).unwrap(), 1);
    use protocol::continuity::TurnStall;
    assert_eq!(stalls(&w), [(TurnStall::GeneratingWithoutProgress, 10 * MINUTE)], "quiet since the progress");
    w.advance(14 * MINUTE);
    w.plane.continue_due(pacing).unwrap();
    assert_eq!(stalls(&w).len(), 1, "reported once");
    // The keepalive's checkpoint falls due meanwhile: it waits for the turn.
    assert_eq!(w.attempts().len(), 1);
    assert!(World::resume_sends(&w.pump()).is_empty(), "nothing is sent into it");
    // The turn ends; the checkpoint goes in and its turn never starts.
    w.observe(&a, ConversationState::Idle);
    assert_eq!(World::resume_sends(&w.pump()).len(), 1);
    let command = w.open_send_or_create(&a);
    w.report(ExecutorFrame::Ack { command_id: command.clone() });
    w.report(ExecutorFrame::Result { command_id: command, outcome: CommandOutcome::Ok { conversation_id: None } });
    w.advance(10 * MINUTE);
    w.plane.continue_due(pacing).unwrap();
    assert_eq!(stalls(&w)[1], (TurnStall::NeverStarted, 10 * MINUTE));
    assert_eq!(w.attempts().len(), 1, "no second prompt on top of it");
    assert!(World::resume_sends(&w.pump()).is_empty());
}

/// The account's pacing serves the worker that has waited longest: one
/// whose turns end at once never starves another that is idle too.
#[test]
fn the_pacing_serves_the_longest_waiting_worker_first() {
    let w = world();
    w.set_default(auto());
    let a = w.working("a", "6a6a6a6a-6a6a-46a6-86a6-6a6a6a6a6a6a");
    let b = w.working("b", "6b6b6b6b-6b6b-46b6-86b6-6b6b6b6b6b6b");
    let (first, second) = if a < b { (a, b) } else { (b, a) };
    w.observe(&first, ConversationState::Idle);
    w.advance(3_000);
    assert_eq!(w.tick(), 1);
    w.pump();
    w.submit(&first);
    w.observe(&second, ConversationState::Idle);
    w.advance(1_000);
    w.observe(&first, ConversationState::Idle);
    w.advance(PACING.min_gap_ms);
    assert_eq!(w.tick(), 1);
    let served: Vec<WorkerId> = w.attempts().into_iter().map(|(w, _, _)| w).collect();
    assert_eq!(served, [first.clone(), second], "the one idle longer goes next, whatever its id");
}

/// A turn that does not end is reported whatever the worker's mode (a
/// manual worker's turn can hang too), and a page that stops generating
/// for any reason stops the count.
#[test]
fn a_manual_workers_hung_turn_is_reported_and_a_closed_page_stops_the_count() {
    let pacing = Pacing { stalled_turn_after_ms: 10 * MINUTE, ..PACING };
    let w = world();
    let a = w.working("a", "7c7c7c7c-7c7c-47c7-87c7-7c7c7c7c7c7c");
    let b = w.working("b", "7d7d7d7d-7d7d-47d7-87d7-7d7d7d7d7d7d");
    w.advance(5 * MINUTE);
    w.incident(&b, protocol::ErrorCode::ChatgptSignedOut);
    w.advance(5 * MINUTE);
    assert_eq!(w.plane.continue_due(pacing).unwrap(), 1);
    let stalled: Vec<WorkerId> = w
        .events()
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::ContinuationTurnStalled { worker_id, .. } => Some(worker_id),
            _ => None,
        })
        .collect();
    assert_eq!(stalled, [a], "the manual worker's hung turn; not b's page, which stopped generating");
}

/// A turn whose page keeps moving on (text streaming, tool-call rows: the
/// executor's `conversationProgress`) is not stalled, even when its worker
/// reports nothing; the page going quiet starts the bound from its last
/// movement. Page movement is not the worker's progress: the stall guard
/// does not count it.
#[test]
fn a_turn_whose_page_keeps_moving_is_not_stalled_until_the_page_goes_quiet() {
    let pacing = Pacing { stalled_turn_after_ms: 10 * MINUTE, ..PACING };
    let w = world();
    let a = w.working("a", "7e7e7e7e-7e7e-47e7-87e7-7e7e7e7e7e7e");
    let quiet_since = w.plane.worker(&a).unwrap().continuity.progress.last_at_ms;
    for _ in 0..4 {
        w.advance(5 * MINUTE);
        w.report(ExecutorFrame::ConversationProgress { worker_id: a.clone() });
        assert_eq!(w.plane.continue_due(pacing).unwrap(), 0, "the page moves on: not stalled");
    }
    assert_eq!(w.plane.worker(&a).unwrap().continuity.progress.last_at_ms, quiet_since, "not the worker's progress");
    assert_eq!(w.plane.next_continue_at(pacing), Some(w.plane.now_ms() + 10 * MINUTE));
    w.advance(10 * MINUTE);
    assert_eq!(w.plane.continue_due(pacing).unwrap(), 1, "quiet for the bound since the page last moved");
    // Movement reported for a page that is not running records nothing.
    w.observe(&a, ConversationState::Idle);
    let before = w.events().len();
    w.report(ExecutorFrame::ConversationProgress { worker_id: a.clone() });
    assert_eq!(w.events().len(), before);
}

/// A lost "idle" report must not hold an Auto worker's next turn until the
/// stalled-turn bound: its `generating` state is re-read at the recheck
/// bound as if a command waited on it. A manual worker's is not.
#[test]
fn an_auto_workers_stale_generating_state_is_re_read_at_the_bound() {
    let w = world();
    let manual = w.working("m", "9c9c9c9c-9999-4999-8999-999999999999");
    w.set_default(auto());
    let a = w.working("a", "9d9d9d9d-9999-4999-8999-999999999999");
    let connected = ["ext".to_owned()];
    let policy = control::schedule::Policy { pacing: PACING, ..Default::default() };
    w.advance(policy.recheck_after_ms - 1);
    assert_eq!(w.plane.recheck(&connected, policy).unwrap(), 0, "not before the bound");
    w.advance(1);
    assert_eq!(w.plane.recheck(&connected, policy).unwrap(), 1, "the Auto worker's page is asked, once");
    let ops = w.pump();
    assert!(matches!(ops[..], [CommandOp::ConversationInspect { .. }]), "{ops:?}");
    let inspect = w.open_send_or_create(&a);
    assert_eq!(w.plane.with_state(|s| s.commands[&inspect].worker_id.clone()), a);
    let _ = manual;
}

/// A question's choices and context are kept with its hold and shown by
/// the operator surfaces; out of bounds, or with a hold that is no
/// question, they are refused and nothing is held. A person's answer, made
/// as root, is delivered once under its key and releases the hold.
#[test]
fn a_question_keeps_its_choices_and_a_persons_answer_releases_it_once() {
    use protocol::operator::{Action, Ask, Status};
    let w = world();
    let a = w.working("a", "44444444-4444-4444-8444-444444444444");
    let ask = |choices: Vec<String>| Some(Ask { choices, context: Some("the old one is MySQL".into()) });
    let hold =
        |hold, ask| Request::SetHold { actor: a.clone(), target: a.clone(), hold, reason: "which db?".into(), ask };
    let too_many = (0..9).map(|i| format!("db{i}")).collect();
    for refused in [hold(Hold::AwaitingHuman, ask(too_many)), hold(Hold::AwaitingDependency, ask(vec![]))] {
        assert_eq!(w.plane.execute(refused).unwrap_err().code(), protocol::ErrorCode::InvalidArgument);
    }
    assert_eq!(w.plane.worker(&a).unwrap().continuity.hold, None);
    w.plane.execute(hold(Hold::AwaitingHuman, ask(vec!["postgres".into(), "sqlite".into()]))).unwrap();
    let view = control::operator::view(&w.plane, &[]);
    let shown = view.runs[0].workers.iter().find(|v| v.worker_id == a.to_string()).unwrap();
    assert_eq!((shown.status, shown.why.as_str(), shown.answerable), (Status::NeedsYou, "which db?", true));
    assert_eq!(shown.ask.as_ref().unwrap().choices, ["postgres", "sqlite"]);
    assert_eq!(shown.recent.last().map(|r| r.words()), Some("its hold changed"), "{:?}", shown.recent);

    let answer = control::operator::Control {
        action: Action::Answer,
        worker_id: Some(a.clone()),
        run_id: None,
        text: Some("postgres".into()),
        key: Some("k1".into()),
    };
    assert_eq!(control::operator::apply(&w.plane, &answer), Ok(1));
    assert_eq!(w.plane.worker(&a).unwrap().continuity.hold, None, "answered: released");
    let again = control::operator::apply(&w.plane, &answer).unwrap_err();
    assert_eq!(again.0, protocol::ErrorCode::InvalidTransition, "a second click: it asks nothing now");
    // It asks again; the first answer's key replayed delivers nothing and
    // leaves the new question standing.
    w.plane.execute(hold(Hold::AwaitingHuman, None)).unwrap();
    assert_eq!(control::operator::apply(&w.plane, &answer), Ok(0));
    assert_eq!(w.plane.worker(&a).unwrap().continuity.hold, Some(Hold::AwaitingHuman));
    let mut answers = 0;
    w.store
        .replay(&mut |e| {
            answers += usize::from(matches!(e.body, protocol::EventBody::WorkerMessage { .. }));
            Ok(())
        })
        .unwrap();
    assert_eq!(answers, 1, "the same key delivers the answer once");
    // A pause is a person's own: an answer never lifts it.
    let pause = control::operator::Control { action: Action::Pause, text: None, key: None, ..answer.clone() };
    let fresh = control::operator::Control { key: Some("k2".into()), ..answer };
    control::operator::apply(&w.plane, &fresh).unwrap();
    control::operator::apply(&w.plane, &pause).unwrap();
    assert_eq!(control::operator::apply(&w.plane, &fresh).unwrap_err().0, protocol::ErrorCode::InvalidTransition);
    assert_eq!(w.plane.worker(&a).unwrap().continuity.hold, Some(Hold::Paused));
}

/// A page that needs a person (ChatGPT's tool-approval card) reads "Needs
/// you" since the page said so, however often the worker changes meanwhile:
/// the 30 s notice is counted from the card, not from the last event.
#[test]
fn a_tool_approval_needs_you_since_the_card_appeared() {
    use protocol::operator::Status;
    let w = world();
    let a = w.working("a", "55555555-5555-4555-8555-555555555555");
    w.observe(&a, ConversationState::Generating);
    w.advance(MINUTE);
    let card = w.plane.now_ms();
    let error = Some(protocol::ErrorCode::ToolApprovalRequired);
    w.report(ExecutorFrame::ConversationState { worker_id: a.clone(), state: ConversationState::Error, error });
    let shown = |w: &World| {
        let view = control::operator::view(&w.plane, &["ext".to_owned()]);
        view.runs[0].workers.iter().find(|v| v.worker_id == a.to_string()).map(|v| (v.status, v.since_ms)).unwrap()
    };
    assert_eq!(shown(&w), (Status::NeedsYou, card));
    w.advance(20_000);
    w.progress(&a);
    w.report(ExecutorFrame::ConversationState { worker_id: a.clone(), state: ConversationState::Error, error });
    assert_eq!(shown(&w), (Status::NeedsYou, card), "the same card, reported again, and progress: the same wait");
}

/// Issue 43, finding 1: any number of surfaces answering one question at
/// once (two dashboard tabs, the popup; each its own key) deliver exactly
/// one answer: the question is checked, answered and released in one
/// commit, and every other answer is refused as "asks nothing now".
mod concurrent_answers {
    use super::*;
    use proptest::prelude::*;

    fn asked(w: &World, name: &str, conversation: &str) -> WorkerId {
        let a = w.working(name, conversation);
        let ask = Request::SetHold {
            actor: a.clone(),
            target: a.clone(),
            hold: Hold::AwaitingHuman,
            reason: "which db?".into(),
            ask: None,
        };
        w.plane.execute(ask).unwrap();
        a
    }

    fn answers_to(w: &World, worker: &WorkerId) -> usize {
        let mut n = 0;
        w.store
            .replay(&mut |e| {
                n += usize::from(matches!(&e.body, EventBody::WorkerMessage { to, .. } if to == worker));
                Ok(())
            })
            .unwrap();
        n
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn of_n_concurrent_answers_exactly_one_goes_in(surfaces in 2..12usize, by_question in any::<bool>()) {
            use control::operator::Control;
            use protocol::operator::Action;
            let w = world();
            // Its own question to a person, or a question it asked root.
            let a = if by_question {
                let a = w.working("a", "66666666-6666-4666-8666-666666666666");
                let worker = w.plane.worker(&a).unwrap();
                let root = w.root.clone();
                w.plane.send_fresh(&worker, &root, protocol::MessageKind::Question, "which?", None, None).unwrap();
                a
            } else {
                asked(&w, "a", "66666666-6666-4666-8666-666666666666")
            };
            let barrier = std::sync::Barrier::new(surfaces);
            let results: Vec<_> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..surfaces)
                    .map(|i| {
                        let (plane, barrier, a) = (&w.plane, &barrier, a.clone());
                        scope.spawn(move || {
                            let answer = Control {
                                action: Action::Answer,
                                worker_id: Some(a),
                                run_id: None,
                                text: Some(format!("postgres, says surface {i}")),
                                key: Some(format!("surface-{i}")),
                            };
                            barrier.wait();
                            control::operator::apply(plane, &answer)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let delivered = results.iter().filter(|r| **r == Ok(1)).count();
            prop_assert_eq!(delivered, 1, "{:?}", results);
            for refused in results.iter().filter(|r| **r != Ok(1)) {
                prop_assert_eq!(refused.as_ref().unwrap_err().0, protocol::ErrorCode::InvalidTransition);
            }
            prop_assert_eq!(answers_to(&w, &a), 1, "one answer reached the worker");
            let worker = w.plane.worker(&a).unwrap();
            prop_assert_eq!(worker.continuity.hold, None);
            prop_assert_eq!(worker.state, WorkerState::Running);
        }
    }
}
