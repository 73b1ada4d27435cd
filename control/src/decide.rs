//! Guarded transitions. [`decide`] reads the state and a command and returns
//! the events that record its effect, or a typed error; it never mutates,
//! never reads a clock and never does IO. New ids come in with the command,
//! so the same inputs always give the same events.

use protocol::executor::{CommandOutcome, ConversationState, ExecutorFrame, ExecutorKind, HostFacts};
use protocol::limits::{ASSIGNMENT_MAX, ITEM_MAX, LIST_MAX, NAME_MAX, TEXT_MAX, TITLE_MAX, WORKERS_PER_RUN_MAX};
use protocol::{
    Assignment, CommandId, CommandIntent, ErrorCode, EventBody, MessageId, MessageKind, PromptRef, RunId, RunState,
    SlotHealth, WorkerId, WorkerState,
};

use crate::error::Error;
use crate::model::{CommandPhase, QueuedCommand, Run, State, Worker};

/// A request to change the control plane, already authenticated: `actor` is
/// the worker whose capability the caller presented.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Create a run and its root worker.
    CreateRun {
        /// The new run.
        run_id: RunId,
        /// Its root worker.
        root_id: WorkerId,
        /// Human title.
        title: String,
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
    /// Progress, completion or failure that names the work it reports on:
    /// follow-up `followup` (0: the original assignment). Refused as
    /// superseded when the worker has a newer follow-up, so a late report
    /// from an earlier turn never closes newer work.
    Answering {
        /// The follow-up number the work answers.
        followup: u32,
        /// `Progress`, `Complete` or `Fail`.
        report: Box<Command>,
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
        host: HostFacts,
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
    /// Assign several queued commands (one dispatch round), in one commit.
    DispatchAll {
        /// (command, executor) pairs.
        dispatches: Vec<(CommandId, String)>,
    },
    /// Queue an inspect of each worker's conversation (see `crate::schedule`).
    Recheck {
        /// (worker, the id for its inspect command) pairs.
        inspections: Vec<(WorkerId, CommandId)>,
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
}

/// The events that record `command`'s effect on `state`, or why it is refused.
pub fn decide(state: &State, command: &Command) -> Result<Vec<EventBody>, Error> {
    match command {
        Command::CreateRun { run_id, root_id, title } => {
            check_text("title", title, TITLE_MAX)?;
            if state.runs.contains_key(run_id) || state.workers.contains_key(root_id) {
                return Err(Error::InvalidArgument("run or root id already exists".into()));
            }
            Ok(vec![
                EventBody::RunCreated { title: title.clone(), root_worker_id: root_id.clone() },
                EventBody::WorkerCreated {
                    worker_id: root_id.clone(),
                    path: "/root".into(),
                    parent_id: None,
                    assignment: None,
                },
                state_change(root_id, WorkerState::Created, WorkerState::Running, None),
            ])
        }
        Command::Spawn { actor, worker_id, name, assignment, create_command } => {
            let (run, root) = root_actor(state, actor)?;
            require_active(run)?;
            check_name(name)?;
            check_assignment(assignment)?;
            let path = format!("{}/{name}", root.path);
            if run.paths.contains(&path) {
                return Err(Error::InvalidArgument(format!("a worker named {path} already exists in this run")));
            }
            if run.workers.len() >= WORKERS_PER_RUN_MAX {
                return Err(Error::LimitReached(format!("a run holds at most {WORKERS_PER_RUN_MAX} workers")));
            }
            if state.workers.contains_key(worker_id) {
                return Err(Error::InvalidArgument("worker id already exists".into()));
            }
            Ok(vec![
                EventBody::WorkerCreated {
                    worker_id: worker_id.clone(),
                    path,
                    parent_id: Some(actor.clone()),
                    assignment: Some(assignment.clone()),
                },
                state_change(worker_id, WorkerState::Created, WorkerState::LaunchRequested, None),
                EventBody::CommandQueued {
                    command_id: create_command.clone(),
                    worker_id: worker_id.clone(),
                    intent: CommandIntent::Create,
                    idempotency_key: format!("create:{worker_id}"),
                    not_before_ms: None,
                },
            ])
        }
        Command::Attach { worker_id } => {
            let (run, worker) = acting(state, worker_id)?;
            if worker.is_root() {
                return Err(Error::Forbidden("root does not attach; it uses the capability from run_create".into()));
            }
            if state.runtime.by_worker(worker_id).is_some() {
                return Err(Error::Forbidden("pool workers attach through admission (runtime_bootstrap)".into()));
            }
            if worker.state == WorkerState::Cancelled
                || worker.state == WorkerState::LaunchFailed
                || run.state.is_terminal()
            {
                return Err(Error::InvalidTransition(format!("worker is {:?}; it can no longer attach", worker.state)));
            }
            let mut events =
                vec![EventBody::WorkerAttached { worker_id: worker_id.clone(), attach_count: worker.attach_count + 1 }];
            match worker.state {
                WorkerState::Created | WorkerState::LaunchRequested | WorkerState::Launching => {
                    events.push(state_change(worker_id, worker.state, WorkerState::Running, Some("attached")));
                }
                WorkerState::Running
                | WorkerState::Waiting
                | WorkerState::Completed
                | WorkerState::Failed
                | WorkerState::Cancelled
                | WorkerState::LaunchFailed => {}
            }
            Ok(events)
        }
        Command::Progress { actor, summary, percent } => {
            let (run, worker) = acting(state, actor)?;
            require_open(run)?;
            require_working(worker)?;
            check_text("summary", summary, TEXT_MAX)?;
            if percent.is_some_and(|p| p > 100) {
                return Err(Error::InvalidArgument("percent must be between 0 and 100".into()));
            }
            let mut events = vec![EventBody::WorkerProgress {
                worker_id: actor.clone(),
                summary: summary.clone(),
                percent: *percent,
            }];
            if worker.state == WorkerState::Waiting {
                events.push(state_change(actor, WorkerState::Waiting, WorkerState::Running, Some("progress")));
            }
            Ok(events)
        }
        Command::Send { actor, message_id, to, kind, body, in_reply_to } => {
            let (run, sender) = acting(state, actor)?;
            require_open(run)?;
            require_working(sender)?;
            check_text("body", body, TEXT_MAX)?;
            let recipient = state
                .worker(to)
                .filter(|w| w.run_id == run.id)
                .ok_or_else(|| Error::NotFound(format!("worker {to} in this run")))?;
            if recipient.id == sender.id {
                return Err(Error::InvalidArgument("a worker cannot message itself".into()));
            }
            if !sender.is_root() && !recipient.is_root() && Some(&recipient.id) != sender.parent.as_ref() {
                return Err(Error::Forbidden("workers may message root or their parent only".into()));
            }
            if let Some(reply_to) = in_reply_to {
                match run.messages.get(reply_to) {
                    Some(addressee) if addressee == actor => {}
                    Some(_) => {
                        return Err(Error::Forbidden("in_reply_to names a message addressed to another worker".into()));
                    }
                    None => return Err(Error::NotFound(format!("message {reply_to} in this run"))),
                }
            }
            if state.runs.values().any(|r| r.messages.contains_key(message_id)) {
                return Err(Error::InvalidArgument("message id already exists".into()));
            }
            let mut events = vec![EventBody::WorkerMessage {
                message_id: message_id.clone(),
                from: actor.clone(),
                to: to.clone(),
                kind: *kind,
                body: body.clone(),
                in_reply_to: in_reply_to.clone(),
            }];
            events.extend(message_state_changes(sender, recipient, *kind));
            Ok(events)
        }
        Command::Broadcast { actor, message_ids, kind, body } => {
            let (run, root) = root_actor(state, actor)?;
            require_open(run)?;
            check_text("body", body, TEXT_MAX)?;
            let recipients = broadcast_recipients(state, run);
            if message_ids.len() < recipients.len() {
                return Err(Error::InvalidArgument("not enough message ids for the recipients".into()));
            }
            let mut events = Vec::new();
            for (recipient, message_id) in recipients.into_iter().zip(message_ids) {
                events.push(EventBody::WorkerMessage {
                    message_id: message_id.clone(),
                    from: actor.clone(),
                    to: recipient.id.clone(),
                    kind: *kind,
                    body: body.clone(),
                    in_reply_to: None,
                });
                events.extend(message_state_changes(root, recipient, *kind));
            }
            Ok(events)
        }
        Command::Complete { actor, summary, artifacts } => {
            let (run, worker) = acting(state, actor)?;
            require_open(run)?;
            require_working(worker)?;
            check_text("summary", summary, TEXT_MAX)?;
            check_list("artifacts", artifacts)?;
            let mut events = vec![
                EventBody::WorkerCompleted {
                    worker_id: actor.clone(),
                    summary: summary.clone(),
                    artifacts: artifacts.clone(),
                },
                state_change(actor, worker.state, WorkerState::Completed, None),
            ];
            if worker.is_root() {
                let children_open = unfinished_children(state, run, actor).next().is_some();
                let to = if children_open { RunState::Completing } else { RunState::Completed };
                events.push(EventBody::RunStateChanged { from: run.state, to, reason: Some("root completed".into()) });
            } else {
                events.extend(close_if_last(state, run, actor));
            }
            Ok(events)
        }
        Command::Answering { followup, report } => {
            let actor = match report.as_ref() {
                Command::Progress { actor, .. } | Command::Complete { actor, .. } | Command::Fail { actor, .. } => {
                    actor
                }
                _ => {
                    return Err(Error::InvalidArgument("only progress, completion and failure name their work".into()));
                }
            };
            let (_, worker) = acting(state, actor)?;
            let newest = worker.followups.len() as u32;
            if *followup < newest {
                return Err(Error::Superseded(format!(
                    "this reports on {}, but follow-up #{newest} is waiting: read it with worker_attach",
                    if *followup == 0 {
                        "the original assignment".to_owned()
                    } else {
                        format!("follow-up #{followup}")
                    }
                )));
            }
            if *followup > newest {
                return Err(Error::InvalidArgument(format!("there is no follow-up #{followup} (newest: {newest})")));
            }
            decide(state, report)
        }
        Command::Fail { actor, reason } => {
            let (run, worker) = acting(state, actor)?;
            require_open(run)?;
            require_working(worker)?;
            check_text("reason", reason, TEXT_MAX)?;
            let mut events = vec![
                EventBody::WorkerFailed { worker_id: actor.clone(), reason: reason.clone() },
                state_change(actor, worker.state, WorkerState::Failed, None),
            ];
            if worker.is_root() {
                events.extend(cancel_children(state, run, actor, "run failed"));
                events.extend(cancel_queued(state, unfinished_children(state, run, actor).map(|w| &w.id)));
                events.push(EventBody::RunStateChanged {
                    from: run.state,
                    to: RunState::Failed,
                    reason: Some(reason.clone()),
                });
            } else {
                events.extend(close_if_last(state, run, actor));
            }
            Ok(events)
        }
        Command::Interrupt { actor, target, reason } => {
            let (run, _) = root_actor(state, actor)?;
            require_open(run)?;
            check_text("reason", reason, TEXT_MAX)?;
            let worker = child_of_run(state, run, target)?;
            if worker.state.is_terminal() {
                return Err(Error::InvalidTransition(format!("worker is already {:?}", worker.state)));
            }
            let mut events = vec![
                EventBody::WorkerInterrupted { worker_id: target.clone(), reason: reason.clone() },
                state_change(target, worker.state, WorkerState::Cancelled, Some("interrupted")),
            ];
            events.extend(cancel_queued(state, [target]));
            events.extend(close_if_last(state, run, target));
            Ok(events)
        }
        Command::Followup { actor, target, instructions, send_command } => {
            let (run, _) = root_actor(state, actor)?;
            require_active(run)?;
            check_text("instructions", instructions, TEXT_MAX)?;
            let worker = child_of_run(state, run, target)?;
            match worker.state {
                WorkerState::Running | WorkerState::Waiting | WorkerState::Completed | WorkerState::Failed => {}
                WorkerState::Created
                | WorkerState::LaunchRequested
                | WorkerState::Launching
                | WorkerState::Cancelled
                | WorkerState::LaunchFailed => {
                    return Err(Error::InvalidTransition(format!(
                        "a {:?} worker cannot take a follow-up",
                        worker.state
                    )));
                }
            }
            let seq = worker.followups.len() as u32 + 1;
            let mut events =
                vec![EventBody::WorkerFollowup { worker_id: target.clone(), seq, instructions: instructions.clone() }];
            if worker.state != WorkerState::Running {
                events.push(state_change(target, worker.state, WorkerState::Running, Some("follow-up")));
            }
            events.push(EventBody::CommandQueued {
                command_id: send_command.clone(),
                worker_id: target.clone(),
                intent: CommandIntent::Send { prompt: PromptRef::Followup { seq } },
                idempotency_key: format!("followup:{target}:{seq}"),
                not_before_ms: None,
            });
            Ok(events)
        }
        Command::CancelRun { actor, reason } => {
            let (run, root) = root_actor(state, actor)?;
            if run.state.is_terminal() {
                return Err(Error::RunNotActive(run.state));
            }
            check_text("reason", reason, TEXT_MAX)?;
            let mut events = cancel_children(state, run, actor, "run cancelled");
            events.extend(cancel_queued(state, unfinished_children(state, run, actor).map(|w| &w.id)));
            if !root.state.is_terminal() {
                events.push(state_change(actor, root.state, WorkerState::Cancelled, Some("run cancelled")));
            }
            events.push(EventBody::RunStateChanged {
                from: run.state,
                to: RunState::Cancelled,
                reason: Some(reason.clone()),
            });
            Ok(events)
        }
        Command::ExecutorConnected { executor_id, executor_instance_id, executor_kind, capabilities, host } => {
            Ok(vec![EventBody::ExecutorConnected {
                executor_id: executor_id.clone(),
                executor_instance_id: executor_instance_id.clone(),
                executor_kind: *executor_kind,
                capabilities: capabilities.clone(),
                host: host.clone(),
            }])
        }
        Command::ExecutorDisconnected { executor_id, executor_instance_id, reason } => {
            Ok(vec![EventBody::ExecutorDisconnected {
                executor_id: executor_id.clone(),
                executor_instance_id: executor_instance_id.clone(),
                reason: reason.clone(),
            }])
        }
        Command::Dispatch { command_id, executor_id } => Ok(vec![dispatched(state, command_id, executor_id)?]),
        Command::DispatchAll { dispatches } => {
            dispatches.iter().map(|(command_id, executor_id)| dispatched(state, command_id, executor_id)).collect()
        }
        Command::Recheck { inspections } => inspections
            .iter()
            .map(|(worker_id, command_id)| {
                let worker = state.worker(worker_id).ok_or_else(|| Error::NotFound(format!("worker {worker_id}")))?;
                if worker.conversation.is_none() {
                    return Err(Error::InvalidTransition(format!("worker {worker_id} has no conversation to inspect")));
                }
                Ok(EventBody::CommandQueued {
                    command_id: command_id.clone(),
                    worker_id: worker_id.clone(),
                    intent: CommandIntent::Inspect,
                    idempotency_key: format!("inspect:{command_id}"),
                    not_before_ms: None,
                })
            })
            .collect(),
        Command::ExecutorReport { executor_id, frame } => report(state, executor_id, frame),
        Command::HostState { worker_id, code, detail } => {
            let worker = state.worker(worker_id).ok_or_else(|| Error::NotFound(format!("worker {worker_id}")))?;
            if !code.is_host_state() {
                return Err(Error::InvalidArgument(format!("{code} is not a host state")));
            }
            Ok(if worker.last_error == Some(*code) {
                vec![]
            } else {
                vec![EventBody::ConversationError { worker_id: worker_id.clone(), code: *code, detail: detail.clone() }]
            })
        }
        Command::RuntimeProvision { actor, operation_id, slots, expires_at_ms } => {
            let (run, root) = root_actor(state, actor)?;
            require_active(run)?;
            if run.workers.len() + slots.len() > WORKERS_PER_RUN_MAX {
                return Err(Error::LimitReached(format!("a run holds at most {WORKERS_PER_RUN_MAX} workers")));
            }
            let mut paths = run.paths.clone();
            let mut events = Vec::new();
            for s in slots {
                if state.runtime.slot(&run.id, s.slot).is_some_and(|r| r.health != SlotHealth::Retired) {
                    return Err(Error::InvalidTransition(format!("slot {} is held", s.slot)));
                }
                check_assignment(&s.assignment)?;
                let base = format!("{}/pool-{}", root.path, s.slot);
                let path = (0..)
                    .map(|n| if n == 0 { base.clone() } else { format!("{base}-{n}") })
                    .find(|p| !paths.contains(p))
                    .expect("a free path");
                paths.insert(path.clone());
                events.extend([
                    EventBody::WorkerCreated {
                        worker_id: s.worker_id.clone(),
                        path,
                        parent_id: Some(actor.clone()),
                        assignment: Some(s.assignment.clone()),
                    },
                    state_change(
                        &s.worker_id,
                        WorkerState::Created,
                        WorkerState::LaunchRequested,
                        Some("pool provisioning"),
                    ),
                    EventBody::RuntimeSlotProvisioning {
                        operation_id: operation_id.clone(),
                        slot: s.slot,
                        worker_id: s.worker_id.clone(),
                        expires_at_ms: *expires_at_ms,
                    },
                    EventBody::CommandQueued {
                        command_id: s.command_id.clone(),
                        worker_id: s.worker_id.clone(),
                        intent: CommandIntent::Create,
                        idempotency_key: format!("create:{}", s.worker_id),
                        not_before_ms: Some(s.not_before_ms),
                    },
                ]);
            }
            Ok(events)
        }
        Command::RuntimeAdmit { worker_id, peer_fingerprint, now_ms } => {
            let (run, worker) = acting(state, worker_id)?;
            require_open(run)?;
            let record = state.runtime.by_worker(worker_id).ok_or(Error::Admission(admission::Refusal::NotPooled))?;
            let claim = admission::Claim { worker: worker_id, peer_fingerprint, now_ms: *now_ms };
            let decided = admission::admit(record, &claim).map_err(Error::Admission)?;
            let mut events = Vec::new();
            if decided == admission::Admission::Admit {
                events.push(EventBody::RuntimeSlotAdmitted {
                    slot: record.slot,
                    worker_id: worker_id.clone(),
                    peer_fingerprint: peer_fingerprint.clone(),
                });
            }
            events.push(EventBody::WorkerAttached {
                worker_id: worker_id.clone(),
                attach_count: worker.attach_count + 1,
            });
            if matches!(worker.state, WorkerState::Created | WorkerState::LaunchRequested | WorkerState::Launching) {
                events.push(state_change(worker_id, worker.state, WorkerState::Running, Some("admitted")));
            }
            Ok(events)
        }
        Command::RuntimeRecover { actor, slot, command_id } => {
            let (run, _) = root_actor(state, actor)?;
            require_open(run)?;
            let record = state.runtime.slot(&run.id, *slot).ok_or_else(|| Error::NotFound(format!("slot {slot}")))?;
            if let Some(attempts) = setup_refused(state, record) {
                // Nothing was submitted before: create afresh under a new key
                // (the executor's journal answers the old key with its refusal).
                let worker = record.reserved_worker.clone();
                return Ok(vec![EventBody::CommandQueued {
                    command_id: command_id.clone(),
                    idempotency_key: format!("create:{worker}:retry-{attempts}"),
                    worker_id: worker,
                    intent: CommandIntent::Create,
                    not_before_ms: None,
                }]);
            }
            if record.health != SlotHealth::Lost || record.conversation.is_none() {
                return Err(Error::InvalidTransition(format!(
                    "slot {slot} is {:?}; only a lost, bound slot is reopened",
                    record.health
                )));
            }
            let worker = record.reserved_worker.clone();
            Ok(vec![
                EventBody::RuntimeSlotHealth {
                    slot: *slot,
                    worker_id: worker.clone(),
                    health: SlotHealth::Recovering,
                    reason: "reopening the exact conversation".into(),
                },
                EventBody::CommandQueued {
                    command_id: command_id.clone(),
                    worker_id: worker.clone(),
                    intent: CommandIntent::Open,
                    idempotency_key: format!("open:{worker}:{}", record.continuation_epoch + 1),
                    not_before_ms: None,
                },
            ])
        }
        Command::RuntimeRetire { actor, slot, command_id } => {
            let (run, _) = root_actor(state, actor)?;
            let record = state.runtime.slot(&run.id, *slot).ok_or_else(|| Error::NotFound(format!("slot {slot}")))?;
            let worker = state.worker(&record.reserved_worker).expect("pool workers exist");
            if let Some(why) = retire_protection(state, record, worker) {
                return Err(Error::InvalidTransition(format!("slot {slot} is protected: {why}")));
            }
            let mut events = vec![EventBody::RuntimeSlotHealth {
                slot: *slot,
                worker_id: worker.id.clone(),
                health: SlotHealth::Retiring,
                reason: "scale-down".into(),
            }];
            if !worker.state.is_terminal() {
                events.push(state_change(&worker.id, worker.state, WorkerState::Cancelled, Some("retired")));
            }
            events.push(EventBody::CommandQueued {
                command_id: command_id.clone(),
                worker_id: worker.id.clone(),
                intent: CommandIntent::Close,
                idempotency_key: format!("close:{}", worker.id),
                not_before_ms: None,
            });
            Ok(events)
        }
    }
}

/// The dispatch of one queued command to an executor, which must be the one
/// holding the worker, if any holds it.
fn dispatched(state: &State, command_id: &CommandId, executor_id: &str) -> Result<EventBody, Error> {
    let command = known_command(state, command_id)?;
    let worker =
        state.worker(&command.worker_id).ok_or_else(|| Error::NotFound(format!("worker {}", command.worker_id)))?;
    if let Some(bound) = &worker.executor_id
        && bound != executor_id
    {
        return Err(Error::Forbidden(format!("worker {} is bound to another executor", worker.id)));
    }
    match command.phase {
        CommandPhase::Queued => Ok(EventBody::CommandDispatched {
            command_id: command_id.clone(),
            worker_id: command.worker_id.clone(),
            executor_id: executor_id.to_owned(),
        }),
        CommandPhase::Dispatched | CommandPhase::Acked | CommandPhase::Completed | CommandPhase::Cancelled => {
            Err(Error::InvalidTransition(format!("command {command_id} is not queued")))
        }
    }
}

/// Applies what an executor reported. Duplicates (a second ack, a result
/// delivered twice, the same binding again) record nothing; anything about a
/// command or worker held by another executor is refused.
fn report(state: &State, executor_id: &str, frame: &ExecutorFrame) -> Result<Vec<EventBody>, Error> {
    match frame {
        ExecutorFrame::Hello { .. } | ExecutorFrame::Heartbeat { .. } => {
            Err(Error::InvalidArgument("hello and heartbeat are session frames, not reports".into()))
        }
        ExecutorFrame::Ack { command_id } => {
            let command = held_command(state, executor_id, command_id)?;
            match command.phase {
                CommandPhase::Dispatched => {
                    let mut events = vec![EventBody::CommandAcked {
                        command_id: command_id.clone(),
                        worker_id: command.worker_id.clone(),
                    }];
                    let worker = state.worker(&command.worker_id).expect("commands name known workers");
                    if command.intent == CommandIntent::Create && worker.state == WorkerState::LaunchRequested {
                        events.push(state_change(
                            &worker.id,
                            WorkerState::LaunchRequested,
                            WorkerState::Launching,
                            Some("executor acknowledged"),
                        ));
                    }
                    Ok(events)
                }
                CommandPhase::Acked | CommandPhase::Completed => Ok(vec![]),
                CommandPhase::Queued | CommandPhase::Cancelled => {
                    Err(Error::InvalidTransition(format!("command {command_id} was never dispatched")))
                }
            }
        }
        ExecutorFrame::Result { command_id, outcome } => {
            let command = held_command(state, executor_id, command_id)?;
            match command.phase {
                CommandPhase::Dispatched | CommandPhase::Acked => {}
                CommandPhase::Completed => return Ok(vec![]),
                CommandPhase::Queued | CommandPhase::Cancelled => {
                    return Err(Error::InvalidTransition(format!("command {command_id} was never dispatched")));
                }
            }
            let worker = state.worker(&command.worker_id).expect("commands name known workers");
            let mut events = vec![EventBody::CommandCompleted {
                command_id: command_id.clone(),
                worker_id: worker.id.clone(),
                outcome: outcome.clone(),
            }];
            match (outcome, &command.intent) {
                (CommandOutcome::Ok { conversation_id: Some(id) }, CommandIntent::Create)
                    if worker.conversation.is_none() =>
                {
                    events.push(bind(state, worker, id, &format!("https://chatgpt.com/c/{id}"), executor_id));
                }
                (CommandOutcome::Ok { .. }, _) => {}
                // A host or setup state (the app not bound, signed out…) is not a
                // worker's failure: it is recorded where runtime_status reads its
                // readiness reasons; runtime_recover retries a pool create. A
                // spawned worker's create has no retry: its launch fails, with the code.
                (CommandOutcome::Error { code, detail }, intent)
                    if code.is_host_state()
                        && (*intent != CommandIntent::Create || state.runtime.by_worker(&worker.id).is_some()) =>
                {
                    events.push(EventBody::ConversationError {
                        worker_id: worker.id.clone(),
                        code: *code,
                        detail: detail.clone(),
                    });
                }
                (CommandOutcome::Error { code, .. }, CommandIntent::Create) if !uncertain(*code) => {
                    if matches!(worker.state, WorkerState::LaunchRequested | WorkerState::Launching) {
                        events.push(state_change(
                            &worker.id,
                            worker.state,
                            WorkerState::LaunchFailed,
                            Some(code.as_str()),
                        ));
                        events.extend(cancel_queued(state, [&worker.id]));
                    }
                }
                // The executor did not act (it never starts past the deadline,
                // e.g. the page stayed generating): the wake goes out again
                // as a new command, a bounded number of times, so a slow page
                // never drops a follow-up.
                (CommandOutcome::Error { code: ErrorCode::DeadlineExceeded, .. }, CommandIntent::Send { .. })
                    if !matches!(worker.state, WorkerState::Failed | WorkerState::Cancelled) =>
                {
                    let attempts = state
                        .commands
                        .values()
                        .filter(|c| c.worker_id == worker.id && c.intent == command.intent)
                        .count();
                    if attempts < SEND_ATTEMPTS_MAX {
                        events.push(EventBody::CommandQueued {
                            command_id: retry_id(command_id),
                            worker_id: worker.id.clone(),
                            intent: command.intent.clone(),
                            idempotency_key: format!("{}:attempt{}", command.idempotency_key, attempts + 1),
                            not_before_ms: None,
                        });
                    }
                }
                // An uncertain outcome retries nothing: the command stays
                // completed-with-error for exact readback and reconciliation.
                (CommandOutcome::Error { .. }, _) => {}
            }
            Ok(events)
        }
        ExecutorFrame::ConversationCreated { command_id, worker_id } => {
            let command = held_command(state, executor_id, command_id)?;
            if &command.worker_id != worker_id {
                return Err(Error::Forbidden("conversationCreated names another worker than its command".into()));
            }
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(if worker.conversation_created {
                vec![]
            } else {
                vec![EventBody::ConversationCreated { worker_id: worker_id.clone(), command_id: command_id.clone() }]
            })
        }
        ExecutorFrame::ConversationBound { worker_id, conversation_id, url } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            match &worker.conversation {
                None => Ok(vec![bind(state, worker, conversation_id, url, executor_id)]),
                Some((bound, _)) if bound == conversation_id => Ok(vec![]),
                Some((bound, _)) => Ok(vec![EventBody::ConversationError {
                    worker_id: worker_id.clone(),
                    code: ErrorCode::ConversationIdentityDrift,
                    detail: format!("executor reported {conversation_id}, bound to {bound}"),
                }]),
            }
        }
        // One meaning for "closed": `conversationState{closed}` is the managed
        // tab gone, exactly as `conversationClosed` (the slot is lost either way).
        ExecutorFrame::ConversationState { worker_id, state: ConversationState::Closed, .. } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(if worker.conversation_state == Some(ConversationState::Closed) {
                vec![]
            } else {
                vec![EventBody::ConversationClosed { worker_id: worker_id.clone() }]
            })
        }
        ExecutorFrame::ConversationState { worker_id, state: observed, error } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(if worker.conversation_state == Some(*observed) && *observed != ConversationState::Error {
                vec![]
            } else {
                vec![EventBody::ConversationStateChanged {
                    worker_id: worker_id.clone(),
                    state: *observed,
                    error: *error,
                }]
            })
        }
        ExecutorFrame::ConversationError { worker_id, code, detail } => {
            held_worker(state, executor_id, worker_id)?;
            Ok(vec![EventBody::ConversationError { worker_id: worker_id.clone(), code: *code, detail: detail.clone() }])
        }
        ExecutorFrame::ConversationClosed { worker_id } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(if worker.conversation_state == Some(ConversationState::Closed) {
                vec![]
            } else {
                vec![EventBody::ConversationClosed { worker_id: worker_id.clone() }]
            })
        }
    }
}

