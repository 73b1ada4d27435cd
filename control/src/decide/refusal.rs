//! Why [`super::decide`] refuses a request: one variant per rule, with the
//! ids and states it is about. Nothing was decided; the caller gets the
//! rule's stable code ([`Refusal::code`], the one mapping) and its message.

use protocol::{CommandId, ErrorCode, MessageId, OwnershipId, RunId, RunState, SlotHealth, WorkerId, WorkerState};

/// A refused request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No such worker.
    #[error("worker {0} not found")]
    NoWorker(WorkerId),
    /// No such worker in the actor's run.
    #[error("worker {0} in this run not found")]
    NoWorkerInRun(WorkerId),
    /// No worker at this path in the actor's run.
    #[error("worker {0} in this run not found")]
    NoPathInRun(String),
    /// No such run.
    #[error("run {0} not found")]
    NoRun(RunId),
    /// No such executor command.
    #[error("command {0} not found")]
    NoCommand(CommandId),
    /// No such message in the actor's run.
    #[error("message {0} in this run not found")]
    NoMessageInRun(MessageId),
    /// No such pool slot in the run.
    #[error("slot {0} not found")]
    NoSlot(u32),
    /// A new id that already names something (a replayed request that lost its key).
    #[error("{0} already exists")]
    IdTaken(&'static str),
    /// Another worker of the run has this name.
    #[error("a worker named {0} already exists in this run")]
    NameTaken(String),
    /// A worker name outside the allowed form.
    #[error("name must be 1-64 characters of a-z, 0-9, '-' or '_'")]
    BadName,
    /// An assignment with nothing to do.
    #[error("assignment.objective must not be empty")]
    EmptyObjective,
    /// A progress percentage outside 0–100.
    #[error("percent must be between 0 and 100")]
    BadPercent,
    /// A message to oneself.
    #[error("a worker cannot message itself")]
    MessageToSelf,
    /// A broadcast given fewer message ids than recipients.
    #[error("not enough message ids for the recipients")]
    TooFewMessageIds,
    /// Root named as the target of a root-only action on workers.
    #[error("root cannot be the target")]
    RootAsTarget,
    /// A code reported as a host state that is not one.
    #[error("{0} is not a host state")]
    NotAHostState(ErrorCode),
    /// `hello` or `heartbeat` handed to the plane as a report.
    #[error("hello, heartbeat, callerSeen and operatorAct are session frames, not reports")]
    SessionFrame,
    /// A follow-up number on a report that names no work.
    #[error("only progress, completion and failure name their work")]
    WorkNotNamed,
    /// A report on a follow-up that does not exist yet.
    #[error("there is no follow-up #{followup} (newest: {newest})")]
    NoSuchFollowup {
        /// The follow-up named.
        followup: u32,
        /// The newest one.
        newest: u32,
    },
    /// A field over its size bound.
    #[error("{field} is too large: {len} bytes/items, at most {max}")]
    TooLarge {
        /// The field.
        field: &'static str,
        /// Its size.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Only the run's root may do this.
    #[error("only root may do this")]
    RootOnly,
    /// The worker asks nothing now: its question was answered already (by
    /// another surface or key), or it never asked.
    #[error("worker {0} asks nothing now: its question was answered already")]
    NothingAsked(WorkerId),
    /// Root never attaches, unless the daemon launched it (a managed root).
    #[error("root does not attach; it uses the capability from run_create")]
    RootDoesNotAttach,
    /// A pool worker attaches only through admission.
    #[error("pool workers attach through admission (runtime_bootstrap)")]
    PoolWorkerAttach,
    /// Workers may message root or their parent only.
    #[error("workers may message root or their parent only")]
    MessageRecipient,
    /// A reply to a message addressed to someone else.
    #[error("in_reply_to names a message addressed to another worker")]
    ReplyToOthers,
    /// The worker's conversation belongs to another executor.
    #[error("worker {0} is bound to another executor")]
    BoundElsewhere(WorkerId),
    /// A report about a command another executor holds.
    #[error("command {0} is not held by this executor")]
    CommandNotHeld(CommandId),
    /// A report about a worker another executor holds.
    #[error("worker {0} is not held by this executor")]
    WorkerNotHeld(WorkerId),
    /// `conversationCreated` naming another worker than its command's.
    #[error("conversationCreated names another worker than its command")]
    CreatedForAnother,
    /// The worker's state does not allow this.
    #[error("worker is {0:?}")]
    WorkerIs(WorkerState),
    /// The worker ended or failed to launch: it can no longer attach.
    #[error("worker is {0:?}; it can no longer attach")]
    CannotAttach(WorkerState),
    /// The worker already ended.
    #[error("worker is already {0:?}")]
    AlreadyEnded(WorkerState),
    /// A follow-up for a worker that never started or ended.
    #[error("a {0:?} worker cannot take a follow-up")]
    NoFollowupFor(WorkerState),
    /// A command for a worker whose conversation is not bound (yet).
    #[error("worker {0} has no bound conversation")]
    Unbound(WorkerId),
    /// A request id of an earlier turn (or of another worker).
    #[error("request id {0} belongs to a turn that has ended: a replayed call is refused")]
    RequestReplayed(String),
    /// Root tried to lift a block a person set.
    #[error("a person blocked this chat from the browser; only they can unblock it there")]
    BlockedByPerson,
    /// A request id or tool name outside its form.
    #[error("a request id is 1-100 of [A-Za-z0-9_-] and a tool name 1-64 of [a-z0-9_]")]
    BadAttribution,
    /// A capability used to act as another worker.
    #[error("a capability acts only as its own worker")]
    NotYourself,
    /// An inspect for a worker without a conversation.
    #[error("worker {0} has no conversation to inspect")]
    NoConversation(WorkerId),
    /// A dispatch of a command that is not queued.
    #[error("command {0} is not queued")]
    NotQueued(CommandId),
    /// A report about a command that was never dispatched.
    #[error("command {0} was never dispatched")]
    NeverDispatched(CommandId),
    /// A pool slot that is already held.
    #[error("slot {0} is held")]
    SlotHeld(u32),
    /// Only a lost, bound slot is reopened.
    #[error("slot {slot} is {health:?}; only a lost, bound slot is reopened")]
    SlotNotLost {
        /// The slot.
        slot: u32,
        /// Its health.
        health: SlotHealth,
    },
    /// A protected slot (why, as the pool says).
    #[error("slot {slot} is protected: {why}")]
    SlotProtected {
        /// The slot.
        slot: u32,
        /// The protection.
        why: String,
    },
    /// The run no longer accepts this action.
    #[error("run is {0:?}; it does not accept this action")]
    RunNotActive(RunState),
    /// The run holds its maximum of workers.
    #[error("a run holds at most {0} workers")]
    RunFull(usize),
    /// A report on work a newer follow-up superseded.
    #[error(
        "superseded: this reports on {}, but follow-up #{newest} is waiting: read it with worker_attach",
        if *followup == 0 { "the original assignment".to_owned() } else { format!("follow-up #{followup}") }
    )]
    Superseded {
        /// The follow-up the report names (0: the original assignment).
        followup: u32,
        /// The newest follow-up.
        newest: u32,
    },
    /// A continuation policy out of its bounds.
    #[error("continuation policy refused: {0}")]
    BadPolicy(String),
    /// A question's choices or context out of bounds, or given with a hold
    /// that is no question.
    #[error("question refused: {0}")]
    BadAsk(String),
    /// A stall hold asked for by a caller: only the stall guard sets it.
    #[error("only the stall guard pauses a worker for a stall; use paused")]
    StallIsTheGuards,
    /// "Continue now" for a worker waiting on a person or a dependency.
    #[error("the worker is {0:?}: release it with worker_resume first")]
    Held(protocol::continuity::Hold),
    /// A due attempt that does not follow the worker's latest (a stale finding).
    #[error("attempt {attempt} does not follow attempt {latest}")]
    AttemptOutOfSequence {
        /// The attempt found due.
        attempt: u32,
        /// The worker's latest.
        latest: u32,
    },
    /// A model label outside its form.
    #[error("model must be 1-64 characters without control characters or surrounding spaces, as the picker shows it")]
    BadModel,
    /// A rollover for a worker whose executor does not roll conversations over.
    #[error("the executor holding worker {0} does not roll conversations over (it declared no conversation_rollover)")]
    NoRolloverCarrier(WorkerId),
    /// A rollover while a command of the worker is in flight.
    #[error("a command of worker {0} is in flight; it rolls over once that settles")]
    RolloverBusy(WorkerId),
    /// A worker that rolled over as often as allowed.
    #[error("the worker rolled over {0} times already; look at its conversations")]
    RolloversExhausted(u32),
    /// A pool admission claim was refused.
    #[error("admission refused: {0}")]
    Admission(admission::Refusal),
    /// No such ownership record.
    #[error("ownership {0} not found")]
    NoOwnership(OwnershipId),
    /// Ownership arguments outside their form.
    #[error("{0}")]
    BadOwnership(String),
    /// The worktree is held by another live record.
    #[error(
        "worktree {worktree} is held by {held_by} ({holder}); ask it to hand over or release it (or reclaim it, if its holder is proven dead)"
    )]
    WorktreeHeld {
        /// The worktree.
        worktree: String,
        /// The live record.
        held_by: OwnershipId,
        /// Its holder.
        holder: WorkerId,
    },
    /// The worktree is held in another run that is still open: who holds
    /// it there is that run's to know.
    #[error(
        "worktree {0} is held in another run; that run's root can release it, or a worker here reclaims it once that run has ended"
    )]
    WorktreeHeldElsewhere(String),
    /// The worktree's Git projection names a live owner this daemon never recorded.
    #[error(
        "the worktree's Git projection names ownership {0}, which this daemon does not know; another orchestrator may hold it"
    )]
    ForeignProjection(String),
    /// The caller does not hold the record (or is not the worker it is offered to).
    #[error("you do not hold ownership {0}")]
    NotHolder(OwnershipId),
    /// A change the record's state does not allow.
    #[error("ownership {0} is {1:?}")]
    OwnershipIs(OwnershipId, protocol::ownership::OwnershipState),
    /// A reclaim of a record whose holder is live.
    #[error("ownership {0}'s holder is live (last seen {1} ms ago); ask it to hand over")]
    HolderLive(OwnershipId, u64),
    /// A record passed on as often as allowed.
    #[error("ownership {0} had {max} holders; release it and claim the worktree afresh", max = protocol::ownership::HOLDERS_MAX)]
    HoldersExhausted(OwnershipId),
}

