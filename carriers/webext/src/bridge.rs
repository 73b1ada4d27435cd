//! The bridge: live sessions by executor id, the dispatch loop, and the
//! `/executor` route.
//!
//! Commands leave from one place, the dispatch loop (woken by every
//! control-plane commit, by a registration and by a paced command's time),
//! so replays
//! and new dispatches never overlap. Each turn it takes a snapshot of the
//! live sessions, replays to every session it has not replayed to yet (a
//! new serial: the commands that executor holds but has not completed), then
//! runs one round (`ControlPlane::dispatch_round`: the round's dispatches
//! committed in one transaction) and sends each command to its
//! executor's session from the snapshot. No lock is held across a commit. A
//! session that registers after the snapshot gets this turn's commands by
//! its own replay in the next turn, not twice. Each dispatch is committed
//! before its frame is sent, so a crash between the two ends in a replay,
//! never in a lost or doubled effect (the executor's journal answers a
//! replayed idempotency key without acting twice). Time-driven commands
//! (inspects of possibly stale states) are queued by `control::scheduler`,
//! which the bridge starts and keeps informed of the live executors.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::{State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use control::ControlPlane;
use control::decide::Request;
use control::queue::Limits;
use control::schedule::Policy;
use control::scheduler::in_place;
use protocol::executor::{DaemonFrame, ExecutorFrame, FRAME_MAX};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

use crate::close::CloseReason;
use crate::credentials::Credentials;
use crate::session::run_session;

/// Tunables of the bridge.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// Heartbeat interval asked of executors (≈ 20 s keeps an MV3 worker alive).
    pub heartbeat_ms: u64,
    /// A session with no frame for this long is disconnected.
    pub lease_ms: u64,
    /// The `hello` must arrive within this long.
    pub hello_timeout_ms: u64,
    /// How often a session re-checks that its credential is still issued.
    pub credential_check_ms: u64,
    /// Per-attempt deadline of a create.
    pub create_timeout_ms: u64,
    /// Per-attempt deadline of a send.
    pub send_timeout_ms: u64,
    /// Dispatch limits.
    pub limits: Limits,
    /// How long a blocking conversation state is trusted while a send waits.
    pub recheck: Policy,
    /// Extension ids allowed to connect; empty allows any extension origin
    /// (with a well-formed, non-empty id).
    pub extension_ids: Vec<String>,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            heartbeat_ms: 20_000,
            lease_ms: 60_000,
            hello_timeout_ms: 10_000,
            credential_check_ms: 1_000,
            create_timeout_ms: 120_000,
            send_timeout_ms: 60_000,
            limits: Limits::default(),
            recheck: Policy::default(),
            extension_ids: Vec::new(),
        }
    }
}

/// What the bridge hands a session to write.
#[derive(Debug)]
pub enum Outgoing {
    /// A frame to send.
    Frame(DaemonFrame),
    /// Close the session with this reason.
    Close(CloseReason),
}

pub(crate) struct Live {
    serial: u64,
    instance: String,
    /// The protocol version it speaks (v2 frames go only to v2 sessions).
    pub(crate) version: u32,
    /// What its `hello` declared it can do.
    pub(crate) capabilities: Vec<String>,
    pub(crate) outbox: mpsc::UnboundedSender<Outgoing>,
    /// When the session last sent a frame, in ms since the bridge started
    /// (written by the session without the sessions lock).
    heard: Arc<AtomicU64>,
}

/// A registered session: its serial, and where it notes each frame it hears.
pub(crate) struct Registered {
    pub(crate) serial: u64,
    pub(crate) heard: Arc<AtomicU64>,
}

/// The bridge between the control plane's queue and live executor sessions.
pub struct Bridge {
    pub(crate) plane: Arc<ControlPlane>,
    pub(crate) config: BridgeConfig,
    pub(crate) credentials: Credentials,
    pub(crate) shutdown: CancellationToken,
    pub(crate) sessions: Mutex<HashMap<String, Live>>,
    serials: AtomicU64,
    started: tokio::time::Instant,
    /// Wakes the dispatch loop for a new session (its replay).
    registered: tokio::sync::Notify,
    /// The executors with a live session, for the scheduler task.
    live: tokio::sync::watch::Sender<Vec<String>>,
    /// Caller attribution: what executors saw in their pages, by request id.
    sightings: std::sync::Mutex<attribution::Sightings>,
    /// Bumped at every new sighting, for the calls waiting on one.
    sighted: tokio::sync::watch::Sender<u64>,
    /// How many calls wait on attribution, per worker (bounded).
    waiting: std::sync::Mutex<HashMap<protocol::WorkerId, usize>>,
    /// The latest version refusals of proven executors, newest last (bounded).
    refusals: std::sync::Mutex<std::collections::VecDeque<Refusal>>,
    /// The latest calls refused because attribution cannot work on their
    /// path, newest last (bounded).
    unattributable: std::sync::Mutex<std::collections::VecDeque<Unattributable>>,
    /// Page inspections waiting on their answer.
    pub(crate) inspections: crate::inspect::Pending,
    /// Pairing requests waiting on a person at `orchestrator setup`.
    pub(crate) pairing: crate::pair_offer::Desk,
}

