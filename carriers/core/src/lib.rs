//! The executor's memory and judgement, without IO, for every carrier: the
//! WebExtension (a handle is a tab id), the CDP agent (a target id) and the
//! fake executor (a simulated tab). It holds
//!
//! - the command idempotency journal, phases `received → tab_opening →
//!   submission_started → submitted → completed`, and the one command being
//!   performed per key (a replay meanwhile *joins* it);
//! - the plan for each command ([`Plan`]): what to do in the browser, or the
//!   answer when nothing is to be done;
//! - the managed-conversation registry (worker ↔ handle ↔ conversation) and
//!   what page reports and lost handles mean on the wire;
//! - the handshake's frames: `hello`, the resync after `welcome`, the
//!   heartbeat interval.
//!
//! A carrier persists [`Core`] after every change (the extension in
//! `storage.local`) and performs the effects it is asked for, in this order
//! per command: [`Core::begin`] → persist → [`ack`] → carry out the plan,
//! calling [`Core::advance`] (and persisting) before each step it names →
//! [`Core::finish`] → persist → send the result. After a restart the daemon
//! replays what is unfinished and [`Core::begin`] resumes each command at its
//! persisted phase: nothing is performed twice, and a prompt that may already
//! be in the page is reconciled with the page, never typed again.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::time::Duration;

use chatgpt_dom::{is_project_page, parse_url};
use protocol::executor::{
    Command, CommandOp, CommandOutcome, ConversationState, ExecutorFrame, ExecutorKind, MachineFacts, PROTOCOL_VERSION,
};
use protocol::{CommandId, ConversationId, ErrorCode, WorkerId};
use serde::{Deserialize, Serialize};

/// Settled journal entries kept for replays; older ones are forgotten.
pub const JOURNAL_KEEP: usize = 512;

/// Heartbeats at most this far apart: Chromium keeps an extension service
/// worker alive while WebSocket messages flow at least every 30 s.
pub const HEARTBEAT_MAX: Duration = Duration::from_secs(20);
/// Heartbeats at least this far apart, whatever the daemon asks.
pub const HEARTBEAT_MIN: Duration = Duration::from_secs(1);

/// The daemon allows an executor 100 frames per second with bursts of 200
/// (close 4003 beyond): a [`Core::resync`] longer than this is sent in
/// chunks of this many frames, [`RESYNC_PAUSE`] apart.
pub const RESYNC_CHUNK: usize = 100;
/// The pause between two resync chunks.
pub const RESYNC_PAUSE: Duration = Duration::from_secs(1);

/// Where a command is. Persisted before the step it names is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Journaled and acknowledged; no effect yet (or one refused without acting).
    Received,
    /// A tab is being opened for it (its URL carries [`tab_marker`]).
    TabOpening,
    /// The prompt is being handed to the page: from here a lost result is
    /// ambiguous unless the page can vouch for it.
    SubmissionStarted,
    /// The page took the prompt; the result may not have reached the daemon.
    Submitted,
    /// The result is known and stored.
    Completed,
}

/// One journaled command, by idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The latest command id carrying this key (replays may renumber).
    pub command_id: CommandId,
    /// The worker it serves.
    pub worker_id: WorkerId,
    /// How far it got.
    pub phase: Phase,
    /// Its outcome, once an effect happened (or may have).
    pub outcome: Option<CommandOutcome>,
    /// Arrival order, for forgetting the oldest.
    pub seq: u64,
}

/// A worker's managed conversation, shown by the carrier's handle `H`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Managed<H> {
    /// The tab (target, simulated page) showing it, while one is open.
    pub tab: Option<H>,
    /// The bound conversation, once the page showed `/c/<uuid>`.
    pub conversation: Option<ConversationId>,
    /// The last coarse state reported to the daemon.
    pub state: Option<ConversationState>,
    /// A tab being closed to park the conversation (its page agreed): a
    /// restart before it closed closes it then ([`Plan::FinishPark`]).
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub closing: Option<H>,
}

impl<H> Default for Managed<H> {
    fn default() -> Self {
        Self { tab: None, conversation: None, state: None, closing: None }
    }
}

