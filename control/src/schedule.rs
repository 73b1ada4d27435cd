//! What falls due with the passage of time. Pure: the state, the connected
//! executors and `now` in; what to do out. The shell owns the timer: it asks
//! [`next_due_at`] when to wake and commits what [`due`] returns.
//!
//! The one rule today keeps every wait on a conversation state bounded.
//! A send waits while its conversation is `generating` or `loading`; if the
//! report that it went idle was lost (the daemon died meanwhile, or the
//! executor never re-sent it), the wait would last forever. So the daemon
//! re-inspects a conversation whose blocking state
//! - predates its executor's current session (it may be stale since the
//!   reconnect): at once, or
//! - has not been confirmed for [`Policy::recheck_after_ms`] while a command
//!   waits on it, or while an Auto worker's next turn does (Execution
//!   Continuity): at that bound, and again every bound after.
//!
//! A turn the daemon believes open is bounded the same way: a continuation
//! was submitted, yet its page was never seen generating since and shows
//! idle (its reports were lost, for example with a daemon that died
//! between the submission and its result). Idle is not a blocking state,
//! so nothing else would ask: the daemon inspects it
//! [`Policy::recheck_after_ms`] after the submission, and an inspect that
//! still finds the page idle ends the turn (see `model`), so the worker is
//! resumed instead of stalling silently.
//!
//! At most one inspect per conversation is open at a time, and each one that
//! finishes (either outcome) restarts the bound, so a failing inspect is
//! retried at the bound's pace, never in a loop.
//!
//! A second rule keeps a spawned worker waiting for its browser rather than
//! failing: its create was refused because the executor could not reach
//! the browser session ([`waits_for_browser`]: no prompt went in, so no
//! conversation can be duplicated), so the daemon queues the create again after
//! [`RELAUNCH_FIRST_MS`], doubling with each refusal up to
//! [`RELAUNCH_MAX_MS`], while an executor is connected. Meanwhile the
//! worker shows `waiting_for: browser` with the executor's reason.

use protocol::executor::ConversationState;
use protocol::{CommandIntent, WorkerId};

use crate::model::{CommandPhase, State, Worker};

/// The first pause before a create refused for want of a browser is queued again.
pub const RELAUNCH_FIRST_MS: u64 = 30_000;
/// The longest pause between two such creates.
pub const RELAUNCH_MAX_MS: u64 = 300_000;

/// Whether a create refused with `code` waits for a person to start or
/// authorize the browser: the executor could not drive a page, so nothing
/// was submitted (these codes are not "maybe" outcomes).
pub fn waits_for_browser(code: protocol::ErrorCode) -> bool {
    matches!(code, protocol::ErrorCode::BrowserControlUnavailable | protocol::ErrorCode::BrowserAuthorizationRequired)
}

/// How the scheduler's rules are tuned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Milliseconds after the last report (or inspect) of `generating` or
    /// `loading` before a waiting command makes the daemon ask again.
    pub recheck_after_ms: u64,
    /// The account-wide budget for automatic continuation attempts.
    pub pacing: crate::continuity::Pacing,
    /// Tab capacity per executor and the reopening of lost tabs, if any
    /// (see [`crate::tabs`]; `usize::MAX` tabs: no capacity, reopening only).
    pub tabs: Option<crate::tabs::TabPolicy>,
    /// When workers roll over to a fresh conversation (see [`crate::rollover`]).
    pub rollover: crate::rollover::RolloverPolicy,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            recheck_after_ms: 30_000,
            pacing: crate::continuity::Pacing::default(),
            tabs: None,
            rollover: crate::rollover::RolloverPolicy::default(),
        }
    }
}

/// The workers whose conversation the daemon should inspect now.
pub fn due(state: &State, connected: &[String], now_ms: u64, policy: Policy) -> Vec<WorkerId> {
    let mut due: Vec<WorkerId> = state
        .workers
        .values()
        .filter(|w| recheck_at(state, w, connected, policy).is_some_and(|at| at <= now_ms))
        .map(|w| w.id.clone())
        .collect();
    due.sort();
    due
}

/// When the next inspect falls due, if any is scheduled at all.
pub fn next_due_at(state: &State, connected: &[String], policy: Policy) -> Option<u64> {
    state.workers.values().filter_map(|w| recheck_at(state, w, connected, policy)).min()
}