/// A worker's call refused because attribution cannot work on its path
/// (no header, no ids in the pages, ids in another form): what the canary
/// and `doctor` diagnose a setup from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unattributable {
    /// When (ms since the epoch, the log's clock).
    pub at_ms: u64,
    /// The caller's run.
    pub run_id: String,
    /// The worker it called as.
    pub worker_id: String,
    /// The tool.
    pub tool: String,
    /// Why attribution cannot work there.
    pub cause: attribution::Unavailable,
}

/// How many such refusals the bridge keeps.
const UNATTRIBUTABLE_KEPT: usize = 32;

/// A paired executor the daemon refused at its `hello` for its protocol
/// version: status and `doctor` say so, since it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The executor.
    pub executor_id: String,
    /// When (ms since the epoch, the log's clock).
    pub at_ms: u64,
    /// The close reason it was sent, naming both builds and the fix.
    pub reason: String,
}

/// How many refusals the bridge keeps (one per executor id, the newest).
const REFUSALS_KEPT: usize = 8;

/// The most calls of one worker that wait on attribution at once: a model
/// makes its calls one after another, and each wait sends lookups.
pub const WAITS_PER_WORKER: usize = 8;

/// How many sightings the bridge keeps, and for how long: a call is judged
/// within its wait of the sighting; older ones only cost memory.
const SIGHTINGS_KEPT: usize = 16_384;
const SIGHTING_MAX_AGE_MS: u64 = 10 * 60 * 1000;
/// How often a waiting call asks again (cheap, and a lost report is then
/// late by at most this).
const LOOKUP_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The conversation a call must come from, to look for it.
#[derive(Debug, Clone)]
pub struct Lookup {
    /// The executor holding it.
    pub executor_id: String,
    /// The worker it belongs to.
    pub worker_id: protocol::WorkerId,
    /// The conversation.
    pub conversation_id: protocol::ConversationId,
}

impl Bridge {
    /// Starts the bridge, its dispatch loop and the scheduler task
    /// (`control::scheduler`). `shutdown` closes every session and ends both.
    pub fn start(
        plane: Arc<ControlPlane>,
        config: BridgeConfig,
        credentials: Credentials,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        let bridge = Arc::new(Self {
            plane,
            config,
            credentials,
            shutdown,
            sessions: Mutex::new(HashMap::new()),
            serials: AtomicU64::new(0),
            started: tokio::time::Instant::now(),
            registered: tokio::sync::Notify::new(),
            live: tokio::sync::watch::Sender::new(Vec::new()),
            sightings: std::sync::Mutex::new(attribution::Sightings::new(SIGHTINGS_KEPT, SIGHTING_MAX_AGE_MS)),
            sighted: tokio::sync::watch::Sender::new(0),
            waiting: std::sync::Mutex::new(HashMap::new()),
            refusals: std::sync::Mutex::new(std::collections::VecDeque::new()),
            unattributable: std::sync::Mutex::new(std::collections::VecDeque::new()),
            inspections: Default::default(),
            pairing: Default::default(),
        });
        tokio::spawn(dispatch_loop(bridge.clone()));
        let stop = bridge.shutdown.clone().cancelled_owned();
        let (plane, live, policy) = (bridge.plane.clone(), bridge.live.subscribe(), bridge.config.recheck);
        tokio::spawn(control::scheduler::run(plane, live, policy, stop));
        bridge
    }

    /// How many executors hold a credential.
    pub fn paired(&self) -> usize {
        self.credentials.list().map_or(0, |l| l.len())
    }

