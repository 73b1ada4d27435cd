//! A fake executor: speaks the real executor protocol over a real WebSocket,
//! simulates managed conversations, keeps an idempotency journal like a real
//! carrier must, and injects scripted faults. The pool, continuity and CI
//! tests use it wherever no browser is needed.
//!
//! ```text
//! let fake = FakeExecutor::start(FakeConfig::new(url, token, "fake-1").fault(Fault::DisconnectAfterAck(Op::Create)));
//! let stats = fake.wait_for(|s| s.submissions.len() == 1, Duration::from_secs(10)).await;
//! ```
//!
//! Effects are counted in [`Stats`]: conversations created and prompts
//! submitted, so a test can assert exactly-once against them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use protocol::executor::{
    Command, CommandOp, CommandOutcome, ConversationState, DaemonFrame, ExecutorFrame, ExecutorKind, MachineFacts,
    PROTOCOL_VERSION,
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

/// The journal entry for one idempotency key.
#[derive(Debug, Clone)]
enum Entry {
    /// Received; the effect has not happened.
    Received,
    /// The effect happened with this outcome.
    Performed(CommandOutcome),
}

struct Shared {
    config: FakeConfig,
    faults: Mutex<Vec<(usize, Fault)>>,
    journal: Mutex<HashMap<String, Entry>>,
    stats: Mutex<Stats>,
    changed: Notify,
    stop: Notify,
    connected: Mutex<bool>,
    /// The live session's outbox, for effects the test injects (a lost tab).
    outbox: Mutex<Option<Outbox>>,
    /// Each conversation's state as the executor sees it (what it reports,
    /// and re-sends after reconnecting or when inspected).
    states: Mutex<HashMap<WorkerId, ConversationState>>,
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
            | Fault::MissDeadline(op) => Some(op),
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
        let shared = Arc::new(Shared {
            faults: Mutex::new(config.faults.clone()),
            config,
            journal: Mutex::new(HashMap::new()),
            stats: Mutex::new(Stats::default()),
            changed: Notify::new(),
            stop: Notify::new(),
            connected: Mutex::new(false),
            outbox: Mutex::new(None),
            states: Mutex::new(HashMap::new()),
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
        self.report_lost_tab(worker, ExecutorFrame::ConversationClosed { worker_id: worker.clone() })
    }

    /// The same loss reported the other documented way: `conversationState{closed}`.
    pub fn lose_tab_as_state(&self, worker: &WorkerId) -> bool {
        let state = ExecutorFrame::ConversationState {
            worker_id: worker.clone(),
            state: ConversationState::Closed,
            error: None,
        };
        self.report_lost_tab(worker, state)
    }

    fn report_lost_tab(&self, worker: &WorkerId, report: ExecutorFrame) -> bool {
        self.shared.states.lock().unwrap().insert(worker.clone(), ConversationState::Closed);
        let sent = self.shared.outbox.lock().unwrap().as_ref().is_some_and(|o| o.send(frame(&report)).is_ok());
        self.shared.update(|s| s.lost_tabs.push(worker.clone()));
        sent
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
    let hello = ExecutorFrame::Hello {
        protocol_version: PROTOCOL_VERSION,
        token: shared.config.token.clone(),
        executor_id: shared.config.executor_id.clone(),
        executor_instance_id: instance.to_owned(),
        executor_kind: ExecutorKind::Fake,
        capabilities: vec!["conversation_create".into(), "conversation_send".into()],
        host: MachineFacts { os: std::env::consts::OS.into(), browser: None },
    };
    if sink.send(frame(&hello)).await.is_err() {
        return Next::SameInstance;
    }
    let heartbeat = match stream.next().await {
        Some(Ok(Message::Text(text))) => match serde_json::from_str::<DaemonFrame>(&text) {
            Ok(DaemonFrame::Welcome { heartbeat_ms, .. }) => {
                shared.config.heartbeat.unwrap_or(Duration::from_millis(heartbeat_ms))
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
    // A report sent while the daemon was away is lost: re-send every
    // conversation's binding and state after the welcome (the protocol's
    // reconnect rule), unless scripted not to.
    let resync: Vec<ExecutorFrame> = if shared.faults.lock().unwrap().iter().any(|(_, f)| *f == Fault::NoResync) {
        Vec::new()
    } else {
        let conversations = shared.stats.lock().unwrap().conversations.clone();
        let states = shared.states.lock().unwrap().clone();
        conversations
            .into_iter()
            .flat_map(|(worker_id, conversation_id)| {
                let bound = ExecutorFrame::ConversationBound {
                    worker_id: worker_id.clone(),
                    url: format!("https://chatgpt.com/c/{conversation_id}"),
                    conversation_id,
                };
                let state = states.get(&worker_id).map(|s| ExecutorFrame::ConversationState {
                    worker_id: worker_id.clone(),
                    state: *s,
                    error: None,
                });
                std::iter::once(bound).chain(state)
            })
            .collect()
    };
    for report in &resync {
        if sink.send(frame(report)).await.is_err() {
            return Next::SameInstance;
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

/// Handles one command frame: journal first, then (unless a fault says
/// otherwise) acknowledge, act once, and report.
fn handle(shared: &Arc<Shared>, outbox: &Outbox, drop_tx: &mpsc::UnboundedSender<Next>, command: Command) {
    let op = command.op.clone();
    shared.update(|s| {
        *s.frames_by_command.entry(command.command_id.clone()).or_default() += 1;
        s.first_received.entry(command.command_id.clone()).or_insert_with(std::time::Instant::now);
        s.commands.push(command.clone());
    });
    let known = shared.journal.lock().unwrap().get(&command.idempotency_key).cloned();
    let ack = || {
        let _ = outbox.send(frame(&ExecutorFrame::Ack { command_id: command.command_id.clone() }));
    };
    if let Some(Entry::Performed(outcome)) = known {
        // A replay of something already done: answer from the journal.
        ack();
        let _ = outbox.send(frame(&ExecutorFrame::Result { command_id: command.command_id.clone(), outcome }));
        return;
    }
    // Faults fire on the first delivery of a command, not on its replays.
    let fired = if known.is_none() { shared.faults_for(&op) } else { Vec::new() };
    let has = |kind: fn(Op) -> Fault| fired.iter().any(|f| f.op().is_some_and(|o| *f == kind(o)));
    shared.journal.lock().unwrap().insert(command.idempotency_key.clone(), Entry::Received);
    if has(Fault::StallBeforeAck) {
        return;
    }
    let reorder = has(Fault::Reorder);
    if !reorder {
        ack();
    }
    if has(Fault::DisconnectAfterAck) {
        let _ = drop_tx.send(Next::SameInstance);
        return;
    }
    if has(Fault::StallAfterAck) {
        return;
    }
    if has(Fault::MissDeadline) {
        // Nothing performed: the key stays received, as the protocol says.
        let outcome =
            CommandOutcome::Error { code: ErrorCode::DeadlineExceeded, detail: "the page stayed busy".into() };
        let _ = outbox.send(frame(&ExecutorFrame::Result { command_id: command.command_id.clone(), outcome }));
        return;
    }
    let late = has(Fault::StallPastDeadline);
    let lose_idle = has(Fault::LoseIdleReport);
    let drop_result = has(Fault::DropResult);
    let twice = has(Fault::DeliverTwice);
    let (shared, outbox, drop_tx) = (shared.clone(), outbox.clone(), drop_tx.clone());
    let act = async move {
        if late {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
            tokio::time::sleep(Duration::from_millis(command.deadline_ms.saturating_sub(now) + 100)).await;
        }
        let outcome = perform(&shared, &outbox, &command, lose_idle);
        shared.journal.lock().unwrap().insert(command.idempotency_key.clone(), Entry::Performed(outcome.clone()));
        let result = ExecutorFrame::Result { command_id: command.command_id.clone(), outcome };
        if !drop_result {
            let _ = outbox.send(frame(&result));
            if twice {
                let _ = outbox.send(frame(&result));
            }
        }
        if reorder {
            let _ = outbox.send(frame(&ExecutorFrame::Ack { command_id: command.command_id.clone() }));
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

/// Refuses a conversation this executor did not create for `worker`, as a
/// real carrier refuses tabs it does not manage.
fn unmanaged(shared: &Shared, worker: &WorkerId, conversation: &ConversationId) -> Option<CommandOutcome> {
    let managed = shared.stats.lock().unwrap().conversations.iter().any(|(w, c)| w == worker && c == conversation);
    (!managed).then(|| CommandOutcome::Error {
        code: ErrorCode::UnmanagedTarget,
        detail: "not a conversation this executor created".into(),
    })
}

/// The simulated effect: create a conversation and submit its prompt, or
/// submit a prompt into an existing one. Counted exactly as it happens.
fn perform(shared: &Shared, outbox: &Outbox, command: &Command, lose_idle: bool) -> CommandOutcome {
    let worker = command.worker_id.clone();
    let send = |f: ExecutorFrame| {
        if let ExecutorFrame::ConversationState { worker_id, state, .. } = &f {
            shared.states.lock().unwrap().insert(worker_id.clone(), *state);
        }
        let _ = outbox.send(frame(&f));
    };
    match &command.op {
        CommandOp::ConversationCreate { prompt, .. } => {
            let id: ConversationId =
                uuid::Uuid::now_v7().hyphenated().to_string().parse().expect("uuids are conversation ids");
            shared.update(|s| {
                s.conversations.push((worker.clone(), id.clone()));
                s.submissions.push((id.clone(), prompt.clone()));
            });
            send(ExecutorFrame::ConversationCreated {
                command_id: command.command_id.clone(),
                worker_id: worker.clone(),
            });
            send(ExecutorFrame::ConversationBound {
                worker_id: worker.clone(),
                conversation_id: id.clone(),
                url: format!("https://chatgpt.com/c/{id}"),
            });
            send(ExecutorFrame::ConversationState { worker_id: worker, state: ConversationState::Idle, error: None });
            CommandOutcome::Ok { conversation_id: Some(id) }
        }
        CommandOp::ConversationSend { conversation_id, prompt, .. }
        | CommandOp::ConversationSteer { conversation_id, prompt } => {
            if let Some(refusal) = unmanaged(shared, &worker, conversation_id) {
                return refusal;
            }
            shared.update(|s| s.submissions.push((conversation_id.clone(), prompt.clone())));
            if lose_idle {
                // The turn runs, then ends while nobody listens: the idle report never arrives.
                send(ExecutorFrame::ConversationState {
                    worker_id: worker.clone(),
                    state: ConversationState::Generating,
                    error: None,
                });
                shared.states.lock().unwrap().insert(worker, ConversationState::Idle);
            } else {
                send(ExecutorFrame::ConversationState {
                    worker_id: worker,
                    state: ConversationState::Idle,
                    error: None,
                });
            }
            CommandOutcome::Ok { conversation_id: Some(conversation_id.clone()) }
        }
        CommandOp::ConversationOpen { conversation_id, .. } => {
            if let Some(refusal) = unmanaged(shared, &worker, conversation_id) {
                return refusal;
            }
            shared.update(|s| s.reopened.push(conversation_id.clone()));
            send(ExecutorFrame::ConversationState { worker_id: worker, state: ConversationState::Idle, error: None });
            CommandOutcome::Ok { conversation_id: Some(conversation_id.clone()) }
        }
        CommandOp::ConversationInspect { conversation_id } => {
            // An inspection re-reports the current state, changed or not.
            let current = shared.states.lock().unwrap().get(&worker).copied();
            if let Some(state) = current {
                send(ExecutorFrame::ConversationState { worker_id: worker, state, error: None });
            }
            CommandOutcome::Ok { conversation_id: Some(conversation_id.clone()) }
        }
        CommandOp::ConversationClose { conversation_id } => {
            shared.update(|s| s.closed.push(conversation_id.clone()));
            send(ExecutorFrame::ConversationClosed { worker_id: worker });
            CommandOutcome::Ok { conversation_id: Some(conversation_id.clone()) }
        }
    }
}