/// What to do for a command, after it is journaled and acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan<H> {
    /// Nothing to perform: this is the result (a replay, or a refusal).
    Reply(CommandOutcome),
    /// Open a tab at `url` (marked with [`tab_marker`]) and submit `prompt` there.
    Create {
        /// Where the new chat starts.
        url: String,
        /// The bootstrap prompt.
        prompt: String,
    },
    /// Submit `prompt` in the worker's tab once the page is idle.
    Submit {
        /// The managed tab.
        tab: H,
        /// The prompt.
        prompt: String,
    },
    /// Submit `prompt` in the worker's tab now, into the running turn,
    /// through the page's steering seam (only a carrier that declared
    /// [`protocol::executor::STEER`] gets this plan).
    Steer {
        /// The managed tab.
        tab: H,
        /// The checkpoint.
        prompt: String,
    },
    /// The prompt may already be in the page: ask the page (it records the
    /// key before it clicks) and submit only if it never took it. Without a
    /// tab the answer is `AMBIGUOUS_SUBMISSION`.
    Reconcile {
        /// The managed tab, if still open.
        tab: Option<H>,
    },
    /// Open the exact conversation in a new managed tab.
    Open {
        /// Its canonical URL.
        url: String,
    },
    /// Report the page's state ([`Core::inspected`]).
    Inspect {
        /// The managed tab.
        tab: H,
    },
    /// Close the managed tab, if one is open, then forget the worker
    /// ([`Core::closed_by_daemon`]).
    Close {
        /// The managed tab, if still open.
        tab: Option<H>,
    },
    /// Close the managed tab to free capacity, keeping the binding (a
    /// `conversation_open` reopens it): first ask the page whether it may
    /// go (idle, nothing in the composer; else `TAB_IN_USE`), then
    /// [`Core::parked`], persist, close.
    Park {
        /// The managed tab.
        tab: H,
    },
    /// A park interrupted by a restart after its page agreed and before
    /// its tab closed: close that tab now, then [`Core::park_closed`].
    FinishPark {
        /// The tab being closed.
        tab: H,
    },
}

/// What to do with an arriving command.
#[derive(Debug, Clone, PartialEq)]
pub enum Begin<H> {
    /// A replay of a command being performed right now: persist (its newest
    /// command id), acknowledge; the first attempt's result answers it.
    Joined,
    /// Refused without touching the journal: acknowledge, then send this.
    Refused(ExecutorFrame),
    /// Persist, acknowledge, carry out the plan, then [`Core::finish`].
    Perform(Plan<H>),
}

/// The persisted executor state, generic over the carrier's handle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Core<H> {
    journal: BTreeMap<String, Entry>,
    workers: BTreeMap<WorkerId, Managed<H>>,
    next_seq: u64,
    /// Keys being performed by this process; a restart forgets them, and the
    /// daemon's replay then resumes each at its phase.
    #[serde(skip)]
    in_flight: BTreeSet<String>,
    /// Whether this carrier's pages offer a steering seam (it declares
    /// [`protocol::executor::STEER`]); set by the carrier at every start.
    #[serde(skip)]
    steers: bool,
    /// When each worker's last `conversationProgress` went out (pacing
    /// only: a restart may send one early).
    #[serde(skip)]
    progress_sent: BTreeMap<WorkerId, u64>,
    /// Request ids already attested per worker (not repeated unprompted;
    /// bounded, oldest out).
    #[serde(skip)]
    attested: BTreeMap<WorkerId, std::collections::VecDeque<String>>,
    /// Request ids the daemon asked for (`callerLookup`), newest last: the
    /// only ids a page may report again (bounded, oldest out).
    #[serde(skip)]
    asked: std::collections::VecDeque<String>,
}

/// How many attested request ids the core remembers per worker, to send
/// each once unprompted (a page shows at most a few turns' ids).
pub const ATTESTED_KEPT: usize = 256;

impl<H> Default for Core<H> {
    fn default() -> Self {
        Self {
            journal: BTreeMap::new(),
            workers: BTreeMap::new(),
            next_seq: 0,
            in_flight: BTreeSet::new(),
            steers: false,
            progress_sent: BTreeMap::new(),
            attested: BTreeMap::new(),
            asked: std::collections::VecDeque::new(),
        }
    }
}

/// An error outcome.
pub fn error(code: ErrorCode, detail: &str) -> CommandOutcome {
    CommandOutcome::Error { code, detail: detail.into() }
}

/// The acknowledgement of a command: it is journaled (nothing about its effect).
pub fn ack(command: &Command) -> ExecutorFrame {
    ExecutorFrame::Ack { command_id: command.command_id.clone() }
}

/// The URL fragment that marks a tab opened for the command with
/// idempotency key `key`, so a person can tell the tab's purpose. (A
/// restart resumes in the tab its journal recorded, never in one found by
/// its URL, which a person's tab may share.)
pub fn tab_marker(key: &str) -> String {
    let safe: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    format!("#orchestrator-{safe}")
}

/// A conversation's canonical URL.
pub fn conversation_url(conversation: &ConversationId) -> String {
    format!("https://chatgpt.com/c/{conversation}")
}

