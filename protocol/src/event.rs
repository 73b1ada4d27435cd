//! Durable domain events. The control plane's state is a fold over these, so
//! each event carries everything needed to rebuild it; nothing else is truth.
//! The JSON form is persisted: variants and fields are only ever added, and
//! `tests/fixtures/events-v1.jsonl` keeps old records readable.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::assignment::Assignment;
use crate::continuity::{AttemptReason, ContinuationPolicy, Hold, StallLevel, Wake};
use crate::error::ErrorCode;
use crate::executor::{CommandOutcome, ConversationState, ExecutorKind, MachineFacts};
use crate::ids::{CommandId, ConversationId, MessageId, OwnershipId, RunId, WorkerId};
use crate::ownership::{Labels, Session, StaleReason, Worktree};
use crate::state::{MessageKind, RunState, WorkerState};

/// What a queued executor command is for. Prompts are stored by reference and
/// rendered at dispatch, so no prompt text (and no attach identity) sits in
/// the log, and every replay renders the same text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CommandIntent {
    /// Create the worker's conversation and submit its bootstrap prompt once.
    Create,
    /// Submit a prompt into the worker's bound conversation once it is idle.
    Send {
        /// Which prompt.
        prompt: PromptRef,
        /// Deliver it mid-turn, without waiting for idle, as
        /// `conversation_steer` (only for an executor that declared that
        /// capability; see `executor::STEER`). Absent: false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        steer: bool,
    },
    /// Reopen the worker's exact bound conversation in a new managed tab
    /// (recovery after the tab or target was lost).
    Open,
    /// Close the worker's managed tab (scale-down, stop).
    Close,
    /// Close the worker's idle tab to keep its executor within its tab
    /// capacity; the conversation stays bound and an `open` reopens it
    /// before its next command.
    Park,
    /// Re-read the conversation's state: the daemon's last observation may be
    /// stale (it predates the executor's reconnect, or a send has waited on
    /// it past the recheck bound). Read-only; may overtake a waiting send.
    Inspect,
}

/// Health of a runtime slot's carrier. A browser tab existing is not health:
/// a slot is `parked` only once its worker was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SlotHealth {
    /// Reserved; the conversation is being created and bootstrapped.
    Provisioning,
    /// Admitted and idle or working: available for targeted tasks.
    Parked,
    /// The tab or target was lost; the exact conversation must be reopened.
    Lost,
    /// The exact conversation is being reopened.
    Recovering,
    /// Fenced for scale-down; its tab is being closed.
    Retiring,
    /// Closed; the slot is free.
    Retired,
    /// An external effect is uncertain; nothing is created or resent until settled.
    ReconcileRequired,
}

/// A prompt the orchestrator renders at dispatch time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "prompt", rename_all = "snake_case")]
pub enum PromptRef {
    /// The versioned bootstrap prompt with the worker's attach identity.
    Bootstrap,
    /// The wake prompt for the worker's follow-up number `seq`.
    Followup {
        /// The follow-up's number.
        seq: u32,
    },
    /// The resume prompt of execution attempt `attempt` (Execution
    /// Continuity: the turn ended, the worker is unfinished).
    Resume {
        /// The attempt's sequence number.
        attempt: u32,
    },
    /// The checkpoint prompt of execution attempt `attempt` (the active
    /// keepalive: report to root, then go on).
    Checkpoint {
        /// The attempt's sequence number.
        attempt: u32,
    },
    /// The rollover prompt: the worker's conversation is about to be
    /// replaced; it writes its checkpoint (`worker_checkpoint`) now.
    Rollover,
}

/// One event in a run's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    /// Position in the run's log: starts at 1, gapless, monotonic.
    pub cursor: u64,
    /// The run the event belongs to.
    pub run_id: RunId,
    /// When it was recorded, in milliseconds since the Unix epoch (injected clock).
    pub at_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub body: EventBody,
}

