//! The control plane shell: authenticates, runs [`decide`], commits the events
//! (with the idempotency record) durably, folds them into the in-memory state
//! and wakes waiters.
//!
//! **Group commit.** Decisions are serialized under the writer lock against
//! the *working* state (what is durable plus what is being made durable);
//! the resulting batches queue in a [`Group`], and whichever committer finds
//! no flush running becomes the leader and writes every queued batch in one
//! store transaction (one fsync for all). Only then are the events folded
//! into the state readers see, their committers answered, and waiters woken
//! (by a publisher task on the runtime, off every committer's path; inline
//! when the plane runs without a runtime). So nothing a
//! reader, a waiter or a caller sees is ever undurable, and concurrent
//! commits share one durable write. A failed write fails its whole group and
//! everything decided on top of it, and the working state is rebuilt from
//! the readers' state: memory and disk stay as they were.
//!
//! **Snapshots.** Every [`SNAPSHOT_EVERY`] committed events the leader of a
//! flush saves the readers' state in the store (no other write can be in
//! flight then), so a start folds that state and only the events after it.
//! A snapshot is a cache of the log, never a source: one this build cannot
//! read, or one the events after it do not fold onto, is passed over for
//! the whole log.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use protocol::executor::{self as wire, CommandOp, ExecutorFrame};
use protocol::limits::{EVENT_MAX, EVENTS_PAGE_MAX, IDEMPOTENCY_KEY_MAX, RESPONSE_MAX, WAIT_MAX_MS};
use protocol::{
    Assignment, CommandId, CommandIntent, Event, EventBody, MessageId, MessageKind, PromptRef, RunId, WorkerId,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::broker::Broker;
use crate::clock::Clock;
use crate::decide::{ManagedRoot, Refusal, Request, broadcast_recipients, decide};
use crate::error::Error;
use crate::keys::Keyring;
use crate::model::{QueuedCommand, Run, State, Worker};
use crate::prompts::{
    bootstrap_prompt, checkpoint_prompt, followup_prompt, resume_prompt, rollover_bootstrap_prompt, rollover_prompt,
    root_bootstrap_prompt,
};
use crate::queue::{Dispatch, Limits, next_dispatches, replay_for};
use crate::schedule::{self, Policy};
use crate::store::{Batch, IdempotencyRecord, Store, StoreError};

/// The bytes a page of events may fill: a response's bound less room for
/// the page's own fields.
const PAGE_BYTES: usize = RESPONSE_MAX - 1024;

/// Who is reading events: root sees the whole run, a worker only what
/// concerns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewer {
    /// The run's root worker.
    Root,
    /// A non-root worker.
    Worker(WorkerId),
    /// A worker of this run reading the ownership log: the events of the
    /// records its run may see ([`crate::ownership::readable`]); for a
    /// worker other than root (named), only those about it.
    Ownership(RunId, Option<WorkerId>),
}

/// A page of events and the cursor to continue from.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The last cursor examined; pass it back as `after` to continue.
    pub cursor: u64,
    /// Events visible to the viewer, in cursor order.
    pub events: Vec<Event>,
    /// Whether a wait ended at its deadline with nothing new.
    pub timed_out: bool,
}

/// An optional idempotency key and the namespace it lives in.
#[derive(Debug, Clone)]
pub struct IdemKey<'a> {
    scope: String,
    key: &'a str,
}

/// How many committed events, by default, between two snapshots of the
/// state: a start folds at most about this many events after the snapshot.
pub const SNAPSHOT_EVERY: u64 = 10_000;

/// The snapshot's format, bumped whenever [`State`]'s shape or the rules
/// of its fold change (a snapshot holds what the fold of its build made of
/// the events before it): a snapshot of another format is passed over
/// (see the module doc).
const SNAPSHOT_FORMAT: u32 = 1;

#[derive(Serialize)]
struct SnapshotOut<'a> {
    format: u32,
    state: &'a State,
}

#[derive(serde::Deserialize)]
struct SnapshotFormat {
    format: u32,
}

#[derive(serde::Deserialize)]
struct SnapshotIn {
    state: State,
}

/// The worker a credential of continuation `epoch` names, if that is its
/// current conversation's: an older epoch's conversation is retired.
fn current(worker: Option<Worker>, epoch: u32) -> Result<Worker, Error> {
    match worker {
        Some(w) if epoch < w.epoch => Err(Error::Retired { current: w.epoch }),
        Some(w) if epoch == w.epoch => Ok(w),
        _ => Err(Error::Unauthorized),
    }
}

/// The state `store`'s log folds to: its latest snapshot's and the events
/// after it, or (no snapshot, or one passed over) the whole log. Fails
/// (`Corrupt`) only when the whole log does not fold.
pub fn fold_store(store: &dyn Store) -> Result<State, StoreError> {
    fold_counting(store).map(|(state, _)| state)
}

/// [`fold_store`], and how many events it folded onto the snapshot (or from
/// nothing): the events the next snapshot is due after.
fn fold_counting(store: &dyn Store) -> Result<(State, u64), StoreError> {
    let mut folded = 0;
    let mut fold = |state: &mut State, position: u64| {
        folded = 0;
        store.replay_after(position, &mut |event| {
            folded += 1;
            state.apply(&event).map_err(|e| StoreError::Corrupt(e.to_string()))
        })
    };
    if let Some(snapshot) = store.snapshot()? {
        let format = serde_json::from_slice::<SnapshotFormat>(&snapshot.state).map(|f| f.format);
        let read = match format {
            Ok(SNAPSHOT_FORMAT) => serde_json::from_slice::<SnapshotIn>(&snapshot.state).map_err(|e| e.to_string()),
            Ok(other) => Err(format!("format {other}, this build reads {SNAPSHOT_FORMAT}")),
            Err(e) => Err(e.to_string()),
        };
        match read {
            Ok(SnapshotIn { mut state }) => match fold(&mut state, snapshot.position) {
                Ok(()) => return Ok((state, folded)),
                Err(StoreError::Corrupt(e)) => {
                    tracing::warn!(
                        "the log after the state's snapshot does not fold onto it ({e}); folding the whole log"
                    );
                }
                Err(e) => return Err(e),
            },
            Err(e) => tracing::warn!("the state's snapshot is passed over ({e}); folding the whole log"),
        }
    }
    let mut state = State::default();
    fold(&mut state, 0)?;
    Ok((state, folded))
}

/// Saves `state` as the store's snapshot (see the module doc).
pub fn save_snapshot(store: &dyn Store, state: &State) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(&SnapshotOut { format: SNAPSHOT_FORMAT, state })
        .map_err(|e| StoreError::Backend(format!("the state does not serialize: {e}")))?;
    store.save_snapshot(&bytes)
}

/// How many of the newest failed tickets keep their outcome for waiters.
const FAILED_KEPT: u64 = 100_000;

/// Batches decided but not yet durable, and who is making them durable.
#[derive(Default)]
struct Group {
    /// Decided, waiting for the next flush, in decision order.
    queued: Vec<(u64, Batch)>,
    /// Being written by the leader now (idempotency checks see them).
    flushing: Arc<Vec<(u64, Batch)>>,
    /// Whether a leader is writing.
    leading: bool,
    /// The last ticket handed out; tickets are flushed in order.
    next_ticket: u64,
    /// Every ticket up to this one has ended.
    settled_through: u64,
    /// The ended tickets that did not become durable (rare: a failed write).
    failed: HashMap<u64, Settled>,
}

/// How a queued batch ended.
#[derive(Debug, Clone)]
enum Settled {
    /// Durable and folded.
    Durable,
    /// Not written (its group, or one it was decided on top of, failed).
    Failed(StoreError),
    /// Durable, but the events did not fold: a bug; writes are refused.
    Unfolded(String),
}