/// When `worker`'s conversation should be inspected, if its state blocks
/// anything and could be stale.
fn recheck_at(state: &State, worker: &Worker, connected: &[String], policy: Policy) -> Option<u64> {
    let executor = worker.executor_id.as_ref().filter(|e| connected.contains(e))?;
    // A tool-approval card, a person's draft or an unreachable browser
    // holds sends as `generating` does (see `queue`): a lost report that the
    // person is done, or a browser that woke without a word, must not hold
    // them for ever.
    let held = worker.conversation_state == Some(ConversationState::Error)
        && worker.last_error.is_some_and(|e| e.holds_sends());
    let blocking =
        held || matches!(worker.conversation_state, Some(ConversationState::Generating | ConversationState::Loading));
    let unconfirmed = worker.continuity.turn_unconfirmed(worker.conversation_state);
    // A parked tab is idle by definition; its next send reopens it.
    if !(blocking || unconfirmed) || worker.conversation.is_none() || worker.fenced || worker.parked {
        return None;
    }
    let open = state.open_commands.iter().filter_map(|id| state.commands.get(id)).filter(|c| c.worker_id == worker.id);
    let mut waiting = false;
    for command in open {
        if command.intent == CommandIntent::Inspect {
            return None;
        }
        waiting |= command.phase == CommandPhase::Queued;
    }
    if unconfirmed {
        let since = worker.continuity.last_submitted_at_ms.unwrap_or(0).max(worker.state_checked_at_ms);
        return Some(since.saturating_add(policy.recheck_after_ms));
    }
    let session_began = state.executor_connected_at.get(executor).copied().unwrap_or(0);
    if worker.state_checked_at_ms < session_began {
        return Some(session_began);
    }
    // An Auto worker's next turn waits on this state as a queued command
    // would: a lost "idle" must not hold it until the stalled-turn bound.
    let resumes =
        worker.continuity.policy.mode == protocol::continuity::ContinuationMode::Auto && !worker.state.is_terminal();
    (waiting || resumes).then(|| worker.state_checked_at_ms.saturating_add(policy.recheck_after_ms))
}

/// The spawned workers whose create should be queued again now (the second
/// rule in the module doc).
pub fn relaunches_due(state: &State, connected: &[String], now_ms: u64) -> Vec<WorkerId> {
    let mut due: Vec<WorkerId> = state
        .workers
        .values()
        .filter(|w| relaunch_at(state, w, connected).is_some_and(|at| at <= now_ms))
        .map(|w| w.id.clone())
        .collect();
    due.sort();
    due
}

/// When the next such create falls due, if any.
pub fn next_relaunch_at(state: &State, connected: &[String]) -> Option<u64> {
    state.workers.values().filter_map(|w| relaunch_at(state, w, connected)).min()
}

/// How many creates `worker` has had, each refused or not.
pub fn creates_of(state: &State, worker: &WorkerId) -> usize {
    state.commands.values().filter(|c| &c.worker_id == worker && c.intent == CommandIntent::Create).count()
}

fn relaunch_at(state: &State, worker: &Worker, connected: &[String]) -> Option<u64> {
    // No executor holds it: its last create was refused (an uncertain one
    // keeps its executor, and is reconciled, never created again).
    let waiting = matches!(worker.state, protocol::WorkerState::LaunchRequested | protocol::WorkerState::Launching)
        && worker.conversation.is_none()
        && worker.executor_id.is_none()
        && worker.last_error.is_some_and(waits_for_browser)
        && state.runtime.by_worker(&worker.id).is_none()
        && !connected.is_empty();
    if !waiting {
        return None;
    }
    let open = state
        .open_commands
        .iter()
        .filter_map(|id| state.commands.get(id))
        .any(|c| c.worker_id == worker.id && c.intent == CommandIntent::Create);
    if open {
        return None;
    }
    let refusals = creates_of(state, &worker.id).clamp(1, 8) as u32;
    let pause = RELAUNCH_FIRST_MS.saturating_mul(1 << (refusals - 1)).min(RELAUNCH_MAX_MS);
    Some(worker.updated_at_ms.saturating_add(pause))
}
