//! Guarded transitions. [`decide`] reads the state and a command and returns
//! the events that record its effect, or a typed error; it never mutates,
//! never reads a clock and never does IO. New ids come in with the command,
//! so the same inputs always give the same events.
//!
//! # Layout
//! One file per command family, each deciding its own commands and holding
//! a table test (a state × a command → the events' kinds, or the refusal):
//! `run`, `worker` (reports fenced by their follow-up included), `message`,
//! `executor` (connections, dispatch, inspects, reports), `runtime` (the
//! pool), `continuity` (policies, holds, continue now, what falls due). This file holds the [`Request`] vocabulary, the routing, the guards
//! every family shares, and the table harness. A new family is one new file,
//! its commands in [`Request`] and one arm in [`decide`].

use protocol::executor::{CommandOutcome, ConversationState, ExecutorFrame, ExecutorKind, MachineFacts};
use protocol::limits::{ASSIGNMENT_MAX, ITEM_MAX, LIST_MAX, NAME_MAX, TEXT_MAX, TITLE_MAX, WORKERS_PER_RUN_MAX};
use protocol::{
    Assignment, CommandId, CommandIntent, ErrorCode, EventBody, MessageId, MessageKind, PromptRef, RunId, RunState,
    SlotHealth, WorkerId, WorkerState,
};

use crate::model::{CommandPhase, QueuedCommand, Run, State, Worker};

mod attribution;
mod continuity;
mod executor;
mod message;
mod ownership;
mod refusal;
mod rollover;
mod run;
mod runtime;
mod worker;

pub use executor::SEND_ATTEMPTS_MAX;
pub use message::broadcast_recipients;
pub use refusal::Refusal;
pub use runtime::{retire_protection, setup_refused};

/// A root the daemon launches into a conversation of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedRoot {
    /// What the run is for; root reads it when it attaches.
    pub assignment: Assignment,
    /// The id for its conversation-create command.
    pub create_command: CommandId,
}