/// The durable control plane.
pub struct ControlPlane {
    store: Arc<dyn Store>,
    /// What is durable: every reader reads this.
    state: RwLock<State>,
    /// The working state decisions are made against (durable plus queued);
    /// its lock serializes decisions.
    writer: Mutex<State>,
    group: Mutex<Group>,
    /// Signalled when a flush ends.
    flushed: Condvar,
    broker: Arc<Broker>,
    /// Hands durable events to the publisher task, which wakes waiters.
    publisher: Option<tokio::sync::mpsc::UnboundedSender<Vec<Event>>>,
    clock: Arc<dyn Clock>,
    keys: Keyring,
    /// Counts commits; the executor bridge's dispatch loop wakes on it.
    changes: Arc<tokio::sync::watch::Sender<u64>>,
    /// Set when committed events failed to fold: writes are refused.
    broken: std::sync::atomic::AtomicBool,
    /// Where and how new worker conversations are created.
    chatgpt: ChatgptSetup,
    /// Events committed since the last snapshot, and how many make the next.
    since_snapshot: std::sync::atomic::AtomicU64,
    snapshot_every: u64,
}

/// The operator's one-time ChatGPT setup, as the daemon was told about it:
/// rendered into every conversation create so a carrier creates the
/// conversation in the Project and binds it to the app before the bootstrap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatgptSetup {
    /// The label the operator gave the orchestrator's app (connector) in ChatGPT.
    pub app_label: Option<String>,
    /// A `https://chatgpt.com/g/g-p-…/project` URL new workers are created in.
    pub project_url: Option<String>,
}

impl ControlPlane {
    /// Rebuilds the state from `store`. A log that does not fold cleanly is
    /// reported as corrupt (`RECONCILE_REQUIRED`) rather than half-loaded.
    pub fn open(store: Arc<dyn Store>, clock: Arc<dyn Clock>, keys: Keyring) -> Result<Self, Error> {
        let (state, unsnapshotted) = fold_counting(store.as_ref())?;
        let broker = Arc::new(Broker::new());
        for run in state.runs.values() {
            broker.prime(&run.id, run.cursor);
        }
        let changes = Arc::new(tokio::sync::watch::Sender::new(0));
        // A task, not a thread, so that paused test time sees it; it ends
        // when the plane (the channel's sender) is dropped.
        let publisher = tokio::runtime::Handle::try_current().ok().map(|runtime| {
            let (publisher, mut published) = tokio::sync::mpsc::unbounded_channel::<Vec<Event>>();
            let (broker, changes) = (broker.clone(), changes.clone());
            runtime.spawn(async move {
                while let Some(events) = published.recv().await {
                    publish(&broker, &changes, &events);
                }
            });
            publisher
        });
        Ok(Self {
            store,
            writer: Mutex::new(state.clone()),
            state: RwLock::new(state),
            group: Mutex::new(Group::default()),
            flushed: Condvar::new(),
            broker,
            publisher,
            clock,
            keys,
            changes,
            broken: std::sync::atomic::AtomicBool::new(false),
            chatgpt: ChatgptSetup::default(),
            // Counted across restarts: a daemon that never lives through
            // 10,000 events still snapshots its growing log.
            since_snapshot: std::sync::atomic::AtomicU64::new(unsnapshotted),
            snapshot_every: SNAPSHOT_EVERY,
        })
    }

    /// The same plane, saving a snapshot every `events` committed events.
    pub fn with_snapshot_every(mut self, events: u64) -> Self {
        self.snapshot_every = events.max(1);
        self
    }

    /// Saves a snapshot when enough events were committed since the last.
    /// Called by a flush's leader only, after its group folded: no write
    /// is in flight, so the readers' state holds exactly what is durable.
    fn snapshot_if_due(&self, committed: usize) {
        use std::sync::atomic::Ordering::SeqCst;
        let since = self.since_snapshot.fetch_add(committed as u64, SeqCst) + committed as u64;
        if since < self.snapshot_every {
            return;
        }
        let saved = save_snapshot(self.store.as_ref(), &self.state.read().expect("state lock"));
        // Only a start is slower without it: a failure is tried again after
        // as many events, not at every flush.
        self.since_snapshot.store(0, SeqCst);
        if let Err(e) = saved {
            tracing::warn!("cannot save the state's snapshot: {e}");
        }
    }

    /// The same plane, creating conversations per `host`.
    pub fn with_chatgpt_setup(mut self, chatgpt: ChatgptSetup) -> Self {
        self.chatgpt = chatgpt;
        self
    }

    /// The operator's ChatGPT setup this daemon runs with.
    pub fn chatgpt_setup(&self) -> &ChatgptSetup {
        &self.chatgpt
    }

    /// A receiver that changes on every commit that appended events.
    pub fn subscribe_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The keyring that issues capabilities and attach identities.
    pub fn keys(&self) -> &Keyring {
        &self.keys
    }

    /// The worker a capability belongs to. Fails with `UNAUTHORIZED` for a
    /// forged capability or one naming no worker of this daemon, and with
    /// `CONVERSATION_RETIRED` for one of a conversation the worker rolled
    /// over from.
    pub fn authenticate(&self, capability: &str) -> Result<Worker, Error> {
        let (id, epoch) = self.keys.verify_capability(capability).ok_or(Error::Unauthorized)?;
        current(self.worker(&id), epoch)
    }

    /// The worker an attach identity belongs to, as [`ControlPlane::authenticate`].
    pub fn attaching(&self, attach_identity: &str) -> Result<Worker, Error> {
        let (id, epoch) = self.keys.verify_attach_identity(attach_identity).ok_or(Error::Unauthorized)?;
        current(self.worker(&id), epoch)
    }

    /// A copy of the run, if it exists.
    pub fn run(&self, id: &RunId) -> Option<Run> {
        self.read().runs.get(id).cloned()
    }

    /// A copy of the worker, if it exists.
    pub fn worker(&self, id: &WorkerId) -> Option<Worker> {
        self.read().workers.get(id).cloned()
    }

    /// The newest `n` runs, newest first.
    pub fn newest_runs(&self, n: usize) -> Vec<Run> {
        let state = self.read();
        let mut runs: Vec<&Run> = state.runs.values().collect();
        runs.sort_by(|a, b| (b.created_at_ms, &b.id).cmp(&(a.created_at_ms, &a.id)));
        runs.into_iter().take(n).cloned().collect()
    }

    /// The run's workers in creation order, root first.
    pub fn workers_of(&self, run: &RunId) -> Vec<Worker> {
        let state = self.read();
        state
            .runs
            .get(run)
            .map_or_else(Vec::new, |r| r.workers.iter().filter_map(|w| state.workers.get(w).cloned()).collect())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().expect("state lock")
    }

