//! The runtime pool manager. Root asks for `desired` parked workers; the pool
//! keeps that true through ensure, scale, recover and stop, and routes
//! targeted tasks to exact workers, without ever duplicating an external
//! effect.
//!
//! # Layout
//! - [`plan`]: the pure reconciler (desired vs observed → slots to provision
//!   or retire; holds on uncertainty).
//! - [`Pool`]: the shell over the control plane. Every decision is committed
//!   as events (provisioning records before any external effect, admission,
//!   health) and every external effect goes through the executor command
//!   journal, so a lost response is reconciled by exact readback, never by a
//!   second create.
//!
//! The `Carrier` seam is the executor protocol itself: the pool never knows
//! which carrier (extension, CDP agent, fake) holds a slot, only the
//! capabilities it declared.
//!
//! Architecture invariant: no IO of its own; the only authority is the
//! durable log behind `control::ControlPlane`.

pub mod plan;

use std::sync::{Arc, Mutex};

use control::ControlPlane;
use control::decide::{ProvisionSlot, Request};
use control::model::Worker;
use protocol::{Assignment, CommandId, CommandIntent, ErrorCode, RunId, SlotHealth, WorkerId};
use registry::CarrierRecord;
use schemars::JsonSchema;
use serde::Serialize;

pub use plan::{Hold, Plan};

/// Why a pool operation was refused. Nothing was committed. Expected
/// answers are data, not errors (a protected slot is in [`Outcome`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// More parked workers were asked for than the configured maximum.
    #[error("desired_workers is at most {max} (the configured maximum)")]
    OverMax {
        /// The maximum.
        max: u32,
    },
    /// A slot's external effect is uncertain: nothing new is created until
    /// it is reconciled (first-uncertain fail-fast).
    #[error("slot {slot}: {why}; nothing new is created until it is reconciled (runtime_recover or inspect)")]
    Uncertain {
        /// The slot.
        slot: u32,
        /// Why.
        why: &'static str,
    },
    /// No live slot has this number.
    #[error("slot {0} not found")]
    NoSuchSlot(u32),
    /// No parked, idle worker that can act is free for an untargeted task.
    #[error("no parked idle worker that can act; runtime_ensure more")]
    NoIdleWorker,
    /// The slot's conversation has not been admitted yet.
    #[error("slot {0} is not admitted yet")]
    NotAdmitted(u32),
    /// The slot's worker could not re-attach on a wake (see
    /// `admission::recognizable`): it gets no task.
    #[error("slot {slot}: {refusal}")]
    CannotAct {
        /// The slot.
        slot: u32,
        /// Why its peer cannot be recognized.
        refusal: admission::Refusal,
    },
    /// A task id that is not `<worker>:<seq>`.
    #[error("task_id is <worker>:<seq>")]
    MalformedTaskId,
    /// No task of this run has this id.
    #[error("task {0} not found")]
    NoSuchTask(String),
    /// The control plane refused (authentication, admission, a transition, the store).
    #[error(transparent)]
    Plane(#[from] control::Error),
}

impl Error {
    /// The stable wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::OverMax { .. } | Error::NoIdleWorker => ErrorCode::LimitReached,
            Error::Uncertain { .. } => ErrorCode::ReconcileRequired,
            Error::NoSuchSlot(_) | Error::NoSuchTask(_) => ErrorCode::NotFound,
            Error::NotAdmitted(_) => ErrorCode::InvalidTransition,
            Error::CannotAct { refusal, .. } => refusal.code(),
            Error::MalformedTaskId => ErrorCode::InvalidArgument,
            Error::Plane(e) => e.code(),
        }
    }
}

impl From<Hold> for Error {
    fn from(hold: Hold) -> Self {
        match hold {
            Hold::OverMax { max } => Error::OverMax { max },
            Hold::Uncertain { slot, why } => Error::Uncertain { slot, why },
        }
    }
}

impl From<protocol::IdError> for Error {
    fn from(e: protocol::IdError) -> Self {
        Error::Plane(e.into())
    }
}

/// Pool settings.
#[derive(Debug, Clone, Copy)]
pub struct PoolConfig {
    /// The one maximum of workers per pool (no second authority).
    pub max_workers: u32,
    /// Spacing between conversation creations, so bursts never flood the account.
    pub pacing_ms: u64,
    /// How long a provisioning record may stay unadmitted.
    pub provisioning_ttl_ms: u64,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self { max_workers: 16, pacing_ms: 3_000, provisioning_ttl_ms: 10 * 60_000 }
    }
}