/// A request to change the control plane, already authenticated: `actor` is
/// the worker whose capability the caller presented.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Create a run and its root worker.
    CreateRun {
        /// The new run.
        run_id: RunId,
        /// Its root worker.
        root_id: WorkerId,
        /// Human title.
        title: String,
        /// Launch root in a managed conversation of its own (seed §13.4),
        /// so the daemon can resume it like any worker; `None`: the caller
        /// is root and keeps its own conversation.
        managed: Option<ManagedRoot>,
        /// Whether its managed conversations' calls must be attributed.
        attribution: protocol::Attribution,
    },
    /// Root creates a worker and asks for its conversation to be launched.
    Spawn {
        /// Must be root.
        actor: WorkerId,
        /// The new worker.
        worker_id: WorkerId,
        /// Last path segment, `[a-z0-9_-]`.
        name: String,
        /// Its task.
        assignment: Assignment,
        /// The id for its conversation-create command.
        create_command: CommandId,
        /// The model to pin it to, as the picker labels it.
        model: Option<String>,
        /// The thinking effort to pin with the model (never without one).
        effort: Option<String>,
    },
    /// A worker's conversation attached with its attach identity.
    Attach {
        /// The worker.
        worker_id: WorkerId,
    },
    /// A worker reports progress.
    Progress {
        /// The reporting worker.
        actor: WorkerId,
        /// What happened.
        summary: String,
        /// 0–100.
        percent: Option<u8>,
    },
    /// A worker sends a message.
    Send {
        /// Sender.
        actor: WorkerId,
        /// The new message.
        message_id: MessageId,
        /// Recipient.
        to: WorkerId,
        /// Kind.
        kind: MessageKind,
        /// Body.
        body: String,
        /// A message addressed to the sender that this one answers.
        in_reply_to: Option<MessageId>,
        /// That message's run and recipient, as the store's index has them
        /// (read before deciding: the state keeps no messages).
        replied: Option<(RunId, WorkerId)>,
    },
    /// A person's answer, sent as root, to a worker that asks a person:
    /// the message, the worker's wait released, in one commit. Decided
    /// against the state the commit sees, so of any number of answers to
    /// one question (dashboard tabs, the popup, any keys) exactly one goes
    /// in; the others are refused.
    Answer {
        /// Must be root.
        actor: WorkerId,
        /// The new message.
        message_id: MessageId,
        /// The asking worker.
        to: WorkerId,
        /// The answer.
        body: String,
    },
    /// Root sends one message to every unfinished worker.
    Broadcast {
        /// Must be root.
        actor: WorkerId,
        /// One fresh id per recipient, used in order.
        message_ids: Vec<MessageId>,
        /// Kind.
        kind: MessageKind,
        /// Body.
        body: String,
    },
    /// A worker reports completion. Root completing completes the run.
    Complete {
        /// The worker.
        actor: WorkerId,
        /// What was delivered.
        summary: String,
        /// Artifact references.
        artifacts: Vec<String>,
    },
    /// A worker reports failure. Root failing fails the run.
    Fail {
        /// The worker.
        actor: WorkerId,
        /// Why.
        reason: String,
    },
    /// Progress, completion or failure on the work of follow-up `followup`
    /// (0: the original assignment). Refused as superseded when the worker
    /// has a newer follow-up, so a late report from an earlier turn never
    /// closes newer work. A report that names none is judged by its turn:
    /// the follow-ups the worker had when its conversation's current turn
    /// began (caller attribution knows the turn), so an unnamed report
    /// from a turn older than the newest follow-up is that older work.
    Answering {
        /// The follow-up number the work answers, if the report named one.
        followup: Option<u32>,
        /// `Progress`, `Complete` or `Fail`.
        report: Box<Request>,
    },
    /// Root stops a worker's work.
    Interrupt {
        /// Must be root.
        actor: WorkerId,
        /// The worker to stop.
        target: WorkerId,
        /// Why.
        reason: String,
    },
    /// Root gives a worker further work, reopening it.
    Followup {
        /// Must be root.
        actor: WorkerId,
        /// The worker.
        target: WorkerId,
        /// What to do next.
        instructions: String,
        /// The id for the wake command that delivers it.
        send_command: CommandId,
    },
    /// Root cancels the run and every unfinished worker.
    CancelRun {
        /// Must be root.
        actor: WorkerId,
        /// Why.
        reason: String,
    },
    /// Root's pool reserves slots before any external effect: per slot a
    /// worker, its provisioning record and its (paced) create command.
    RuntimeProvision {
        /// Must be root.
        actor: WorkerId,
        /// The provisioning operation.
        operation_id: String,
        /// The slots to provision.
        slots: Vec<ProvisionSlot>,
        /// Unadmitted records expire at this time.
        expires_at_ms: u64,
    },
    /// A slot's conversation proves its MCP peer reached us.
    RuntimeAdmit {
        /// The worker its attach identity names.
        worker_id: WorkerId,
        /// The calling MCP peer.
        peer_fingerprint: String,
        /// Now.
        now_ms: u64,
    },
    /// Root reopens a lost slot's exact conversation.
    RuntimeRecover {
        /// Must be root.
        actor: WorkerId,
        /// The slot.
        slot: u32,
        /// The id for the open command.
        command_id: CommandId,
    },
    /// Root retires a safe idle slot: fence, then close its tab.
    RuntimeRetire {
        /// Must be root.
        actor: WorkerId,
        /// The slot.
        slot: u32,
        /// The id for the close command.
        command_id: CommandId,
    },
    /// An executor authenticated.
    ExecutorConnected {
        /// Stable carrier identity.
        executor_id: String,
        /// This process start.
        executor_instance_id: String,
        /// Carrier kind.
        executor_kind: ExecutorKind,
        /// Declared capabilities.
        capabilities: Vec<String>,
        /// Host facts.
        host: MachineFacts,
    },
    /// An executor's session ended.
    ExecutorDisconnected {
        /// Stable carrier identity.
        executor_id: String,
        /// The session's process start.
        executor_instance_id: String,
        /// The close reason.
        reason: String,
    },
    /// Assign a queued command to an executor, before it is sent.
    Dispatch {
        /// The command.
        command_id: CommandId,
        /// The executor.
        executor_id: String,
    },
    /// Root sets a worker's continuation policy, or (no `target`) the run's default.
    SetContinuation {
        /// Root.
        actor: WorkerId,
        /// The worker; absent for the run's default.
        target: Option<WorkerId>,
        /// The whole policy.
        policy: protocol::continuity::ContinuationPolicy,
    },
    /// Holds a worker's automatic turns: its own wait for a person or a
    /// dependency (the worker itself or root), or a pause (root).
    SetHold {
        /// Who asks.
        actor: WorkerId,
        /// The worker held.
        target: WorkerId,
        /// Which hold.
        hold: protocol::continuity::Hold,
        /// Why (the question, the dependency).
        reason: String,
        /// A question's choices and context (a wait for a person only).
        ask: Option<protocol::operator::Ask>,
    },
    /// Releases a worker's hold (`worker_resume`): root, or the worker itself.
    ReleaseHold {
        /// Who asks.
        actor: WorkerId,
        /// The worker released.
        target: WorkerId,
    },
    /// Root asks for one turn of a worker now (clearing a pause, never a
    /// wait for a person or a dependency; never a second one in flight).
    ContinueNow {
        /// Root.
        actor: WorkerId,
        /// The worker.
        target: WorkerId,
    },
    /// What the continuity rules found due (see `crate::continuity::due`).
    ContinuityDue {
        /// The attempts to schedule and the stall guard's findings.
        actions: Vec<crate::continuity::Action>,
    },
    /// Queue each spawned worker's create again: the last one was refused
    /// for want of a browser (see `crate::schedule`).
    Relaunch {
        /// (worker, the id for its new create command) pairs.
        relaunches: Vec<(WorkerId, CommandId)>,
    },
    /// Queue the parks and reopens of tab capacity (see `crate::tabs`).
    Tabs {
        /// (worker, the id for its park command) pairs.
        parks: Vec<(WorkerId, CommandId)>,
        /// (worker, the id for its open command) pairs.
        opens: Vec<(WorkerId, CommandId)>,
    },
    /// Queue an inspect of each worker's conversation (see `crate::schedule`).
    Recheck {
        /// (worker, the id for its inspect command) pairs.
        inspections: Vec<(WorkerId, CommandId)>,
    },
    /// One round of the executor loop: the dispatches the queue allows, in
    /// one commit.
    Round {
        /// (command, executor) pairs, each as [`Request::Dispatch`].
        dispatches: Vec<(CommandId, String)>,
    },
    /// An executor reported something about its commands or conversations.
    ExecutorReport {
        /// The reporting executor (authenticated by its session).
        executor_id: String,
        /// What it said (never `hello` or `heartbeat`).
        frame: ExecutorFrame,
    },
    /// A worker's MCP peer showed a host or setup state (its ChatGPT app
    /// lists an older tool catalog): recorded where `runtime_status` reads
    /// its readiness reasons, never as the worker's failure.
    HostState {
        /// The worker whose conversation called.
        worker_id: WorkerId,
        /// A host state (`ErrorCode::is_host_state`).
        code: ErrorCode,
        /// Detail for the operator.
        detail: String,
    },
    /// Root blocks or unblocks a worker's chat.
    Block {
        /// Root.
        actor: WorkerId,
        /// The worker whose chat it is.
        worker_id: WorkerId,
        /// Blocked now or not.
        blocked: bool,
        /// Why, when given.
        reason: Option<String>,
    },
    /// A call was proven to come from the worker's own conversation: its
    /// request id (its turn's) becomes the worker's current one, and every
    /// id it attributed before is used up.
    Attributed {
        /// The worker.
        worker_id: WorkerId,
        /// The call's request id.
        request_id: String,
        /// The tool called.
        tool: String,
    },
    /// A worker records its own checkpoint (`worker_checkpoint`).
    Checkpoint {
        /// The worker.
        actor: WorkerId,
        /// What is done and what is next.
        note: String,
    },
    /// Root asks a worker (or, a managed root, itself) to roll over to a
    /// fresh conversation: the worker is prompted to checkpoint first.
    AskRollover {
        /// Root.
        actor: WorkerId,
        /// The worker.
        target: WorkerId,
        /// The id for the checkpoint prompt's command.
        command_id: CommandId,
    },
    /// What `crate::rollover::due` found: rollovers, each with the id for
    /// its create, and checkpoint requests, each with its prompt's id.
    Rollover {
        /// (worker, why, create command) triples.
        rolls: Vec<(WorkerId, protocol::rollover::RolloverReason, CommandId)>,
        /// (worker, why, prompt command) triples.
        asks: Vec<(WorkerId, protocol::rollover::RolloverReason, CommandId)>,
    },
    /// A change to worktree ownership, by a worker proven to be `actor`
    /// (decided in `ownership.rs`).
    Ownership {
        /// The caller.
        actor: WorkerId,
        /// The change, with the Git facts the adapter read.
        op: crate::ownership::Op,
        /// The shell's clock, for leases (decide reads none).
        now_ms: u64,
    },
}