/// The prompt a command carries, if any.
pub fn prompt_of(command: &Command) -> Option<&str> {
    match &command.op {
        CommandOp::ConversationCreate { prompt, .. }
        | CommandOp::ConversationSend { prompt, .. }
        | CommandOp::ConversationSteer { prompt, .. } => Some(prompt),
        _ => None,
    }
}

/// The app a command asks the page to use, if any.
pub fn app_of(command: &Command) -> Option<&str> {
    match &command.op {
        CommandOp::ConversationCreate { app, .. } | CommandOp::ConversationSend { app, .. } => app.as_deref(),
        _ => None,
    }
}

/// The model a command pins the page to, if any.
pub fn model_of(command: &Command) -> Option<&str> {
    match &command.op {
        CommandOp::ConversationCreate { model, .. } | CommandOp::ConversationSend { model, .. } => model.as_deref(),
        _ => None,
    }
}

/// The thinking effort a command pins with its model, if any.
pub fn effort_of(command: &Command) -> Option<&str> {
    match &command.op {
        CommandOp::ConversationCreate { effort, .. } | CommandOp::ConversationSend { effort, .. } => effort.as_deref(),
        _ => None,
    }
}

/// Who this executor is, for its `hello`.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// The credential `orchestrator pair` issued (`exc1.<executor id>.<secret>`).
    pub token: String,
    /// Stable across restarts: the credential's executor id.
    pub executor_id: String,
    /// New for every process (a restart is a new instance).
    pub instance_id: String,
    /// What kind of carrier this is.
    pub kind: ExecutorKind,
    /// Optional operations it supports beyond the required ones.
    pub capabilities: Vec<String>,
    /// The machine it runs on.
    pub host: MachineFacts,
}

/// This build's version, said in every `hello` (`host.release`).
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// The first frame of every session; `host.release` is this build's
/// unless the identity names one.
pub fn hello(identity: &Identity) -> ExecutorFrame {
    let mut host = identity.host.clone();
    host.release.get_or_insert_with(|| RELEASE.into());
    ExecutorFrame::Hello {
        protocol_version: PROTOCOL_VERSION,
        token: identity.token.clone(),
        executor_id: identity.executor_id.clone(),
        executor_instance_id: identity.instance_id.clone(),
        executor_kind: identity.kind,
        capabilities: identity.capabilities.clone(),
        host,
    }
}

/// How often to send heartbeats, given the `welcome`'s `heartbeatMs`.
pub fn heartbeat_every(welcome_heartbeat_ms: u64) -> Duration {
    Duration::from_millis(welcome_heartbeat_ms).clamp(HEARTBEAT_MIN, HEARTBEAT_MAX)
}

impl<H: Clone + PartialEq + Debug> Core<H> {
    /// Declares whether this carrier's pages offer a steering seam (as its
    /// `hello` does): without it a `conversation_steer` is refused.
    pub fn set_steering(&mut self, steers: bool) {
        self.steers = steers;
    }