    /// An idempotency key in `scope`, validated.
    pub fn idem_key<'a>(scope: impl Into<String>, key: Option<&'a str>) -> Result<Option<IdemKey<'a>>, Error> {
        let Some(key) = key else { return Ok(None) };
        if key.len() > IDEMPOTENCY_KEY_MAX {
            return Err(Error::TooLarge { field: "idempotency_key", len: key.len(), max: IDEMPOTENCY_KEY_MAX });
        }
        if key.is_empty() || key.chars().any(char::is_control) {
            return Err(Error::InvalidArgument(format!(
                "idempotency_key must be 1-{IDEMPOTENCY_KEY_MAX} bytes without control characters"
            )));
        }
        Ok(Some(IdemKey { scope: scope.into(), key }))
    }

    /// Runs one command. `make` builds it (and the response) from the
    /// working state under the writer lock, so nothing it reads can change
    /// before the commit. With a key: a replay with the same `request`
    /// returns the first response; a different `request` is a `CONFLICT`.
    /// Returns once the events are durable and folded.
    fn commit<R: Serialize + DeserializeOwned>(
        &self,
        idem: Option<IdemKey<'_>>,
        request: &impl Serialize,
        make: impl FnOnce(&State) -> (Request, R),
    ) -> Result<(R, Vec<Event>), Error> {
        // A refusal may rest on queued batches too: it waits for the newest.
        let refused = |e: Error, last: u64| match self.durable(last) {
            Settled::Durable => e,
            Settled::Failed(store) => store.into(),
            Settled::Unfolded(fold) => Error::ReconcileRequired(format!("committed events do not fold: {fold}")),
        };
        let (response, events, ticket) = {
            let mut working = self.writer.lock().expect("writer lock");
            let last = self.group.lock().expect("group lock").next_ticket;
            if self.broken.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(Error::ReconcileRequired(
                    "the control plane refused writes after a fold failure; restart it".into(),
                ));
            }
            let request_hash = idem.as_ref().map(|_| hash_json(request));
            if let (Some(idem), Some(hash)) = (&idem, &request_hash)
                && let Some((found, queued)) = self.idempotency(&idem.scope, idem.key)?
            {
                if &found.request_hash != hash {
                    let conflict = Error::Conflict { key: idem.key.to_owned() };
                    drop(working);
                    return Err(refused(conflict, queued.unwrap_or(last)));
                }
                let response = serde_json::from_str(&found.response)
                    .map_err(|e| StoreError::Corrupt(format!("idempotency response: {e}")))?;
                (response, Vec::new(), queued)
            } else {
                match self.decide_and_queue(&mut working, idem, request_hash, make) {
                    Ok(decided) => decided,
                    Err(e) => {
                        drop(working);
                        return Err(refused(e, last));
                    }
                }
            }
        };
        // Answer only from what is durable: a queued batch this answer rests on is waited for.
        match ticket.map_or(Settled::Durable, |ticket| self.durable(ticket)) {
            Settled::Durable => Ok((response, events)),
            Settled::Failed(e) => Err(e.into()),
            Settled::Unfolded(e) => Err(Error::ReconcileRequired(format!("committed events do not fold: {e}"))),
        }
    }

    /// Decides `make`'s command against the working state, folds its events
    /// there and queues its batch; returns the response, the events and the
    /// ticket to wait for (none when nothing is pending at all).
    #[allow(clippy::type_complexity)]
    fn decide_and_queue<R: Serialize>(
        &self,
        working: &mut State,
        idem: Option<IdemKey<'_>>,
        request_hash: Option<String>,
        make: impl FnOnce(&State) -> (Request, R),
    ) -> Result<(R, Vec<Event>, Option<u64>), Error> {
        let (command, response) = make(working);
        let bodies = decide(working, &command)?;
        // Every event must fit in a response page (see `EVENT_MAX`).
        for body in &bodies {
            let len = serde_json::to_vec(body).map_or(usize::MAX, |json| json.len());
            if len > EVENT_MAX {
                return Err(Error::TooLarge { field: body.kind(), len, max: EVENT_MAX });
            }
        }
        let events = stamp(working, &command, bodies, self.clock.now_ms());
        let idempotency = match (idem, request_hash) {
            (Some(idem), Some(request_hash)) => Some(IdempotencyRecord {
                scope: idem.scope,
                key: idem.key.to_owned(),
                request_hash,
                response: serde_json::to_string(&response).expect("responses serialize"),
            }),
            _ => None,
        };
        let mut group = self.group.lock().expect("group lock");
        if events.is_empty() && idempotency.is_none() {
            // Nothing to write; the answer may still rest on queued batches.
            return Ok((response, events, Some(group.next_ticket)));
        }
        // The events were decided against this very state, so a fold
        // failure is a bug, not bad input: nothing was queued; refuse
        // every later write until a restart re-folds the log.
        if let Err(e) = events.iter().try_for_each(|event| working.apply(event)) {
            self.broken.store(true, std::sync::atomic::Ordering::SeqCst);
            tracing::error!("decided events do not fold ({e}); refusing writes until restart");
            return Err(Error::ReconcileRequired(format!("decided events do not fold: {e}")));
        }
        group.next_ticket += 1;
        let ticket = group.next_ticket;
        group.queued.push((ticket, Batch { events: events.clone(), idempotency }));
        Ok((response, events, Some(ticket)))
    }

    /// Waits until `ticket` (and every one before it) has ended, leading a
    /// flush of every queued batch when no other committer is.
    fn durable(&self, ticket: u64) -> Settled {
        let mut group = self.group.lock().expect("group lock");
        loop {
            if ticket <= group.settled_through {
                return group.failed.get(&ticket).cloned().unwrap_or(Settled::Durable);
            }
            if group.leading {
                group = self.flushed.wait(group).expect("group lock");
                continue;
            }
            group.leading = true;
            let flushing = Arc::new(std::mem::take(&mut group.queued));
            group.flushing = flushing.clone();
            drop(group);
            let batches: Vec<Batch> = flushing.iter().map(|(_, b)| b.clone()).collect();
            // Whatever happens here, the group is settled and the waiters
            // released: a panic fails it (and every later write) loudly
            // instead of leaving everyone waiting on a leader that is gone.
            let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if self.broken.load(std::sync::atomic::Ordering::SeqCst) {
                    return Settled::Unfolded("writes are refused after a fold failure; restart".into());
                }
                match self.store.append_group(&batches) {
                    Ok(()) => {
                        let settled = self.fold_durable(&batches);
                        if matches!(settled, Settled::Durable) {
                            self.snapshot_if_due(batches.iter().map(|b| b.events.len()).sum());
                        }
                        settled
                    }
                    Err(e) => self.roll_back(e),
                }
            }));
            let outcome = written.as_ref().cloned().unwrap_or_else(|_| {
                self.broken.store(true, std::sync::atomic::Ordering::SeqCst);
                Settled::Unfolded("the commit leader panicked; restart".into())
            });
            group = self.group.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((last, _)) = flushing.last() {
                if !matches!(outcome, Settled::Durable) {
                    for (t, _) in flushing.iter() {
                        group.failed.insert(*t, outcome.clone());
                    }
                }
                group.settled_through = group.settled_through.max(*last);
                // A waiter reads its outcome right after the wake; keep a
                // generous window of failed tickets, not all of them.
                let keep_from = group.settled_through.saturating_sub(FAILED_KEPT);
                group.failed.retain(|t, _| *t > keep_from);
            }
            group.flushing = Arc::default();
            group.leading = false;
            self.flushed.notify_all();
            if let Err(panic) = written {
                drop(group);
                std::panic::resume_unwind(panic);
            }
        }
    }

    /// Folds a written group into the readers' state and hands its events
    /// to the publisher.
    fn fold_durable(&self, batches: &[Batch]) -> Settled {
        let events: Vec<Event> = batches.iter().flat_map(|b| b.events.iter().cloned()).collect();
        {
            let mut state = self.state.write().expect("state lock");
            if let Err(e) = events.iter().try_for_each(|event| state.apply(event)) {
                self.broken.store(true, std::sync::atomic::Ordering::SeqCst);
                tracing::error!("committed events do not fold ({e}); refusing writes until restart");
                return Settled::Unfolded(e.to_string());
            }
        }
        if !events.is_empty() {
            // Inline when there is no publisher task (or its runtime is gone).
            let unsent = match &self.publisher {
                Some(publisher) => publisher.send(events).err().map(|e| e.0),
                None => Some(events),
            };
            if let Some(events) = unsent {
                publish(&self.broker, &self.changes, &events);
            }
        }
        Settled::Durable
    }

    /// A group failed to write: it, and every batch decided on top of it
    /// since (failed here, under the writer lock, so none is added
    /// meanwhile), end undurable; the working state goes back to what is.
    fn roll_back(&self, error: StoreError) -> Settled {
        let mut working = self.writer.lock().expect("writer lock");
        let mut group = self.group.lock().expect("group lock");
        let queued = std::mem::take(&mut group.queued);
        let tickets: Vec<u64> = group.flushing.iter().chain(&queued).map(|(t, _)| *t).collect();
        for t in tickets {
            group.failed.insert(t, Settled::Failed(error.clone()));
        }
        group.settled_through = group.next_ticket;
        group.flushing = Arc::default();
        *working = self.read().clone();
        Settled::Failed(error)
    }

    /// Commits decided but not yet durable (queued or being written).
    pub fn pending_commits(&self) -> usize {
        let group = self.group.lock().expect("group lock");
        group.queued.len() + group.flushing.len()
    }

    /// The idempotency record for `key`, queued or being written (with the
    /// ticket to wait for) or durable.
    fn idempotency(&self, scope: &str, key: &str) -> Result<Option<(IdempotencyRecord, Option<u64>)>, StoreError> {
        {
            let group = self.group.lock().expect("group lock");
            let pending = group.flushing.iter().chain(group.queued.iter());
            if let Some((ticket, rec)) = pending
                .filter_map(|(t, b)| Some((t, b.idempotency.as_ref()?)))
                .find(|(_, rec)| rec.scope == scope && rec.key == key)
            {
                return Ok(Some((rec.clone(), Some(*ticket))));
            }
        }
        Ok(self.store.idempotency(scope, key)?.map(|rec| (rec, None)))
    }

    /// Runs a command that has no idempotency key and returns its events.
    pub fn execute(&self, command: Request) -> Result<Vec<Event>, Error> {
        self.commit(None, &(), |_| (command, ())).map(|(_, events)| events)
    }

    /// Creates a run and its root worker; returns `(run, root)`.
    pub fn create_run(&self, title: &str, idem: Option<&str>) -> Result<(RunId, WorkerId), Error> {
        self.create_run_once(title, idem).map(|(run, root, _)| (run, root))
    }

    /// Like [`ControlPlane::create_run`], and says whether this call created
    /// the run (`true`) or replayed an earlier one's key (`false`). The
    /// caller hands out root's capability only when it created the run: an
    /// idempotency key proves nothing about who asks (SPEC §9).
    pub fn create_run_once(&self, title: &str, idem: Option<&str>) -> Result<(RunId, WorkerId, bool), Error> {
        self.create_run_with(title, None, protocol::Attribution::Required, idem)
    }

    /// Like [`ControlPlane::create_run_once`], with root launched into a
    /// managed conversation of its own to carry out `assignment` (seed
    /// §13.4): an executor opens it and root attaches from it like a
    /// worker, so Execution Continuity can resume it.
    pub fn create_managed_run(
        &self,
        title: &str,
        assignment: &Assignment,
        idem: Option<&str>,
    ) -> Result<(RunId, WorkerId, bool), Error> {
        self.create_run_with(title, Some(assignment), protocol::Attribution::Required, idem)
    }

    /// Creates a run: root is the caller (`root_assignment` absent) or
    /// launched into a managed conversation, and the run's calls are
    /// attributed or identified by capability alone (`attribution`).
    pub fn create_run_with(
        &self,
        title: &str,
        root_assignment: Option<&Assignment>,
        attribution: protocol::Attribution,
        idem: Option<&str>,
    ) -> Result<(RunId, WorkerId, bool), Error> {
        let idem = Self::idem_key("run_create", idem)?;
        // What a replay of the key must repeat (unchanged for runs that
        // keep the default attribution, so their stored keys still match).
        let request = match (root_assignment, attribution) {
            (None, protocol::Attribution::Required) => serde_json::json!(title),
            (Some(a), protocol::Attribution::Required) => serde_json::json!((title, a)),
            (a, other) => serde_json::json!((title, a, other)),
        };
        self.commit(idem, &request, |_| {
            let managed = root_assignment.map(|assignment| ManagedRoot {
                assignment: assignment.clone(),
                create_command: CommandId::from_uuid_bytes(new_uuid()),
            });
            let (run_id, root_id) = (RunId::from_uuid_bytes(new_uuid()), WorkerId::from_uuid_bytes(new_uuid()));
            let request = Request::CreateRun {
                run_id: run_id.clone(),
                root_id: root_id.clone(),
                title: title.to_owned(),
                managed,
                attribution,
            };
            (request, (run_id, root_id))
        })
        .map(|((run, root), events)| (run, root, !events.is_empty()))
    }

    /// Root spawns a worker; returns its id (the same id on an idempotent replay).
    pub fn spawn(
        &self,
        actor: &Worker,
        name: &str,
        assignment: &Assignment,
        idem: Option<&str>,
    ) -> Result<WorkerId, Error> {
        self.spawn_pinned(actor, name, assignment, None, idem)
    }

    /// [`ControlPlane::spawn`], the worker pinned to `model` if given.
    pub fn spawn_pinned(
        &self,
        actor: &Worker,
        name: &str,
        assignment: &Assignment,
        model: Option<&str>,
        idem: Option<&str>,
    ) -> Result<WorkerId, Error> {
        self.spawn_pinned_with(actor, name, assignment, model, None, idem)
    }

    /// [`ControlPlane::spawn_pinned`], with the thinking `effort` pinned
    /// beside the model (an effort without a model is refused).
    pub fn spawn_pinned_with(
        &self,
        actor: &Worker,
        name: &str,
        assignment: &Assignment,
        model: Option<&str>,
        effort: Option<&str>,
        idem: Option<&str>,
    ) -> Result<WorkerId, Error> {
        let idem = Self::idem_key(format!("worker_spawn:{}", actor.run_id), idem)?;
        // Without a model (or an effort), the arguments hash as they always
        // did: a replay across an upgrade still matches its record.
        let args = match (model, effort) {
            (None, None) => serde_json::json!([name, assignment]),
            (Some(model), None) => serde_json::json!([name, assignment, model]),
            (model, Some(effort)) => serde_json::json!([name, assignment, model, effort]),
        };
        self.commit(idem, &args, |_| {
            let worker_id = WorkerId::from_uuid_bytes(new_uuid());
            let cmd = Request::Spawn {
                actor: actor.id.clone(),
                worker_id: worker_id.clone(),
                name: name.to_owned(),
                assignment: assignment.clone(),
                create_command: CommandId::from_uuid_bytes(new_uuid()),
                model: model.map(str::to_owned),
                effort: effort.map(str::to_owned),
            };
            (cmd, worker_id)
        })
        .map(|(r, _)| r)
    }

    /// Sends a message; returns its id (the same id on an idempotent replay).
    pub fn send(
        &self,
        actor: &Worker,
        to: &WorkerId,
        kind: MessageKind,
        body: &str,
        in_reply_to: Option<&MessageId>,
        idem: Option<&str>,
    ) -> Result<MessageId, Error> {
        self.send_fresh(actor, to, kind, body, in_reply_to, idem).map(|(id, _)| id)
    }

    /// [`Self::send`], also saying whether this call sent it (`false`: an
    /// idempotent replay of an earlier one).
    pub fn send_fresh(
        &self,
        actor: &Worker,
        to: &WorkerId,
        kind: MessageKind,
        body: &str,
        in_reply_to: Option<&MessageId>,
        idem: Option<&str>,
    ) -> Result<(MessageId, bool), Error> {
        let idem = Self::idem_key(format!("message_send:{}", actor.id), idem)?;
        let replied = in_reply_to.map(|id| self.store.message(id)).transpose()?.flatten();
        self.commit(idem, &(to, kind, body, in_reply_to), |_| {
            let message_id = MessageId::from_uuid_bytes(new_uuid());
            let cmd = Request::Send {
                actor: actor.id.clone(),
                message_id: message_id.clone(),
                to: to.clone(),
                kind,
                body: body.to_owned(),
                in_reply_to: in_reply_to.cloned(),
                replied,
            };
            (cmd, message_id)
        })
        .map(|(id, events)| (id, !events.is_empty()))
    }

    /// A person's answer, as `actor` (root), to `to`'s question: the
    /// message and the release of its wait in one commit, decided against
    /// the committed state (`Request::Answer`). Returns whether it went in
    /// now (`false`: a replay of `idem`).
    pub fn answer(&self, actor: &Worker, to: &WorkerId, body: &str, idem: Option<&str>) -> Result<bool, Error> {
        let idem = Self::idem_key(format!("answer:{}", actor.id), idem)?;
        self.commit(idem, &(to, body), |_| {
            let message_id = MessageId::from_uuid_bytes(new_uuid());
            let cmd = Request::Answer { actor: actor.id.clone(), message_id, to: to.clone(), body: body.to_owned() };
            (cmd, ())
        })
        .map(|(_, events)| !events.is_empty())
    }

    /// Root messages every unfinished worker; returns the message ids (the
    /// same ids on an idempotent replay).
    pub fn broadcast(
        &self,
        actor: &Worker,
        kind: MessageKind,
        body: &str,
        idem: Option<&str>,
    ) -> Result<Vec<MessageId>, Error> {
        let idem = Self::idem_key(format!("message_broadcast:{}", actor.id), idem)?;
        self.commit(idem, &(kind, body), |state| {
            let recipients = state.runs.get(&actor.run_id).map_or(0, |run| broadcast_recipients(state, run).len());
            let ids: Vec<MessageId> = (0..recipients).map(|_| MessageId::from_uuid_bytes(new_uuid())).collect();
            let cmd =
                Request::Broadcast { actor: actor.id.clone(), message_ids: ids.clone(), kind, body: body.to_owned() };
            (cmd, ids)
        })
        .map(|(ids, _)| ids)
    }

    /// Root gives a worker more work; returns the follow-up's sequence number.
    pub fn followup(
        &self,
        actor: &Worker,
        target: &WorkerId,
        instructions: &str,
        idem: Option<&str>,
    ) -> Result<u32, Error> {
        let idem = Self::idem_key(format!("worker_followup:{}", actor.run_id), idem)?;
        self.commit(idem, &(target, instructions), |state| {
            // Read under the writer lock: racing follow-ups get distinct numbers.
            let seq = state.worker(target).map_or(1, |w| w.followups.len() as u32 + 1);
            let cmd = Request::Followup {
                actor: actor.id.clone(),
                target: target.clone(),
                instructions: instructions.to_owned(),
                send_command: CommandId::from_uuid_bytes(new_uuid()),
            };
            (cmd, seq)
        })
        .map(|(r, _)| r)
    }

    /// Whether root already used `idem` for a follow-up in its run (a replay
    /// answers as the first call did, whatever holds now).
    pub fn followup_replayed(&self, actor: &Worker, idem: Option<&str>) -> Result<bool, Error> {
        let Some(idem) = Self::idem_key(format!("worker_followup:{}", actor.run_id), idem)? else { return Ok(false) };
        Ok(self.idempotency(&idem.scope, idem.key)?.is_some())
    }

    /// A copy of an executor command, if it exists.
    pub fn command(&self, id: &CommandId) -> Option<QueuedCommand> {
        self.read().commands.get(id).cloned()
    }

    /// The worktree ownership records `key` names, oldest first, each with
    /// whether its holder is proven dead now: every one for the operator
    /// (`run` none), only those a worker of `run` may see otherwise
    /// ([`crate::ownership::readable`]).
    pub fn ownership(
        &self,
        key: &crate::ownership::Key,
        run: Option<&RunId>,
    ) -> Vec<(protocol::ownership::Record, Option<protocol::ownership::StaleReason>)> {
        let now = self.clock.now_ms();
        self.with_state(|s| {
            s.ownership
                .lookup(key)
                .into_iter()
                .filter(|r| run.is_none_or(|run| crate::ownership::readable(s, r, run)))
                .map(|r| (r.clone(), crate::ownership::stale(s, r, now)))
                .collect()
        })
    }

    /// Every ownership record (of the repository `repo`, if given), oldest
    /// claim first, each with whether its holder is proven dead now.
    pub fn owners(
        &self,
        repo: Option<&str>,
    ) -> Vec<(protocol::ownership::Record, Option<protocol::ownership::StaleReason>)> {
        let now = self.clock.now_ms();
        self.with_state(|s| {
            s.ownership.list(repo).into_iter().map(|r| (r.clone(), crate::ownership::stale(s, r, now))).collect()
        })
    }

    /// Whether `record`'s holder is proven dead now, and why.
    pub fn ownership_stale(&self, record: &protocol::ownership::Record) -> Option<protocol::ownership::StaleReason> {
        let now = self.clock.now_ms();
        self.with_state(|s| crate::ownership::stale(s, record, now))
    }

    /// The worktree's live ownership record, if it is held.
    pub fn live_owner(&self, path: &str) -> Option<protocol::ownership::Record> {
        self.with_state(|s| s.ownership.live(path).cloned())
    }

    /// Whether `actor` may make `op` now: the same decision as [`Self::own`]
    /// against the current state, committing nothing. The shell asks before
    /// an external effect (a WIP snapshot) that only an allowed change may cause.
    pub fn may_own(&self, actor: &WorkerId, op: crate::ownership::Op) -> Result<(), Error> {
        let request = Request::Ownership { actor: actor.clone(), op, now_ms: self.clock.now_ms() };
        self.with_state(|s| crate::decide::decide(s, &request)).map(drop).map_err(Error::from)
    }

    /// A fresh ownership record id (time-ordered).
    pub fn new_ownership_id() -> protocol::OwnershipId {
        protocol::OwnershipId::from_uuid_bytes(new_uuid())
    }

    /// A change to worktree ownership by `actor`, at the plane's clock.
    pub fn own(&self, actor: &WorkerId, op: crate::ownership::Op) -> Result<Vec<Event>, Error> {
        self.execute(Request::Ownership { actor: actor.clone(), op, now_ms: self.clock.now_ms() })
    }

    /// Events of the system stream (executor connections) after `after`.
    pub fn system_events(&self, after: u64, limit: usize) -> Result<Vec<Event>, Error> {
        Ok(self.store.events_after(&RunId::system(), after, limit.clamp(1, EVENTS_PAGE_MAX))?)
    }

    /// The system stream's cursor (executor connections).
    pub fn system_cursor(&self) -> u64 {
        self.read().system_cursor
    }

    /// Queued commands to dispatch now (see [`crate::queue`]).
    pub fn next_dispatches(&self, connected: &[String], limits: Limits) -> Vec<Dispatch> {
        next_dispatches(&self.read(), connected, limits, self.clock.now_ms())
    }

    /// Queues an inspect for every conversation whose blocking state may be
    /// stale (see [`crate::schedule`]); returns how many. One commit. The
    /// [`crate::scheduler`] task calls it.
    pub fn recheck(&self, connected: &[String], policy: Policy) -> Result<usize, Error> {
        if schedule::due(&self.read(), connected, self.clock.now_ms(), policy).is_empty() {
            return Ok(0);
        }
        // Decided again under the writer lock: nothing queued twice.
        self.commit(None, &(), |state| {
            let due = schedule::due(state, connected, self.clock.now_ms(), policy);
            let inspections: Vec<_> = due.into_iter().map(|w| (w, CommandId::from_uuid_bytes(new_uuid()))).collect();
            let n = inspections.len();
            (Request::Recheck { inspections }, n)
        })
        .map(|(n, _)| n)
    }

    /// Queues the parks and reopens tab capacity asks for now (see
    /// [`crate::tabs`]); returns how many. One commit. The
    /// [`crate::scheduler`] task calls it when a capacity is configured.
    pub fn tabs(&self, policy: crate::tabs::TabPolicy) -> Result<usize, Error> {
        if crate::tabs::due(&self.read(), policy, self.clock.now_ms()).is_empty() {
            return Ok(0);
        }
        self.commit(None, &(), |state| {
            let due = crate::tabs::due(state, policy, self.clock.now_ms());
            let ids = |workers: Vec<WorkerId>| -> Vec<_> {
                workers.into_iter().map(|w| (w, CommandId::from_uuid_bytes(new_uuid()))).collect()
            };
            let n = due.parks.len() + due.opens.len();
            (Request::Tabs { parks: ids(due.parks), opens: ids(due.opens) }, n)
        })
        .map(|(n, _)| n)
    }

    /// Root asks `target` (or a managed root, itself) to roll over to a
    /// fresh conversation (see [`crate::rollover`]).
    pub fn ask_rollover(&self, actor: &WorkerId, target: &WorkerId) -> Result<Vec<Event>, Error> {
        let command_id = CommandId::from_uuid_bytes(new_uuid());
        self.execute(Request::AskRollover { actor: actor.clone(), target: target.clone(), command_id })
    }

    /// Queues the rollovers and checkpoint requests due now (see
    /// [`crate::rollover`]); returns how many. One commit. The
    /// [`crate::scheduler`] task calls it.
    pub fn rollover(&self, policy: crate::rollover::RolloverPolicy) -> Result<usize, Error> {
        if crate::rollover::due(&self.read(), policy, self.clock.now_ms()).is_empty() {
            return Ok(0);
        }
        self.commit(None, &(), |state| {
            let due = crate::rollover::due(state, policy, self.clock.now_ms());
            let ids = |found: Vec<(WorkerId, protocol::rollover::RolloverReason)>| -> Vec<_> {
                found.into_iter().map(|(w, why)| (w, why, CommandId::from_uuid_bytes(new_uuid()))).collect()
            };
            let n = due.rolls.len() + due.asks.len();
            (Request::Rollover { rolls: ids(due.rolls), asks: ids(due.asks) }, n)
        })
        .map(|(n, _)| n)
    }

    /// When a requested rollover stops waiting for its checkpoint, if one waits.
    pub fn next_rollover_at(&self, policy: crate::rollover::RolloverPolicy) -> Option<u64> {
        crate::rollover::next_due_at(&self.read(), policy, self.clock.now_ms())
    }

    /// When an idle tab may next be parked where room is short, if ever.
    pub fn next_tabs_at(&self, policy: crate::tabs::TabPolicy) -> Option<u64> {
        crate::tabs::next_due_at(&self.read(), policy, self.clock.now_ms())
    }

    /// Queues again the create of every spawned worker that waits for its
    /// browser and whose pause is over (see [`crate::schedule`]); returns
    /// how many. One commit. The [`crate::scheduler`] task calls it.
    pub fn relaunch(&self, connected: &[String]) -> Result<usize, Error> {
        if schedule::relaunches_due(&self.read(), connected, self.clock.now_ms()).is_empty() {
            return Ok(0);
        }
        self.commit(None, &(), |state| {
            let due = schedule::relaunches_due(state, connected, self.clock.now_ms());
            let relaunches: Vec<_> = due.into_iter().map(|w| (w, CommandId::from_uuid_bytes(new_uuid()))).collect();
            let n = relaunches.len();
            (Request::Relaunch { relaunches }, n)
        })
        .map(|(n, _)| n)
    }

    /// When a create waiting for its browser is next queued again, if any.
    pub fn next_relaunch_at(&self, connected: &[String]) -> Option<u64> {
        schedule::next_relaunch_at(&self.read(), connected)
    }

    /// Commits what Execution Continuity's rules find due now
    /// ([`crate::continuity::due`]): attempts to schedule, each with its
    /// command, and the stall guard's findings. Returns how many.
    pub fn continue_due(&self, pacing: crate::continuity::Pacing) -> Result<usize, Error> {
        if crate::continuity::due(&self.read(), self.clock.now_ms(), pacing).is_empty() {
            return Ok(0);
        }
        // Decided again under the writer lock: no attempt scheduled twice.
        self.commit(None, &(), |state| {
            let actions = crate::continuity::due(state, self.clock.now_ms(), pacing);
            let n = actions.len();
            (Request::ContinuityDue { actions }, n)
        })
        .map(|(n, _)| n)
    }

    /// When a continuity rule next falls due, if any is scheduled.
    pub fn next_continue_at(&self, pacing: crate::continuity::Pacing) -> Option<u64> {
        crate::continuity::next_due_at(&self.read(), self.clock.now_ms(), pacing)
    }

    /// One round of the executor loop, in one commit: dispatches what the
    /// queue allows now ([`crate::queue`]); returns each wire command with
    /// its executor. Planned again under the writer lock, so racing rounds
    /// never dispatch a command twice. (Inspects that fall due are queued by
    /// the [`crate::scheduler`]; their commit wakes the loop.)
    pub fn dispatch_round(
        &self,
        connected: &[String],
        limits: Limits,
        timeout_ms: impl Fn(&CommandIntent) -> u64,
    ) -> Result<Vec<(String, wire::Command)>, Error> {
        if next_dispatches(&self.read(), connected, limits, self.clock.now_ms()).is_empty() {
            return Ok(Vec::new());
        }
        let (dispatched, _) = self.commit(None, &(), |state| {
            let round = next_dispatches(state, connected, limits, self.clock.now_ms());
            let dispatches: Vec<(CommandId, String)> =
                round.into_iter().map(|d| (d.command_id, d.executor_id)).collect();
            (Request::Round { dispatches: dispatches.clone() }, dispatches)
        })?;
        // Each command is rendered on its own: one that cannot be rendered
        // (logged) holds back no other; it stays dispatched and is replayed.
        Ok(dispatched
            .into_iter()
            .filter_map(|(command_id, executor_id)| {
                let intent = self.command(&command_id)?.intent;
                self.rendered(&command_id, timeout_ms(&intent)).map(|wire| (executor_id, wire))
            })
            .collect())
    }

    /// What the worker waits for, if anything outside it (see [`crate::waiting`]).
    pub fn waiting_for(&self, worker: &Worker, live: &[String]) -> Option<protocol::Waiting> {
        crate::waiting::waiting_for(&self.read(), &self.chatgpt, worker, live)
    }

    /// When the next inspect falls due (see [`crate::schedule`]), if any.
    pub fn next_recheck_at(&self, connected: &[String], policy: Policy) -> Option<u64> {
        schedule::next_due_at(&self.read(), connected, policy)
    }

    /// The earliest time a queued command waits for (pacing), if any.
    pub fn next_not_before(&self) -> Option<u64> {
        let state = self.read();
        let now = self.clock.now_ms();
        state
            .open_commands
            .iter()
            .filter_map(|id| state.commands.get(id))
            .filter(|c| c.phase == crate::model::CommandPhase::Queued)
            .filter_map(|c| c.not_before_ms)
            .filter(|t| *t > now)
            .min()
    }

    /// Now, from the injected clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Reads the state under the read lock.
    pub fn with_state<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.read())
    }

    /// Commits the dispatch of a queued command to an executor and returns the
    /// wire command to send. Journal first, effect second: if the daemon dies
    /// before the send, the command is replayed on reconnect.
    pub fn dispatch(&self, dispatch: &Dispatch, timeout_ms: u64) -> Result<wire::Command, Error> {
        self.execute(Request::Dispatch {
            command_id: dispatch.command_id.clone(),
            executor_id: dispatch.executor_id.clone(),
        })?;
        self.render(&dispatch.command_id, timeout_ms)
    }

    /// The wire commands to replay to `executor_id` on (re)connect.
    pub fn replay(&self, executor_id: &str, timeout_ms: u64) -> Result<Vec<wire::Command>, Error> {
        let ids = replay_for(&self.read(), executor_id);
        Ok(ids.iter().filter_map(|id| self.rendered(id, timeout_ms)).collect())
    }

    /// [`ControlPlane::render`], with a failure logged rather than returned:
    /// a round or a replay still sends every command that renders.
    fn rendered(&self, id: &CommandId, timeout_ms: u64) -> Option<wire::Command> {
        self.render(id, timeout_ms)
            .inspect_err(
                |e| tracing::error!(command = %id, code = %e.code(), "cannot render a dispatched command: {e}"),
            )
            .ok()
    }

    /// Renders a durable command as a wire command. The deadline is per
    /// attempt (now + `timeout_ms`); the id and idempotency key never change.
    pub fn render(&self, id: &CommandId, timeout_ms: u64) -> Result<wire::Command, Error> {
        let state = self.read();
        let command = state.commands.get(id).ok_or_else(|| Refusal::NoCommand(id.clone()))?;
        let worker = state.worker(&command.worker_id).ok_or_else(|| Refusal::NoWorker(command.worker_id.clone()))?;
        let attach = self.keys.attach_identity_at(&worker.id, worker.epoch);
        let op = match &command.intent {
            CommandIntent::Create => CommandOp::ConversationCreate {
                prompt: match (worker.is_root(), worker.epoch) {
                    (true, 0) => root_bootstrap_prompt(&attach),
                    (false, 0) => bootstrap_prompt(&attach),
                    (is_root, epoch) => rollover_bootstrap_prompt(&attach, epoch, is_root),
                },
                project_url: self.chatgpt.project_url.clone(),
                app: self.chatgpt.app_label.clone(),
                model: worker.model.clone(),
                effort: worker.effort.clone(),
                replaces: worker.retired.last().filter(|_| worker.epoch > 0).cloned(),
            },
            CommandIntent::Send { prompt, steer } => {
                let (conversation_id, _) =
                    worker.conversation.clone().ok_or_else(|| Refusal::Unbound(worker.id.clone()))?;
                let prompt = match prompt {
                    PromptRef::Bootstrap => bootstrap_prompt(&attach),
                    PromptRef::Followup { seq } => followup_prompt(&attach, *seq),
                    PromptRef::Resume { attempt } => resume_prompt(&attach, *attempt),
                    PromptRef::Checkpoint { attempt } => checkpoint_prompt(&attach, *attempt),
                    PromptRef::Rollover => rollover_prompt(&attach),
                };
                // Decided again when sent: the executor holding the worker
                // may have reconnected without the seam since it was queued.
                let steers = worker.executor_id.as_ref().is_some_and(|e| state.steering_executors.contains(e));
                if *steer && steers {
                    CommandOp::ConversationSteer { conversation_id, prompt }
                } else {
                    CommandOp::ConversationSend {
                        conversation_id,
                        prompt,
                        app: self.chatgpt.app_label.clone(),
                        model: worker.model.clone(),
                        effort: worker.effort.clone(),
                    }
                }
            }
            CommandIntent::Open | CommandIntent::Close | CommandIntent::Park | CommandIntent::Inspect => {
                let (conversation_id, url) =
                    worker.conversation.clone().ok_or_else(|| Refusal::Unbound(worker.id.clone()))?;
                match command.intent {
                    CommandIntent::Open => CommandOp::ConversationOpen { conversation_id, url },
                    CommandIntent::Inspect => CommandOp::ConversationInspect { conversation_id },
                    CommandIntent::Park => CommandOp::ConversationClose { conversation_id, park: true },
                    _ => CommandOp::ConversationClose { conversation_id, park: false },
                }
            }
        };
        Ok(wire::Command {
            command_id: command.id.clone(),
            worker_id: worker.id.clone(),
            deadline_ms: self.clock.now_ms() + timeout_ms,
            idempotency_key: command.idempotency_key.clone(),
            op,
        })
    }

    /// Records what an executor reported; duplicates record nothing.
    pub fn report(&self, executor_id: &str, frame: ExecutorFrame) -> Result<Vec<Event>, Error> {
        self.execute(Request::ExecutorReport { executor_id: executor_id.to_owned(), frame })
    }

    /// A page of the run's events after `after`, filtered for `viewer`.
    pub fn events(&self, run: &RunId, after: u64, limit: usize, viewer: &Viewer) -> Result<Page, Error> {
        let head = self
            .with_state(|s| match run.is_ownership() {
                true => Some(s.ownership.cursor),
                false => s.runs.get(run).map(|r| r.cursor),
            })
            .ok_or_else(|| Refusal::NoRun(run.clone()))?;
        if after > head {
            return Err(Error::InvalidArgument(format!("after_cursor {after} is beyond the run's last cursor {head}")));
        }
        let limit = limit.clamp(1, EVENTS_PAGE_MAX);
        let mut cursor = after;
        let mut events = Vec::new();
        // Bytes too: a page stops before `PAGE_BYTES`, but always holds at
        // least one event (each is under `EVENT_MAX`), so paging progresses.
        let mut bytes = 0;
        let mut full = false;
        while events.len() < limit && cursor < head && !full {
            // The tail may lag the state by the publisher's hop: then the store.
            // Root sees every event: read no more than the page still needs.
            let wanted = match viewer {
                Viewer::Root => limit - events.len(),
                Viewer::Worker(_) | Viewer::Ownership(..) => EVENTS_PAGE_MAX,
            };
            let batch: Vec<Event> = match self.broker.tail_after(run, cursor, wanted) {
                Some(tail) if !tail.is_empty() => tail.iter().map(|e| Event::clone(e)).collect(),
                _ => self.store.events_after(run, cursor, wanted)?,
            };
            if batch.is_empty() {
                break;
            }
            for event in batch {
                if events.len() == limit {
                    break;
                }
                let event_cursor = event.cursor;
                let visible = match viewer {
                    Viewer::Root => true,
                    Viewer::Worker(id) => event.body.visible_to(id),
                    Viewer::Ownership(run, worker) => {
                        worker.as_ref().is_none_or(|w| event.body.visible_to(w))
                            && event.body.ownership().is_some_and(|(id, _)| {
                                self.with_state(|s| {
                                    s.ownership.records.get(id).is_some_and(|r| crate::ownership::readable(s, r, run))
                                })
                            })
                    }
                };
                if visible {
                    let len = serde_json::to_vec(&event).map_or(usize::MAX, |json| json.len()) + 1;
                    if !events.is_empty() && bytes + len > PAGE_BYTES {
                        full = true;
                        break;
                    }
                    bytes += len;
                    events.push(event);
                }
                cursor = event_cursor;
            }
        }
        Ok(Page { cursor, events, timed_out: false })
    }

    /// Waits until an event visible to `viewer` follows `after`, or until
    /// `timeout` (capped at `WAIT_MAX_MS`) passes. Never polls: it sleeps on
    /// the run's feed between checks.
    pub async fn wait(
        &self,
        run: &RunId,
        after: u64,
        timeout: Duration,
        limit: usize,
        viewer: &Viewer,
    ) -> Result<Page, Error> {
        let timeout = timeout.min(Duration::from_millis(WAIT_MAX_MS));
        let deadline = tokio::time::Instant::now() + timeout;
        let mut feed = self.broker.subscribe(run);
        let mut after = after;
        loop {
            feed.borrow_and_update();
            let page = self.events(run, after, limit, viewer)?;
            if !page.events.is_empty() {
                return Ok(page);
            }
            after = page.cursor;
            match tokio::time::timeout_at(deadline, feed.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) | Err(_) => {
                    return Ok(Page { cursor: after, events: Vec::new(), timed_out: true });
                }
            }
        }
    }
}

