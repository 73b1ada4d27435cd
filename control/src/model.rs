//! In-memory state: a pure fold over the event log. Restart rebuilds it
//! from the store's latest snapshot of it and the events after (or the
//! whole log); nothing here is authoritative on its own.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use protocol::continuity::{ContinuationPolicy, Wake};
use protocol::executor::{CommandOutcome, ConversationState};

use protocol::rollover::{Capsule, RolloverReason};

use crate::continuity::{Continuity, Finish};
use protocol::{
    Assignment, CommandId, CommandIntent, ConversationId, Event, EventBody, RunId, RunState, WorkerId, WorkerState,
};

/// A run as the log describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Its id.
    pub id: RunId,
    /// Human title.
    pub title: String,
    /// Lifecycle state.
    pub state: RunState,
    /// The `/root` worker.
    pub root: WorkerId,
    /// Cursor of the last event; the next event gets `cursor + 1`.
    pub cursor: u64,
    /// When the run was created.
    pub created_at_ms: u64,
    /// When the run last changed.
    pub updated_at_ms: u64,
    /// Workers in creation order, root first.
    pub workers: Vec<WorkerId>,
    /// Worker paths in use.
    pub paths: HashSet<String>,
    /// The continuation policy workers spawned from now on start with.
    pub continuation_default: ContinuationPolicy,
    /// Whether its managed conversations' calls must be attributed.
    pub attribution: protocol::Attribution,
}

/// A logical worker as the log describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Worker {
    /// Its id.
    pub id: WorkerId,
    /// Its run.
    pub run_id: RunId,
    /// Hierarchical name, `/root` or `/root/<name>`.
    pub path: String,
    /// The spawning worker; absent for root.
    pub parent: Option<WorkerId>,
    /// Lifecycle state.
    pub state: WorkerState,
    /// The authoritative task; absent for root.
    pub assignment: Option<Assignment>,
    /// Follow-up instructions, oldest first.
    pub followups: Vec<String>,
    /// Completion summaries, each with how many follow-ups the worker had then
    /// (0: the assignment itself; n: follow-up n), for collecting tasks.
    pub completions: Vec<(u32, String)>,
    /// How many times its conversation attached.
    pub attach_count: u32,
    /// Last progress summary.
    pub last_progress: Option<String>,
    /// Completion summary or failure reason, once terminal.
    pub outcome: Option<String>,
    /// When it was created.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
    /// The executor holding this worker's conversation, once a create was dispatched.
    pub executor_id: Option<String>,
    /// The exact conversation identity and URL, once the executor bound it.
    pub conversation: Option<(ConversationId, String)>,
    /// Whether the executor reported creating the conversation.
    pub conversation_created: bool,
    /// Last observed coarse conversation state.
    pub conversation_state: Option<ConversationState>,
    /// When that state was last reported, or last asked for by an inspect
    /// that finished (either way): what `crate::schedule` measures staleness from.
    pub state_checked_at_ms: u64,
    /// The last error the executor reported about the conversation.
    pub last_error: Option<protocol::ErrorCode>,
    /// When the page's reported state or error last changed (0: never
    /// reported): since when a page that needs a person has needed one.
    pub page_since_ms: u64,
    /// Set when the executor reported a different conversation than the bound
    /// one: nothing more is dispatched until the pool reconciles.
    pub fenced: bool,
    /// Execution Continuity: its policy, holds, attempts and pending turn.
    pub continuity: Continuity,
    /// Its tab was closed to keep its executor within its tab capacity
    /// (`park`): its conversation is bound still, and an `open` reopens it
    /// before its next command.
    #[serde(default)]
    pub parked: bool,
    /// Reopens of its parked tab that failed in a row: the next waits
    /// longer (see [`crate::tabs`]).
    #[serde(default)]
    pub reopen_failures: u32,
    /// Who blocked its chat, while it is blocked: its calls are refused
    /// with `CHAT_BLOCKED` (not a cancel; nothing else changes).
    pub blocked: Option<protocol::BlockedBy>,
    /// How many follow-ups it had when its conversation's current turn
    /// began (its first attributed call), if a turn was ever attributed: a
    /// report that names no follow-up answers that turn's work.
    pub turn_followups: Option<u32>,
    /// Its continuation epoch: how many times it rolled over to a fresh
    /// conversation. Credentials of an older epoch are refused.
    #[serde(default)]
    pub epoch: u32,
    /// The conversations it rolled over from, oldest first (the newest
    /// `protocol::rollover::LINEAGE_KEPT`).
    #[serde(default)]
    pub retired: Vec<ConversationId>,
    /// What its current conversation was told at its rollover.
    #[serde(default)]
    pub capsule: Option<Capsule>,
    /// Its own newest checkpoint note (`worker_checkpoint`), and when.
    #[serde(default)]
    pub checkpoint: Option<(String, u64)>,
    /// A rollover asked for and not yet made: why, and since when.
    #[serde(default)]
    pub rollover: Option<(RolloverReason, u64)>,
    /// The context meter: bytes that passed through its current
    /// conversation as far as the orchestrator sees them (prompts, what
    /// attach returned, reports, messages). An estimate from below: the
    /// model's own words are not seen.
    #[serde(default)]
    pub context_bytes: u64,
    /// The meter when its current conversation first attached (the capsule,
    /// the assignment, the follow-ups): what any fresh conversation would
    /// carry. Rollover is measured from it, so a large assignment never
    /// rolls a fresh conversation over at once.
    #[serde(default)]
    pub context_floor: u64,
    /// The model it is pinned to, if any (`worker.model_pinned`).
    #[serde(default)]
    pub model: Option<String>,
    /// The thinking effort pinned with its model, if any.
    #[serde(default)]
    pub effort: Option<String>,
}