/// Caller attribution and blocked chats (decided in `attribution.rs`).
impl Request {
    /// Root blocks (`blocked`) or unblocks the chat of `worker_id`.
    pub fn block(actor: WorkerId, worker_id: WorkerId, blocked: bool, reason: Option<String>) -> Request {
        Request::Block { actor, worker_id, blocked, reason }
    }
}

/// One slot of a provisioning operation.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvisionSlot {
    /// The runtime slot.
    pub slot: u32,
    /// The worker reserved for it.
    pub worker_id: WorkerId,
    /// Its parked-worker assignment.
    pub assignment: Assignment,
    /// The id for its create command.
    pub command_id: CommandId,
    /// Pacing: not created before this time.
    pub not_before_ms: u64,
    /// The model to pin its worker to, as the picker labels it.
    pub model: Option<String>,
}

/// The events that record `command`'s effect on `state`, or why it is refused.
/// Each family of commands is decided in its own file. A conversation bound
/// here also binds the worktree records its worker holds, in the same
/// commit (`ownership.conversation_bound`): a provisional record converges,
/// never a second one.
pub fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    let mut events = route(state, command)?;
    let bound = ownership::converge(state, &events);
    events.extend(bound);
    Ok(events)
}

fn route(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::CreateRun { .. } | Request::CancelRun { .. } => run::decide(state, command),
        Request::Spawn { .. }
        | Request::Attach { .. }
        | Request::Progress { .. }
        | Request::Complete { .. }
        | Request::Answering { .. }
        | Request::Fail { .. }
        | Request::Interrupt { .. }
        | Request::Followup { .. } => worker::decide(state, command),
        Request::Send { .. } | Request::Answer { .. } | Request::Broadcast { .. } => message::decide(state, command),
        Request::ExecutorConnected { .. }
        | Request::ExecutorDisconnected { .. }
        | Request::Dispatch { .. }
        | Request::Recheck { .. }
        | Request::Tabs { .. }
        | Request::Relaunch { .. }
        | Request::Round { .. }
        | Request::ExecutorReport { .. }
        | Request::HostState { .. } => executor::decide(state, command),
        Request::RuntimeProvision { .. }
        | Request::RuntimeAdmit { .. }
        | Request::RuntimeRecover { .. }
        | Request::RuntimeRetire { .. } => runtime::decide(state, command),
        Request::SetContinuation { .. }
        | Request::SetHold { .. }
        | Request::ReleaseHold { .. }
        | Request::ContinueNow { .. }
        | Request::ContinuityDue { .. } => continuity::decide(state, command),
        Request::Block { .. } | Request::Attributed { .. } => attribution::decide(state, command),
        Request::Checkpoint { .. } | Request::AskRollover { .. } | Request::Rollover { .. } => {
            rollover::decide(state, command)
        }
        Request::Ownership { .. } => ownership::decide(state, command),
    }
}

