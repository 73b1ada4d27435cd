//! Tab capacity: each executor keeps at most `max_open` managed tabs open
//! (`serve --max-open-tabs`). Pure, like [`crate::schedule`]: the state and
//! `now` in, what to queue out; the [`crate::scheduler`] task commits it and
//! [`crate::queue`] dispatches it.
//!
//! - A worker holds a tab on its executor from its create's dispatch until
//!   its tab is parked, closed or lost; a parked worker whose `open` is in
//!   flight holds one again.
//! - When an executor has more tabs open than its capacity, or a parked
//!   worker's reopen or a create waits for room on it, the tabs of its idle
//!   workers are parked, the longest idle first. A worker is idle when its
//!   conversation reads idle, no command of it is queued or in flight,
//!   Execution Continuity wants no turn of it, and nothing happened to it
//!   for `idle_grace_ms`. Root's tab (Main) is never parked. The executor
//!   closes a tab only if its page agrees (idle, nothing in the composer;
//!   else `TAB_IN_USE`, and the refusal's own events restart the grace).
//! - A parked worker with a prompt to deliver gets an `open` first (the
//!   exact conversation, in a new tab); the queue dispatches it ahead of
//!   the prompt once its executor has room.
//! - A worker whose tab was lost (a person closed it, the browser
//!   restarted) is parked too, capacity or not, and reopened the same way;
//!   at once if the tab went mid-turn, so that the turn's end is seen.

use std::collections::HashMap;

use protocol::executor::ConversationState;
use protocol::{CommandIntent, WorkerId};

use crate::model::{CommandPhase, QueuedCommand, State, Worker};

/// The capacity and the grace before an idle tab may be parked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TabPolicy {
    /// Managed tabs open at once per executor.
    pub max_open: usize,
    /// How long a worker stays idle before its tab may be parked.
    pub idle_grace_ms: u64,
}

impl TabPolicy {
    /// The grace when none is configured: a minute, as people expect a tab
    /// they just watched finish to stay a little.
    pub const DEFAULT_GRACE_MS: u64 = 60_000;
}

/// What to queue now: parks and reopens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Due {
    /// Workers whose idle tab is to be parked.
    pub parks: Vec<WorkerId>,
    /// Parked workers to reopen in their exact conversation.
    pub opens: Vec<WorkerId>,
}

impl Due {
    /// Whether there is nothing to queue.
    pub fn is_empty(&self) -> bool {
        self.parks.is_empty() && self.opens.is_empty()
    }
}

/// Each worker's open commands, indexed once per pass (a pass looks at
/// every worker; scanning the queue for each would cost workers × queue).
struct Open<'a>(HashMap<&'a WorkerId, Vec<&'a QueuedCommand>>);

impl<'a> Open<'a> {
    fn index(state: &'a State) -> Open<'a> {
        let mut by_worker: HashMap<&WorkerId, Vec<&QueuedCommand>> = HashMap::new();
        for c in state.open_commands.iter().filter_map(|id| state.commands.get(id)) {
            by_worker.entry(&c.worker_id).or_default().push(c);
        }
        Open(by_worker)
    }

    fn of(&self, worker: &WorkerId) -> impl Iterator<Item = &'a QueuedCommand> + '_ {
        self.0.get(worker).into_iter().flatten().copied()
    }
}

/// Whether `worker` holds a tab on its executor now: its create is in
/// flight, or its conversation is bound and its tab neither closed nor
/// parked, or its reopen (after a park or a lost tab) is in flight.
fn holds_tab(open: &Open, worker: &Worker) -> bool {
    let in_flight = |intent: CommandIntent| open.of(&worker.id).any(|c| c.intent == intent && c.in_flight());
    if worker.executor_id.is_none() {
        return false;
    }
    if worker.conversation.is_none() {
        return in_flight(CommandIntent::Create);
    }
    if worker.parked || worker.conversation_state == Some(ConversationState::Closed) {
        return in_flight(CommandIntent::Open);
    }
    true
}

/// How many managed tabs each executor holds open.
pub fn open_tabs(state: &State) -> HashMap<&str, usize> {
    tabs_of(state, &Open::index(state))
}

fn tabs_of<'a>(state: &'a State, open: &Open) -> HashMap<&'a str, usize> {
    let mut tabs = HashMap::new();
    for w in state.workers.values().filter(|w| holds_tab(open, w)) {
        *tabs.entry(w.executor_id.as_deref().expect("holds a tab")).or_default() += 1;
    }
    tabs
}

/// Reopens in a row that may fail before a tab lost mid-turn waits for its
/// worker's next prompt instead.
const UNSEEN_REOPENS_MAX: u32 = 3;

/// How long a reopen waits after `failures` in a row failed: the grace,
/// doubling, at most five minutes.
const REOPEN_BACKOFF_MAX_MS: u64 = 300_000;