/// Where an executor command is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandPhase {
    /// Durable intent; no executor has it yet.
    Queued,
    /// Assigned to an executor and sent (or about to be); not yet acknowledged.
    Dispatched,
    /// The executor journaled it.
    Acked,
    /// The executor reported its outcome.
    Completed,
    /// Dropped before dispatch because its worker ended.
    Cancelled,
}

/// A durable executor command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedCommand {
    /// Its id.
    pub id: CommandId,
    /// The worker it serves.
    pub worker_id: WorkerId,
    /// What it is for.
    pub intent: CommandIntent,
    /// The executor's journal key.
    pub idempotency_key: String,
    /// Where it is.
    pub phase: CommandPhase,
    /// The executor it was dispatched to.
    pub executor_id: Option<String>,
    /// The terminal outcome.
    pub outcome: Option<CommandOutcome>,
    /// Not dispatched before this time (pacing).
    pub not_before_ms: Option<u64>,
}

impl QueuedCommand {
    /// Dispatched or acknowledged, not yet completed.
    pub fn in_flight(&self) -> bool {
        matches!(self.phase, CommandPhase::Dispatched | CommandPhase::Acked)
    }
}

/// What one prompt is taken to add to a conversation's context: the
/// prompts are short and their text is rendered at dispatch, not stored.
pub const PROMPT_BYTES: usize = 1_000;

impl Worker {
    /// Adds `bytes` to the context meter.
    fn metered(&mut self, bytes: usize) {
        self.context_bytes = self.context_bytes.saturating_add(bytes as u64);
    }

    /// Its conversation retired and a fresh one coming at the capsule's
    /// epoch: nothing of the old page's state is kept; the executor that
    /// held it creates the new one.
    fn rolled_over(&mut self, retired: Option<ConversationId>, capsule: Capsule, at: u64) {
        if let Some(old) = retired {
            self.retired.push(old);
            let over = self.retired.len().saturating_sub(protocol::rollover::LINEAGE_KEPT);
            self.retired.drain(..over);
        }
        self.epoch = capsule.epoch;
        self.context_bytes = capsule.bytes() as u64;
        self.context_floor = 0;
        self.capsule = Some(capsule);
        self.rollover = None;
        self.conversation = None;
        self.conversation_created = false;
        self.conversation_state = None;
        self.last_error = None;
        self.page_since_ms = 0;
        self.state_checked_at_ms = at;
        self.parked = false;
        self.reopen_failures = 0;
        self.turn_followups = None;
        self.continuity.idle_since_ms = None;
    }

    /// Whether it rolled over and its fresh conversation is not yet bound.
    pub fn rolling(&self) -> bool {
        self.epoch > 0 && self.conversation.is_none()
    }

    /// Whether this is the run's root worker.
    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// Whether this is a root the daemon launched into a conversation of its
    /// own (only such a root has an assignment): it attaches like a worker.
    pub fn is_managed_root(&self) -> bool {
        self.is_root() && self.assignment.is_some()
    }
}