/// What happened. Serialized as `{"type": "worker.created", "data": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", content = "data")]
pub enum EventBody {
    /// A run and its root worker were created.
    #[serde(rename = "run.created")]
    RunCreated {
        /// Short human title.
        title: String,
        /// The run's `/root` worker.
        root_worker_id: WorkerId,
    },
    /// The run moved between lifecycle states.
    #[serde(rename = "run.state_changed")]
    RunStateChanged {
        /// Previous state.
        from: RunState,
        /// New state.
        to: RunState,
        /// Why, when a caller said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A logical worker was created (root, or spawned by a parent).
    #[serde(rename = "worker.created")]
    WorkerCreated {
        /// The new worker.
        worker_id: WorkerId,
        /// Hierarchical name, for example `/root/backend`.
        path: String,
        /// The spawning worker; absent for root.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_id: Option<WorkerId>,
        /// The authoritative task; absent for root, whose task is the user's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assignment: Option<Assignment>,
    },
    /// A worker moved between lifecycle states.
    #[serde(rename = "worker.state_changed")]
    WorkerStateChanged {
        /// The worker.
        worker_id: WorkerId,
        /// Previous state.
        from: WorkerState,
        /// New state.
        to: WorkerState,
        /// Why, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A worker's conversation attached through MCP and fetched its assignment.
    #[serde(rename = "worker.attached")]
    WorkerAttached {
        /// The worker.
        worker_id: WorkerId,
        /// How many times it has attached, this one included.
        attach_count: u32,
    },
    /// A worker reported progress.
    #[serde(rename = "worker.progress")]
    WorkerProgress {
        /// The worker.
        worker_id: WorkerId,
        /// What was done or is under way.
        summary: String,
        /// Rough completion, 0–100, when the worker can tell.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        percent: Option<u8>,
    },
    /// A durable message from one worker to another.
    #[serde(rename = "worker.message")]
    WorkerMessage {
        /// The message.
        message_id: MessageId,
        /// Sender.
        from: WorkerId,
        /// Recipient.
        to: WorkerId,
        /// Kind of message.
        kind: MessageKind,
        /// Body text.
        body: String,
        /// The message this one answers, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_reply_to: Option<MessageId>,
    },
    /// Root gave a worker further work; the worker is reopened.
    #[serde(rename = "worker.followup")]
    WorkerFollowup {
        /// The worker.
        worker_id: WorkerId,
        /// Sequence number of this follow-up for the worker, from 1.
        seq: u32,
        /// What to do next.
        instructions: String,
    },
    /// A worker reported completion.
    #[serde(rename = "worker.completed")]
    WorkerCompleted {
        /// The worker.
        worker_id: WorkerId,
        /// What was delivered.
        summary: String,
        /// References to produced artifacts.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<String>,
        /// The follow-up the report named as the work it finishes (0: the
        /// assignment), when it named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        followup: Option<u32>,
    },
    /// A worker reported an unrecoverable failure.
    #[serde(rename = "worker.failed")]
    WorkerFailed {
        /// The worker.
        worker_id: WorkerId,
        /// Why.
        reason: String,
        /// The follow-up the report named, when it named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        followup: Option<u32>,
    },
    /// Root interrupted a worker (cancelled its work).
    #[serde(rename = "worker.interrupted")]
    WorkerInterrupted {
        /// The worker.
        worker_id: WorkerId,
        /// Why.
        reason: String,
    },
    /// An executor command was queued for a worker (the durable intent).
    #[serde(rename = "executor.command_queued")]
    CommandQueued {
        /// The command.
        command_id: CommandId,
        /// The worker it serves.
        worker_id: WorkerId,
        /// What it is for.
        intent: CommandIntent,
        /// The executor's journal key, stable across replays.
        idempotency_key: String,
        /// Not dispatched before this time (ms since epoch): pacing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_before_ms: Option<u64>,
    },
    /// The command was assigned to an executor and sent (or is about to be).
    /// From here on it belongs to that executor only.
    #[serde(rename = "executor.command_dispatched")]
    CommandDispatched {
        /// The command.
        command_id: CommandId,
        /// The worker.
        worker_id: WorkerId,
        /// The executor it is bound to.
        executor_id: String,
    },
    /// The executor acknowledged (journaled) the command.
    #[serde(rename = "executor.command_acked")]
    CommandAcked {
        /// The command.
        command_id: CommandId,
        /// The worker.
        worker_id: WorkerId,
    },
    /// The executor reported the command's terminal outcome.
    #[serde(rename = "executor.command_completed")]
    CommandCompleted {
        /// The command.
        command_id: CommandId,
        /// The worker.
        worker_id: WorkerId,
        /// What happened.
        outcome: CommandOutcome,
    },
    /// A queued command was dropped before dispatch (its worker ended).
    #[serde(rename = "executor.command_cancelled")]
    CommandCancelled {
        /// The command.
        command_id: CommandId,
        /// The worker.
        worker_id: WorkerId,
    },
    /// The executor created a conversation for a worker.
    #[serde(rename = "conversation.created")]
    ConversationCreated {
        /// The worker.
        worker_id: WorkerId,
        /// The creating command.
        command_id: CommandId,
    },
    /// The exact conversation identity, as observed by the worker's executor.
    #[serde(rename = "conversation.bound")]
    ConversationBound {
        /// The worker.
        worker_id: WorkerId,
        /// The UUID from `/c/<uuid>`.
        conversation_id: ConversationId,
        /// Canonical URL.
        url: String,
        /// The executor holding the binding.
        executor_id: String,
    },
    /// The conversation's coarse state changed.
    #[serde(rename = "conversation.state_changed")]
    ConversationStateChanged {
        /// The worker.
        worker_id: WorkerId,
        /// New state.
        state: ConversationState,
        /// Error detail, when `state` is `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorCode>,
    },
    /// The running turn's content moved on (the executor's
    /// `conversationProgress`): the turn is not stalled, whatever its worker
    /// reports.
    #[serde(rename = "conversation.progressed")]
    ConversationProgressed {
        /// The worker.
        worker_id: WorkerId,
    },
    /// The executor reported an error about the conversation.
    #[serde(rename = "conversation.error")]
    ConversationError {
        /// The worker.
        worker_id: WorkerId,
        /// What went wrong.
        code: ErrorCode,
        /// Detail (no page content).
        detail: String,
    },
    /// The managed tab or target closed.
    #[serde(rename = "conversation.closed")]
    ConversationClosed {
        /// The worker.
        worker_id: WorkerId,
    },
    /// The pool reserved a slot and its worker, before any external effect.
    #[serde(rename = "runtime.slot_provisioning")]
    RuntimeSlotProvisioning {
        /// The provisioning operation.
        operation_id: String,
        /// The runtime slot.
        slot: u32,
        /// The worker reserved for the slot (admitted later).
        worker_id: WorkerId,
        /// The provisioning record expires unadmitted at this time.
        expires_at_ms: u64,
    },
    /// The slot's conversation proved its MCP peer reached us: the worker is admitted.
    #[serde(rename = "runtime.slot_admitted")]
    RuntimeSlotAdmitted {
        /// The runtime slot.
        slot: u32,
        /// The admitted worker.
        worker_id: WorkerId,
        /// Fingerprint of the MCP peer that bootstrapped (not a secret).
        peer_fingerprint: String,
    },
    /// The pool moved a slot's health.
    #[serde(rename = "runtime.slot_health")]
    RuntimeSlotHealth {
        /// The runtime slot.
        slot: u32,
        /// The worker of the slot.
        worker_id: WorkerId,
        /// New health.
        health: SlotHealth,
        /// Why.
        reason: String,
    },
    /// An executor authenticated (system stream).
    #[serde(rename = "executor.connected")]
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
    /// A worker's (or, without `worker_id`, the run's default) continuation
    /// policy was set. The run's default applies to workers spawned after it.
    #[serde(rename = "continuation.policy_changed")]
    ContinuationPolicyChanged {
        /// The worker; absent for the run's default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_id: Option<WorkerId>,
        /// The whole new policy.
        policy: ContinuationPolicy,
    },
    /// The run's caller attribution policy was set (at its creation; absent: required).
    #[serde(rename = "run.attribution_set")]
    RunAttributionSet {
        /// The policy.
        policy: crate::state::Attribution,
    },
    /// A chat was blocked (every tool call made as it is refused with
    /// `CHAT_BLOCKED`; not a cancel) or unblocked.
    #[serde(rename = "worker.block_changed")]
    WorkerBlockChanged {
        /// The worker whose conversation it is.
        worker_id: WorkerId,
        /// Blocked now or not.
        blocked: bool,
        /// Who did it.
        by: crate::state::BlockedBy,
        /// Why, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A new request id was proven to come from the worker's own
    /// conversation: an executor saw it there as the page's newest. ChatGPT
    /// gives every connector call of one turn the same id, so this is
    /// recorded once per turn (by its first call); the id then attributes
    /// that worker's calls until a newer one is attributed, and never
    /// again after (a replay of an earlier turn's id is refused).
    #[serde(rename = "caller.attributed")]
    CallerAttributed {
        /// The worker.
        worker_id: WorkerId,
        /// The turn's request id.
        request_id: String,
        /// The tool its first attributed call called.
        tool: String,
    },
    /// A hold on a worker's automatic turns was set, or (`hold` absent) released.
    #[serde(rename = "worker.hold_changed")]
    WorkerHoldChanged {
        /// The worker.
        worker_id: WorkerId,
        /// The new hold; absent when released.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold: Option<Hold>,
        /// Why, in the words of whoever set it (the question for a human,
        /// the dependency awaited).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// A question's choices and context (`worker_await_human`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ask: Option<crate::operator::Ask>,
    },
    /// A turn was asked for a worker (by root, the operator, or an event
    /// concerning it); kept until delivered or withdrawn.
    #[serde(rename = "continuation.requested")]
    ContinuationRequested {
        /// The worker.
        worker_id: WorkerId,
        /// Why.
        wake: Wake,
    },
    /// An execution attempt was scheduled; its command is queued in the same commit.
    #[serde(rename = "execution.scheduled")]
    ExecutionScheduled {
        /// The worker.
        worker_id: WorkerId,
        /// The attempt's sequence number for the worker (from 1).
        attempt: u32,
        /// What started it.
        reason: AttemptReason,
        /// Every wake it answers (its provenance).
        wakes: Vec<Wake>,
        /// The command that submits its prompt.
        command_id: CommandId,
    },
    /// The stall guard found a worker making no progress.
    #[serde(rename = "continuation.stalled")]
    ContinuationStalled {
        /// The worker.
        worker_id: WorkerId,
        /// Warning, or paused (a `worker.hold_changed` to `stalled` follows).
        level: StallLevel,
        /// Consecutive attempts that ended without progress.
        attempts_without_progress: u32,
        /// Milliseconds since its last progress.
        quiet_ms: u64,
    },
    /// The worker is pinned to a model: every prompt of its conversations
    /// goes in only once the page's picker shows that model.
    #[serde(rename = "worker.model_pinned")]
    WorkerModelPinned {
        /// The worker.
        worker_id: WorkerId,
        /// The model's label, as the picker shows it.
        model: String,
        /// The thinking effort pinned with it, as the picker labels it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
    },
    /// The worker recorded its own checkpoint (`worker_checkpoint`): what
    /// is done and what is next, at most `rollover::CHECKPOINT_MAX` bytes.
    /// Its next rollover's capsule carries the newest.
    #[serde(rename = "worker.checkpointed")]
    WorkerCheckpointed {
        /// The worker.
        worker_id: WorkerId,
        /// Its note.
        note: String,
    },
    /// A rollover of the worker to a fresh conversation was asked for: the
    /// worker is asked to write its checkpoint first (its conversation
    /// still takes turns); the daemon rolls it once it did, its turn ended,
    /// or the wait ran out.
    #[serde(rename = "worker.rollover_requested")]
    WorkerRolloverRequested {
        /// The worker.
        worker_id: WorkerId,
        /// Why.
        reason: crate::rollover::RolloverReason,
    },
    /// The worker's conversation was retired (left in the browser
    /// untouched; its credentials refused from now on) and its fresh one
    /// is being created through the create path, at continuation epoch
    /// `capsule.epoch`, with `capsule` for its attach.
    #[serde(rename = "worker.rolled_over")]
    WorkerRolledOver {
        /// The worker.
        worker_id: WorkerId,
        /// The conversation retired, if one was bound.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retired: Option<ConversationId>,
        /// What the fresh conversation is told.
        capsule: crate::rollover::Capsule,
    },
    /// The worker's turn does not end (`stall`, for `for_ms`): nothing is
    /// submitted into it and nothing reloads it; root or the operator
    /// decides (`worker_stop`, `runtime_recover`, or waiting on).
    #[serde(rename = "continuation.turn_stalled")]
    ContinuationTurnStalled {
        /// The worker.
        worker_id: WorkerId,
        /// What was seen.
        stall: crate::continuity::TurnStall,
        /// How long it has gone without progress from the worker (or
        /// without starting), in ms.
        for_ms: u64,
    },
    /// ChatGPT said "Too many requests" on this worker's tab: every
    /// automatic continuation, on every worker, waits out the scheduler's
    /// rate-limit wait; nothing was clicked.
    #[serde(rename = "continuation.rate_limited")]
    ContinuationRateLimited {
        /// The worker whose tab showed it.
        worker_id: WorkerId,
        /// What the executor reported (no page content).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// A worker claimed a Git worktree (ownership stream, like every
    /// `ownership.*` event): a new record, `provisional` until its
    /// conversation is bound, `active` once it is (or for a worker without
    /// a managed conversation).
    #[serde(rename = "ownership.claimed")]
    OwnershipClaimed {
        /// The new record.
        ownership_id: OwnershipId,
        /// The claiming worker.
        holder: WorkerId,
        /// Its run.
        run_id: RunId,
        /// Its execution session.
        session: Session,
        /// The worktree, as the Git adapter read it.
        worktree: Worktree,
        /// The worker's conversation, when its executor had bound one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation: Option<ConversationId>,
        /// The holder has no managed conversation to wait for (a root in
        /// its own chat): the record is active without one.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unmanaged: bool,
        /// What the work is for.
        #[serde(default)]
        labels: Labels,
        /// The worktree's record before this one (released or landed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<OwnershipId>,
    },
    /// The holder's conversation was bound by its executor (a provisional
    /// record becomes active; a rolled-over worker adds its fresh one).
    #[serde(rename = "ownership.conversation_bound")]
    OwnershipConversationBound {
        /// The record.
        ownership_id: OwnershipId,
        /// Its holder.
        holder: WorkerId,
        /// The conversation, as its executor bound it.
        conversation_id: ConversationId,
    },
    /// The holder went on in a new execution session (after a restart).
    #[serde(rename = "ownership.resumed")]
    OwnershipResumed {
        /// The record.
        ownership_id: OwnershipId,
        /// Its holder.
        holder: WorkerId,
        /// The new session.
        session: Session,
    },
    /// The holder was heard from: its lease runs from now.
    #[serde(rename = "ownership.heartbeat")]
    OwnershipHeartbeat {
        /// The record.
        ownership_id: OwnershipId,
        /// Its holder.
        holder: WorkerId,
    },
    /// The holder offered the worktree to another worker.
    #[serde(rename = "ownership.handoff_started")]
    OwnershipHandoffStarted {
        /// The record.
        ownership_id: OwnershipId,
        /// Its holder (still).
        holder: WorkerId,
        /// The worker offered it.
        to: WorkerId,
    },
    /// The worker offered the worktree accepted it: it holds it now.
    #[serde(rename = "ownership.handoff_completed")]
    OwnershipHandoffCompleted {
        /// The record.
        ownership_id: OwnershipId,
        /// The new holder.
        holder: WorkerId,
        /// Its run.
        run_id: RunId,
        /// Its execution session.
        session: Session,
        /// Its conversation, when bound.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation: Option<ConversationId>,
        /// It has no managed conversation to wait for.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unmanaged: bool,
    },
    /// A worker took over the worktree of a holder proven dead.
    #[serde(rename = "ownership.reclaimed")]
    OwnershipReclaimed {
        /// The record.
        ownership_id: OwnershipId,
        /// The new holder.
        holder: WorkerId,
        /// Its run.
        run_id: RunId,
        /// Its execution session.
        session: Session,
        /// Its conversation, when bound.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation: Option<ConversationId>,
        /// It has no managed conversation to wait for.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unmanaged: bool,
        /// The holder it was taken from.
        from: WorkerId,
        /// The proof that holder is dead.
        stale: StaleReason,
    },
    /// The holder gave the worktree up.
    #[serde(rename = "ownership.released")]
    OwnershipReleased {
        /// The record.
        ownership_id: OwnershipId,
        /// Its holder.
        holder: WorkerId,
        /// Why, when said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The worktree's work in progress was preserved under a ref (its
    /// holder's, or before a reclaim or release, whoever made that).
    #[serde(rename = "ownership.wip_preserved")]
    OwnershipWipPreserved {
        /// The record.
        ownership_id: OwnershipId,
        /// Its holder.
        holder: WorkerId,
        /// Whose call preserved it.
        by: WorkerId,
        /// The ref.
        ref_name: String,
        /// The snapshot commit.
        commit: String,
    },
    /// The worktree's branch was submitted for landing (the submit receipt).
    #[serde(rename = "ownership.submitted")]
    OwnershipSubmitted {
        /// The record.
        ownership_id: OwnershipId,
        /// Its holder.
        holder: WorkerId,
        /// The submitting session.
        session: String,
        /// The branch.
        branch: String,
        /// Its head: the source commit.
        head: String,
    },
    /// The submitted commit reached the target branch (the land receipt).
    #[serde(rename = "ownership.landed")]
    OwnershipLanded {
        /// The record.
        ownership_id: OwnershipId,
        /// Its holder.
        holder: WorkerId,
        /// Who recorded it.
        by: WorkerId,
        /// The target branch.
        into: String,
        /// The target's commit containing the source commit.
        commit: String,
        /// The source commit.
        source_head: String,
    },
    /// The worktree is gone (the Git adapter found no directory); the
    /// record and its provenance stay.
    #[serde(rename = "ownership.removed")]
    OwnershipRemoved {
        /// The record.
        ownership_id: OwnershipId,
        /// Its last holder.
        holder: WorkerId,
    },
    /// An executor's session ended (system stream).
    #[serde(rename = "executor.disconnected")]
    ExecutorDisconnected {
        /// Stable carrier identity.
        executor_id: String,
        /// The session's process start.
        executor_instance_id: String,
        /// Why, as a close reason.
        reason: String,
    },
}

impl EventBody {
    /// The dotted event type, for example `worker.created`.
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::RunCreated { .. } => "run.created",
            EventBody::RunStateChanged { .. } => "run.state_changed",
            EventBody::WorkerCreated { .. } => "worker.created",
            EventBody::WorkerStateChanged { .. } => "worker.state_changed",
            EventBody::WorkerAttached { .. } => "worker.attached",
            EventBody::WorkerProgress { .. } => "worker.progress",
            EventBody::WorkerMessage { .. } => "worker.message",
            EventBody::WorkerFollowup { .. } => "worker.followup",
            EventBody::WorkerCompleted { .. } => "worker.completed",
            EventBody::WorkerFailed { .. } => "worker.failed",
            EventBody::WorkerInterrupted { .. } => "worker.interrupted",
            EventBody::CommandQueued { .. } => "executor.command_queued",
            EventBody::CommandDispatched { .. } => "executor.command_dispatched",
            EventBody::CommandAcked { .. } => "executor.command_acked",
            EventBody::CommandCompleted { .. } => "executor.command_completed",
            EventBody::CommandCancelled { .. } => "executor.command_cancelled",
            EventBody::ConversationCreated { .. } => "conversation.created",
            EventBody::ConversationBound { .. } => "conversation.bound",
            EventBody::ConversationStateChanged { .. } => "conversation.state_changed",
            EventBody::ConversationProgressed { .. } => "conversation.progressed",
            EventBody::ConversationError { .. } => "conversation.error",
            EventBody::ConversationClosed { .. } => "conversation.closed",
            EventBody::RuntimeSlotProvisioning { .. } => "runtime.slot_provisioning",
            EventBody::RuntimeSlotAdmitted { .. } => "runtime.slot_admitted",
            EventBody::RuntimeSlotHealth { .. } => "runtime.slot_health",
            EventBody::ExecutorConnected { .. } => "executor.connected",
            EventBody::ExecutorDisconnected { .. } => "executor.disconnected",
            EventBody::ContinuationPolicyChanged { .. } => "continuation.policy_changed",
            EventBody::WorkerHoldChanged { .. } => "worker.hold_changed",
            EventBody::RunAttributionSet { .. } => "run.attribution_set",
            EventBody::WorkerBlockChanged { .. } => "worker.block_changed",
            EventBody::CallerAttributed { .. } => "caller.attributed",
            EventBody::ContinuationRequested { .. } => "continuation.requested",
            EventBody::ExecutionScheduled { .. } => "execution.scheduled",
            EventBody::ContinuationStalled { .. } => "continuation.stalled",
            EventBody::ContinuationRateLimited { .. } => "continuation.rate_limited",
            EventBody::ContinuationTurnStalled { .. } => "continuation.turn_stalled",
            EventBody::WorkerModelPinned { .. } => "worker.model_pinned",
            EventBody::WorkerCheckpointed { .. } => "worker.checkpointed",
            EventBody::WorkerRolloverRequested { .. } => "worker.rollover_requested",
            EventBody::WorkerRolledOver { .. } => "worker.rolled_over",
            EventBody::OwnershipClaimed { .. } => "ownership.claimed",
            EventBody::OwnershipConversationBound { .. } => "ownership.conversation_bound",
            EventBody::OwnershipResumed { .. } => "ownership.resumed",
            EventBody::OwnershipHeartbeat { .. } => "ownership.heartbeat",
            EventBody::OwnershipHandoffStarted { .. } => "ownership.handoff_started",
            EventBody::OwnershipHandoffCompleted { .. } => "ownership.handoff_completed",
            EventBody::OwnershipReclaimed { .. } => "ownership.reclaimed",
            EventBody::OwnershipReleased { .. } => "ownership.released",
            EventBody::OwnershipWipPreserved { .. } => "ownership.wip_preserved",
            EventBody::OwnershipSubmitted { .. } => "ownership.submitted",
            EventBody::OwnershipLanded { .. } => "ownership.landed",
            EventBody::OwnershipRemoved { .. } => "ownership.removed",
        }
    }

    /// The ownership record an `ownership.*` event is about, and its holder
    /// after it; `None` for every other event.
    pub fn ownership(&self) -> Option<(&OwnershipId, &WorkerId)> {
        match self {
            EventBody::OwnershipClaimed { ownership_id, holder, .. }
            | EventBody::OwnershipConversationBound { ownership_id, holder, .. }
            | EventBody::OwnershipResumed { ownership_id, holder, .. }
            | EventBody::OwnershipHeartbeat { ownership_id, holder }
            | EventBody::OwnershipHandoffStarted { ownership_id, holder, .. }
            | EventBody::OwnershipHandoffCompleted { ownership_id, holder, .. }
            | EventBody::OwnershipReclaimed { ownership_id, holder, .. }
            | EventBody::OwnershipReleased { ownership_id, holder, .. }
            | EventBody::OwnershipWipPreserved { ownership_id, holder, .. }
            | EventBody::OwnershipSubmitted { ownership_id, holder, .. }
            | EventBody::OwnershipLanded { ownership_id, holder, .. }
            | EventBody::OwnershipRemoved { ownership_id, holder } => Some((ownership_id, holder)),
            _ => None,
        }
    }

    /// Whether a non-root worker may see this event: it concerns the run as a
    /// whole, the worker itself, or a message addressed to it.
    pub fn visible_to(&self, worker: &WorkerId) -> bool {
        match self {
            EventBody::RunCreated { .. } | EventBody::RunStateChanged { .. } | EventBody::RunAttributionSet { .. } => {
                true
            }
            EventBody::ContinuationPolicyChanged { worker_id, .. } => worker_id.as_ref().is_none_or(|w| w == worker),
            EventBody::ExecutorConnected { .. } | EventBody::ExecutorDisconnected { .. } => false,
            // An ownership event: its holder's, and the worker it is offered
            // to, taken from, or landed by.
            EventBody::OwnershipHandoffStarted { holder, to: other, .. }
            | EventBody::OwnershipReclaimed { holder, from: other, .. }
            | EventBody::OwnershipWipPreserved { holder, by: other, .. }
            | EventBody::OwnershipLanded { holder, by: other, .. } => holder == worker || other == worker,
            EventBody::OwnershipClaimed { holder, .. }
            | EventBody::OwnershipConversationBound { holder, .. }
            | EventBody::OwnershipResumed { holder, .. }
            | EventBody::OwnershipHeartbeat { holder, .. }
            | EventBody::OwnershipHandoffCompleted { holder, .. }
            | EventBody::OwnershipReleased { holder, .. }
            | EventBody::OwnershipSubmitted { holder, .. }
            | EventBody::OwnershipRemoved { holder, .. } => holder == worker,
            EventBody::WorkerMessage { from, to, .. } => from == worker || to == worker,
            EventBody::WorkerCreated { worker_id, .. }
            | EventBody::WorkerStateChanged { worker_id, .. }
            | EventBody::WorkerAttached { worker_id, .. }
            | EventBody::WorkerProgress { worker_id, .. }
            | EventBody::WorkerFollowup { worker_id, .. }
            | EventBody::WorkerCompleted { worker_id, .. }
            | EventBody::WorkerFailed { worker_id, .. }
            | EventBody::WorkerInterrupted { worker_id, .. }
            | EventBody::CommandQueued { worker_id, .. }
            | EventBody::CommandDispatched { worker_id, .. }
            | EventBody::CommandAcked { worker_id, .. }
            | EventBody::CommandCompleted { worker_id, .. }
            | EventBody::CommandCancelled { worker_id, .. }
            | EventBody::ConversationCreated { worker_id, .. }
            | EventBody::ConversationBound { worker_id, .. }
            | EventBody::ConversationStateChanged { worker_id, .. }
            | EventBody::ConversationProgressed { worker_id }
            | EventBody::ConversationError { worker_id, .. }
            | EventBody::ConversationClosed { worker_id, .. }
            | EventBody::RuntimeSlotProvisioning { worker_id, .. }
            | EventBody::RuntimeSlotAdmitted { worker_id, .. }
            | EventBody::RuntimeSlotHealth { worker_id, .. }
            | EventBody::WorkerHoldChanged { worker_id, .. }
            | EventBody::WorkerBlockChanged { worker_id, .. }
            | EventBody::CallerAttributed { worker_id, .. }
            | EventBody::ContinuationRequested { worker_id, .. }
            | EventBody::ExecutionScheduled { worker_id, .. }
            | EventBody::ContinuationStalled { worker_id, .. }
            | EventBody::ContinuationRateLimited { worker_id, .. }
            | EventBody::ContinuationTurnStalled { worker_id, .. }
            | EventBody::WorkerModelPinned { worker_id, .. }
            | EventBody::WorkerCheckpointed { worker_id, .. }
            | EventBody::WorkerRolloverRequested { worker_id, .. }
            | EventBody::WorkerRolledOver { worker_id, .. } => worker_id == worker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(n: u8) -> WorkerId {
        WorkerId::from_uuid_bytes([n; 16])
    }

    #[test]
    fn events_round_trip_with_flat_type_and_data() {
        let event = Event {
            cursor: 7,
            run_id: RunId::from_uuid_bytes([1; 16]),
            at_ms: 1_700_000_000_000,
            body: EventBody::WorkerMessage {
                message_id: MessageId::from_uuid_bytes([2; 16]),
                from: worker(3),
                to: worker(4),
                kind: MessageKind::Question,
                body: "which port?".into(),
                in_reply_to: None,
            },
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "worker.message");
        assert_eq!(json["data"]["kind"], "question");
        assert_eq!(json["cursor"], 7);
        assert_eq!(event.body.kind(), "worker.message");
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }

    #[test]
    fn unknown_event_types_are_refused() {
        let json = r#"{"cursor":1,"run_id":"run_01010101010101010101010101010101","at_ms":1,"type":"worker.teleported","data":{}}"#;
        assert!(serde_json::from_str::<Event>(json).is_err());
    }

    #[test]
    fn workers_see_only_their_own_events_and_their_mail() {
        let (a, b) = (worker(1), worker(2));
        let mail = EventBody::WorkerMessage {
            message_id: MessageId::from_uuid_bytes([9; 16]),
            from: worker(0),
            to: a.clone(),
            kind: MessageKind::Answer,
            body: String::new(),
            in_reply_to: None,
        };
        assert!(mail.visible_to(&a));
        assert!(!mail.visible_to(&b));
        let progress = EventBody::WorkerProgress { worker_id: b.clone(), summary: "x".into(), percent: None };
        assert!(!progress.visible_to(&a));
        assert!(progress.visible_to(&b));
    }
}
