//! Which executor commands go out next. Pure: the state and the set of
//! connected executors in, the dispatch decisions out. Idempotent by
//! construction: a command is chosen only while it is `Queued`, and the
//! caller commits its dispatch before sending, so asking twice never sends
//! twice.
//!
//! Rules:
//! - one in-flight command per worker (per conversation), in queue order;
//! - a create goes to the connected executor with the most room: one at
//!   the capacity its `hello` declared (`host.capacity`) takes none, and
//!   among the rest the lowest load for its capacity wins (an executor
//!   without one counts as `max_active`), so workers spread across hosts;
//!   at most `max_launches` creates are in flight, and at most `max_active`
//!   managed workers (holding or creating a conversation) exist at once;
//! - a send goes only to the executor holding the worker's conversation, and
//!   only while that conversation is not generating or loading, nor showing
//!   a tool-approval card (a person answers it first); a steer
//!   (a checkpoint due mid-turn) also while generating, if that executor
//!   still declares the steering seam;
//! - an inspect (read-only) overtakes queued commands of its worker: it is
//!   how a send held by a stale `generating` learns the turn ended. It still
//!   waits for an in-flight command of its worker;
//! - a create of a worker pinned to a model goes only to an executor that
//!   declared `conversation_model`;
//! - a rollover's create (the worker's fresh conversation) goes to the
//!   executor that held the worker, within `max_launches` and tab room;
//! - with a tab capacity (`max_open_tabs`, see [`crate::tabs`]), a create
//!   or a reopen goes only to an executor with a tab to spare; a parked
//!   worker's sends and inspects wait for its reopen, which overtakes them;
//! - a dispatched command belongs to its executor forever: it is replayed to
//!   that executor on reconnect, never re-routed (re-routing could duplicate
//!   the effect).

use std::collections::{HashMap, HashSet};

use protocol::executor::ConversationState;
use protocol::{CommandId, CommandIntent, WorkerId};

use crate::model::{CommandPhase, State, Worker};

/// Concurrency limits; configurable, not architectural caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Conversation creations in flight at once.
    pub max_launches: usize,
    /// Managed worker conversations (active or being created) at once.
    pub max_active: usize,
    /// Managed tabs open at once per executor, if capped.
    pub max_open_tabs: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_launches: 2, max_active: 4, max_open_tabs: None }
    }
}

/// One decision: send `command_id` to `executor_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// The command.
    pub command_id: CommandId,
    /// The executor.
    pub executor_id: String,
}

/// Whether `worker` holds a place on its executor: placed and unfinished,
/// or a pool worker whose slot is live. A parked pool conversation keeps its
/// tab open between tasks (its worker completes each task), so it holds its
/// place until its slot is retired; a spawned worker's does not count once
/// it finished (a follow-up makes it count again).
pub fn managed(state: &State, worker: &Worker) -> bool {
    let parked_in_pool = || {
        state
            .runtime
            .by_worker(&worker.id)
            .is_some_and(|r| !matches!(r.health, protocol::SlotHealth::Retiring | protocol::SlotHealth::Retired))
    };
    worker.executor_id.is_some() && (!worker.state.is_terminal() || parked_in_pool())
}

