//! A fake executor: speaks the real executor protocol over a real WebSocket,
//! runs the real executor logic (`executor_core`, the journal, plans and
//! handshake the extension runs too) over a simulated browser whose tabs
//! hold conversations, and injects scripted faults around that core. The
//! pool, continuity and CI tests use it wherever no browser is needed.
//!
//! ```text
//! let fake = FakeExecutor::start(FakeConfig::new(url, token, "fake-1").fault(Fault::DisconnectAfterAck(Op::Create)));
//! let stats = fake.wait_for(|s| s.submissions.len() == 1, Duration::from_secs(10)).await;
//! ```
//!
//! Effects are counted in [`Stats`]: conversations created and prompts
//! submitted, so a test can assert exactly-once against them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_core::{Begin, Identity, Phase, Plan, ack, conversation_url, error};
use futures_util::{SinkExt, StreamExt};
use protocol::executor::{
    Command, CommandOp, CommandOutcome, ConversationState, DaemonFrame, ExecutorFrame, ExecutorKind, MachineFacts,
};
use protocol::{CommandId, ConversationId, ErrorCode, WorkerId};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;

/// Which commands a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `conversation_create`.
    Create,
    /// `conversation_send`.
    Send,
    /// Any command.
    Any,
}

impl Op {
    fn matches(self, op: &CommandOp) -> bool {
        match self {
            Op::Any => true,
            Op::Create => matches!(op, CommandOp::ConversationCreate { .. }),
            Op::Send => matches!(op, CommandOp::ConversationSend { .. }),
        }
    }
}

/// A scripted fault. Each fires once, on the first command it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Acknowledge, then drop the connection before acting.
    DisconnectAfterAck(Op),
    /// Journal the command but never acknowledge it (until it is replayed).
    StallBeforeAck(Op),
    /// Acknowledge but do not act (until it is replayed).
    StallAfterAck(Op),
    /// Act, but never send the result (until it is replayed).
    DropResult(Op),
    /// Send the result twice.
    DeliverTwice(Op),
    /// Send the result before the acknowledgement.
    Reorder(Op),
    /// Acknowledge, wait past the command's deadline, then act and report.
    StallPastDeadline(Op),
    /// Report the turn as generating and lose its idle report (as when the
    /// daemon dies meanwhile): only a resync tells the daemon it went idle.
    LoseIdleReport(Op),
    /// Acknowledge, then answer `DEADLINE_EXCEEDED` without acting, as a
    /// carrier does when the page stayed busy past the deadline.
    MissDeadline(Op),
    /// Submit, then end the turn on "Message delivery timed out" instead of
    /// idle (the page's Retry button is there; nothing clicks it).
    DeliveryTimeout(Op),
    /// Submit, then end the turn on ChatGPT's length notice: the
    /// conversation takes no more turns (later prompts are refused with
    /// `CONVERSATION_TOO_LONG`, nothing taken); the daemon rolls the worker
    /// over.
    ConversationFull(Op),
    /// Submit, then end the turn on the "Too many requests" dialog.
    RateLimited(Op),
    /// After the next result, reconnect as a new executor instance.
    ReconnectNewInstance,
    /// After reconnecting, do not re-send the conversations' states (a
    /// minimal executor that only answers commands).
    NoResync,
    /// Stop sending heartbeats (the daemon's lease should expire).
    StopHeartbeats,
}

/// How to reach the daemon and what to do wrong.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// `ws://host:port/executor`.
    pub url: String,
    /// This executor's credential (`orchestrator pair` issues it for `executor_id`).
    pub token: String,
    /// Stable executor id.
    pub executor_id: String,
    /// Scripted faults, each with how many matching commands to let pass first.
    pub faults: Vec<(usize, Fault)>,
    /// Delay between reconnection attempts.
    pub reconnect_delay: Duration,
    /// Heartbeat interval; `None` uses the daemon's `welcome`.
    pub heartbeat: Option<Duration>,
    /// Whether its simulated pages offer a steering seam (it declares
    /// `conversation_steer` and takes a checkpoint mid-turn).
    pub steers: bool,
    /// What its simulated pages show of tool calls, for caller attribution.
    pub callers: Callers,
}

