//! In-memory state: a pure fold over the event log. Restart rebuilds it by
//! replaying the store; nothing here is persisted on its own.

use std::collections::{HashMap, HashSet};

use protocol::{Assignment, Event, EventBody, MessageId, RunId, RunState, WorkerId, WorkerState};

/// A run as the log describes it.
#[derive(Debug, Clone, PartialEq)]
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
    /// Messages sent in this run, with their recipient (for `in_reply_to` checks).
    pub messages: HashMap<MessageId, WorkerId>,
    /// Worker paths in use.
    pub paths: HashSet<String>,
}

/// A logical worker as the log describes it.
#[derive(Debug, Clone, PartialEq)]
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
}

impl Worker {
    /// Whether this is the run's root worker.
    pub fn is_root(&self) -> bool {
        self.parent.is_none()
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

/// All runs and workers.
#[derive(Debug, Default, Clone)]
pub struct State {
    /// Runs by id.
    pub runs: HashMap<RunId, Run>,
    /// Workers by id, across runs.
    pub workers: HashMap<WorkerId, Worker>,
}

impl State {
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
                    messages: HashMap::new(),
                    paths: HashSet::new(),
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
                        attach_count: 0,
                        last_progress: None,
                        outcome: None,
                        created_at_ms: at,
                        updated_at_ms: at,
                    },
                );
            }
            EventBody::WorkerMessage { message_id, from, to, .. } => {
                for w in [from, to] {
                    touch(&mut self.workers, w, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                }
                run.messages.insert(message_id.clone(), to.clone());
            }
            EventBody::WorkerStateChanged { worker_id, from, to, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                if w.state != *from {
                    return Err(fail("worker.state_changed from a state the worker is not in"));
                }
                w.state = *to;
            }
            EventBody::WorkerAttached { worker_id, attach_count } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.attach_count = *attach_count;
            }
            EventBody::WorkerProgress { worker_id, summary, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.last_progress = Some(summary.clone());
            }
            EventBody::WorkerFollowup { worker_id, instructions, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.followups.push(instructions.clone());
                w.outcome = None;
            }
            EventBody::WorkerCompleted { worker_id, summary, .. } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.outcome = Some(summary.clone());
            }
            EventBody::WorkerFailed { worker_id, reason } | EventBody::WorkerInterrupted { worker_id, reason } => {
                let w = touch(&mut self.workers, worker_id, &event.run_id, at).ok_or_else(|| fail("unknown worker"))?;
                w.outcome = Some(reason.clone());
            }
        }
        Ok(())
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