    /// Records that `executor_id` was refused for its version (its older
    /// refusal replaced, the oldest dropped past [`REFUSALS_KEPT`]).
    pub(crate) fn refused(&self, executor_id: &str, reason: &crate::close::CloseReason) {
        let mut kept = self.refusals.lock().expect("refusals lock");
        kept.retain(|r| r.executor_id != executor_id);
        if kept.len() == REFUSALS_KEPT {
            kept.pop_front();
        }
        kept.push_back(Refusal { executor_id: executor_id.into(), at_ms: self.plane.now_ms(), reason: reason.text() });
    }

    /// The version refusals since this daemon started, oldest first: of
    /// executors still paired that have not connected since (a connection
    /// forgets its executor's refusal).
    pub async fn refusals(&self) -> Vec<Refusal> {
        let paired: Vec<String> =
            self.credentials.list().unwrap_or_default().into_iter().map(|i| i.executor_id).collect();
        let kept = self.refusals.lock().expect("refusals lock");
        kept.iter().filter(|r| paired.contains(&r.executor_id)).cloned().collect()
    }

    /// Keeps `refused` (newest last, bounded).
    pub fn unattributable(&self, mut refused: Unattributable) {
        refused.at_ms = self.plane.now_ms();
        let mut kept = self.unattributable.lock().expect("unattributable lock");
        if kept.len() == UNATTRIBUTABLE_KEPT {
            kept.pop_front();
        }
        kept.push_back(refused);
    }

    /// The calls refused lately because attribution cannot work on their
    /// path, oldest first.
    pub fn unattributable_calls(&self) -> Vec<Unattributable> {
        self.unattributable.lock().expect("unattributable lock").iter().cloned().collect()
    }

    /// Whether a page showing `conversation` reported any request id lately.
    pub fn pages_show_ids(&self, conversation: &protocol::ConversationId) -> bool {
        self.sightings.lock().expect("sightings lock").shown_in(conversation)
    }