/// The log refers to something it never created: the store is corrupt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {cursor} of {run}: {reason}")]
pub struct FoldError {
    /// The run.
    pub run: String,
    /// The event.
    pub cursor: u64,
    /// What did not fit.
    pub reason: String,
}

/// How many request ids of each worker's turns the state keeps. An older
/// turn's id is no longer refused here, but it cannot attribute a call all
/// the same: the page check takes only the page's newest id.
pub const ATTRIBUTED_KEPT: usize = 64;

/// All runs and workers. No message or event is kept in it (they stay in
/// the store): it grows with the runs, workers and executor commands, not
/// with what workers say, and that is what a snapshot of it costs.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Runs by id. A run holds nothing that grows with its history, so
    /// reading one costs the same on its first day and its hundredth.
    pub runs: HashMap<RunId, Run>,
    /// Workers by id, across runs.
    pub workers: HashMap<WorkerId, Worker>,
    /// Executor commands by id.
    pub commands: HashMap<CommandId, QueuedCommand>,
    /// Commands not yet completed or cancelled, in queue order.
    pub open_commands: Vec<CommandId>,
    /// Cursor of the system stream (executor connections).
    pub system_cursor: u64,
    /// When the last automatic (auto-resume) attempt was scheduled, across
    /// all runs: the account-wide pacing counts from it.
    pub last_auto_attempt_at_ms: Option<u64>,
    /// When ChatGPT last said "Too many requests" on a managed tab: every
    /// automatic attempt waits the scheduler's rate-limit wait from it.
    pub rate_limited_at_ms: Option<u64>,
    /// The executors whose latest session declared the steering seam
    /// (`protocol::executor::STEER`).
    pub steering_executors: HashSet<String>,
    /// The executors whose latest session declared they park tabs
    /// (`protocol::executor::PARK`).
    #[serde(default)]
    pub parking_executors: HashSet<String>,
    /// The executors whose latest session declared they roll conversations
    /// over (`protocol::executor::ROLLOVER`).
    #[serde(default)]
    pub rolling_executors: HashSet<String>,
    /// The executors whose latest session declared they pin models
    /// (`protocol::executor::MODEL`).
    #[serde(default)]
    pub model_executors: HashSet<String>,
    /// The executors whose latest session declared they pin the thinking
    /// effort too (`protocol::executor::EFFORT`).
    #[serde(default)]
    pub effort_executors: HashSet<String>,
    /// Worktree ownership, folded from its own stream.
    #[serde(default)]
    pub ownership: crate::ownership::Ledger,
    /// The runtime pools' managed-carrier records.
    pub runtime: registry::Registry,
    /// When each executor's current session began (its last `executor.connected`):
    /// a conversation state observed before that may be stale.
    pub executor_connected_at: HashMap<String, u64>,
    /// What each executor's latest session said of its machine (name,
    /// browser, and the capacity placement honours).
    pub executor_hosts: HashMap<String, protocol::executor::MachineFacts>,
    /// Each executor's kind and process start, from its latest `hello`
    /// (a deployment's identity names them).
    pub executor_starts: HashMap<String, (protocol::executor::ExecutorKind, String)>,
    /// The request ids that attributed calls, and whose: an id attributes
    /// one worker's calls only, and only while it is that worker's newest.
    /// The last [`ATTRIBUTED_KEPT`] of each worker.
    pub attributed_requests: HashMap<String, WorkerId>,
    /// Each worker's kept attributed request ids, oldest first: the last is
    /// its current turn's.
    pub attributed_by_worker: HashMap<WorkerId, VecDeque<String>>,
}

impl State {
    /// Whether `request_id` may attribute `worker`'s calls: no call was
    /// attributed by it yet, or it is `worker`'s current turn's. Any other
    /// id that attributed calls belongs to a turn that has ended.
    pub fn request_usable(&self, request_id: &str, worker: &WorkerId) -> bool {
        match self.attributed_requests.get(request_id) {
            None => true,
            Some(owner) => {
                owner == worker
                    && self.attributed_by_worker.get(worker).and_then(VecDeque::back).is_some_and(|c| c == request_id)
            }
        }
    }

    /// The worker, or `NOT_FOUND`.
    pub fn worker(&self, id: &WorkerId) -> Option<&Worker> {
        self.workers.get(id)
    }