/// Drops the still-queued commands of `workers`; dispatched ones stay for
/// their executor to settle.
fn cancel_queued<'a>(state: &State, workers: impl IntoIterator<Item = &'a WorkerId>) -> Vec<EventBody> {
    let workers: Vec<&WorkerId> = workers.into_iter().collect();
    state
        .open_commands
        .iter()
        .filter_map(|id| state.commands.get(id))
        .filter(|c| c.phase == CommandPhase::Queued && workers.contains(&&c.worker_id))
        .map(|c| EventBody::CommandCancelled { command_id: c.id.clone(), worker_id: c.worker_id.clone() })
        .collect()
}

fn state_change(worker: &WorkerId, from: WorkerState, to: WorkerState, reason: Option<&str>) -> EventBody {
    EventBody::WorkerStateChanged { worker_id: worker.clone(), from, to, reason: reason.map(str::to_owned) }
}

/// The actor and its run; the actor must exist.
fn acting<'a>(state: &'a State, actor: &WorkerId) -> Result<(&'a Run, &'a Worker), Refusal> {
    let worker = state.worker(actor).ok_or_else(|| Refusal::NoWorker(actor.clone()))?;
    let run = state.runs.get(&worker.run_id).ok_or_else(|| Refusal::NoRun(worker.run_id.clone()))?;
    Ok((run, worker))
}