    /// Executor ids with a live session.
    pub async fn connected(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.sessions.lock().await.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Records a new session. The same executor instance reconnecting
    /// supersedes its older session (a half-open socket); another instance
    /// claiming an id that has a live session is refused, never preferred.
    /// The dispatch loop replays to it (it sees a new serial).
    pub(crate) async fn register(
        &self,
        executor_id: &str,
        instance_id: &str,
        version: u32,
        outbox: mpsc::UnboundedSender<Outgoing>,
        hello: ExecutorFrame,
    ) -> Result<Registered, CloseReason> {
        let serial = self.serials.fetch_add(1, Ordering::SeqCst) + 1;
        let now = self.now_ms();
        let heard = Arc::new(AtomicU64::new(now));
        {
            let mut sessions = self.sessions.lock().await;
            // A live session that has been silent longer than one and a half
            // heartbeats is taken for dead (a half-open socket after a restart):
            // the newcomer, proven by the same id's credential, supersedes it.
            let quiet = self.config.heartbeat_ms * 3 / 2;
            if sessions.get(executor_id).is_some_and(|live| {
                let silent = now.saturating_sub(live.heard.load(Ordering::SeqCst));
                live.instance != instance_id && !live.outbox.is_closed() && silent <= quiet
            }) {
                return Err(CloseReason::IdInUse);
            }
            // Recorded before the session is dispatchable: placement reads the
            // executor's declared capacity from it (a create dispatched first
            // would take no capacity into account).
            let declared = match &hello {
                ExecutorFrame::Hello { capabilities, .. } => capabilities.clone(),
                _ => Vec::new(),
            };
            if let ExecutorFrame::Hello { executor_kind, capabilities, host, .. } = hello {
                let command = Request::ExecutorConnected {
                    executor_id: executor_id.to_owned(),
                    executor_instance_id: instance_id.to_owned(),
                    executor_kind,
                    capabilities,
                    host,
                };
                self.record(command).await;
            }
            self.refusals.lock().expect("refusals lock").retain(|r| r.executor_id != executor_id);
            let live = Live {
                serial,
                instance: instance_id.to_owned(),
                version,
                capabilities: declared,
                outbox,
                heard: heard.clone(),
            };
            if let Some(old) = sessions.insert(executor_id.to_owned(), live) {
                let _ = old.outbox.send(Outgoing::Close(CloseReason::Superseded));
            }
            // The scheduler also wakes on this, so it finds the executor live
            // even though its connection was committed first.
            self.publish_live(&sessions);
        }
        self.registered.notify_one();
        Ok(Registered { serial, heard })
    }

    /// Tells the scheduler which executors are live (it wakes on the change
    /// as on a commit).
    fn publish_live(&self, sessions: &HashMap<String, Live>) {
        let mut ids: Vec<String> = sessions.keys().cloned().collect();
        ids.sort();
        self.live.send_replace(ids);
    }

    /// Milliseconds since the bridge started (the sessions' shared clock).
    pub(crate) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Forgets a session (unless a newer one replaced it) and records the disconnect.
    pub(crate) async fn unregister(&self, executor_id: &str, instance_id: &str, serial: u64, reason: String) {
        {
            let mut sessions = self.sessions.lock().await;
            if sessions.get(executor_id).is_some_and(|live| live.serial == serial) {
                sessions.remove(executor_id);
            }
            self.publish_live(&sessions);
        }
        let command = Request::ExecutorDisconnected {
            executor_id: executor_id.to_owned(),
            executor_instance_id: instance_id.to_owned(),
            reason,
        };
        self.record(command).await;
    }

    /// An executor saw a request id in one of its pages.
    pub(crate) fn caller_seen(&self, executor_id: &str, frame: ExecutorFrame) {
        let ExecutorFrame::CallerSeen { worker_id, conversation_id, request_id, newest } = frame else { return };
        // Only the executor holding the worker speaks for its page.
        let holder = |s: &control::model::State| s.worker(&worker_id).and_then(|w| w.executor_id.clone());
        if self.plane.with_state(holder).as_deref() != Some(executor_id) {
            return;
        }
        let seen = attribution::Sighting {
            executor_id: executor_id.to_owned(),
            worker_id,
            conversation_id,
            at_ms: self.now_ms(),
        };
        if self.sightings.lock().expect("sightings lock").record(&request_id, seen, newest) {
            self.sighted.send_modify(|n| *n += 1);
        }
    }

    /// Waits (at most `within`) for the executor holding `lookup`'s
    /// conversation to report `request_id` after this call started (a
    /// report from before, lost or outdated, never speaks for the page of
    /// now), asking it to look now, and again every [`LOOKUP_EVERY`] (a
    /// report lost to a reconnect is asked for anew; a lookup is
    /// idempotent); while the page calls the id not its newest, it asks
    /// once more. The sighting, and whether its id was the
    /// page's newest; `None`: nobody reported it in time; `Err`: two pages
    /// claimed it, or the holder speaks v1 and never reports.
    pub async fn await_caller(
        &self,
        request_id: &str,
        lookup: &Lookup,
        within: std::time::Duration,
    ) -> Result<Option<(attribution::Sighting, bool)>, attribution::Unidentified> {
        let _slot = WaitSlot::take(self, &lookup.worker_id).ok_or(attribution::Unidentified::TooManyWaiting)?;
        // A holder that is away may come back within the wait; one that
        // speaks v1 never reports.
        if self.sessions.lock().await.get(&lookup.executor_id).is_some_and(|live| live.version < 2) {
            return Err(attribution::Unidentified::HolderCannotReport);
        }
        let mut sighted = self.sighted.subscribe();
        let since = self.now_ms();
        let deadline = tokio::time::Instant::now() + within;
        let until_ms = self.plane.now_ms() + within.as_millis() as u64;
        let mut next_lookup = tokio::time::Instant::now();
        let (mut latest, mut asked) = (None, 0);
        loop {
            sighted.borrow_and_update();
            if let Some((seen, newest)) = self.sightings.lock().expect("sightings lock").get(request_id, since)? {
                let elsewhere = seen.conversation_id != lookup.conversation_id || seen.worker_id != lookup.worker_id;
                if newest || elsewhere {
                    return Ok(Some((seen.clone(), newest)));
                }
                latest = Some((seen.clone(), newest));
            }
            if tokio::time::Instant::now() >= next_lookup {
                // Asked twice and told "not the newest": a turn that ended
                // (a replay holds no wait slot for the whole bound).
                if asked >= 2 && latest.is_some() {
                    return Ok(latest);
                }
                self.ask_caller(request_id, lookup, until_ms).await;
                asked += 1;
                next_lookup = tokio::time::Instant::now() + LOOKUP_EVERY;
            }
            match tokio::time::timeout_at(deadline.min(next_lookup), sighted.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Ok(latest),
                Err(_) if tokio::time::Instant::now() >= deadline => return Ok(latest),
                Err(_) => {}
            }
        }
    }

    /// Sends `callerLookup` to the executor holding `lookup`'s conversation,
    /// if it has a live v2 session.
    async fn ask_caller(&self, request_id: &str, lookup: &Lookup, until_ms: u64) {
        if let Some(live) = self.sessions.lock().await.get(&lookup.executor_id).filter(|l| l.version >= 2) {
            let _ = live.outbox.send(Outgoing::Frame(DaemonFrame::CallerLookup {
                worker_id: lookup.worker_id.clone(),
                conversation_id: lookup.conversation_id.clone(),
                request_id: request_id.to_owned(),
                until_ms,
            }));
        }
    }

    /// Hands an executor's report to the control plane. A refused report
    /// (a command or worker held elsewhere, an unknown id) is logged, not fatal.
    pub(crate) async fn report(&self, executor_id: &str, frame: ExecutorFrame) {
        if let Err(e) = in_place(|| self.plane.report(executor_id, frame)) {
            tracing::warn!(executor = executor_id, code = %e.code(), "report refused: {e}");
        }
    }

    async fn record(&self, command: Request) {
        if let Err(e) = in_place(|| self.plane.execute(command)) {
            tracing::error!(code = %e.code(), "recording an executor event failed: {e}");
        }
    }

    /// An extension origin with a well-formed id (Chromium: 32 of `a`–`p`;
    /// Firefox: a UUID), and one of `--extension-id` when any is set.
    pub(crate) fn origin_allowed(&self, origin: &str) -> bool {
        let id = origin.strip_prefix("moz-extension://").or_else(|| origin.strip_prefix("chrome-extension://"));
        let Some(id) = id.filter(|id| well_formed_extension_id(id)) else { return false };
        self.config.extension_ids.is_empty() || self.config.extension_ids.iter().any(|allowed| allowed == id)
    }
}

/// One of a worker's [`WAITS_PER_WORKER`] attribution waits, given back on drop.
struct WaitSlot<'a> {
    bridge: &'a Bridge,
    worker: protocol::WorkerId,
}