/// Wakes the waiters of durable events and the loops that watch commits,
/// and logs the domain's milestones at INFO: one line per worker transition,
/// binding and host state (ids, states and codes only: never a text a
/// worker or root wrote, never a capability).
fn publish(broker: &Broker, changes: &tokio::sync::watch::Sender<u64>, events: &[Event]) {
    for event in events {
        match &event.body {
            EventBody::WorkerStateChanged { worker_id, from, to, .. } => {
                tracing::info!(run = %event.run_id, worker = %worker_id, ?from, ?to, "worker state");
            }
            EventBody::ConversationBound { worker_id, conversation_id, .. } => {
                tracing::info!(run = %event.run_id, worker = %worker_id, conversation = %conversation_id, "bound");
            }
            EventBody::ExecutionScheduled { worker_id, attempt, reason, .. } => {
                tracing::info!(run = %event.run_id, worker = %worker_id, attempt, ?reason, "execution attempt scheduled");
            }
            EventBody::WorkerHoldChanged { worker_id, hold, .. } => {
                tracing::info!(run = %event.run_id, worker = %worker_id, ?hold, "continuation hold");
            }
            EventBody::ContinuationStalled { worker_id, level, attempts_without_progress, .. } => {
                tracing::info!(run = %event.run_id, worker = %worker_id, ?level, attempts_without_progress, "stalled");
            }
            EventBody::ConversationError { worker_id, code, .. } => {
                tracing::info!(run = %event.run_id, worker = %worker_id, %code, "conversation needs attention");
            }
            EventBody::ContinuationTurnStalled { worker_id, stall, for_ms } => {
                tracing::warn!(run = %event.run_id, worker = %worker_id, ?stall, for_ms, "turn stalled; nothing reloads it");
            }
            EventBody::ContinuationRateLimited { worker_id, .. } => {
                tracing::warn!(run = %event.run_id, worker = %worker_id, "ChatGPT rate limit: automatic continuation waits");
            }
            _ => {}
        }
    }
    broker.publish(events);
    changes.send_modify(|n| *n += 1);
}