/// The pool's readiness, kept apart from worker failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Readiness {
    /// The pool is switched off (maximum 0).
    Disabled,
    /// Configured, but no slot is parked yet or no executor is connected.
    ConfiguredNotReady,
    /// Every live slot is parked, and every worker can act on a wake.
    Ready,
    /// Some slots are provisioning, lost or recovering, or a parked worker
    /// cannot act (its admitted MCP peer can no longer be recognized).
    Degraded,
    /// An uncertain external effect fences the pool.
    ReconcileRequired,
}

/// One slot as `runtime_status` shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SlotStatus {
    /// The runtime slot.
    pub slot: u32,
    /// Its worker.
    pub worker_id: WorkerId,
    /// Health.
    pub health: SlotHealth,
    /// Admitted (its MCP peer reached us).
    pub admitted: bool,
    /// Admitted, and its MCP peer can be recognized again, so a wake can
    /// reach it (see `admission::recognizable`). A slot that cannot act gets
    /// no task.
    pub can_act: bool,
    /// The exact conversation, once bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The executor holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<String>,
    /// The machine that executor runs on, as its `hello` named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Reopenings so far.
    pub continuation_epoch: u32,
    /// Idle: available for a targeted task or a scale-down.
    pub idle: bool,
}

/// `runtime_status`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Status {
    /// Overall readiness.
    pub state: Readiness,
    /// Why not ready (setup and host states, never task failures).
    pub reasons: Vec<ErrorCode>,
    /// Live slots (parked, provisioning, lost, recovering).
    pub live: u32,
    /// The configured maximum.
    pub max_workers: u32,
    /// Every slot that is not retired (a stopped pool lists none).
    pub slots: Vec<SlotStatus>,
}

/// What an ensure or scale did.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Outcome {
    /// Slots provisioned now.
    pub provisioned: Vec<u32>,
    /// Slots being retired now.
    pub retiring: Vec<u32>,
    /// Surplus slots kept because they are protected (busy, targeted, pending, uncertain).
    pub protected: Vec<u32>,
    /// Lost slots being reopened now.
    pub recovering: Vec<u32>,
}

/// A targeted task: follow-up `seq` of a pool worker.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Task {
    /// `<worker>:<seq>`.
    pub task_id: String,
    /// The slot.
    pub slot: u32,
    /// The worker.
    pub worker_id: WorkerId,
}

/// Whether a task's worker reported it done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Recorded; its worker has not completed it yet.
    Pending,
    /// Its worker completed it; `result` holds the summary.
    Completed,
}

/// Where a task is.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskStatus {
    /// The task.
    pub task_id: String,
    /// Pending or completed.
    pub status: TaskState,
    /// The worker's completion summary, once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// The pool manager over one control plane (all runs' pools).
pub struct Pool {
    plane: Arc<ControlPlane>,
    config: PoolConfig,
    /// Serializes reconciles, so racing ensures see each other's records.
    reconcile: Mutex<()>,
}

/// A slot whose tab is gone and whose exact conversation can be reopened.
fn lost(record: &CarrierRecord) -> bool {
    record.health == SlotHealth::Lost && record.conversation.is_some()
}

fn new_id() -> [u8; 16] {
    *uuid::Uuid::now_v7().as_bytes()
}

fn parked_assignment(slot: u32) -> Assignment {
    Assignment {
        objective: format!(
            "Parked pool worker for runtime slot {slot}. Wait for targeted tasks: each arrives as a follow-up with a wake \
             prompt. Carry it out, then call worker_complete with the result and wait for the next."
        ),
        constraints: vec!["Work only on tasks the orchestrator gives you.".into()],
        acceptance_criteria: vec![],
        dependencies: vec![],
        scope: Default::default(),
        artifact_refs: vec![],
        communication_policy: Some("Ask /root with message_send when blocked.".into()),
        completion_protocol: Some("worker_complete after each task.".into()),
    }
}

impl Pool {
    /// A pool manager.
    pub fn new(plane: Arc<ControlPlane>, config: PoolConfig) -> Self {
        Self { plane, config, reconcile: Mutex::new(()) }
    }

    /// The configuration.
    pub fn config(&self) -> PoolConfig {
        self.config
    }