    /// Folds one event in. Refuses an event that does not continue its run's
    /// log or names an unknown entity, so a corrupt store fails closed.
    pub fn apply(&mut self, event: &Event) -> Result<(), FoldError> {
        let fail =
            |reason: &str| FoldError { run: event.run_id.to_string(), cursor: event.cursor, reason: reason.to_owned() };
        let at = event.at_ms;
        if event.run_id.is_ownership() {
            return self.ownership.apply(event);
        }
        if event.run_id.is_system() {
            if event.cursor != self.system_cursor + 1 {
                return Err(fail("cursor does not continue the system log"));
            }
            self.system_cursor = event.cursor;
            return match &event.body {
                EventBody::ExecutorConnected {
                    executor_id,
                    capabilities,
                    host,
                    executor_kind,
                    executor_instance_id,
                } => {
                    self.executor_connected_at.insert(executor_id.clone(), at);
                    self.executor_starts.insert(executor_id.clone(), (*executor_kind, executor_instance_id.clone()));
                    self.executor_hosts.insert(executor_id.clone(), host.clone());
                    // An executor that names its browser in `hello` reaches it:
                    // its conversations' "cannot reach the browser" is over
                    // (what it reports next says how each page is).
                    if host.browser.is_some() {
                        let held = self
                            .workers
                            .values_mut()
                            .filter(|w| w.executor_id.as_ref() == Some(executor_id) && w.conversation.is_some());
                        for w in held {
                            w.last_error = w.last_error.filter(|e| !crate::schedule::waits_for_browser(*e));
                        }
                    }
                    // Each session says anew what its executor does.
                    for (capability, executors) in [
                        (protocol::executor::STEER, &mut self.steering_executors),
                        (protocol::executor::PARK, &mut self.parking_executors),
                        (protocol::executor::ROLLOVER, &mut self.rolling_executors),
                        (protocol::executor::MODEL, &mut self.model_executors),
                        (protocol::executor::EFFORT, &mut self.effort_executors),
                    ] {
                        if capabilities.iter().any(|c| c == capability) {
                            executors.insert(executor_id.clone());
                        } else {
                            executors.remove(executor_id);
                        }
                    }
                    Ok(())
                }
                EventBody::ExecutorDisconnected { .. } => Ok(()),
                _ => Err(fail("only executor events belong to the system log")),
            };
        }
        if let EventBody::RunCreated { title, root_worker_id } = &event.body {
            if event.cursor != 1 || self.runs.contains_key(&event.run_id) {
                return Err(fail("run.created is not the first event of a new run"));
            }
            self.runs.insert(
                event.run_id.clone(),
                Run {
                    id: event.run_id.clone(),
                    title: title.clone(),
                    state: RunState::Active,
                    root: root_worker_id.clone(),
                    cursor: 1,
                    created_at_ms: at,
                    updated_at_ms: at,
                    workers: Vec::new(),
                    paths: HashSet::new(),
                    continuation_default: ContinuationPolicy::default(),
                    attribution: protocol::Attribution::default(),
                },
            );
            return Ok(());
        }
        let run = self.runs.get_mut(&event.run_id).ok_or_else(|| fail("unknown run"))?;
        if event.cursor != run.cursor + 1 {
            return Err(fail("cursor does not continue the run's log"));
        }
        run.cursor = event.cursor;
        run.updated_at_ms = at;
        match &event.body {
            EventBody::RunCreated { .. } => unreachable!("handled above"),
            EventBody::RunStateChanged { from, to, .. } => {
                if run.state != *from {
                    return Err(fail("run.state_changed from a state the run is not in"));
                }
                run.state = *to;
            }
            EventBody::WorkerCreated { worker_id, path, parent_id, assignment } => {
                if self.workers.contains_key(worker_id) || !run.paths.insert(path.clone()) {
                    return Err(fail("worker.created for an existing worker or path"));
                }
                run.workers.push(worker_id.clone());
                self.workers.insert(
                    worker_id.clone(),
                    Worker {
                        id: worker_id.clone(),
                        run_id: event.run_id.clone(),
                        path: path.clone(),
                        parent: parent_id.clone(),
                        state: WorkerState::Created,
                        assignment: assignment.clone(),
                        followups: Vec::new(),
                        completions: Vec::new(),
                        attach_count: 0,
                        last_progress: None,
                        outcome: None,
                        created_at_ms: at,
                        updated_at_ms: at,
                        executor_id: None,
                        conversation: None,
                        conversation_created: false,
                        conversation_state: None,
                        state_checked_at_ms: at,
                        last_error: None,
                        page_since_ms: 0,
                        fenced: false,
                        continuity: Continuity::new(run.continuation_default, at),
                        parked: false,
                        reopen_failures: 0,
                        blocked: None,
                        turn_followups: None,
                        epoch: 0,
                        retired: Vec::new(),
                        capsule: None,
                        checkpoint: None,
                        rollover: None,
                        context_bytes: 0,
                        context_floor: 0,
                        model: None,
                        effort: None,
                    },
                );
            }
            EventBody::WorkerMessage { from, to, .. } => {
                for w in [from, to] {
                    touch(&mut self.workers, w, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                }
                // Speaking is progress; being spoken to is a reason for a turn.
                let bytes = match &event.body {
                    EventBody::WorkerMessage { body, .. } => body.len(),
                    _ => 0,
                };
                if let Some(sender) = self.workers.get_mut(from) {
                    sender.continuity.progressed(at);
                    sender.metered(bytes);
                }
                if let Some(recipient) = self.workers.get_mut(to).filter(|_| from != to) {
                    recipient.metered(bytes);
                }
                if let Some(recipient) = self.workers.get_mut(to).filter(|w| !w.state.is_terminal() && from != to) {
                    recipient.continuity.wake(Wake::Event { kind: event.body.kind().to_owned() });
                }
            }
            EventBody::WorkerStateChanged { worker_id, from, to, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                if w.state != *from {
                    return Err(fail("worker.state_changed from a state the worker is not in"));
                }
                w.state = *to;
                if to.is_terminal() {
                    w.continuity.ended();
                }
            }
            EventBody::WorkerAttached { worker_id, attach_count } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.attach_count = *attach_count;
                // What attach returned: the assignment and the follow-ups
                // (at most one response's worth).
                let returned = w.assignment.as_ref().map_or(0, |a| serde_json::to_vec(a).map_or(0, |v| v.len()))
                    + w.followups.iter().map(String::len).sum::<usize>();
                w.metered(returned.min(protocol::limits::RESPONSE_MAX));
                if w.context_floor == 0 {
                    w.context_floor = w.context_bytes;
                }
                w.last_error = w.last_error.filter(|e| !app_setup_state(*e));
            }
            EventBody::WorkerProgress { worker_id, summary, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.last_progress = Some(summary.clone());
                w.continuity.progressed(at);
                w.metered(summary.len());
            }
            EventBody::WorkerFollowup { worker_id, instructions, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.followups.push(instructions.clone());
                w.outcome = None;
            }
            EventBody::WorkerCompleted { worker_id, summary, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.outcome = Some(summary.clone());
                w.completions.push((w.followups.len() as u32, summary.clone()));
                w.metered(summary.len());
            }
            EventBody::WorkerFailed { worker_id, reason, .. } | EventBody::WorkerInterrupted { worker_id, reason } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.outcome = Some(reason.clone());
            }
            EventBody::CommandQueued { command_id, worker_id, intent, idempotency_key, not_before_ms } => {
                touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                if self.commands.contains_key(command_id) {
                    return Err(fail("command queued twice"));
                }
                self.commands.insert(
                    command_id.clone(),
                    QueuedCommand {
                        id: command_id.clone(),
                        worker_id: worker_id.clone(),
                        intent: intent.clone(),
                        idempotency_key: idempotency_key.clone(),
                        phase: CommandPhase::Queued,
                        executor_id: None,
                        outcome: None,
                        not_before_ms: *not_before_ms,
                    },
                );
                self.open_commands.push(command_id.clone());
            }
            EventBody::CommandDispatched { command_id, worker_id, executor_id } => {
                let c = self.commands.get_mut(command_id).ok_or_else(|| fail("unknown command"))?;
                c.phase = CommandPhase::Dispatched;
                c.executor_id = Some(executor_id.clone());
                let (sends, steers) = match c.intent {
                    CommandIntent::Send { steer, .. } => (true, steer),
                    _ => (false, false),
                };
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.executor_id.get_or_insert_with(|| executor_id.clone());
                if sends {
                    // A steer joins a turn that is already running.
                    let mid_turn = steers && w.conversation_state == Some(ConversationState::Generating);
                    w.continuity.send_dispatched(mid_turn);
                }
            }
            EventBody::CommandAcked { command_id, .. } => {
                let c = self.commands.get_mut(command_id).ok_or_else(|| fail("unknown command"))?;
                c.phase = CommandPhase::Acked;
            }
            EventBody::CommandCompleted { command_id, outcome, .. } => {
                let c = self.commands.get_mut(command_id).ok_or_else(|| fail("unknown command"))?;
                c.phase = CommandPhase::Completed;
                c.outcome = Some(outcome.clone());
                let refused_create = c.intent == CommandIntent::Create
                    && matches!(outcome, CommandOutcome::Error { code, .. } if code.is_host_state());
                let inspected = c.intent == CommandIntent::Inspect;
                let tab = match (&c.intent, outcome) {
                    (CommandIntent::Park, CommandOutcome::Ok { .. }) => Some(true),
                    (CommandIntent::Open, CommandOutcome::Ok { .. }) => Some(false),
                    _ => None,
                };
                let worker_id = c.worker_id.clone();
                self.open_commands.retain(|id| id != command_id);
                let sent =
                    matches!(c.intent, CommandIntent::Send { .. }) && matches!(outcome, CommandOutcome::Ok { .. });
                let finish = match outcome {
                    _ if sent => Finish::Submitted,
                    CommandOutcome::Error { code, .. } if code.outcome_uncertain() => Finish::Uncertain,
                    _ => Finish::Undelivered,
                };
                let sends = matches!(c.intent, CommandIntent::Send { .. });
                if let Some(w) = self.workers.get_mut(&worker_id) {
                    if sent || (c.intent == CommandIntent::Create && matches!(outcome, CommandOutcome::Ok { .. })) {
                        w.metered(PROMPT_BYTES);
                    }
                    // A prompt just went in: its turn is starting, though its
                    // page may still read idle (its busy report travels
                    // apart). Its tab's idle grace starts again, or it could
                    // be parked under the turn it just began.
                    if sent {
                        w.updated_at_ms = at;
                    }
                    if let Some(parked) = tab {
                        w.parked = parked;
                        w.reopen_failures = 0;
                    } else if c.intent == CommandIntent::Open && w.parked {
                        w.reopen_failures = w.reopen_failures.saturating_add(1);
                    }
                    let ended_early = sends && w.continuity.send_finished();
                    if w.continuity.in_flight.as_ref() == Some(command_id) {
                        w.continuity.command_finished(finish, ended_early, at);
                    }
                    // A submitted prompt starts a new turn: every wake that came
                    // while it was pending rides with it (seed §10.2, step 8),
                    // unless that turn already ran and ended meanwhile.
                    if sent && !ended_early {
                        w.continuity.intent = None;
                        w.continuity.idle_since_ms = None;
                    }
                }
                if inspected && let Some(w) = self.workers.get_mut(&worker_id) {
                    w.state_checked_at_ms = at;
                    // The page answered (its state came before this result)
                    // and still shows the open turn ended: it did end. An
                    // inspect that failed confirmed nothing.
                    let working = matches!(w.state, WorkerState::Running | WorkerState::Waiting);
                    let answered = matches!(outcome, CommandOutcome::Ok { .. });
                    if working && answered && w.continuity.turn_unconfirmed(w.conversation_state) {
                        w.continuity.went_idle(at);
                    }
                }
                // The executor closed the tab of a create refused for a setup
                // state: the worker is nobody's until a retry is dispatched
                // (a rolling worker stays with the executor that held it).
                if refused_create
                    && let Some(w) =
                        self.workers.get_mut(&worker_id).filter(|w| w.conversation.is_none() && !w.rolling())
                {
                    w.executor_id = None;
                }
            }
            EventBody::CommandCancelled { command_id, .. } => {
                let c = self.commands.get_mut(command_id).ok_or_else(|| fail("unknown command"))?;
                let sends = matches!(c.intent, CommandIntent::Send { .. }) && c.phase != CommandPhase::Queued;
                c.phase = CommandPhase::Cancelled;
                let worker_id = c.worker_id.clone();
                self.open_commands.retain(|id| id != command_id);
                if let Some(w) = self.workers.get_mut(&worker_id) {
                    if sends {
                        w.continuity.send_finished();
                    }
                    if w.continuity.in_flight.as_ref() == Some(command_id) {
                        w.continuity.in_flight = None;
                    }
                }
            }
            EventBody::ConversationCreated { worker_id, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.conversation_created = true;
            }
            EventBody::ConversationBound { worker_id, conversation_id, url, executor_id } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.conversation = Some((conversation_id.clone(), url.clone()));
                w.executor_id = Some(executor_id.clone());
                w.state_checked_at_ms = at;
            }
            EventBody::ConversationProgressed { worker_id } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.continuity.page_progressed(at);
            }
            EventBody::ConversationStateChanged { worker_id, state, error } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                if w.conversation_state != Some(*state) || w.last_error != *error {
                    w.page_since_ms = at;
                }
                w.conversation_state = Some(*state);
                w.state_checked_at_ms = at;
                match state {
                    // Waiting counts: once its answer comes, the idle turn is resumed at once.
                    ConversationState::Idle if matches!(w.state, WorkerState::Running | WorkerState::Waiting) => {
                        w.continuity.went_idle(at)
                    }
                    ConversationState::Generating => w.continuity.went_busy(at),
                    // "Message delivery timed out" or "Too many requests": the
                    // turn ended without an answer; a recovery is asked for
                    // (Retry is never clicked, the dialog never dismissed).
                    ConversationState::Error
                        if matches!(
                            error,
                            Some(protocol::ErrorCode::DeliveryTimeout | protocol::ErrorCode::RateLimited)
                        ) && matches!(w.state, WorkerState::Running | WorkerState::Waiting) =>
                    {
                        w.continuity.turn_failed(at)
                    }
                    _ => {}
                }
                if *state != ConversationState::Generating {
                    w.continuity.busy_since_ms = None;
                    w.continuity.page_progress_at_ms = None;
                }
                // An app setup state outlives page state changes: it clears when the
                // worker attaches (its MCP peer reached us), or with a new error.
                if error.is_some() || !w.last_error.is_some_and(app_setup_state) {
                    w.last_error = *error;
                }
            }
            EventBody::ConversationError { worker_id, code, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.last_error = Some(*code);
                if *code == protocol::ErrorCode::ConversationIdentityDrift {
                    w.fenced = true;
                }
            }
            EventBody::ConversationClosed { worker_id } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.conversation_state = Some(ConversationState::Closed);
                w.state_checked_at_ms = at;
                // Its conversation lives on without a tab (a person closed
                // it, the browser restarted): as a parked one, it is opened
                // again in its exact conversation before its next prompt.
                w.parked |= w.conversation.is_some();
                // The tab is gone: "cannot reach the browser" no longer says
                // anything about it (its slot's lost health does).
                w.last_error = w.last_error.filter(|e| !crate::schedule::waits_for_browser(*e));
            }
            EventBody::RuntimeSlotProvisioning { worker_id, .. }
            | EventBody::RuntimeSlotAdmitted { worker_id, .. }
            | EventBody::RuntimeSlotHealth { worker_id, .. } => {
                touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
            }
            EventBody::OwnershipClaimed { .. }
            | EventBody::OwnershipConversationBound { .. }
            | EventBody::OwnershipResumed { .. }
            | EventBody::OwnershipHeartbeat { .. }
            | EventBody::OwnershipHandoffStarted { .. }
            | EventBody::OwnershipHandoffCompleted { .. }
            | EventBody::OwnershipReclaimed { .. }
            | EventBody::OwnershipReleased { .. }
            | EventBody::OwnershipWipPreserved { .. }
            | EventBody::OwnershipSubmitted { .. }
            | EventBody::OwnershipLanded { .. }
            | EventBody::OwnershipRemoved { .. } => {
                return Err(fail("ownership events belong to the ownership log"));
            }
            EventBody::ExecutorConnected { .. } | EventBody::ExecutorDisconnected { .. } => {
                return Err(fail("executor events belong to the system log"));
            }
            EventBody::ContinuationPolicyChanged { worker_id: None, policy } => run.continuation_default = *policy,
            EventBody::ContinuationPolicyChanged { worker_id: Some(worker_id), policy } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.continuity.policy = *policy;
            }
            EventBody::WorkerHoldChanged { worker_id, hold, reason, ask } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.continuity.hold = *hold;
                w.continuity.hold_reason = hold.and(reason.clone());
                w.continuity.hold_ask = hold.and(ask.clone());
                w.continuity.hold_since_ms = hold.map(|_| at);
                // Declaring a wait, or being released from one, is progress
                // (seed §16.1); the guard's own pause is not.
                if *hold != Some(protocol::continuity::Hold::Stalled) {
                    w.continuity.progressed(at);
                }
            }
            EventBody::ContinuationRequested { worker_id, wake } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.continuity.wake(wake.clone());
            }
            EventBody::ExecutionScheduled { worker_id, attempt, command_id, reason, .. } => {
                use protocol::continuity::AttemptReason;
                if matches!(reason, AttemptReason::AutoResume | AttemptReason::Recovery) {
                    self.last_auto_attempt_at_ms = Some(at);
                }
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                if *attempt != w.continuity.attempts + 1 {
                    return Err(fail("execution.scheduled out of sequence"));
                }
                w.continuity.scheduled(command_id.clone());
                w.continuity.last_reason = Some(*reason);
                w.continuity.auto_resumes += u32::from(*reason == AttemptReason::AutoResume);
            }
            EventBody::ContinuationStalled { worker_id, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.continuity.warned = true;
            }
            EventBody::ContinuationTurnStalled { worker_id, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.continuity.turn_stall_reported = true;
            }
            EventBody::ContinuationRateLimited { worker_id, .. } => {
                touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                self.rate_limited_at_ms = Some(at);
            }
            EventBody::RunAttributionSet { policy } => run.attribution = *policy,
            EventBody::WorkerBlockChanged { worker_id, blocked, by, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.blocked = blocked.then_some(*by);
            }
            EventBody::WorkerModelPinned { worker_id, model, effort } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.model = Some(model.clone());
                w.effort = effort.clone();
            }
            EventBody::WorkerCheckpointed { worker_id, note } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.checkpoint = Some((note.clone(), at));
                w.metered(note.len());
            }
            EventBody::WorkerRolloverRequested { worker_id, reason } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.rollover = Some((*reason, at));
            }
            EventBody::WorkerRolledOver { worker_id, retired, capsule } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                if capsule.epoch != w.epoch + 1 {
                    return Err(fail("worker.rolled_over out of sequence"));
                }
                w.rolled_over(retired.clone(), capsule.clone(), at);
            }
            EventBody::CallerAttributed { worker_id, request_id, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.turn_followups = Some(w.followups.len() as u32);
                if self.attributed_requests.insert(request_id.clone(), worker_id.clone()).is_some() {
                    return Err(fail("a request id attributed twice"));
                }
                let kept = self.attributed_by_worker.entry(worker_id.clone()).or_default();
                kept.push_back(request_id.clone());
                if kept.len() > ATTRIBUTED_KEPT
                    && let Some(oldest) = kept.pop_front()
                {
                    self.attributed_requests.remove(&oldest);
                }
            }
        }
        // The operator surfaces show each worker's last continuity events (seed §17.3).
        if let Some(w) = continuity_subject(&event.body).and_then(|id| self.workers.get_mut(id)) {
            w.continuity.noted(event.body.kind(), at);
        }
        self.runtime.apply(event).map_err(|e| fail(&e.to_string()))?;
        Ok(())
    }
}