    /// The journal entry for `key`.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.journal.get(key)
    }

    /// The worker's managed conversation.
    pub fn managed(&self, worker: &WorkerId) -> Option<&Managed<H>> {
        self.workers.get(worker)
    }

    /// Every managed worker.
    pub fn workers(&self) -> impl Iterator<Item = (&WorkerId, &Managed<H>)> {
        self.workers.iter()
    }

    /// The worker a tab serves, if the tab is managed.
    pub fn worker_of(&self, tab: &H) -> Option<&WorkerId> {
        self.workers.iter().find(|(_, m)| m.tab.as_ref() == Some(tab)).map(|(w, _)| w)
    }

    /// Whether `tab`, showing `url`, is still the managed tab it was: it
    /// shows its worker's bound conversation, or, before one is bound, a
    /// page a create marked. A tab id outlives nothing reliably (after a
    /// browser restart a stored id may name a person's tab): nothing is
    /// reloaded, parked or closed in a tab that fails this.
    pub fn shows_own(&self, tab: &H, url: &str) -> bool {
        let owner = self.workers.iter().find(|(_, m)| m.tab.as_ref() == Some(tab) || m.closing.as_ref() == Some(tab));
        let Some((worker, managed)) = owner else { return false };
        let shown = parse_url(url).and_then(|r| r.conversation);
        match &managed.conversation {
            Some(bound) => shown.as_ref() == Some(bound),
            // A create's tab: blank until shown its page, then marked, and
            // once its prompt may be in, the conversation it made.
            None => {
                matches!(url, "" | "about:blank")
                    || (url.starts_with(protocol::executor::URL_PREFIX) && url.contains("#orchestrator-"))
                    || (shown.is_some() && self.submitting(worker))
            }
        }
    }

    /// Whether a submission of `worker`'s may be in its page now (journaled
    /// as started, its outcome not yet known): its page is never reloaded.
    pub fn submitting(&self, worker: &WorkerId) -> bool {
        self.journal.values().any(|e| e.worker_id == *worker && e.phase == Phase::SubmissionStarted)
    }

    /// The outcome `ok`, naming the worker's conversation if bound.
    pub fn ok(&self, worker: &WorkerId) -> CommandOutcome {
        CommandOutcome::Ok { conversation_id: self.managed(worker).and_then(|m| m.conversation.clone()) }
    }

    /// Takes an arriving command: joins a replay to the attempt in progress,
    /// or journals it (finding its earlier arrival) and says what to do.
    pub fn begin(&mut self, command: &Command, now_ms: u64) -> Begin<H> {
        let key = &command.idempotency_key;
        if self.in_flight.contains(key) {
            return if self.retarget(command) { Begin::Joined } else { Begin::Refused(result(command, reused_key())) };
        }
        match self.receive(command, now_ms) {
            Ok(plan) => {
                self.in_flight.insert(key.clone());
                Begin::Perform(plan)
            }
            Err(refusal) => Begin::Refused(result(command, refusal)),
        }
    }

    /// Journals the command (or finds its earlier arrival) and plans it; an
    /// error is a refusal that leaves the journal untouched.
    fn receive(&mut self, command: &Command, now_ms: u64) -> Result<Plan<H>, CommandOutcome> {
        let key = command.idempotency_key.clone();
        if let Some(entry) = self.journal.get_mut(&key) {
            if entry.worker_id != command.worker_id {
                return Err(reused_key());
            }
            entry.command_id = command.command_id.clone();
            match (entry.phase, &entry.outcome) {
                (Phase::Submitted | Phase::Completed, Some(outcome)) => return Ok(Plan::Reply(outcome.clone())),
                (Phase::SubmissionStarted | Phase::Submitted, _) => {
                    let tab = self.workers.get(&command.worker_id).and_then(|m| m.tab.clone());
                    return Ok(Plan::Reconcile { tab });
                }
                // Received or opening: nothing happened in the page yet; go on.
                _ => {}
            }
        } else {
            self.next_seq += 1;
            self.journal.insert(
                key,
                Entry {
                    command_id: command.command_id.clone(),
                    worker_id: command.worker_id.clone(),
                    phase: Phase::Received,
                    outcome: None,
                    seq: self.next_seq,
                },
            );
            self.forget_old();
        }
        if now_ms > command.deadline_ms {
            // A create that had opened its tab gives the conversation-less tab
            // up (left open, unmanaged), so the worker is not stuck with it.
            if self.entry(&command.idempotency_key).is_some_and(|e| e.phase == Phase::TabOpening) {
                self.release_unbound(&command.worker_id);
            }
            return Ok(Plan::Reply(error(ErrorCode::DeadlineExceeded, "the command arrived after its deadline")));
        }
        self.retire_replaced(command);
        Ok(self.plan(command).unwrap_or_else(Plan::Reply))
    }

    /// A rollover's create (`replaces`): the worker's old conversation is
    /// no longer managed here. Its tab, if open, is left as it is (the
    /// person may still read it); nothing it shows is reported again.
    fn retire_replaced(&mut self, command: &Command) {
        let CommandOp::ConversationCreate { replaces: Some(old), .. } = &command.op else { return };
        if self.workers.get(&command.worker_id).is_some_and(|m| m.conversation.as_ref() == Some(old)) {
            self.workers.remove(&command.worker_id);
            self.progress_sent.remove(&command.worker_id);
            self.attested.remove(&command.worker_id);
        }
    }

    fn plan(&self, command: &Command) -> Result<Plan<H>, CommandOutcome> {
        let managed = self.workers.get(&command.worker_id);
        // Every command but create must name the conversation this executor bound for the worker.
        let bound = |conversation: &ConversationId| match managed {
            Some(m) if m.conversation.as_ref() == Some(conversation) => Ok(m),
            _ => Err(error(ErrorCode::UnmanagedTarget, "not a conversation this executor created for the worker")),
        };
        let open_tab = |conversation: &ConversationId| {
            bound(conversation)?
                .tab
                .clone()
                .ok_or_else(|| error(ErrorCode::NotFound, "the conversation has no open tab; open it first"))
        };
        if app_of(command).is_some_and(|label| !protocol::limits::valid_app_label(label)) {
            return Err(error(ErrorCode::InvalidArgument, "app is not a valid app label"));
        }
        if model_of(command).is_some_and(|label| !protocol::limits::valid_model_label(label)) {
            return Err(error(ErrorCode::InvalidArgument, "model is not a valid model label"));
        }
        if effort_of(command).is_some_and(|label| !protocol::limits::valid_model_label(label))
            || (effort_of(command).is_some() && model_of(command).is_none())
        {
            return Err(error(ErrorCode::InvalidArgument, "effort is not a valid effort label beside a model"));
        }
        match &command.op {
            CommandOp::ConversationCreate { prompt, project_url, .. } => match managed {
                // Resuming after a restart: the tab is already open, go on to submit.
                Some(Managed { tab: Some(tab), conversation: None, .. })
                    if self.entry(&command.idempotency_key).is_some_and(|e| e.phase == Phase::TabOpening) =>
                {
                    Ok(Plan::Submit { tab: tab.clone(), prompt: prompt.clone() })
                }
                Some(_) => Err(error(ErrorCode::Conflict, "the worker already has a managed conversation")),
                None => {
                    let url = match project_url {
                        Some(url) if is_project_page(url) => url.clone(),
                        Some(_) => {
                            return Err(error(
                                ErrorCode::InvalidArgument,
                                "projectUrl is not a chatgpt.com project URL",
                            ));
                        }
                        None => "https://chatgpt.com/".into(),
                    };
                    Ok(Plan::Create { url, prompt: prompt.clone() })
                }
            },
            CommandOp::ConversationSend { conversation_id, prompt, .. } => {
                open_tab(conversation_id).map(|tab| Plan::Submit { tab, prompt: prompt.clone() })
            }
            CommandOp::ConversationSteer { .. } if !self.steers => {
                Err(error(ErrorCode::InvalidArgument, "this executor declared no steering seam (conversation_steer)"))
            }
            CommandOp::ConversationSteer { conversation_id, prompt } => {
                open_tab(conversation_id).map(|tab| Plan::Steer { tab, prompt: prompt.clone() })
            }
            CommandOp::ConversationOpen { conversation_id, .. } => bound(conversation_id).map(|m| match m.tab {
                Some(_) => Plan::Reply(CommandOutcome::Ok { conversation_id: Some(conversation_id.clone()) }),
                None => Plan::Open { url: conversation_url(conversation_id) },
            }),
            CommandOp::ConversationInspect { conversation_id } => {
                open_tab(conversation_id).map(|tab| Plan::Inspect { tab })
            }
            CommandOp::ConversationClose { conversation_id, park: false } => {
                bound(conversation_id).map(|m| Plan::Close { tab: m.tab.clone() })
            }
            // Already parked (or its tab lost): nothing to close.
            CommandOp::ConversationClose { conversation_id, park: true } => {
                bound(conversation_id).map(|m| match (&m.tab, &m.closing) {
                    (Some(tab), _) => Plan::Park { tab: tab.clone() },
                    (None, Some(tab)) => Plan::FinishPark { tab: tab.clone() },
                    (None, None) => Plan::Reply(CommandOutcome::Ok { conversation_id: Some(conversation_id.clone()) }),
                })
            }
        }
    }

    /// A replay arrived while the command is being performed: the result
    /// will answer the newest command id. False (and nothing changed) when
    /// the key belongs to another worker.
    fn retarget(&mut self, command: &Command) -> bool {
        match self.journal.get_mut(&command.idempotency_key) {
            Some(entry) if entry.worker_id == command.worker_id => {
                entry.command_id = command.command_id.clone();
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Moves `key` to `phase`. Persist before taking the step it names.
    pub fn advance(&mut self, key: &str, phase: Phase) {
        if let Some(entry) = self.journal.get_mut(key) {
            entry.phase = phase;
        }
    }

    /// Records the command's outcome and returns the result frame (to the
    /// newest command id). An error answered before anything reached the
    /// page (`DEADLINE_EXCEEDED`, `UNMANAGED_TARGET`, a setup state) leaves
    /// the key received, so a replay acts; any other outcome is stored and
    /// answers every replay.
    pub fn finish(&mut self, key: &str, outcome: CommandOutcome) -> Option<ExecutorFrame> {
        self.in_flight.remove(key);
        let entry = self.journal.get_mut(key)?;
        let untouched = entry.phase <= Phase::TabOpening && matches!(outcome, CommandOutcome::Error { .. });
        if untouched {
            entry.phase = Phase::Received;
            entry.outcome = None;
        } else {
            entry.phase = Phase::Completed;
            entry.outcome = Some(outcome.clone());
        }
        Some(ExecutorFrame::Result { command_id: entry.command_id.clone(), outcome })
    }

    /// The attempt performing `key` died without a result (as a restart
    /// would end it): a replay resumes it at its phase instead of joining.
    pub fn abandon(&mut self, key: &str) {
        self.in_flight.remove(key);
    }

    /// A tab was opened for `worker` (a create, or a reopen of its conversation).
    pub fn tab_opened(&mut self, worker: &WorkerId, tab: H) {
        self.workers.entry(worker.clone()).or_default().tab = Some(tab);
    }

    /// A create was refused before anything was submitted (the app could
    /// not be bound, the page was signed out…): the worker no longer owns a
    /// conversation-less tab, so a later retry starts clean. Returns the tab
    /// to close. A worker whose page already showed a conversation keeps it.
    pub fn release_unbound(&mut self, worker: &WorkerId) -> Option<H> {
        if self.workers.get(worker).is_some_and(|m| m.conversation.is_none()) {
            return self.workers.remove(worker).and_then(|m| m.tab);
        }
        None
    }

    /// The worker's tab is being closed to free capacity (the page said it
    /// may go): the binding stays, the tab is forgotten first (so its
    /// closing reports nothing), and a `conversation_open` reopens it.
    /// Returns the tab to close.
    pub fn parked(&mut self, worker: &WorkerId) -> Option<H>
    where
        H: Clone,
    {
        let m = self.workers.get_mut(worker)?;
        m.closing = m.tab.take();
        m.closing.clone()
    }

    /// The parked tab closed: nothing is left to close after a restart.
    pub fn park_closed(&mut self, worker: &WorkerId) {
        if let Some(m) = self.workers.get_mut(worker) {
            m.closing = None;
        }
    }

    /// The browser put another tab in a tab's place (Chromium gives a tab
    /// it discards a new id): a managed tab keeps its worker under the new
    /// handle, a parked one its pending close. Returns the worker, if the
    /// tab was managed.
    pub fn tab_replaced(&mut self, old: &H, new: H) -> Option<WorkerId>
    where
        H: Clone,
    {
        let (worker, managed) =
            self.workers.iter_mut().find(|(_, m)| m.tab.as_ref() == Some(old) || m.closing.as_ref() == Some(old))?;
        if managed.tab.as_ref() == Some(old) {
            managed.tab = Some(new.clone());
        }
        if managed.closing.as_ref() == Some(old) {
            managed.closing = Some(new);
        }
        Some(worker.clone())
    }

    /// The page of `tab` is out of reach for now (the browser discarded or
    /// froze it, and it is being reloaded): reported as such, so that sends
    /// wait, and so that its next report, whatever it says, goes out as a
    /// change. Nothing for a tab nobody manages.
    pub fn page_unreachable(&mut self, tab: &H, detail: &str) -> Vec<ExecutorFrame> {
        let Some(worker) = self.worker_of(tab).cloned() else { return vec![] };
        let managed = self.workers.get_mut(&worker).expect("found above");
        managed.state = Some(ConversationState::Error);
        let code = ErrorCode::BrowserControlUnavailable;
        vec![
            ExecutorFrame::ConversationError { worker_id: worker.clone(), code, detail: detail.into() },
            ExecutorFrame::ConversationState { worker_id: worker, state: ConversationState::Error, error: Some(code) },
        ]
    }

    /// The browser connection is lost: every managed conversation is out of
    /// reach until it is back (a host state for each, not a worker's
    /// failure); an open tab's page is reported unreachable as
    /// [`Core::page_unreachable`] does, so its next report, whatever it
    /// says, goes out as a change and the daemon hears the page again.
    pub fn browser_lost(&mut self, detail: &str) -> Vec<ExecutorFrame> {
        let code = ErrorCode::BrowserControlUnavailable;
        let mut frames = Vec::new();
        for (worker, managed) in &mut self.workers {
            frames.push(ExecutorFrame::ConversationError { worker_id: worker.clone(), code, detail: detail.into() });
            if managed.tab.is_some() {
                managed.state = Some(ConversationState::Error);
                let state = ConversationState::Error;
                frames.push(ExecutorFrame::ConversationState { worker_id: worker.clone(), state, error: Some(code) });
            }
        }
        frames
    }

    /// A tab went away. For a managed tab, the worker's conversation is closed.
    pub fn tab_removed(&mut self, tab: &H) -> Vec<ExecutorFrame> {
        let Some(worker) = self.worker_of(tab).cloned() else { return vec![] };
        let managed = self.workers.get_mut(&worker).expect("found above");
        managed.tab = None;
        managed.state = Some(ConversationState::Closed);
        vec![ExecutorFrame::ConversationClosed { worker_id: worker }]
    }

    /// The daemon closed the worker's conversation (`conversation_close`),
    /// whether its tab was still open or already gone: reported closed, then
    /// forgotten (never re-sent by a resync).
    pub fn closed_by_daemon(&mut self, worker: &WorkerId) -> Vec<ExecutorFrame> {
        match self.workers.remove(worker) {
            Some(_) => vec![ExecutorFrame::ConversationClosed { worker_id: worker.clone() }],
            None => vec![],
        }
    }

    /// What a page report means: a binding the first time a managed tab
    /// shows `/c/<uuid>`, drift if it later shows another, and state changes
    /// (an unchanged state is not sent again; an error always is). Reports
    /// from tabs this executor does not manage mean nothing.
    pub fn page_report(
        &mut self,
        tab: &H,
        url: &str,
        state: ConversationState,
        error: Option<ErrorCode>,
    ) -> Vec<ExecutorFrame> {
        let Some(worker) = self.worker_of(tab).cloned() else { return vec![] };
        let managed = self.workers.get_mut(&worker).expect("found above");
        let mut frames = Vec::new();
        if let Some(seen) = parse_url(url).and_then(|r| r.conversation) {
            match &managed.conversation {
                None => {
                    managed.conversation = Some(seen.clone());
                    frames.push(ExecutorFrame::ConversationBound {
                        worker_id: worker.clone(),
                        url: conversation_url(&seen),
                        conversation_id: seen,
                    });
                }
                Some(bound) if *bound == seen => {}
                Some(bound) => frames.push(ExecutorFrame::ConversationError {
                    worker_id: worker.clone(),
                    code: ErrorCode::ConversationIdentityDrift,
                    detail: format!("the managed tab shows {seen}, bound to {bound}"),
                }),
            }
        }
        if managed.state != Some(state) || state == ConversationState::Error {
            managed.state = Some(state);
            frames.push(ExecutorFrame::ConversationState { worker_id: worker, state, error });
        }
        frames
    }

    /// The page of `tab` saw its running turn's content move on at `now`:
    /// a `conversationProgress` for its worker, unless one went out less
    /// than [`protocol::executor::PROGRESS_EVERY_MS`] ago or the tab is not
    /// a bound managed conversation. The page says when it is generating;
    /// the daemon records it only for a turn it sees running.
    pub fn page_progress(&mut self, tab: &H, now_ms: u64) -> Vec<ExecutorFrame> {
        let Some(worker) = self.worker_of(tab).cloned() else { return vec![] };
        if self.workers.get(&worker).is_none_or(|m| m.conversation.is_none()) {
            return vec![];
        }
        let last = self.progress_sent.get(&worker).copied();
        if last.is_some_and(|at| now_ms < at.saturating_add(protocol::executor::PROGRESS_EVERY_MS)) {
            return vec![];
        }
        self.progress_sent.insert(worker.clone(), now_ms);
        vec![ExecutorFrame::ConversationProgress { worker_id: worker }]
    }

    /// The request ids a managed page shows (`conversation`: the
    /// conversation that page says it is; `newest`: the newest id it shows,
    /// in the page's own order): one `callerSeen` each, for the page's own
    /// bound conversation only (a tab never attests for another), malformed
    /// ids dropped, each id once unless `again` (the daemon asked for one
    /// that may have been missed: the page sends only that one again).
    pub fn callers_seen(
        &mut self,
        tab: &H,
        conversation: &str,
        request_ids: &[String],
        newest: Option<&str>,
        again: bool,
    ) -> Vec<ExecutorFrame> {
        let Some(worker) = self.worker_of(tab).cloned() else { return vec![] };
        let Some(bound) = self.workers.get(&worker).and_then(|m| m.conversation.clone()) else { return vec![] };
        if bound.to_string() != conversation {
            return vec![];
        }
        let seen = self.attested.entry(worker.clone()).or_default();
        let mut frames = Vec::new();
        for request_id in request_ids.iter().take(protocol::executor::CALLS_PER_REPORT_MAX) {
            if !protocol::executor::valid_request_id(request_id) {
                continue;
            }
            let known = seen.contains(request_id);
            // Again only what the daemon asked for, once: a page cannot make
            // the executor repeat its whole history (the frame rate is shared).
            let asked = self.asked.iter().position(|a| a == request_id);
            if known && !(again && asked.is_some()) {
                continue;
            }
            if let Some(i) = asked {
                self.asked.remove(i);
            }
            if !known {
                if seen.len() >= ATTESTED_KEPT {
                    seen.pop_front();
                }
                seen.push_back(request_id.clone());
            }
            frames.push(ExecutorFrame::CallerSeen {
                worker_id: worker.clone(),
                conversation_id: bound.clone(),
                request_id: request_id.clone(),
                newest: newest == Some(request_id.as_str()),
            });
        }
        frames
    }

    /// The tab to look in for a daemon's `callerLookup` of `request_id`:
    /// the worker's, if it shows the conversation named. The id may then be
    /// reported again, once.
    pub fn lookup_tab(&mut self, worker: &WorkerId, conversation: &ConversationId, request_id: &str) -> Option<H>
    where
        H: Clone,
    {
        let tab = self.workers.get(worker).filter(|m| m.conversation.as_ref() == Some(conversation))?.tab.clone()?;
        // Asked again: the newest ask, the last to be pushed out.
        if let Some(i) = self.asked.iter().position(|a| a == request_id) {
            self.asked.remove(i);
        } else if self.asked.len() >= ATTESTED_KEPT {
            self.asked.pop_front();
        }
        self.asked.push_back(request_id.to_owned());
        Some(tab)
    }

    /// An inspection's report: like [`Core::page_report`], but the state is
    /// re-sent even when unchanged (the daemon may have missed the last one).
    pub fn inspected(
        &mut self,
        tab: &H,
        url: &str,
        state: ConversationState,
        error: Option<ErrorCode>,
    ) -> Vec<ExecutorFrame> {
        let mut frames = self.page_report(tab, url, state, error);
        let sent_state = frames.iter().any(|f| matches!(f, ExecutorFrame::ConversationState { .. }));
        if let (false, Some(worker)) = (sent_state, self.worker_of(tab)) {
            frames.push(ExecutorFrame::ConversationState { worker_id: worker.clone(), state, error });
        }
        frames
    }

    /// Drops tabs that no longer exist (after a browser restart), reporting
    /// each managed conversation that lost its tab.
    pub fn retain_tabs(&mut self, alive: impl Fn(&H) -> bool) -> Vec<ExecutorFrame> {
        let gone: Vec<H> = self.workers.values().filter_map(|m| m.tab.clone()).filter(|t| !alive(t)).collect();
        gone.iter().flat_map(|tab| self.tab_removed(tab)).collect()
    }

    /// The browser started: every tab handle kept from before names
    /// nothing of ours now (a restored tab gets a new id, and an old id may
    /// name a person's tab), so none is trusted. A bound worker keeps its
    /// conversation with no tab (reported closed: the daemon opens it
    /// again); a create's worker with no conversation yet is forgotten, and
    /// its command, if it had only begun opening its tab, starts afresh on
    /// replay; one that may have handed its prompt over is ambiguous then.
    /// A tab being parked is left as it is.
    pub fn browser_started(&mut self) -> Vec<ExecutorFrame> {
        let unbound: Vec<WorkerId> =
            self.workers.iter().filter(|(_, m)| m.conversation.is_none()).map(|(w, _)| w.clone()).collect();
        for worker in &unbound {
            self.workers.remove(worker);
            for entry in self.journal.values_mut().filter(|e| &e.worker_id == worker && e.phase == Phase::TabOpening) {
                entry.phase = Phase::Received;
            }
        }
        for managed in self.workers.values_mut() {
            managed.closing = None;
        }
        self.retain_tabs(|_| false)
    }

    /// What to send right after `welcome`: every managed conversation's
    /// binding and current state, changed or not (a report sent while the
    /// daemon was away is lost). Send it in [`RESYNC_CHUNK`]s.
    pub fn resync(&self) -> Vec<ExecutorFrame> {
        let mut frames = Vec::new();
        for (worker, managed) in &self.workers {
            if let Some(conversation) = &managed.conversation {
                frames.push(ExecutorFrame::ConversationBound {
                    worker_id: worker.clone(),
                    conversation_id: conversation.clone(),
                    url: conversation_url(conversation),
                });
            }
            if let Some(state) = managed.state {
                frames.push(ExecutorFrame::ConversationState { worker_id: worker.clone(), state, error: None });
            }
        }
        frames
    }

    /// Keeps the journal bounded: the oldest settled entries (completed, or
    /// received with nothing done) go first; a command in progress or whose
    /// submission is unsettled is never forgotten.
    fn forget_old(&mut self) {
        let settled = |e: &Entry| matches!(e.phase, Phase::Completed | Phase::Received);
        let count = self.journal.iter().filter(|(k, e)| settled(e) && !self.in_flight.contains(*k)).count();
        if count <= JOURNAL_KEEP {
            return;
        }
        let mut oldest: Vec<(u64, String)> = self
            .journal
            .iter()
            .filter(|(k, e)| settled(e) && !self.in_flight.contains(*k))
            .map(|(k, e)| (e.seq, k.clone()))
            .collect();
        oldest.sort();
        for (_, key) in oldest.into_iter().take(count - JOURNAL_KEEP) {
            self.journal.remove(&key);
        }
    }
}

fn reused_key() -> CommandOutcome {
    error(ErrorCode::Conflict, "idempotency key reused for another worker")
}

fn result(command: &Command, outcome: CommandOutcome) -> ExecutorFrame {
    ExecutorFrame::Result { command_id: command.command_id.clone(), outcome }
}