/// What the fake's simulated pages show of the tool calls the daemon looks
/// up (`callerLookup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Callers {
    /// Every call looked up came from the worker's own conversation's
    /// current turn: the page shows its id as the newest (a model that
    /// uses only its own capability).
    #[default]
    Shown,
    /// The pages show no request id (an executor that cannot see them);
    /// only [`FakeExecutor::page_shows`] puts one there.
    Hidden,
    /// An executor from before caller attribution: it speaks executor
    /// protocol v1, which has no caller frames.
    V1,
}

impl FakeConfig {
    /// A well-behaved fake.
    pub fn new(url: impl Into<String>, token: impl Into<String>, executor_id: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            token: token.into(),
            executor_id: executor_id.into(),
            faults: Vec::new(),
            reconnect_delay: Duration::from_millis(50),
            heartbeat: None,
            steers: false,
            callers: Callers::default(),
        }
    }

    /// Adds a scripted fault that fires on the first command it matches.
    pub fn fault(self, fault: Fault) -> Self {
        self.fault_after(0, fault)
    }

    /// Adds a scripted fault that lets `skip` matching commands pass, then fires once.
    pub fn fault_after(mut self, skip: usize, fault: Fault) -> Self {
        self.faults.push((skip, fault));
        self
    }
}

/// What the fake has seen and done.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Successful handshakes.
    pub connections: usize,
    /// Instance ids used, in order.
    pub instances: Vec<String>,
    /// Conversations created, with the worker each serves.
    pub conversations: Vec<(WorkerId, ConversationId)>,
    /// Prompts submitted, per conversation, in order.
    pub submissions: Vec<(ConversationId, String)>,
    /// Command frames received, per command id (replays count).
    pub frames_by_command: HashMap<CommandId, usize>,
    /// Commands received, in order (replays included).
    pub commands: Vec<Command>,
    /// When each command was first received (for latency benchmarks).
    pub first_received: HashMap<CommandId, std::time::Instant>,
    /// Tabs the test made the browser lose, by worker.
    pub lost_tabs: Vec<WorkerId>,
    /// Conversations reopened (recovery), in order.
    pub reopened: Vec<ConversationId>,
    /// Conversations closed, in order.
    pub closed: Vec<ConversationId>,
    /// Close codes and reasons the daemon sent.
    pub closes: Vec<(u16, String)>,
}

impl Stats {
    /// Prompts submitted into conversations serving `worker`.
    pub fn submissions_for(&self, worker: &WorkerId) -> Vec<String> {
        let convs: Vec<&ConversationId> =
            self.conversations.iter().filter(|(w, _)| w == worker).map(|(_, c)| c).collect();
        self.submissions.iter().filter(|(c, _)| convs.contains(&c)).map(|(_, p)| p.clone()).collect()
    }
}

/// A simulated tab: what a page would show and remember.
#[derive(Debug, Clone)]
struct Tab {
    /// The conversation it shows, once the first prompt made one.
    conversation: Option<ConversationId>,
    state: ConversationState,
    /// Idempotency keys whose prompt the page took (a real page records the
    /// key before it clicks, so a reconcile can ask it).
    took: HashSet<String>,
    /// It shows the length notice: no more turns.
    full: bool,
}

impl Tab {
    fn url(&self) -> String {
        self.conversation.as_ref().map_or_else(|| "https://chatgpt.com/".into(), conversation_url)
    }
}

/// The simulated browser: tabs by handle.
#[derive(Debug, Default)]
struct Browser {
    next: u64,
    tabs: HashMap<u64, Tab>,
}

impl Browser {
    fn open(&mut self, conversation: Option<ConversationId>) -> u64 {
        self.next += 1;
        let tab = Tab { conversation, state: ConversationState::Idle, took: HashSet::new(), full: false };
        self.tabs.insert(self.next, tab);
        self.next
    }
}