/// Gives each decided event its run, cursor and time: a dispatch round and
/// the continuity rules' findings span runs, each event going to its
/// worker's run.
fn stamp(state: &State, command: &Request, bodies: Vec<EventBody>, at_ms: u64) -> Vec<Event> {
    let mut next = HashMap::<RunId, u64>::new();
    bodies
        .into_iter()
        .map(|body| {
            let run_id = match &body {
                _ if body.ownership().is_some() => RunId::ownership(),
                EventBody::CommandDispatched { worker_id, .. }
                | EventBody::CommandQueued { worker_id, intent: CommandIntent::Inspect, .. } => {
                    state.workers[worker_id].run_id.clone()
                }
                EventBody::ExecutionScheduled { worker_id, .. }
                | EventBody::CommandQueued { worker_id, .. }
                | EventBody::ContinuationStalled { worker_id, .. }
                | EventBody::ContinuationTurnStalled { worker_id, .. }
                | EventBody::WorkerHoldChanged { worker_id, .. }
                    if matches!(
                        command,
                        Request::ContinuityDue { .. } | Request::Relaunch { .. } | Request::Tabs { .. }
                    ) =>
                {
                    state.workers[worker_id].run_id.clone()
                }
                EventBody::CommandCancelled { worker_id, .. }
                | EventBody::CommandQueued { worker_id, .. }
                | EventBody::WorkerRolloverRequested { worker_id, .. }
                | EventBody::WorkerRolledOver { worker_id, .. }
                    if matches!(command, Request::Rollover { .. }) =>
                {
                    state.workers[worker_id].run_id.clone()
                }
                _ => run_of(state, command),
            };
            let cursor = next.entry(run_id.clone()).or_insert_with(|| {
                if run_id.is_system() {
                    state.system_cursor
                } else if run_id.is_ownership() {
                    state.ownership.cursor
                } else {
                    state.runs.get(&run_id).map_or(0, |r| r.cursor)
                }
            });
            *cursor += 1;
            Event { cursor: *cursor, run_id, at_ms, body }
        })
        .collect()
}