/// The number of conversation creates a provisioning slot's worker has had,
/// when the last was refused for a host or setup state (nothing was
/// submitted; see `CarrierRecord::awaiting_setup`) and none is queued since:
/// the slot waits for `runtime_recover` to try again once the setup is fixed.
pub fn setup_refused(state: &State, record: &registry::CarrierRecord) -> Option<usize> {
    if record.awaiting_setup.is_none() || record.health != SlotHealth::Provisioning || record.conversation.is_some() {
        return None;
    }
    let worker = &record.reserved_worker;
    Some(state.commands.values().filter(|c| &c.worker_id == worker && c.intent == CommandIntent::Create).count())
}

/// Why a pool slot may not be retired now, if it may not: only a parked,
/// idle slot with nothing queued or in flight is safe.
pub fn retire_protection(state: &State, record: &registry::CarrierRecord, worker: &Worker) -> Option<&'static str> {
    if record.health != SlotHealth::Parked {
        return Some(match record.health {
            SlotHealth::ReconcileRequired => "reconcile required",
            SlotHealth::Provisioning => "still provisioning",
            SlotHealth::Lost | SlotHealth::Recovering => "being recovered",
            SlotHealth::Retiring | SlotHealth::Retired => "already retiring",
            SlotHealth::Parked => unreachable!(),
        });
    }
    let open = state.open_commands.iter().filter_map(|id| state.commands.get(id)).any(|c| c.worker_id == worker.id);
    if open {
        return Some("a command is queued or in flight (targeted or continuation pending)");
    }
    let idle =
        worker.state == WorkerState::Completed || (worker.state == WorkerState::Running && worker.followups.is_empty());
    (!idle).then_some("busy with a task")
}

