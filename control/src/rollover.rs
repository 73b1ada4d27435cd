//! When workers roll over to a fresh conversation (see
//! `protocol::rollover`). Pure: the state, the policy and the time in, the
//! rollovers and checkpoint requests due out; `decide` records them.
//!
//! Rules, for a working worker (running or waiting) whose executor declared
//! `conversation_rollover`, below `ROLLOVERS_MAX`:
//! - its page says the conversation reached its maximum length: it rolls
//!   at once (nothing more can be typed there; the capsule comes from the
//!   log alone);
//! - a rollover was asked for (root, or the meter): it rolls once the
//!   worker wrote its checkpoint since, or the request's prompt is done and
//!   the page is idle, or `checkpoint_wait_ms` passed;
//! - its context meter grew by `at_bytes` since its conversation first
//!   attached: a rollover is asked for (the worker is prompted to write its
//!   checkpoint first).
//!
//! A worker rolls only with no command in flight (its queued ones are
//! dropped: the fresh conversation's attach carries everything).

use std::collections::HashMap;

use protocol::executor::ConversationState;
use protocol::rollover::{ROLLOVERS_MAX, RolloverReason};
use protocol::{CommandIntent, ErrorCode, PromptRef, WorkerId, WorkerState};

use crate::model::{State, Worker};

/// How rollovers are tuned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RolloverPolicy {
    /// The context meter's threshold, if any: a worker whose current
    /// conversation carried this many bytes is asked to roll over.
    pub at_bytes: Option<u64>,
    /// How long a requested rollover waits for the worker's checkpoint.
    pub checkpoint_wait_ms: u64,
}

impl RolloverPolicy {
    /// The default meter threshold: about 100,000 tokens of what the
    /// orchestrator sees, well inside a conversation's length.
    pub const DEFAULT_AT_BYTES: u64 = 400_000;
    /// The default wait for a checkpoint.
    pub const DEFAULT_CHECKPOINT_WAIT_MS: u64 = 300_000;
}

impl Default for RolloverPolicy {
    fn default() -> Self {
        Self { at_bytes: Some(Self::DEFAULT_AT_BYTES), checkpoint_wait_ms: Self::DEFAULT_CHECKPOINT_WAIT_MS }
    }
}

/// What is due now.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Due {
    /// Workers to roll over now, and why.
    pub rolls: Vec<(WorkerId, RolloverReason)>,
    /// Workers to ask for a checkpoint before rolling, and why.
    pub asks: Vec<(WorkerId, RolloverReason)>,
}

impl Due {
    /// Nothing is due.
    pub fn is_empty(&self) -> bool {
        self.rolls.is_empty() && self.asks.is_empty()
    }
}

/// What a worker has open.
#[derive(Debug, Default, Clone, Copy)]
struct Open {
    /// A command in flight.
    in_flight: bool,
    /// The rollover prompt, not yet done.
    asking: bool,
    /// A create, queued or in flight.
    creating: bool,
}

fn open_by_worker(state: &State) -> HashMap<&WorkerId, Open> {
    let mut open: HashMap<&WorkerId, Open> = HashMap::new();
    for c in state.open_commands.iter().filter_map(|id| state.commands.get(id)) {
        let entry = open.entry(&c.worker_id).or_default();
        entry.in_flight |= c.in_flight();
        entry.asking |= c.intent == CommandIntent::Send { prompt: PromptRef::Rollover, steer: false };
        entry.creating |= c.intent == CommandIntent::Create;
    }
    open
}

/// Whether `worker` may roll over at all (the command's own checks are `decide`'s).
pub fn eligible(state: &State, worker: &Worker) -> bool {
    matches!(worker.state, WorkerState::Running | WorkerState::Waiting)
        && !worker.fenced
        && worker.epoch < ROLLOVERS_MAX
        && worker.executor_id.as_ref().is_some_and(|e| state.rolling_executors.contains(e))
}

/// Whether the worker's page says its conversation takes no more turns.
pub fn full(worker: &Worker) -> bool {
    worker.conversation.is_some()
        && worker.conversation_state == Some(ConversationState::Error)
        && worker.last_error == Some(ErrorCode::ConversationTooLong)
}

/// The rollovers and checkpoint requests due at `now_ms`, by worker id.
pub fn due(state: &State, policy: RolloverPolicy, now_ms: u64) -> Due {
    let open = open_by_worker(state);
    let mut due = Due::default();
    for w in state.workers.values().filter(|w| eligible(state, w)) {
        let open = open.get(&w.id).copied().unwrap_or_default();
        let roll = match w.rollover {
            // A rollover whose create failed, asked for again.
            Some((reason, _)) if w.rolling() => (!open.creating).then_some(reason),
            _ if w.conversation.is_none() => None,
            _ if full(w) => Some(RolloverReason::TooLong),
            Some((reason, since)) => {
                let checkpointed = w.checkpoint.as_ref().is_some_and(|(_, at)| *at >= since);
                // The prompt went in and the turn it started ended (a sent
                // prompt clears the idle mark; the page sets it anew).
                let answered = !open.asking
                    && w.conversation_state == Some(ConversationState::Idle)
                    && w.continuity.idle_since_ms.is_some_and(|t| t >= since);
                let waited = now_ms >= since.saturating_add(policy.checkpoint_wait_ms);
                (checkpointed || answered || waited).then_some(reason)
            }
            None => {
                if policy.at_bytes.is_some_and(|at| w.context_bytes.saturating_sub(w.context_floor) >= at) {
                    due.asks.push((w.id.clone(), RolloverReason::ContextMeter));
                }
                None
            }
        };
        if let Some(reason) = roll.filter(|_| !open.in_flight) {
            due.rolls.push((w.id.clone(), reason));
        }
    }
    due.rolls.sort();
    due.asks.sort();
    due
}

/// When a requested rollover stops waiting for its checkpoint, if one waits.
pub fn next_due_at(state: &State, policy: RolloverPolicy, now_ms: u64) -> Option<u64> {
    state
        .workers
        .values()
        .filter(|w| w.conversation.is_some() && eligible(state, w))
        .filter_map(|w| w.rollover.map(|(_, since)| since.saturating_add(policy.checkpoint_wait_ms)))
        .filter(|at| *at > now_ms)
        .min()
}