struct Shared {
    config: FakeConfig,
    faults: Mutex<Vec<(usize, Fault)>>,
    /// The executor's memory, the same core the extension runs; tab
    /// handles are the simulated browser's.
    core: Mutex<executor_core::Core<u64>>,
    browser: Mutex<Browser>,
    stats: Mutex<Stats>,
    changed: Notify,
    stop: Notify,
    connected: Mutex<bool>,
    /// The live session's outbox, for effects the test injects (a lost tab).
    outbox: Mutex<Option<Outbox>>,
    /// The request ids each worker's page shows ([`FakeExecutor::page_shows`]),
    /// oldest first.
    shown: Mutex<HashMap<WorkerId, Vec<String>>>,
}

impl Fault {
    /// The command kind this fault is about, if it is about commands.
    fn op(self) -> Option<Op> {
        match self {
            Fault::DisconnectAfterAck(op)
            | Fault::StallBeforeAck(op)
            | Fault::StallAfterAck(op)
            | Fault::DropResult(op)
            | Fault::DeliverTwice(op)
            | Fault::Reorder(op)
            | Fault::StallPastDeadline(op)
            | Fault::LoseIdleReport(op)
            | Fault::MissDeadline(op)
            | Fault::DeliveryTimeout(op)
            | Fault::ConversationFull(op)
            | Fault::RateLimited(op) => Some(op),
            Fault::ReconnectNewInstance | Fault::StopHeartbeats | Fault::NoResync => None,
        }
    }
}

impl Shared {
    /// The command faults that fire on this (new) command; counts down the others.
    fn faults_for(&self, op: &CommandOp) -> Vec<Fault> {
        let mut faults = self.faults.lock().unwrap();
        let mut fired = Vec::new();
        faults.retain_mut(|(skip, fault)| match fault.op() {
            Some(o) if o.matches(op) && *skip == 0 => {
                fired.push(*fault);
                false
            }
            Some(o) if o.matches(op) => {
                *skip -= 1;
                true
            }
            _ => true,
        });
        fired
    }

    /// Takes a fault that is not about one command, once its skip count has
    /// run down (each call counts as one occasion).
    fn take_fault(&self, wanted: Fault) -> bool {
        let mut faults = self.faults.lock().unwrap();
        let Some(i) = faults.iter().position(|(_, f)| *f == wanted) else { return false };
        if faults[i].0 > 0 {
            faults[i].0 -= 1;
            return false;
        }
        faults.remove(i);
        true
    }

    fn update(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut self.stats.lock().unwrap());
        self.changed.notify_waiters();
    }
}

/// A running fake executor.
pub struct FakeExecutor {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

type Outbox = mpsc::UnboundedSender<Message>;

fn frame(f: &ExecutorFrame) -> Message {
    Message::Text(serde_json::to_string(f).expect("frames serialize").into())
}

impl FakeExecutor {
    /// Connects (and keeps reconnecting) until stopped.
    pub fn start(config: FakeConfig) -> Self {
        let mut core = executor_core::Core::default();
        core.set_steering(config.steers);
        let shared = Arc::new(Shared {
            faults: Mutex::new(config.faults.clone()),
            config,
            core: Mutex::new(core),
            browser: Mutex::new(Browser::default()),
            stats: Mutex::new(Stats::default()),
            changed: Notify::new(),
            stop: Notify::new(),
            connected: Mutex::new(false),
            outbox: Mutex::new(None),
            shown: Mutex::new(HashMap::new()),
        });
        let task = tokio::spawn(run(shared.clone()));
        Self { shared, task }
    }

    /// A snapshot of what happened so far.
    pub fn stats(&self) -> Stats {
        self.shared.stats.lock().unwrap().clone()
    }

    /// Whether a session is up now.
    pub fn is_connected(&self) -> bool {
        *self.shared.connected.lock().unwrap()
    }