/// Binds a worker's first observed conversation, unless another worker already
/// holds that conversation: then it is identity drift, recorded and fenced,
/// never a second mapping of one conversation.
fn bind(
    state: &State,
    worker: &Worker,
    conversation: &protocol::ConversationId,
    url: &str,
    executor_id: &str,
) -> EventBody {
    let taken = state
        .workers
        .values()
        .any(|w| w.id != worker.id && w.conversation.as_ref().is_some_and(|(c, _)| c == conversation));
    if taken {
        return EventBody::ConversationError {
            worker_id: worker.id.clone(),
            code: ErrorCode::ConversationIdentityDrift,
            detail: format!("conversation {conversation} already belongs to another worker"),
        };
    }
    EventBody::ConversationBound {
        worker_id: worker.id.clone(),
        conversation_id: conversation.clone(),
        url: url.to_owned(),
        executor_id: executor_id.to_owned(),
    }
}

/// Attempts of one wake (a `conversation_send` answered `DEADLINE_EXCEEDED`
/// is queued again until this many were made).
pub const SEND_ATTEMPTS_MAX: usize = 5;

/// The id of the command that retries `previous`: derived from it, so
/// `decide` stays a function of its inputs (and a replayed report decides
/// the same id).
fn retry_id(previous: &CommandId) -> CommandId {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("retry:{previous}").as_bytes());
    CommandId::from_uuid_bytes(digest[..16].try_into().expect("a SHA-256 has 16 bytes to spare"))
}