/// When `worker`, parked with a prompt waiting or with a turn whose end was
/// never seen (its tab was lost mid-turn: only its page can say how the
/// turn ended), is to be reopened: at once, or after a backoff when its
/// last reopens failed.
fn reopen_at(open: &Open, worker: &Worker, policy: TabPolicy) -> Option<u64> {
    if !worker.parked || open.of(&worker.id).any(|c| c.intent == CommandIntent::Open) {
        return None;
    }
    let prompt_waits = open.of(&worker.id).any(|c| matches!(c.intent, CommandIntent::Send { .. }));
    // Not a worker that waits for a person (its page may show them a card
    // they chose to close), nor one whose reopens keep failing (its
    // conversation may be gone): those wait for their next prompt.
    let turn_running = worker.continuity.turn_open || worker.continuity.busy_since_ms.is_some();
    let turn_unseen = turn_running
        && !worker.state.is_terminal()
        && !worker.fenced
        && worker.continuity.hold.is_none()
        && worker.reopen_failures < UNSEEN_REOPENS_MAX;
    let waits = prompt_waits || turn_unseen;
    if !waits {
        return None;
    }
    if worker.reopen_failures == 0 {
        return Some(0);
    }
    let backoff = policy.idle_grace_ms.saturating_mul(1 << worker.reopen_failures.min(16)).min(REOPEN_BACKOFF_MAX_MS);
    Some(worker.updated_at_ms.saturating_add(backoff))
}

/// When `worker`'s tab may be parked (its grace's end), if it is idle: its
/// page reads idle, no command of it is open, and Execution Continuity
/// either wants no turn of it or holds that turn (a question, an answer
/// awaited, a pause, a dependency, manual mode). Only on an executor that
/// parks (`protocol::executor::PARK`); never root's.
fn idle_since(state: &State, open: &Open, worker: &Worker, now_ms: u64) -> Option<u64> {
    use crate::continuity::Verdict;
    if !worker.executor_id.as_ref().is_some_and(|e| state.parking_executors.contains(e)) {
        return None;
    }
    let run = state.runs.get(&worker.run_id)?;
    let turn = worker.continuity.evaluate(run.state, worker.state, false, now_ms);
    let idle = !worker.parked
        && !worker.is_root()
        && worker.conversation.is_some()
        && worker.conversation_state == Some(ConversationState::Idle)
        && worker.continuity.in_flight.is_none()
        && matches!(turn, None | Some(Verdict::Hold(_) | Verdict::Cancel(_)))
        && open.of(&worker.id).next().is_none();
    idle.then_some(worker.updated_at_ms)
}

/// How many tabs each executor must give up: over its capacity, plus its
/// parked workers waiting to reopen, plus one when a create waits and it
/// is full; less the parks already under way there.
fn shortfall(state: &State, open: &Open, policy: TabPolicy) -> HashMap<String, usize> {
    let creates_wait = state
        .open_commands
        .iter()
        .filter_map(|id| state.commands.get(id))
        .any(|c| c.intent == CommandIntent::Create && c.phase == CommandPhase::Queued);
    let tabs = tabs_of(state, open);
    let mut want: HashMap<String, usize> = tabs.iter().map(|(e, n)| ((*e).to_owned(), *n)).collect();
    let mut parking: HashMap<&str, usize> = HashMap::new();
    for w in state.workers.values() {
        let Some(executor) = w.executor_id.as_deref() else { continue };
        let reopening = w.parked
            && open.of(&w.id).any(|c| {
                c.phase == CommandPhase::Queued && matches!(c.intent, CommandIntent::Open | CommandIntent::Send { .. })
            });
        if reopening {
            *want.entry(executor.to_owned()).or_default() += 1;
        }
        if open.of(&w.id).any(|c| c.intent == CommandIntent::Park) {
            *parking.entry(executor).or_default() += 1;
        }
    }
    let mut short = HashMap::new();
    for (executor, wanted) in want {
        let open_here = tabs.get(executor.as_str()).copied().unwrap_or(0);
        let extra = usize::from(creates_wait && open_here >= policy.max_open);
        let under_way = parking.get(executor.as_str()).copied().unwrap_or(0);
        let need = (wanted + extra).saturating_sub(policy.max_open).saturating_sub(under_way);
        if need > 0 {
            short.insert(executor, need);
        }
    }
    short
}

/// What to queue now.
pub fn due(state: &State, policy: TabPolicy, now_ms: u64) -> Due {
    let open = Open::index(state);
    let mut opens: Vec<WorkerId> = (state.workers.values())
        .filter(|w| reopen_at(&open, w, policy).is_some_and(|at| at <= now_ms))
        .map(|w| w.id.clone())
        .collect();
    opens.sort();
    let mut parks = Vec::new();
    for (executor, need) in shortfall(state, &open, policy) {
        let mut idle: Vec<(u64, &WorkerId)> = state
            .workers
            .values()
            .filter(|w| w.executor_id.as_deref() == Some(executor.as_str()))
            .filter_map(|w| idle_since(state, &open, w, now_ms).map(|since| (since, &w.id)))
            .filter(|(since, _)| since.saturating_add(policy.idle_grace_ms) <= now_ms)
            .collect();
        idle.sort();
        parks.extend(idle.into_iter().take(need).map(|(_, id)| id.clone()));
    }
    parks.sort();
    Due { parks, opens }
}

/// When an idle tab next may be parked where room is short, or a parked
/// worker next reopened, if any.
pub fn next_due_at(state: &State, policy: TabPolicy, now_ms: u64) -> Option<u64> {
    let open = Open::index(state);
    let short = shortfall(state, &open, policy);
    let parks = (state.workers.values())
        .filter(|w| w.executor_id.as_ref().is_some_and(|e| short.contains_key(e)))
        .filter_map(|w| idle_since(state, &open, w, now_ms))
        .map(|since| since.saturating_add(policy.idle_grace_ms));
    let opens = state.workers.values().filter_map(|w| reopen_at(&open, w, policy));
    parks.chain(opens).min()
}