impl<'a> WaitSlot<'a> {
    fn take(bridge: &'a Bridge, worker: &protocol::WorkerId) -> Option<WaitSlot<'a>> {
        let mut waiting = bridge.waiting.lock().expect("waiting lock");
        let n = waiting.entry(worker.clone()).or_default();
        if *n >= WAITS_PER_WORKER {
            return None;
        }
        *n += 1;
        Some(WaitSlot { bridge, worker: worker.clone() })
    }
}

impl Drop for WaitSlot<'_> {
    fn drop(&mut self) {
        let mut waiting = self.bridge.waiting.lock().expect("waiting lock");
        if let Some(n) = waiting.get_mut(&self.worker) {
            *n -= 1;
            if *n == 0 {
                waiting.remove(&self.worker);
            }
        }
    }
}

/// Whether `id` looks like a browser's extension id: 1–64 of lowercase
/// letters, digits and `-` (never empty, never a path or a port).
fn well_formed_extension_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The host name of a `Host` header value: without its port, IPv6 without brackets.
pub fn host_name(host: &str) -> &str {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name)
}

/// `/executor` answers loopback `Host`s only: executors run on this
/// machine, and a host exposed for MCP (a tunnel) must never reach it.
pub fn loopback_host(host: &str) -> bool {
    ["localhost", "127.0.0.1", "::1"].contains(&host_name(host))
}

/// The one sender of commands (see the module doc): wakes on every commit,
/// on a registration and at the next paced command's time. (Inspects that
/// fall due are queued by the scheduler task; their commit wakes it.)
async fn dispatch_loop(bridge: Arc<Bridge>) {
    let mut changes = bridge.plane.subscribe_changes();
    // The session serial each executor was last replayed to.
    let mut replayed: HashMap<String, u64> = HashMap::new();
    loop {
        let turn_began = bridge.plane.now_ms();
        dispatch_turn(&bridge, &mut replayed).await;
        // Timed work waits for its time: wake then, without polling. What was
        // due when the turn began was handled by it (or failed, and waits for
        // the next change); what fell due during the turn wakes us at once.
        let plane = &bridge.plane;
        let now = plane.now_ms();
        let timer = plane
            .next_not_before()
            .filter(|at| *at > turn_began)
            .map(|at| tokio::time::Instant::now() + std::time::Duration::from_millis(at.saturating_sub(now)));
        tokio::select! {
            _ = async { tokio::time::sleep_until(timer.expect("guarded")).await }, if timer.is_some() => {}
            changed = changes.changed() => if changed.is_err() { return },
            _ = bridge.registered.notified() => {}
            _ = bridge.shutdown.cancelled() => return,
        }
    }
}