/// The queued commands to dispatch now, given the connected executors.
pub fn next_dispatches(state: &State, connected: &[String], limits: Limits, now_ms: u64) -> Vec<Dispatch> {
    // Workers with a command in flight, and workers whose queue head is taken.
    let mut in_flight: HashSet<&WorkerId> = HashSet::new();
    let mut busy: HashSet<&WorkerId> = HashSet::new();
    let mut launches = 0;
    for c in state.open_commands.iter().filter_map(|id| state.commands.get(id)).filter(|c| c.in_flight()) {
        in_flight.insert(&c.worker_id);
        busy.insert(&c.worker_id);
        if c.intent == CommandIntent::Create {
            launches += 1;
        }
    }
    let mut active = state.workers.values().filter(|w| managed(state, w)).count();
    let mut load: HashMap<&str, usize> = connected.iter().map(|e| (e.as_str(), 0)).collect();
    for w in state.workers.values().filter(|w| managed(state, w)) {
        if let Some(n) = w.executor_id.as_deref().and_then(|e| load.get_mut(e)) {
            *n += 1;
        }
    }

    // Counted only when capped: it looks at every worker.
    let mut tabs: HashMap<String, usize> = match limits.max_open_tabs {
        Some(_) => crate::tabs::open_tabs(state).into_iter().map(|(e, n)| (e.to_owned(), n)).collect(),
        None => HashMap::new(),
    };
    let room = |tabs: &HashMap<String, usize>, executor: &str| {
        limits.max_open_tabs.is_none_or(|max| tabs.get(executor).copied().unwrap_or(0) < max)
    };
    let mut out = Vec::new();
    for command in state.open_commands.iter().filter_map(|id| state.commands.get(id)) {
        let Some(worker) = state.workers.get(&command.worker_id) else { continue };
        // A parked worker's prompt or inspect waits for its reopen, which
        // goes first whenever it was queued.
        let parked_waits =
            worker.parked && matches!(command.intent, CommandIntent::Send { .. } | CommandIntent::Inspect);
        let overtakes =
            command.intent == CommandIntent::Inspect || (worker.parked && command.intent == CommandIntent::Open);
        let blocked = if overtakes { &in_flight } else { &busy };
        if command.phase != CommandPhase::Queued || blocked.contains(&command.worker_id) || parked_waits {
            continue;
        }
        // Queue order per worker: a later command never overtakes an earlier one.
        busy.insert(&command.worker_id);
        if command.not_before_ms.is_some_and(|t| t > now_ms) {
            continue;
        }
        if worker.fenced || (worker.state.is_terminal() && command.intent == CommandIntent::Create) {
            continue;
        }
        let executor = match &command.intent {
            // A rollover's create goes to the executor that held the worker.
            CommandIntent::Create if worker.rolling() => {
                let Some(executor) = &worker.executor_id else { continue };
                if launches >= limits.max_launches || !load.contains_key(executor.as_str()) || !room(&tabs, executor) {
                    continue;
                }
                executor.clone()
            }
            CommandIntent::Create => {
                if worker.executor_id.is_some() || launches >= limits.max_launches || active >= limits.max_active {
                    continue;
                }
                let capacity = |id: &str| {
                    let declared = state.executor_hosts.get(id).and_then(|h| h.capacity);
                    declared.map_or(limits.max_active, |c| c as usize).max(1)
                };
                // A pinned model is set only by an executor that declared it can.
                let pins = |id: &str| {
                    (worker.model.is_none() || state.model_executors.contains(id))
                        && (worker.effort.is_none() || state.effort_executors.contains(id))
                };
                let roomiest = load
                    .iter()
                    .filter(|(id, n)| **n < capacity(id) && room(&tabs, id) && pins(id))
                    .min_by_key(|(id, n)| (**n * 1_000_000 / capacity(id), **id));
                let Some((executor, _)) = roomiest else { continue };
                executor.to_string()
            }
            CommandIntent::Send { steer, .. } => {
                let (Some(executor), Some(_)) = (&worker.executor_id, &worker.conversation) else { continue };
                let busy_page = match worker.conversation_state {
                    Some(ConversationState::Loading) => true,
                    // A tool-approval card or a person's draft waits for a
                    // person (nothing is typed under or beside it), an
                    // unreachable browser for the browser.
                    Some(ConversationState::Error) => worker.last_error.is_some_and(|e| e.holds_sends()),
                    // A steer goes mid-turn, to an executor that still steers.
                    Some(ConversationState::Generating) => !(*steer && state.steering_executors.contains(executor)),
                    _ => false,
                };
                // A pinned model is set only by an executor that (still) declares it can.
                let unpinned = (worker.model.is_some() && !state.model_executors.contains(executor))
                    || (worker.effort.is_some() && !state.effort_executors.contains(executor));
                if busy_page || unpinned || !load.contains_key(executor.as_str()) {
                    continue;
                }
                executor.clone()
            }
            CommandIntent::Open | CommandIntent::Close | CommandIntent::Park | CommandIntent::Inspect => {
                let (Some(executor), Some(_)) = (&worker.executor_id, &worker.conversation) else { continue };
                let reopens = worker.parked && command.intent == CommandIntent::Open;
                if !load.contains_key(executor.as_str()) || (reopens && !room(&tabs, executor)) {
                    continue;
                }
                executor.clone()
            }
        };
        in_flight.insert(&command.worker_id);
        if command.intent == CommandIntent::Create || (worker.parked && command.intent == CommandIntent::Open) {
            *tabs.entry(executor.clone()).or_default() += 1;
        }
        if command.intent == CommandIntent::Create && worker.rolling() {
            launches += 1;
        } else if command.intent == CommandIntent::Create {
            launches += 1;
            active += 1;
            *load.get_mut(executor.as_str()).expect("chosen from the connected set") += 1;
        }
        out.push(Dispatch { command_id: command.id.clone(), executor_id: executor });
    }
    out
}

/// The commands `executor_id` holds but has not completed: replayed, with the
/// same ids and idempotency keys, whenever it (re)connects.
pub fn replay_for(state: &State, executor_id: &str) -> Vec<CommandId> {
    state
        .open_commands
        .iter()
        .filter_map(|id| state.commands.get(id))
        .filter(|c| c.in_flight() && c.executor_id.as_deref() == Some(executor_id))
        .map(|c| c.id.clone())
        .collect()
}