/// Codes that mean the effect may have happened: never grounds for a retry.
fn uncertain(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::OutcomeUnknown | ErrorCode::AmbiguousSubmission | ErrorCode::ReconcileRequired)
}

fn known_command<'a>(state: &'a State, id: &CommandId) -> Result<&'a QueuedCommand, Error> {
    state.commands.get(id).ok_or_else(|| Error::NotFound(format!("command {id}")))
}

/// A command dispatched to `executor_id`.
fn held_command<'a>(state: &'a State, executor_id: &str, id: &CommandId) -> Result<&'a QueuedCommand, Error> {
    let command = known_command(state, id)?;
    if command.executor_id.as_deref() != Some(executor_id) {
        return Err(Error::Forbidden(format!("command {id} is not held by this executor")));
    }
    Ok(command)
}

/// A worker whose conversation `executor_id` holds.
fn held_worker<'a>(state: &'a State, executor_id: &str, id: &WorkerId) -> Result<&'a Worker, Error> {
    let worker = state.worker(id).ok_or_else(|| Error::NotFound(format!("worker {id}")))?;
    if worker.executor_id.as_deref() != Some(executor_id) {
        return Err(Error::Forbidden(format!("worker {id} is not held by this executor")));
    }
    Ok(worker)
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

/// Who a broadcast in `run` reaches, in order: every unfinished non-root worker.
pub fn broadcast_recipients<'a>(state: &'a State, run: &Run) -> Vec<&'a Worker> {
    run.workers.iter().filter_map(|id| state.worker(id)).filter(|w| !w.is_root() && !w.state.is_terminal()).collect()
}