/// One turn: replays to new sessions, then one round, sent from a snapshot
/// of the sessions (no lock held across a commit).
async fn dispatch_turn(bridge: &Arc<Bridge>, replayed: &mut HashMap<String, u64>) {
    let live: HashMap<String, (u64, mpsc::UnboundedSender<Outgoing>)> = {
        let sessions = bridge.sessions.lock().await;
        sessions.iter().map(|(id, live)| (id.clone(), (live.serial, live.outbox.clone()))).collect()
    };
    replayed.retain(|id, _| live.contains_key(id));
    if live.is_empty() {
        return;
    }
    let (plane, config) = (&bridge.plane, &bridge.config);
    let timeout = |intent: &protocol::CommandIntent| match intent {
        protocol::CommandIntent::Create => config.create_timeout_ms,
        _ => config.send_timeout_ms,
    };
    for (executor_id, (serial, outbox)) in &live {
        if replayed.get(executor_id) == Some(serial) {
            continue;
        }
        let replay_timeout = config.create_timeout_ms.max(config.send_timeout_ms);
        match in_place(|| plane.replay(executor_id, replay_timeout)) {
            Ok(commands) => {
                for command in commands {
                    tracing::info!(executor = %executor_id, command = %command.command_id, "replaying");
                    let _ = outbox.send(Outgoing::Frame(DaemonFrame::Command(command)));
                }
                replayed.insert(executor_id.clone(), *serial);
            }
            Err(e) => tracing::error!(code = %e.code(), "replay failed, retrying on the next wake: {e}"),
        }
    }
    // A session whose replay failed gets nothing new until its replay went out.
    let connected: Vec<String> =
        live.iter().filter(|(id, (serial, _))| replayed.get(*id) == Some(serial)).map(|(id, _)| id.clone()).collect();
    let ready = in_place(|| plane.dispatch_round(&connected, config.limits, timeout)).unwrap_or_else(|e| {
        tracing::error!(code = %e.code(), "dispatch round failed, replanning on the next wake: {e}");
        Vec::new()
    });
    for (executor_id, command) in ready {
        // A session that died or was replaced meanwhile gets it by replay.
        if let Some((_, outbox)) = live.get(&executor_id) {
            let _ = outbox.send(Outgoing::Frame(DaemonFrame::Command(command)));
        }
    }
}

/// The `/executor` route, and `/executor/pair` beside it.
pub fn router(bridge: Arc<Bridge>) -> Router {
    Router::new()
        .route("/executor", get(upgrade))
        .route(protocol::executor::pair_offer::PATH, get(crate::pair_offer::upgrade))
        .with_state(bridge)
}

/// `/executor` as the remote endpoint serves it (`serve --executor-listen`,
/// TLS only, for host agents on other machines): the Host is whatever
/// address the agent dialled, so it is not checked; a request carrying an
/// `Origin` (a page) is refused, and so is a credential granting a
/// person's controls; `/executor/pair` is never served here.
pub fn remote_router(bridge: Arc<Bridge>) -> Router {
    Router::new().route("/executor", get(upgrade_remote)).with_state(bridge)
}

async fn upgrade_remote(ws: WebSocketUpgrade, headers: HeaderMap, State(bridge): State<Arc<Bridge>>) -> Response {
    if headers.contains_key(header::ORIGIN) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: the remote executor endpoint takes host agents, never pages")
            .into_response();
    }
    ws.max_message_size(4 * FRAME_MAX)
        .max_frame_size(4 * FRAME_MAX)
        .on_upgrade(move |socket| crate::session::run_remote_session(socket, bridge))
}

async fn upgrade(ws: WebSocketUpgrade, headers: HeaderMap, State(bridge): State<Arc<Bridge>>) -> Response {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !loopback_host(host) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: Host is not allowed").into_response();
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !bridge.origin_allowed(origin) {
            return (StatusCode::FORBIDDEN, "FORBIDDEN: only extension origins and native executors may connect")
                .into_response();
        }
    }
    // Frames up to 4x the protocol bound are read and refused with a close
    // reason; larger ones are cut off by the transport.
    ws.max_message_size(4 * FRAME_MAX)
        .max_frame_size(4 * FRAME_MAX)
        .on_upgrade(move |socket| run_session(socket, bridge))
}