    fn records(&self, run: &RunId) -> Vec<CarrierRecord> {
        self.plane.with_state(|s| s.runtime.pool(run).cloned().collect())
    }

    /// Whether a slot may not be retired now (see `control::decide::retire_protection`).
    fn protected(&self, run: &RunId, slot: u32) -> bool {
        self.plane.with_state(|s| {
            let Some(record) = s.runtime.slot(run, slot) else { return false };
            s.worker(&record.reserved_worker)
                .is_some_and(|w| control::decide::retire_protection(s, record, w).is_some())
        })
    }

    fn idle(&self, worker: &WorkerId) -> bool {
        self.plane.with_state(|s| {
            let (Some(record), Some(w)) = (s.runtime.by_worker(worker), s.worker(worker)) else { return false };
            control::decide::retire_protection(s, record, w).is_none()
        })
    }

    /// The pool's readiness and slots. Read-only and bounded by the maximum.
    /// `alive` says whether an admitted peer's transport session is still
    /// open in this process (the shell knows its sessions; the log does not).
    pub fn status(&self, run: &RunId, connected_executors: &[String], alive: &dyn Fn(&str) -> bool) -> Status {
        let records = self.records(run);
        let slots: Vec<SlotStatus> = records
            .iter()
            .filter(|r| r.health != SlotHealth::Retired)
            .map(|r| SlotStatus {
                slot: r.slot,
                worker_id: r.reserved_worker.clone(),
                health: r.health,
                admitted: r.logical_worker_id.is_some(),
                can_act: r.logical_worker_id.is_some() && admission::recognizable(r, alive).is_ok(),
                conversation_id: r.conversation.as_ref().map(|(c, _)| c.to_string()),
                executor_id: r.executor_id.clone(),
                host: r
                    .executor_id
                    .as_ref()
                    .and_then(|id| self.plane.with_state(|s| s.executor_hosts.get(id).and_then(|h| h.name.clone()))),
                continuation_epoch: r.continuation_epoch,
                idle: self.idle(&r.reserved_worker),
            })
            .collect();
        let live = records.iter().filter(|r| plan::live(r)).count() as u32;
        let mut reasons = Vec::new();
        if connected_executors.is_empty() {
            reasons.push(ErrorCode::BrowserControlUnavailable);
        }
        let unadmitted = |s: &SlotStatus| s.health == SlotHealth::Provisioning && s.conversation_id.is_some();
        if slots.iter().any(|s| (unadmitted(s) && !s.admitted) || (s.admitted && !s.can_act)) {
            reasons.push(ErrorCode::PeerIdentityUnresolved);
        }
        // Host and setup states the executors reported for slot workers:
        // readiness reasons, never worker or task failures.
        let reported: Vec<ErrorCode> = self.plane.with_state(|s| {
            records.iter().filter_map(|r| s.worker(&r.reserved_worker).and_then(|w| w.last_error)).collect()
        });
        for code in reported {
            if code.is_host_state() && !reasons.contains(&code) {
                reasons.push(code);
            }
        }
        let uncertain = slots.iter().any(|s| s.health == SlotHealth::ReconcileRequired);
        if uncertain {
            reasons.push(ErrorCode::ReconcileRequired);
        }
        let state = if self.config.max_workers == 0 {
            Readiness::Disabled
        } else if uncertain {
            Readiness::ReconcileRequired
        } else if slots.is_empty() || connected_executors.is_empty() {
            Readiness::ConfiguredNotReady
        } else if reasons.iter().any(|r| r.is_host_state()) {
            // A pool is not ready while its browser or setup needs a person,
            // whatever its slots' records say.
            Readiness::Degraded
        } else if slots.iter().all(|s| s.health == SlotHealth::Parked && s.can_act) {
            Readiness::Ready
        } else {
            Readiness::Degraded
        };
        Status { state, reasons, live, max_workers: self.config.max_workers, slots }
    }

    /// Reconciles toward `desired` parked workers: reopens every lost slot's
    /// exact conversation (a browser restarted: the seed's G6, one ensure
    /// and no separate recover) and provisions missing slots. Idempotent:
    /// once the records exist and no slot is lost, it does nothing. An
    /// uncertain slot holds everything (first-uncertain fail-fast).
    pub fn ensure(&self, root: &Worker, desired: u32) -> Result<Outcome, Error> {
        self.ensure_pinned(root, desired, None)
    }