fn state_change(worker: &WorkerId, from: WorkerState, to: WorkerState, reason: Option<&str>) -> EventBody {
    EventBody::WorkerStateChanged { worker_id: worker.clone(), from, to, reason: reason.map(str::to_owned) }
}

/// The actor and its run; the actor must exist.
fn acting<'a>(state: &'a State, actor: &WorkerId) -> Result<(&'a Run, &'a Worker), Error> {
    let worker = state.worker(actor).ok_or_else(|| Error::NotFound(format!("worker {actor}")))?;
    let run = state.runs.get(&worker.run_id).ok_or_else(|| Error::NotFound(format!("run {}", worker.run_id)))?;
    Ok((run, worker))
}

/// The actor, which must be its run's root.
fn root_actor<'a>(state: &'a State, actor: &WorkerId) -> Result<(&'a Run, &'a Worker), Error> {
    let (run, worker) = acting(state, actor)?;
    if !worker.is_root() {
        return Err(Error::Forbidden("only root may do this".into()));
    }
    Ok((run, worker))
}

/// A non-root worker of `run`.
fn child_of_run<'a>(state: &'a State, run: &Run, id: &WorkerId) -> Result<&'a Worker, Error> {
    let worker = state
        .worker(id)
        .filter(|w| w.run_id == run.id)
        .ok_or_else(|| Error::NotFound(format!("worker {id} in this run")))?;
    if worker.is_root() {
        return Err(Error::InvalidArgument("root cannot be the target".into()));
    }
    Ok(worker)
}