/// The actor, which must be its run's root.
fn root_actor<'a>(state: &'a State, actor: &WorkerId) -> Result<(&'a Run, &'a Worker), Refusal> {
    let (run, worker) = acting(state, actor)?;
    if !worker.is_root() {
        return Err(Refusal::RootOnly);
    }
    Ok((run, worker))
}

/// A non-root worker of `run`.
fn child_of_run<'a>(state: &'a State, run: &Run, id: &WorkerId) -> Result<&'a Worker, Refusal> {
    let worker = state.worker(id).filter(|w| w.run_id == run.id).ok_or_else(|| Refusal::NoWorkerInRun(id.clone()))?;
    if worker.is_root() {
        return Err(Refusal::RootAsTarget);
    }
    Ok(worker)
}

/// New work may start only in an active run.
fn require_active(run: &Run) -> Result<(), Refusal> {
    match run.state {
        RunState::Active => Ok(()),
        RunState::Completing | RunState::Completed | RunState::Failed | RunState::Cancelled => {
            Err(Refusal::RunNotActive(run.state))
        }
    }
}

/// Reporting and messaging continue while a run is completing.
fn require_open(run: &Run) -> Result<(), Refusal> {
    match run.state {
        RunState::Active | RunState::Completing => Ok(()),
        RunState::Completed | RunState::Failed | RunState::Cancelled => Err(Refusal::RunNotActive(run.state)),
    }
}

/// Only a working worker reports, messages, completes or fails.
fn require_working(worker: &Worker) -> Result<(), Refusal> {
    match worker.state {
        WorkerState::Running | WorkerState::Waiting => Ok(()),
        WorkerState::Created
        | WorkerState::LaunchRequested
        | WorkerState::Launching
        | WorkerState::Completed
        | WorkerState::Failed
        | WorkerState::Cancelled
        | WorkerState::LaunchFailed => Err(Refusal::WorkerIs(worker.state)),
    }
}