/// The run an event of `command` belongs to: the run being created, or the
/// run of the worker the event names.
fn run_of(state: &State, command: &Request) -> RunId {
    let actor = match command {
        Request::CreateRun { run_id, .. } => return run_id.clone(),
        Request::ExecutorConnected { .. } | Request::ExecutorDisconnected { .. } => return RunId::system(),
        Request::Ownership { .. } => return RunId::ownership(),
        Request::Dispatch { command_id, .. } => &state.commands[command_id].worker_id,
        Request::Recheck { .. }
        | Request::Tabs { .. }
        | Request::Rollover { .. }
        | Request::Relaunch { .. }
        | Request::Round { .. }
        | Request::ContinuityDue { .. } => {
            unreachable!("each dispatch, inspect or continuity event names its worker")
        }
        Request::Answering { report, .. } => return run_of(state, report),
        Request::ExecutorReport { frame, .. } => match frame {
            ExecutorFrame::Ack { command_id } | ExecutorFrame::Result { command_id, .. } => {
                &state.commands[command_id].worker_id
            }
            ExecutorFrame::ConversationCreated { worker_id, .. }
            | ExecutorFrame::ConversationBound { worker_id, .. }
            | ExecutorFrame::ConversationState { worker_id, .. }
            | ExecutorFrame::ConversationProgress { worker_id }
            | ExecutorFrame::ConversationError { worker_id, .. }
            | ExecutorFrame::ConversationBlock { worker_id, .. }
            | ExecutorFrame::ConversationClosed { worker_id } => worker_id,
            ExecutorFrame::Hello { .. }
            | ExecutorFrame::Heartbeat { .. }
            | ExecutorFrame::CallerSeen { .. }
            | ExecutorFrame::OperatorAct { .. }
            | ExecutorFrame::PageInspected { .. } => {
                unreachable!("decide refuses session frames")
            }
        },
        Request::Attach { worker_id }
        | Request::RuntimeAdmit { worker_id, .. }
        | Request::Attributed { worker_id, .. }
        | Request::HostState { worker_id, .. } => worker_id,
        Request::Spawn { actor, .. }
        | Request::Progress { actor, .. }
        | Request::Send { actor, .. }
        | Request::Answer { actor, .. }
        | Request::Broadcast { actor, .. }
        | Request::Complete { actor, .. }
        | Request::Fail { actor, .. }
        | Request::Interrupt { actor, .. }
        | Request::Followup { actor, .. }
        | Request::CancelRun { actor, .. }
        | Request::RuntimeProvision { actor, .. }
        | Request::RuntimeRecover { actor, .. }
        | Request::RuntimeRetire { actor, .. }
        | Request::SetContinuation { actor, .. }
        | Request::SetHold { actor, .. }
        | Request::ReleaseHold { actor, .. }
        | Request::ContinueNow { actor, .. }
        | Request::Checkpoint { actor, .. }
        | Request::AskRollover { actor, .. }
        | Request::Block { actor, .. } => actor,
    };
    state.workers[actor].run_id.clone()
}