    /// Waits until `done` holds for the stats, or panics after `within`.
    pub async fn wait_for(&self, done: impl Fn(&Stats) -> bool, within: Duration) -> Stats {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.shared.changed.notified();
            let stats = self.stats();
            if done(&stats) {
                return stats;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "fake executor {}: condition not met within {within:?}; stats: {:#?}",
                    self.shared.config.executor_id,
                    self.stats()
                );
            }
        }
    }

    /// Simulates the browser losing a worker's tab: reports the conversation
    /// closed, as a real carrier would. Returns whether a session was up.
    pub fn lose_tab(&self, worker: &WorkerId) -> bool {
        self.report_lost_tab(worker, false)
    }

    /// The same loss reported the other documented way: `conversationState{closed}`.
    pub fn lose_tab_as_state(&self, worker: &WorkerId) -> bool {
        self.report_lost_tab(worker, true)
    }

    fn report_lost_tab(&self, worker: &WorkerId, as_state: bool) -> bool {
        let mut core = self.shared.core.lock().unwrap();
        let tab = core.managed(worker).and_then(|m| m.tab);
        let mut frames = tab.map(|tab| core.tab_removed(&tab)).unwrap_or_default();
        drop(core);
        if let Some(tab) = tab {
            self.shared.browser.lock().unwrap().tabs.remove(&tab);
        }
        if as_state {
            let closed = ConversationState::Closed;
            frames = vec![ExecutorFrame::ConversationState { worker_id: worker.clone(), state: closed, error: None }];
        }
        let outbox = self.shared.outbox.lock().unwrap();
        let sent = outbox.as_ref().is_some_and(|o| frames.iter().all(|f| o.send(frame(f)).is_ok()));
        self.shared.update(|s| s.lost_tabs.push(worker.clone()));
        sent
    }

    /// Reports the page of `worker`'s tab as `state` (with `error`), as the
    /// page would after the test's script moved it, whether or not the core
    /// reported it already. Returns whether a session was up.
    pub fn report_state(&self, worker: &WorkerId, state: ConversationState, error: Option<ErrorCode>) -> bool {
        let frame_ = ExecutorFrame::ConversationState { worker_id: worker.clone(), state, error };
        let outbox = self.shared.outbox.lock().unwrap();
        outbox.as_ref().is_some_and(|o| o.send(frame(&frame_)).is_ok())
    }

    /// Reports that `worker`'s running turn moved on (text streamed), as a
    /// page would, paced by the core. Returns whether a frame went out.
    pub fn report_progress(&self, worker: &WorkerId) -> bool {
        let mut core = self.shared.core.lock().unwrap();
        let Some(tab) = core.managed(worker).and_then(|m| m.tab) else { return false };
        let frames = core.page_progress(&tab, now_ms());
        drop(core);
        let outbox = self.shared.outbox.lock().unwrap();
        !frames.is_empty() && outbox.as_ref().is_some_and(|o| frames.iter().all(|f| o.send(frame(f)).is_ok()))
    }

    /// Makes `worker`'s page show a new turn's request id, as the model's
    /// first call in that turn would: the executor attests it as the page's
    /// newest. Returns whether a frame went out.
    pub fn page_shows(&self, worker: &WorkerId, request_id: &str) -> bool {
        let mut core = self.shared.core.lock().unwrap();
        let Some(m) = core.managed(worker) else { return false };
        let (Some(tab), Some(conversation)) = (m.tab, m.conversation.clone()) else { return false };
        self.shared.shown.lock().unwrap().entry(worker.clone()).or_default().push(request_id.to_owned());
        let ids = [request_id.to_owned()];
        let frames = core.callers_seen(&tab, &conversation.to_string(), &ids, Some(request_id), false);
        drop(core);
        let outbox = self.shared.outbox.lock().unwrap();
        !frames.is_empty() && outbox.as_ref().is_some_and(|o| frames.iter().all(|f| o.send(frame(f)).is_ok()))
    }

    /// Disconnects for good.
    pub async fn stop(self) {
        self.shared.stop.notify_one();
        let _ = self.task.await;
    }
}