fn unfinished_children<'a>(
    state: &'a State,
    run: &'a Run,
    except: &'a WorkerId,
) -> impl Iterator<Item = &'a Worker> + 'a {
    run.workers
        .iter()
        .filter(move |id| *id != except)
        .filter_map(|id| state.worker(id))
        .filter(|w| !w.is_root() && !w.state.is_terminal())
}

fn cancel_children(state: &State, run: &Run, root: &WorkerId, reason: &str) -> Vec<EventBody> {
    unfinished_children(state, run, root)
        .map(|w| state_change(&w.id, w.state, WorkerState::Cancelled, Some(reason)))
        .collect()
}

/// When root has completed and `finishing` was the last unfinished worker,
/// the run completes.
fn close_if_last(state: &State, run: &Run, finishing: &WorkerId) -> Option<EventBody> {
    (run.state == RunState::Completing && unfinished_children(state, run, finishing).next().is_none()).then(|| {
        EventBody::RunStateChanged {
            from: RunState::Completing,
            to: RunState::Completed,
            reason: Some("last worker finished".into()),
        }
    })
}

fn check_text(field: &'static str, text: &str, max: usize) -> Result<(), Refusal> {
    if text.len() > max {
        return Err(Refusal::TooLarge { field, len: text.len(), max });
    }
    Ok(())
}

fn check_list(field: &'static str, items: &[String]) -> Result<(), Refusal> {
    if items.len() > LIST_MAX {
        return Err(Refusal::TooLarge { field, len: items.len(), max: LIST_MAX });
    }
    items.iter().try_for_each(|item| check_text(field, item, ITEM_MAX))
}

fn check_assignment(a: &Assignment) -> Result<(), Refusal> {
    if a.objective.trim().is_empty() {
        return Err(Refusal::EmptyObjective);
    }
    for text in a.texts() {
        check_text("assignment", text, TEXT_MAX)?;
    }
    for list in a.lists() {
        check_list("assignment", list)?;
    }
    let len = serde_json::to_vec(a).map_or(usize::MAX, |json| json.len());
    if len > ASSIGNMENT_MAX {
        return Err(Refusal::TooLarge { field: "assignment", len, max: ASSIGNMENT_MAX });
    }
    Ok(())
}

/// Table tests, one table per family (in its file): a state built by
/// deciding and folding commands, then one command, and the kinds of the
/// events it decides (or the code of its refusal).
#[cfg(test)]
mod table {
    use std::collections::HashMap;

    use protocol::Event;

    use super::*;