    /// [`Pool::ensure`], the workers it provisions pinned to `model`.
    pub fn ensure_pinned(&self, root: &Worker, desired: u32, model: Option<&str>) -> Result<Outcome, Error> {
        let _one = self.reconcile.lock().expect("reconcile lock");
        let records = self.records(&root.run_id);
        plan::plan(&records, desired, self.config.max_workers, self.plane.now_ms())?;
        let recovering = self.reopen(root, records.iter().filter(|r| lost(r)))?;
        Ok(Outcome { recovering, ..self.provision(root, desired, model)? })
    }

    /// Reopens each of `records`' exact conversation (or creates again one
    /// whose creates were refused for setup); returns their slots.
    fn reopen<'a>(&self, root: &Worker, records: impl Iterator<Item = &'a CarrierRecord>) -> Result<Vec<u32>, Error> {
        let mut slots = Vec::new();
        for record in records {
            let command_id = CommandId::from_uuid_bytes(new_id());
            self.plane.execute(Request::RuntimeRecover { actor: root.id.clone(), slot: record.slot, command_id })?;
            slots.push(record.slot);
        }
        Ok(slots)
    }

    fn provision(&self, root: &Worker, desired: u32, model: Option<&str>) -> Result<Outcome, Error> {
        let records = self.records(&root.run_id);
        let now = self.plane.now_ms();
        let planned = plan::plan(&records, desired, self.config.max_workers, now)?;
        if planned.provision.is_empty() {
            return Ok(Outcome::default());
        }
        // Pacing: continue after the last paced create of this pool.
        let last = self.plane.with_state(|s| {
            s.commands
                .values()
                .filter(|c| {
                    c.intent == CommandIntent::Create
                        && s.runtime.by_worker(&c.worker_id).is_some_and(|r| r.run_id == root.run_id)
                })
                .filter_map(|c| c.not_before_ms)
                .max()
        });
        let start = last.map_or(now, |t| now.max(t + self.config.pacing_ms));
        let slots = planned
            .provision
            .iter()
            .enumerate()
            .map(|(i, slot)| ProvisionSlot {
                slot: *slot,
                worker_id: WorkerId::from_uuid_bytes(new_id()),
                assignment: parked_assignment(*slot),
                command_id: CommandId::from_uuid_bytes(new_id()),
                not_before_ms: start + i as u64 * self.config.pacing_ms,
                model: model.map(str::to_owned),
            })
            .collect();
        let operation_id = format!("ensure-{}", uuid::Uuid::now_v7().simple());
        self.plane.execute(Request::RuntimeProvision {
            actor: root.id.clone(),
            operation_id,
            slots,
            expires_at_ms: now + self.config.provisioning_ttl_ms,
        })?;
        Ok(Outcome { provisioned: planned.provision, ..Outcome::default() })
    }

    /// Scales to `desired`: provisions missing slots, or retires safe idle
    /// tail slots (highest first), keeping protected ones.
    pub fn scale(&self, root: &Worker, desired: u32) -> Result<Outcome, Error> {
        self.scale_pinned(root, desired, None)
    }

    /// [`Pool::scale`], the workers it provisions pinned to `model`.
    pub fn scale_pinned(&self, root: &Worker, desired: u32, model: Option<&str>) -> Result<Outcome, Error> {
        let _one = self.reconcile.lock().expect("reconcile lock");
        let records = self.records(&root.run_id);
        match plan::plan(&records, desired, self.config.max_workers, self.plane.now_ms()) {
            Ok(p) if !p.provision.is_empty() => return self.provision(root, desired, model),
            // Uncertainty blocks creation, not a careful scale-down.
            Ok(_) | Err(Hold::Uncertain { .. }) => {}
            Err(hold) => return Err(hold.into()),
        }
        let mut outcome = Outcome::default();
        let (mut excess, order) = plan::retire_order(&records, desired);
        // Retire safe slots from the tail until the excess is gone; protected ones are kept.
        for slot in order {
            if excess == 0 {
                break;
            }
            // A protected slot (busy, targeted, pending, uncertain) is an answer, not a refusal.
            if self.protected(&root.run_id, slot) {
                outcome.protected.push(slot);
                continue;
            }
            let command_id = CommandId::from_uuid_bytes(new_id());
            match self.plane.execute(Request::RuntimeRetire { actor: root.id.clone(), slot, command_id }) {
                Ok(_) => {
                    outcome.retiring.push(slot);
                    excess -= 1;
                }
                // A task landed between the look and the retire (dispatch does
                // not take the reconcile lock): protected after all.
                Err(_) if self.protected(&root.run_id, slot) => outcome.protected.push(slot),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(outcome)
    }

    /// Reopens every lost slot's exact conversation (same logical worker, new
    /// ephemeral handle in the executor), and creates again the conversation
    /// of every slot whose creates were all refused for a setup state (see
    /// [`control::decide::setup_refused`]). Nothing else is touched.
    pub fn recover(&self, root: &Worker) -> Result<Outcome, Error> {
        let _one = self.reconcile.lock().expect("reconcile lock");
        let retry =
            |r: &&CarrierRecord| lost(r) || self.plane.with_state(|s| control::decide::setup_refused(s, r).is_some());
        let recovering = self.reopen(root, self.records(&root.run_id).iter().filter(retry))?;
        Ok(Outcome { recovering, ..Outcome::default() })
    }

    /// Admits the calling conversation's MCP peer into its slot (see the
    /// `admission` crate); returns the admitted worker.
    pub fn bootstrap(&self, attach_identity: &str, peer_fingerprint: &str) -> Result<Worker, Error> {
        let worker = self.plane.attaching(attach_identity)?.id;
        self.plane.execute(Request::RuntimeAdmit {
            worker_id: worker.clone(),
            peer_fingerprint: peer_fingerprint.to_owned(),
            now_ms: self.plane.now_ms(),
        })?;
        Ok(self
            .plane
            .worker(&worker)
            .ok_or_else(|| control::Error::from(control::decide::Refusal::NoWorker(worker.clone())))?)
    }

    /// Records a task for one parked worker (the given slot, or the lowest
    /// idle one that can act) and queues its exact wake. The record comes
    /// before the wake; the wake is only a delivery hint. A worker that could
    /// not re-attach on the wake (`alive`, as for [`Pool::status`]) is never
    /// given a task: `PEER_IDENTITY_UNRESOLVED`, nothing recorded.
    pub fn dispatch(
        &self,
        root: &Worker,
        instructions: &str,
        slot: Option<u32>,
        idem: Option<&str>,
        alive: &dyn Fn(&str) -> bool,
    ) -> Result<Task, Error> {
        let records = self.records(&root.run_id);
        let record = match slot {
            Some(slot) => records
                .iter()
                .find(|r| r.slot == slot && r.health != SlotHealth::Retired)
                .ok_or(Error::NoSuchSlot(slot))?,
            None => records
                .iter()
                .find(|r| {
                    r.health == SlotHealth::Parked
                        && self.idle(&r.reserved_worker)
                        && admission::recognizable(r, alive).is_ok()
                })
                .ok_or(Error::NoIdleWorker)?,
        };
        if record.logical_worker_id.is_none() {
            return Err(Error::NotAdmitted(record.slot));
        }
        // A replay answers as the first call did, even if the worker can no longer act.
        if !self.plane.followup_replayed(root, idem)? {
            admission::recognizable(record, alive)
                .map_err(|refusal| Error::CannotAct { slot: record.slot, refusal })?;
        }
        let seq = self.plane.followup(root, &record.reserved_worker, instructions, idem)?;
        Ok(Task {
            task_id: format!("{}:{seq}", record.reserved_worker),
            slot: record.slot,
            worker_id: record.reserved_worker.clone(),
        })
    }

    /// Where a task is; its result once its worker completed it.
    pub fn collect(&self, root: &Worker, task_id: &str) -> Result<TaskStatus, Error> {
        let (worker, seq) = task_id.split_once(':').ok_or(Error::MalformedTaskId)?;
        let worker: WorkerId = worker.parse()?;
        let seq: u32 = seq.parse().map_err(|_| Error::MalformedTaskId)?;
        let w = self
            .plane
            .worker(&worker)
            .filter(|w| w.run_id == root.run_id)
            .ok_or_else(|| Error::NoSuchTask(task_id.to_owned()))?;
        if seq == 0 || seq as usize > w.followups.len() {
            return Err(Error::NoSuchTask(task_id.to_owned()));
        }
        let result = w.completions.iter().find(|(n, _)| *n == seq).map(|(_, s)| s.clone());
        Ok(TaskStatus {
            task_id: task_id.to_owned(),
            status: if result.is_some() { TaskState::Completed } else { TaskState::Pending },
            result,
        })
    }
}