/// New work may start only in an active run.
fn require_active(run: &Run) -> Result<(), Error> {
    match run.state {
        RunState::Active => Ok(()),
        RunState::Completing | RunState::Completed | RunState::Failed | RunState::Cancelled => {
            Err(Error::RunNotActive(run.state))
        }
    }
}

/// Reporting and messaging continue while a run is completing.
fn require_open(run: &Run) -> Result<(), Error> {
    match run.state {
        RunState::Active | RunState::Completing => Ok(()),
        RunState::Completed | RunState::Failed | RunState::Cancelled => Err(Error::RunNotActive(run.state)),
    }
}

/// Only a working worker reports, messages, completes or fails.
fn require_working(worker: &Worker) -> Result<(), Error> {
    match worker.state {
        WorkerState::Running | WorkerState::Waiting => Ok(()),
        WorkerState::Created
        | WorkerState::LaunchRequested
        | WorkerState::Launching
        | WorkerState::Completed
        | WorkerState::Failed
        | WorkerState::Cancelled
        | WorkerState::LaunchFailed => Err(Error::InvalidTransition(format!("worker is {:?}", worker.state))),
    }
}

/// A question or blocker makes the sender wait; an answer or correction
/// releases a waiting recipient.
fn message_state_changes(sender: &Worker, recipient: &Worker, kind: MessageKind) -> Vec<EventBody> {
    let mut events = Vec::new();
    if kind.makes_sender_wait() && sender.state == WorkerState::Running && !sender.is_root() {
        events.push(state_change(&sender.id, WorkerState::Running, WorkerState::Waiting, Some("awaiting reply")));
    }
    if kind.releases_recipient() && recipient.state == WorkerState::Waiting {
        events.push(state_change(&recipient.id, WorkerState::Waiting, WorkerState::Running, Some("reply received")));
    }
    events
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

fn check_text(field: &'static str, text: &str, max: usize) -> Result<(), Error> {
    if text.len() > max {
        return Err(Error::TooLarge { field, len: text.len(), max });
    }
    Ok(())
}

fn check_list(field: &'static str, items: &[String]) -> Result<(), Error> {
    if items.len() > LIST_MAX {
        return Err(Error::TooLarge { field, len: items.len(), max: LIST_MAX });
    }
    items.iter().try_for_each(|item| check_text(field, item, ITEM_MAX))
}

fn check_name(name: &str) -> Result<(), Error> {
    check_text("name", name, NAME_MAX)?;
    let ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !ok {
        return Err(Error::InvalidArgument("name must be 1-64 characters of a-z, 0-9, '-' or '_'".into()));
    }
    Ok(())
}

fn check_assignment(a: &Assignment) -> Result<(), Error> {
    if a.objective.trim().is_empty() {
        return Err(Error::InvalidArgument("assignment.objective must not be empty".into()));
    }
    for text in a.texts() {
        check_text("assignment", text, TEXT_MAX)?;
    }
    for list in a.lists() {
        check_list("assignment", list)?;
    }
    let len = serde_json::to_vec(a).map_or(usize::MAX, |json| json.len());
    if len > ASSIGNMENT_MAX {
        return Err(Error::TooLarge { field: "assignment", len, max: ASSIGNMENT_MAX });
    }
    Ok(())
}