    /// What a row expects: the decided events' kinds in order, or a refusal.
    pub(super) type Expect = Result<&'static [&'static str], ErrorCode>;

    /// A state built through `decide` and the fold, as the plane builds it.
    pub(super) struct Given {
        pub state: State,
        pub run: RunId,
        pub root: WorkerId,
        cursors: HashMap<RunId, u64>,
        next: u8,
    }

    impl Given {
        /// A run with its root.
        pub fn run() -> Self {
            let mut given = Given {
                state: State::default(),
                run: RunId::from_uuid_bytes([0xA0; 16]),
                root: WorkerId::from_uuid_bytes([0xA1; 16]),
                cursors: HashMap::new(),
                next: 1,
            };
            let (run_id, root_id) = (given.run.clone(), given.root.clone());
            given.apply(Request::CreateRun {
                run_id,
                root_id,
                title: "table".into(),
                managed: None,
                attribution: protocol::Attribution::Required,
            });
            given
        }

        /// Another run with its root, made the current one (what later
        /// commands spawn into); the previous run and root are returned.
        pub fn another_run(&mut self) -> (RunId, WorkerId) {
            let (run_id, root_id) = (RunId::from_uuid_bytes(self.id()), WorkerId::from_uuid_bytes(self.id()));
            let previous =
                (std::mem::replace(&mut self.run, run_id.clone()), std::mem::replace(&mut self.root, root_id.clone()));
            self.apply(Request::CreateRun {
                run_id,
                root_id,
                title: "another".into(),
                managed: None,
                attribution: protocol::Attribution::Required,
            });
            previous
        }

        /// A fresh 16-byte id.
        pub fn id(&mut self) -> [u8; 16] {
            self.next += 1;
            [self.next; 16]
        }

        /// Decides and folds `command`; panics if it is refused.
        pub fn apply(&mut self, command: Request) -> Vec<EventBody> {
            let bodies = decide(&self.state, &command).unwrap_or_else(|e| panic!("given {command:?}: {e}"));
            for body in &bodies {
                let run = match body {
                    EventBody::ExecutorConnected { .. } | EventBody::ExecutorDisconnected { .. } => RunId::system(),
                    _ if body.ownership().is_some() => RunId::ownership(),
                    _ => self.run.clone(),
                };
                let cursor = self.cursors.entry(run.clone()).or_default();
                *cursor += 1;
                let event = Event { cursor: *cursor, run_id: run, at_ms: 1_000 + *cursor, body: body.clone() };
                self.state.apply(&event).unwrap_or_else(|e| panic!("fold {body:?}: {e}"));
            }
            bodies
        }

        /// A spawned worker (its create queued, not yet dispatched).
        pub fn spawned(&mut self, name: &str) -> WorkerId {
            let (worker_id, create_command) =
                (WorkerId::from_uuid_bytes(self.id()), CommandId::from_uuid_bytes(self.id()));
            let assignment = Assignment::from_objective(format!("{name}'s task"));
            let actor = self.root.clone();
            self.apply(Request::Spawn {
                actor,
                worker_id: worker_id.clone(),
                name: name.into(),
                assignment,
                create_command,
                model: None,
                effort: None,
            });
            worker_id
        }

        /// A spawned worker whose conversation attached.
        pub fn attached(&mut self, name: &str) -> WorkerId {
            let worker = self.spawned(name);
            self.apply(Request::Attach { worker_id: worker.clone() });
            worker
        }

        /// The worker's open command (the newest one).
        pub fn open_command(&self, worker: &WorkerId) -> CommandId {
            self.state
                .open_commands
                .iter()
                .rev()
                .find(|id| self.state.commands[*id].worker_id == *worker)
                .cloned()
                .expect("an open command")
        }

        /// A worker whose create `executor` performed: dispatched, acked, bound, idle.
        pub fn created(&mut self, name: &str, executor: &str) -> WorkerId {
            let worker = self.spawned(name);
            let command_id = self.open_command(&worker);
            self.apply(Request::Dispatch { command_id: command_id.clone(), executor_id: executor.into() });
            let conversation: protocol::ConversationId =
                format!("0196b2c4-8e1f-7a3b-9c2d-{:012x}", self.id()[0]).parse().expect("a uuid");
            let report = |frame| Request::ExecutorReport { executor_id: executor.into(), frame };
            self.apply(report(ExecutorFrame::Ack { command_id: command_id.clone() }));
            self.apply(report(ExecutorFrame::ConversationBound {
                worker_id: worker.clone(),
                conversation_id: conversation.clone(),
                url: format!("https://chatgpt.com/c/{conversation}"),
            }));
            let outcome = CommandOutcome::Ok { conversation_id: Some(conversation) };
            self.apply(report(ExecutorFrame::Result { command_id, outcome }));
            worker
        }
    }

    /// Runs one table: each row's command against its state.
    pub(super) fn check(rows: Vec<(&str, Given, Request, Expect)>) {
        for (name, given, command, expect) in rows {
            let got = decide(&given.state, &command).map_err(|e| e.code());
            let kinds: Result<Vec<&str>, ErrorCode> = got.map(|events| events.iter().map(EventBody::kind).collect());
            assert_eq!(kinds, expect.map(<[&str]>::to_vec), "row {name:?}");
        }
    }
}