fn hash_json(value: &impl Serialize) -> String {
    let bytes = serde_json::to_vec(value).expect("requests serialize");
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A time-ordered UUIDv7 as bytes.
fn new_uuid() -> [u8; 16] {
    *uuid::Uuid::now_v7().as_bytes()
}

/// A run `prune` took (or, dry, would take).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrunedRun {
    /// The run.
    pub run_id: RunId,
    /// Its title.
    pub title: String,
    /// Its state (ended).
    pub state: protocol::RunState,
    /// When it last changed.
    pub updated_at_ms: u64,
}

/// What `prune` found, and what it removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneReport {
    /// The runs.
    pub runs: Vec<PrunedRun>,
    /// What went with them.
    pub pruned: crate::store::Pruned,
}

/// The retention policy, on a store no plane has open: removes every run
/// that ended (completed, failed or cancelled) and has not changed for
/// `older_than_ms` before `now_ms`, unless an executor may still answer
/// one of its commands (that provenance is still needed); then saves a
/// snapshot of what is left, so the next start folds no more than before.
/// With `dry`, only says what it would remove.
pub fn prune(store: &dyn Store, now_ms: u64, older_than_ms: u64, dry: bool) -> Result<PruneReport, StoreError> {
    let state = fold_store(store)?;
    let cutoff = now_ms.saturating_sub(older_than_ms);
    let answerable: std::collections::HashSet<&WorkerId> = (state.open_commands.iter())
        .filter_map(|id| state.commands.get(id))
        .filter(|c| c.in_flight())
        .map(|c| &c.worker_id)
        .collect();
    let mut runs: Vec<PrunedRun> = state
        .runs
        .values()
        .filter(|run| run.state.is_terminal() && run.updated_at_ms <= cutoff)
        .filter(|run| !run.workers.iter().chain([&run.root]).any(|w| answerable.contains(w)))
        .map(|run| PrunedRun {
            run_id: run.id.clone(),
            title: run.title.clone(),
            state: run.state,
            updated_at_ms: run.updated_at_ms,
        })
        .collect();
    runs.sort_by(|a, b| (a.updated_at_ms, a.run_id.as_str()).cmp(&(b.updated_at_ms, b.run_id.as_str())));
    let ids: Vec<RunId> = runs.iter().map(|r| r.run_id.clone()).collect();
    let mut owners: std::collections::HashSet<String> = ids.iter().map(|r| r.to_string()).collect();
    for run in ids.iter().filter_map(|id| state.runs.get(id)) {
        owners.extend(run.workers.iter().chain([&run.root]).map(|w| w.to_string()));
    }
    drop(state);
    let pruned = store.prune(&ids, &owners, dry)?;
    if !dry && !ids.is_empty() {
        save_snapshot(store, &fold_store(store)?)?;
    }
    Ok(PruneReport { runs, pruned })
}