impl Refusal {
    /// The stable wire code: the one place a rule becomes a code.
    pub fn code(&self) -> ErrorCode {
        use Refusal::*;
        match self {
            NoWorker(_) | NoWorkerInRun(_) | NoPathInRun(_) | NoRun(_) | NoCommand(_) | NoMessageInRun(_)
            | NoSlot(_) | NoOwnership(_) => ErrorCode::NotFound,
            IdTaken(_)
            | NameTaken(_)
            | BadName
            | EmptyObjective
            | BadPercent
            | MessageToSelf
            | TooFewMessageIds
            | RootAsTarget
            | NotAHostState(_)
            | SessionFrame
            | WorkNotNamed
            | NoSuchFollowup { .. }
            | BadPolicy(_)
            | BadAsk(_)
            | StallIsTheGuards
            | BadModel
            | BadAttribution
            | BadOwnership(_) => ErrorCode::InvalidArgument,
            RequestReplayed(_) => ErrorCode::UnidentifiedCaller,
            TooLarge { .. } => ErrorCode::TooLarge,
            BlockedByPerson => ErrorCode::Forbidden,
            RootOnly | NotYourself | RootDoesNotAttach | PoolWorkerAttach | MessageRecipient | ReplyToOthers
            | BoundElsewhere(_) | CommandNotHeld(_) | WorkerNotHeld(_) | CreatedForAnother => ErrorCode::Forbidden,
            WorkerIs(_)
            | Unbound(_)
            | CannotAttach(_)
            | AlreadyEnded(_)
            | NoFollowupFor(_)
            | NoConversation(_)
            | NotQueued(_)
            | NeverDispatched(_)
            | SlotHeld(_)
            | SlotNotLost { .. }
            | SlotProtected { .. }
            | Held(_)
            | NoRolloverCarrier(_)
            | RolloverBusy(_)
            | AttemptOutOfSequence { .. }
            | NothingAsked(_)
            | OwnershipIs(..) => ErrorCode::InvalidTransition,
            RunNotActive(_) => ErrorCode::RunNotActive,
            RunFull(_) | RolloversExhausted(_) | HoldersExhausted(_) => ErrorCode::LimitReached,
            WorktreeHeld { .. } | WorktreeHeldElsewhere(_) | ForeignProjection(_) => ErrorCode::OwnershipConflict,
            NotHolder(_) => ErrorCode::OwnershipNotHolder,
            HolderLive(..) => ErrorCode::OwnershipHolderLive,
            Superseded { .. } => ErrorCode::Conflict,
            Admission(refusal) => refusal.code(),
        }
    }
}