/// The worker an Execution Continuity event is about, if it is one.
fn continuity_subject(body: &EventBody) -> Option<&WorkerId> {
    match body {
        EventBody::WorkerHoldChanged { worker_id, .. }
        | EventBody::ContinuationRequested { worker_id, .. }
        | EventBody::ExecutionScheduled { worker_id, .. }
        | EventBody::ContinuationStalled { worker_id, .. }
        | EventBody::ContinuationTurnStalled { worker_id, .. }
        | EventBody::ContinuationRateLimited { worker_id, .. }
        | EventBody::ContinuationPolicyChanged { worker_id: Some(worker_id), .. } => Some(worker_id),
        _ => None,
    }
}

/// The worker of `run`, with its change time moved to `at`.
fn touch<'a>(
    workers: &'a mut HashMap<WorkerId, Worker>,
    id: &WorkerId,
    run: &RunId,
    at: u64,
) -> Option<&'a mut Worker> {
    let w = workers.get_mut(id).filter(|w| &w.run_id == run)?;
    w.updated_at_ms = at;
    Some(w)
}

/// The ChatGPT app's setup states: they stay on a worker until its MCP peer
/// reaches the daemon (an attach), whatever its page shows meanwhile.
fn app_setup_state(code: protocol::ErrorCode) -> bool {
    use protocol::ErrorCode::{HostAppBindingNotReady, HostAppDisabled, HostAppStale};
    matches!(code, HostAppBindingNotReady | HostAppDisabled | HostAppStale)
}