async fn run(shared: Arc<Shared>) {
    let mut instance = new_instance();
    loop {
        let stop = shared.stop.notified();
        tokio::select! {
            next = session(&shared, &instance) => {
                *shared.connected.lock().unwrap() = false;
                if next == Next::NewInstance {
                    instance = new_instance();
                }
            }
            _ = stop => return,
        }
        *shared.connected.lock().unwrap() = false;
        tokio::select! {
            _ = tokio::time::sleep(shared.config.reconnect_delay) => {}
            _ = shared.stop.notified() => return,
        }
    }
}

fn new_instance() -> String {
    format!("inst-{}", uuid::Uuid::now_v7().simple())
}

#[derive(Debug, PartialEq, Eq)]
enum Next {
    SameInstance,
    NewInstance,
}

async fn session(shared: &Arc<Shared>, instance: &str) -> Next {
    let Ok((socket, _)) = tokio_tungstenite::connect_async_with_config(shared.config.url.as_str(), None, true).await
    else {
        return Next::SameInstance;
    };
    let (mut sink, mut stream) = socket.split();
    let mut hello = executor_core::hello(&Identity {
        token: shared.config.token.clone(),
        executor_id: shared.config.executor_id.clone(),
        instance_id: instance.to_owned(),
        kind: ExecutorKind::Fake,
        capabilities: [
            "conversation_create",
            "conversation_send",
            protocol::executor::PARK,
            protocol::executor::ROLLOVER,
        ]
        .into_iter()
        .chain(shared.config.steers.then_some(protocol::executor::STEER))
        .map(String::from)
        .collect(),
        host: MachineFacts {
            os: std::env::consts::OS.into(),
            browser: Some(format!("simulated (fake-executor {})", env!("CARGO_PKG_VERSION"))),
            ..MachineFacts::default()
        },
    });
    if let (Callers::V1, ExecutorFrame::Hello { protocol_version, host, .. }) = (shared.config.callers, &mut hello) {
        *protocol_version = 1;
        host.release = None;
    }
    if sink.send(frame(&hello)).await.is_err() {
        return Next::SameInstance;
    }
    let heartbeat = match stream.next().await {
        Some(Ok(Message::Text(text))) => match serde_json::from_str::<DaemonFrame>(&text) {
            Ok(DaemonFrame::Welcome { heartbeat_ms, .. }) => {
                shared.config.heartbeat.unwrap_or_else(|| executor_core::heartbeat_every(heartbeat_ms))
            }
            _ => return Next::SameInstance,
        },
        Some(Ok(Message::Close(close))) => {
            if let Some(c) = close {
                shared.update(|s| s.closes.push((c.code.into(), c.reason.to_string())));
            }
            return Next::SameInstance;
        }
        _ => return Next::SameInstance,
    };
    *shared.connected.lock().unwrap() = true;
    shared.update(|s| {
        s.connections += 1;
        s.instances.push(instance.to_owned());
    });
    // A report sent while the daemon was away is lost: the core re-sends
    // every binding and state after the welcome, unless scripted not to.
    let resync = if shared.faults.lock().unwrap().iter().any(|(_, f)| *f == Fault::NoResync) {
        Vec::new()
    } else {
        shared.core.lock().unwrap().resync()
    };
    for (i, chunk) in resync.chunks(executor_core::RESYNC_CHUNK).enumerate() {
        if i > 0 {
            tokio::time::sleep(executor_core::RESYNC_PAUSE).await;
        }
        for report in chunk {
            if sink.send(frame(report)).await.is_err() {
                return Next::SameInstance;
            }
        }
    }

    let (outbox, mut rx) = mpsc::unbounded_channel::<Message>();
    *shared.outbox.lock().unwrap() = Some(outbox.clone());
    let (drop_tx, mut drop_rx) = mpsc::unbounded_channel::<Next>();
    let writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            if sink.send(m).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let mut beat = tokio::time::interval(heartbeat);
    let mut seq = 0;
    let next = loop {
        tokio::select! {
            msg = stream.next() => match msg {
                Some(Ok(Message::Text(text))) => match serde_json::from_str::<DaemonFrame>(&text) {
                    Ok(DaemonFrame::Command(command)) => handle(shared, &outbox, &drop_tx, command),
                    Ok(DaemonFrame::CallerLookup { worker_id, conversation_id, request_id, .. }) => {
                        // Shown: the page shows every id asked for, as its newest;
                        // else only what `page_shows` put there, the last the newest.
                        let newest = match shared.config.callers {
                            Callers::Shown => Some(request_id.clone()),
                            Callers::Hidden | Callers::V1 => {
                                let shown = shared.shown.lock().unwrap();
                                let page = shown.get(&worker_id).filter(|p| p.contains(&request_id));
                                page.and_then(|p| p.last().cloned())
                            }
                        };
                        if let Some(newest) = newest {
                            let mut core = shared.core.lock().unwrap();
                            let tab = core.lookup_tab(&worker_id, &conversation_id, &request_id);
                            let ids = [request_id.clone()];
                            let frames = match tab {
                                Some(tab) => {
                                    core.callers_seen(&tab, &conversation_id.to_string(), &ids, Some(&newest), true)
                                }
                                None => vec![],
                            };
                            drop(core);
                            for f in &frames {
                                let _ = outbox.send(frame(f));
                            }
                        }
                    }
                    _ => break Next::SameInstance,
                },
                Some(Ok(Message::Close(close))) => {
                    if let Some(c) = close {
                        shared.update(|s| s.closes.push((c.code.into(), c.reason.to_string())));
                    }
                    break Next::SameInstance;
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break Next::SameInstance,
            },
            _ = beat.tick() => {
                if !shared.faults.lock().unwrap().iter().any(|(_, f)| *f == Fault::StopHeartbeats) {
                    seq += 1;
                    let _ = outbox.send(frame(&ExecutorFrame::Heartbeat { seq }));
                }
            }
            next = drop_rx.recv() => break next.unwrap_or(Next::SameInstance),
        }
    };
    drop(outbox);
    writer.abort();
    next
}

/// Handles one command frame the way `executor_core` prescribes (journal,
/// acknowledge, act once, record, report), with the scripted faults
/// injected around it.
fn handle(shared: &Arc<Shared>, outbox: &Outbox, drop_tx: &mpsc::UnboundedSender<Next>, command: Command) {
    shared.update(|s| {
        *s.frames_by_command.entry(command.command_id.clone()).or_default() += 1;
        s.first_received.entry(command.command_id.clone()).or_insert_with(std::time::Instant::now);
        s.commands.push(command.clone());
    });
    let send = |f: &ExecutorFrame| {
        let _ = outbox.send(frame(f));
    };
    let key = command.idempotency_key.clone();
    // Faults fire on the first delivery of a command, not on its replays.
    let first = shared.core.lock().unwrap().entry(&key).is_none();
    let begun = shared.core.lock().unwrap().begin(&command, now_ms());
    let plan = match begun {
        Begin::Refused(result) => {
            send(&ack(&command));
            send(&result);
            return;
        }
        Begin::Joined => {
            send(&ack(&command));
            return;
        }
        Begin::Perform(plan) => plan,
    };
    let fired = if first { shared.faults_for(&command.op) } else { Vec::new() };
    let has = |kind: fn(Op) -> Fault| fired.iter().any(|f| f.op().is_some_and(|o| *f == kind(o)));
    // A stalled or cut-off attempt dies without a result, as a restart ends
    // it: the daemon's replay resumes it at its phase.
    if has(Fault::StallBeforeAck) {
        shared.core.lock().unwrap().abandon(&key);
        return;
    }
    let reorder = has(Fault::Reorder);
    if !reorder {
        send(&ack(&command));
    }
    if has(Fault::DisconnectAfterAck) {
        shared.core.lock().unwrap().abandon(&key);
        let _ = drop_tx.send(Next::SameInstance);
        return;
    }
    if has(Fault::StallAfterAck) {
        shared.core.lock().unwrap().abandon(&key);
        return;
    }
    if has(Fault::MissDeadline) {
        // Nothing performed: the core leaves the key received, as the protocol says.
        let outcome = error(ErrorCode::DeadlineExceeded, "the page stayed busy");
        if let Some(result) = shared.core.lock().unwrap().finish(&key, outcome) {
            send(&result);
        }
        return;
    }
    let late = has(Fault::StallPastDeadline);
    let ending = if has(Fault::LoseIdleReport) {
        TurnEnd::Unreported
    } else if has(Fault::DeliveryTimeout) {
        TurnEnd::Incident(ErrorCode::DeliveryTimeout)
    } else if has(Fault::RateLimited) {
        TurnEnd::Incident(ErrorCode::RateLimited)
    } else if has(Fault::ConversationFull) {
        TurnEnd::Incident(ErrorCode::ConversationTooLong)
    } else {
        TurnEnd::Idle
    };
    let drop_result = has(Fault::DropResult);
    let twice = has(Fault::DeliverTwice);
    let (shared, outbox, drop_tx) = (shared.clone(), outbox.clone(), drop_tx.clone());
    let act = async move {
        if late {
            tokio::time::sleep(Duration::from_millis(command.deadline_ms.saturating_sub(now_ms()) + 100)).await;
        }
        let outcome = perform(&shared, &outbox, &command, plan, ending);
        let result = shared.core.lock().unwrap().finish(&command.idempotency_key, outcome);
        if let (false, Some(result)) = (drop_result, result) {
            let _ = outbox.send(frame(&result));
            if twice {
                let _ = outbox.send(frame(&result));
            }
        }
        if reorder {
            let _ = outbox.send(frame(&ack(&command)));
        }
        if shared.take_fault(Fault::ReconnectNewInstance) {
            let _ = drop_tx.send(Next::NewInstance);
        }
    };
    if late {
        tokio::spawn(act);
    } else {
        // Synchronous apart from channel sends; run it to completion now so
        // command order is kept.
        futures_util::FutureExt::now_or_never(act).expect("acting does not wait unless late");
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// How a submitted turn ends on the simulated page.
#[derive(Debug, Clone, Copy)]
enum TurnEnd {
    /// Idle, reported.
    Idle,
    /// Idle while nobody listens: only a resync or an inspection tells.
    Unreported,
    /// On an incident (`state: error` with the code).
    Incident(ErrorCode),
}

/// Carries out the core's plan in the simulated browser. Effects are counted
/// in [`Stats`] exactly as they happen.
fn perform(shared: &Shared, outbox: &Outbox, command: &Command, plan: Plan<u64>, ending: TurnEnd) -> CommandOutcome {
    let worker = &command.worker_id;
    let key = &command.idempotency_key;
    let emit = |frames: Vec<ExecutorFrame>| {
        for f in &frames {
            let _ = outbox.send(frame(f));
        }
    };
    let prompt = executor_core::prompt_of(command).unwrap_or_default();
    let submit = |tab: u64| -> CommandOutcome {
        shared.core.lock().unwrap().advance(key, Phase::SubmissionStarted);
        let mut browser = shared.browser.lock().unwrap();
        let Some(page) = browser.tabs.get_mut(&tab) else {
            return error(ErrorCode::AmbiguousSubmission, "the tab closed during submission");
        };
        // A full conversation takes nothing more (the adapter reads the notice first).
        if page.full && !page.took.contains(key) {
            return error(ErrorCode::ConversationTooLong, "the conversation reached its maximum length");
        }
        if page.took.insert(key.clone()) {
            if page.conversation.is_none() {
                let id: ConversationId =
                    uuid::Uuid::now_v7().hyphenated().to_string().parse().expect("uuids are conversation ids");
                page.conversation = Some(id.clone());
                shared.update(|s| s.conversations.push((worker.clone(), id)));
            }
            let conversation = page.conversation.clone().expect("set above");
            shared.update(|s| s.submissions.push((conversation, prompt.to_owned())));
            // The turn runs, then ends (see `TurnEnd`).
            let url = page.url();
            let mut core = shared.core.lock().unwrap();
            emit(core.page_report(&tab, &url, ConversationState::Generating, None));
            let (state, error) = match ending {
                TurnEnd::Incident(code) => (ConversationState::Error, Some(code)),
                TurnEnd::Idle | TurnEnd::Unreported => (ConversationState::Idle, None),
            };
            page.state = state;
            page.full |= error == Some(ErrorCode::ConversationTooLong);
            let ended = core.page_report(&tab, &url, state, error);
            if !matches!(ending, TurnEnd::Unreported) {
                emit(ended);
            }
        }
        let mut core = shared.core.lock().unwrap();
        core.advance(key, Phase::Submitted);
        core.ok(worker)
    };
    match plan {
        Plan::Reply(outcome) => outcome,
        Plan::Create { .. } => {
            shared.core.lock().unwrap().advance(key, Phase::TabOpening);
            let tab = shared.browser.lock().unwrap().open(None);
            shared.core.lock().unwrap().tab_opened(worker, tab);
            emit(vec![ExecutorFrame::ConversationCreated {
                command_id: command.command_id.clone(),
                worker_id: worker.clone(),
            }]);
            submit(tab)
        }
        // The simulated page takes a prompt mid-turn as it does when idle.
        Plan::Submit { tab, .. } | Plan::Steer { tab, .. } => submit(tab),
        Plan::Reconcile { tab: None } => error(ErrorCode::AmbiguousSubmission, "the tab closed during submission"),
        // The page answers for the key: it took the prompt or it did not.
        Plan::Reconcile { tab: Some(tab) } if executor_core::prompt_of(command).is_some() => submit(tab),
        Plan::Reconcile { .. } => shared.core.lock().unwrap().ok(worker),
        Plan::Open { .. } => {
            let CommandOp::ConversationOpen { conversation_id, .. } = &command.op else {
                return error(ErrorCode::InvalidArgument, "only conversation_open opens a conversation");
            };
            let tab = shared.browser.lock().unwrap().open(Some(conversation_id.clone()));
            let mut core = shared.core.lock().unwrap();
            core.tab_opened(worker, tab);
            emit(core.page_report(&tab, &conversation_url(conversation_id), ConversationState::Idle, None));
            shared.update(|s| s.reopened.push(conversation_id.clone()));
            core.ok(worker)
        }
        Plan::Inspect { tab } => {
            let page = shared.browser.lock().unwrap().tabs.get(&tab).cloned();
            let mut core = shared.core.lock().unwrap();
            match page {
                Some(page) => {
                    let error = page.full.then_some(ErrorCode::ConversationTooLong);
                    emit(core.inspected(&tab, &page.url(), page.state, error))
                }
                None => emit(core.tab_removed(&tab)),
            }
            core.ok(worker)
        }
        // The simulated page may go while idle (it never holds a draft).
        Plan::Park { tab } => {
            let idle =
                shared.browser.lock().unwrap().tabs.get(&tab).is_some_and(|p| p.state == ConversationState::Idle);
            if !idle {
                return error(ErrorCode::TabInUse, "the page is not idle");
            }
            let mut core = shared.core.lock().unwrap();
            if let Some(tab) = core.parked(worker) {
                shared.browser.lock().unwrap().tabs.remove(&tab);
            }
            core.park_closed(worker);
            core.ok(worker)
        }
        Plan::FinishPark { tab } => {
            shared.browser.lock().unwrap().tabs.remove(&tab);
            let mut core = shared.core.lock().unwrap();
            core.park_closed(worker);
            core.ok(worker)
        }
        Plan::Close { tab } => {
            let closed = tab.is_some_and(|tab| shared.browser.lock().unwrap().tabs.remove(&tab).is_some());
            let mut core = shared.core.lock().unwrap();
            let ok = core.ok(worker);
            emit(core.closed_by_daemon(worker));
            if let (true, CommandOutcome::Ok { conversation_id: Some(conversation) }) = (closed, &ok) {
                shared.update(|s| s.closed.push(conversation.clone()));
            }
            ok
        }
    }
}
