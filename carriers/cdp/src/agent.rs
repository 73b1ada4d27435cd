//! The CDP host agent: an executor (the same protocol, the same
//! `executor-core` journal and plans as the extension) whose tabs are
//! DevTools targets of an authorized browser session. It connects out to
//! the daemon's `/executor` with its own credential, like the extension,
//! so it runs beside the daemon or on another host.
//!
//! What it touches: only targets it created (`Target.createTarget`; a page
//! inspection's too, closed after its reading, see [`inspect`]), and
//! after a restart the ones its persisted journal names (a create's target
//! is journaled by its id before it shows any page, so a restart never
//! looks for it by URL, which a person's tab may share); it attaches to no
//! other target and never navigates, closes or evaluates in one. Target
//! ids are handles, persisted only so a restart can find its own tabs
//! again; a target that is gone is reported closed and the daemon reopens
//! the exact conversation (`conversation_open`) in a new one.
//!
//! A browser it cannot reach is a setup state on every command
//! (`BROWSER_CONTROL_UNAVAILABLE`, `BROWSER_AUTHORIZATION_REQUIRED`),
//! answered within the connect timeout with nothing done.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::GetVersionParams;
use chromiumoxide::cdp::browser_protocol::page::NavigateParams;
use chromiumoxide::cdp::browser_protocol::system_info::GetProcessInfoParams;
use chromiumoxide::cdp::browser_protocol::target::{
    AttachToTargetParams, CloseTargetParams, CreateTargetParams, GetTargetsParams, SessionId, SetDiscoverTargetsParams,
    TargetId,
};
use chromiumoxide::cdp::js_protocol::runtime::ExecutionContextId;
use executor_core::{
    Begin, Core, Identity, Phase, Plan, ack, app_of, effort_of, error, model_of, prompt_of, tab_marker,
};
use extension::messages::{NotStarted, PageReply, Submission, ToPage};
use futures_util::{SinkExt, StreamExt};
use protocol::ErrorCode;
use protocol::executor::{Command, CommandOp, CommandOutcome, DaemonFrame, ExecutorFrame, ExecutorKind, MachineFacts};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::cdp::{Cdp, Event};
use crate::connect::{Connector, Endpoint};
use crate::launch::{Dedicated, Launched};
use crate::page::{self, Bundle, Said};

mod dial;
mod inspect;

/// The managed conversations one host takes unless its operator says
/// otherwise: a browser keeps this many background tabs responsive.
pub const DEFAULT_CAPACITY: u32 = 8;

/// How the agent reaches the daemon and the browser.
#[derive(Debug, Clone)]
pub struct Config {
    /// The daemon's executor endpoint: `ws://127.0.0.1:7777/executor` on
    /// its machine, `wss://HOST:PORT/executor` from another.
    pub daemon: String,
    /// The certificate a `wss://` endpoint must present (`pair --remote`).
    pub daemon_pin: Option<executor_tls::Pin>,
    /// The credential `orchestrator pair --executor-id <id>` issued.
    pub token: String,
    /// The executor id the credential was issued for.
    pub executor_id: String,
    /// The authorized browser session.
    pub browser: Endpoint,
    /// The adapter evaluated in every managed target.
    pub bundle: Bundle,
    /// Where the journal is kept across restarts (owner-only).
    pub state_file: PathBuf,
    /// The bound on reaching the browser.
    pub connect_timeout: Duration,
    /// How long a DevTools handshake the browser holds for a person's
    /// Allow is kept waiting (see [`crate::connect::Connector`]).
    pub approval_wait: Duration,
    /// The pause between attempts to reach the daemon.
    pub reconnect_delay: Duration,
    /// How many managed conversations this host takes (`hello`'s
    /// `host.capacity`); the daemon places no more on it.
    pub capacity: Option<u32>,
    /// The bounded fallback: a dedicated profile the agent launches itself
    /// (never the user's own; see [`crate::launch`]). When set, `browser`
    /// is that profile's directory.
    pub dedicated: Option<Dedicated>,
}

/// A running agent.
pub struct Agent {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Agent {
    /// Starts the agent: it keeps a session with the daemon until stopped
    /// and reaches the browser when a command needs it. A journal that exists
    /// but cannot be read is refused: starting afresh over it could submit a
    /// prompt its earlier self already did.
    pub fn start(config: Config) -> Result<Agent, JournalError> {
        let core = load(&config.state_file)?;
        let shared = Arc::new(Shared::new(config, core));
        let task = tokio::spawn(run(shared.clone()));
        // Conversations kept from an earlier process are watched again at once.
        supervise(shared.clone());
        Ok(Agent { shared, task })
    }

    /// Whether a daemon session is up.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::SeqCst)
    }

    /// The targets the agent manages now (its handles), for diagnostics.
    pub fn targets(&self) -> Vec<String> {
        self.shared.core.lock().unwrap().workers().filter_map(|(_, m)| m.tab.clone()).collect()
    }

    /// Stops the agent and starts it again from its kept journal, as a new
    /// process would (its in-memory state, sessions and connections are gone).
    pub async fn restart(&mut self) -> Result<(), JournalError> {
        self.shared.halt().await;
        let _ = (&mut self.task).await;
        *self = Agent::start(self.shared.config.clone())?;
        Ok(())
    }

    /// Stops the agent (the browser and its targets are left as they are).
    pub async fn stop(self) {
        self.shared.halt().await;
        let _ = self.task.await;
    }
}

/// Why the kept journal cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "the agent's journal {file} cannot be read ({why}); move it aside only once no command it holds can be in flight"
)]
pub struct JournalError {
    file: String,
    why: String,
}

/// One journal writer per process (an agent restarted in place may still
/// have a command of its earlier self finishing); the temporary file is per
/// process, so two processes never rename each other's.
static PERSISTING: Mutex<()> = Mutex::new(());

struct Shared {
    config: Config,
    core: Mutex<Core<String>>,
    /// The live browser connection; the async lock serializes connecting.
    browser: tokio::sync::Mutex<Option<Arc<Browser>>>,
    /// Reaches the browser, keeping a handshake held for a person's Allow.
    connector: tokio::sync::Mutex<Connector>,
    /// The dedicated browser, when the agent launched one.
    launched: tokio::sync::Mutex<Launched>,
    /// The browser's product and version once reached, for `hello` (which
    /// must not wait on a connect in progress).
    version: Mutex<Option<String>>,
    outbox: Mutex<Option<mpsc::UnboundedSender<Message>>>,
    connected: AtomicBool,
    stop: CancellationToken,
}

/// One connection to the browser and the agent's sessions in it.
struct Browser {
    cdp: Cdp,
    version: String,
    /// The browser process, when DevTools names it: a lost connection then
    /// says whether the browser exited or only closed DevTools.
    pid: Option<u32>,
    pages: Mutex<HashMap<String, Attached>>,
    /// Notified whenever an adapter comes up.
    ready: Notify,
    /// Page reports heard over this connection: an answer to a question
    /// asked before a newer report came is stale.
    reports: std::sync::atomic::AtomicU64,
}

/// The agent's session with one of its targets.
struct Attached {
    session: SessionId,
    /// The adapter's world in the current document, once it is up.
    context: Option<ExecutionContextId>,
    /// Why the adapter did not start in the current document, if it said so.
    failed: Option<NotStarted>,
}

/// Why a target's adapter gave no answer.
#[derive(Debug)]
enum Unanswered {
    /// The deadline passed with no adapter up in the target.
    Deadline,
    /// The target or the browser went away (why).
    Gone(String),
    /// The adapter could not start in the target's page.
    NotStarted(NotStarted),
    /// The browser itself stopped answering (see [`unresponsive`]).
    Asleep,
}

impl Shared {
    fn new(config: Config, core: Core<String>) -> Shared {
        let connector = Connector::new(config.browser.clone(), config.connect_timeout, config.approval_wait);
        Shared {
            config,
            core: Mutex::new(core),
            browser: tokio::sync::Mutex::new(None),
            connector: tokio::sync::Mutex::new(connector),
            launched: tokio::sync::Mutex::new(Launched::default()),
            version: Mutex::new(None),
            outbox: Mutex::new(None),
            connected: AtomicBool::new(false),
            stop: CancellationToken::new(),
        }
    }

    /// Sends `frame` on the live session, if any; a halted agent sends
    /// nothing more (see [`Shared::halt`]).
    fn send(&self, frame: &ExecutorFrame) {
        let outbox = self.outbox.lock().unwrap();
        if self.stop.is_cancelled() {
            return;
        }
        if let Some(outbox) = outbox.as_ref() {
            let _ = outbox.send(text(frame));
        }
    }

    fn emit(&self, frames: Vec<ExecutorFrame>) {
        for frame in &frames {
            if let ExecutorFrame::ConversationState { worker_id, state, .. } = frame {
                tracing::debug!(worker = %worker_id, ?state, "page state to the daemon");
            }
            self.send(frame);
        }
    }

    /// Stops everything this agent runs: its daemon session, its browser
    /// connection and watcher. Commands still finishing neither write the
    /// journal nor tell the daemon anything more, from the same instant: a
    /// completion the daemon heard of but the journal did not keep would
    /// leave a restarted agent without that worker's conversation, never
    /// to be replayed (its calls could then never be attributed).
    async fn halt(&self) {
        {
            // Under the journal's lock too: a write that began before the
            // halt ends before it, and none begins after it.
            let _journal = PERSISTING.lock().unwrap();
            let mut outbox = self.outbox.lock().unwrap();
            self.stop.cancel();
            *outbox = None;
        }
        *self.browser.lock().await = None;
        self.launched.lock().await.stop().await;
    }

    /// Writes the journal (atomically, owner-only) after every change; one
    /// writer at a time, each writing the newest state. False when it could
    /// not be kept (or the agent stopped): nothing may then be acknowledged.
    fn persist(&self) -> bool {
        let _one = PERSISTING.lock().unwrap();
        if self.stop.is_cancelled() {
            return false;
        }
        let json = serde_json::to_vec(&*self.core.lock().unwrap()).expect("the core serializes");
        let file = &self.config.state_file;
        let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
        let written = write_private(&tmp, &json).and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = &written {
            tracing::error!(file = %file.display(), "cannot keep the agent's journal: {e}");
        }
        written.is_ok()
    }

    /// The browser connection for a command, reaching the session first if
    /// needed (which may ask a person to allow it).
    async fn browser(self: &Arc<Self>) -> Result<Arc<Browser>, CommandOutcome> {
        self.reach_browser(true).await
    }

    /// The browser connection, reaching the session first if needed; a
    /// reconnecting loop (`!for_command`) takes up an Allow already given
    /// but opens no dialog a person denied or left unanswered.
    async fn reach_browser(self: &Arc<Self>, for_command: bool) -> Result<Arc<Browser>, CommandOutcome> {
        let mut slot = self.browser.lock().await;
        if let Some(browser) = slot.as_ref().filter(|b| !b.cdp.is_closed()) {
            return Ok(browser.clone());
        }
        if let Some(dedicated) = &self.config.dedicated {
            let mut launched = self.launched.lock().await;
            launched.ensure(dedicated, self.config.connect_timeout).await.map_err(|e| error(e.code, &e.detail))?;
        }
        let cdp = self.connector.lock().await.connect(for_command).await.map_err(|e| error(e.code, &e.detail))?;
        let unavailable = |e: crate::cdp::Error| error(ErrorCode::BrowserControlUnavailable, &e.to_string());
        let within = self.config.connect_timeout;
        let version = cdp.call_within(within, None, GetVersionParams::default()).await.map_err(unavailable)?.product;
        let pid = browser_pid(&cdp, within).await;
        let events = cdp.events();
        cdp.call_within(within, None, SetDiscoverTargetsParams::new(true)).await.map_err(unavailable)?;
        // Targets that did not survive (a browser restart is a new
        // generation: every id is new) are lost; the daemon reopens them.
        let alive = page_targets(&cdp).await.map_err(unavailable)?;
        *self.version.lock().unwrap() = Some(version.clone());
        let browser = Arc::new(Browser {
            cdp,
            version,
            pid,
            pages: Mutex::new(HashMap::new()),
            ready: Notify::new(),
            reports: Default::default(),
        });
        tokio::spawn(watch(self.clone(), browser.clone(), events));
        let lost = self.core.lock().unwrap().retain_tabs(|t| alive.contains(t));
        if !lost.is_empty() {
            self.persist();
            self.emit(lost);
        }
        tracing::info!(browser = %browser.version, "reached the browser session");
        *slot = Some(browser.clone());
        drop(slot);
        // The adapter runs again in every target still managed, so its first
        // reading reports the page as it is now (what an earlier process or
        // connection last saw may be stale).
        // An unchanged page says nothing by itself, so each is asked once:
        // a page the daemon last heard of as out of reach (or mid-turn)
        // is heard from again now, not at its next recheck.
        let managed: Vec<String> = self.core.lock().unwrap().workers().filter_map(|(_, m)| m.tab.clone()).collect();
        for target in managed {
            if let Err(outcome) = self.session(&browser, &target).await {
                tracing::warn!(%target, ?outcome, "cannot watch a managed target again");
                continue;
            }
            let (shared, browser) = (self.clone(), browser.clone());
            tokio::spawn(async move {
                let before = browser.reports.load(Ordering::SeqCst);
                let asked = shared.ask(&browser, &target, &ToPage::Ping, now_ms() + 10_000).await;
                // A report the page made meanwhile (a submit's turn starting) is newer than this answer.
                if let Ok(PageReply::Report(report)) = asked
                    && browser.reports.load(Ordering::SeqCst) == before
                {
                    let frames =
                        shared.core.lock().unwrap().page_report(&target, &report.url, report.state, report.error);
                    if !frames.is_empty() {
                        shared.persist();
                        shared.emit(frames);
                    }
                }
            });
        }
        Ok(browser)
    }

    /// The agent's session with `target` (one of its own), attaching and
    /// installing the adapter first if this connection has none yet.
    async fn session(&self, browser: &Browser, target: &str) -> Result<SessionId, CommandOutcome> {
        if let Some(page) = browser.pages.lock().unwrap().get(target) {
            return Ok(page.session.clone());
        }
        let attach = AttachToTargetParams::builder().target_id(TargetId::from(target.to_owned())).flatten(true).build();
        let session = browser
            .cdp
            .call(None, attach.expect("target set"))
            .await
            .map_err(|e| error(ErrorCode::BrowserControlUnavailable, &format!("cannot attach to its target: {e}")))?
            .session_id;
        // Registered before the install so the adapter's first words (it may
        // start at once) are heard; withdrawn if the install fails.
        let attached = Attached { session: session.clone(), context: None, failed: None };
        browser.pages.lock().unwrap().insert(target.to_owned(), attached);
        if let Err(e) = page::install(&browser.cdp, &session, &self.config.bundle).await {
            browser.pages.lock().unwrap().remove(target);
            return Err(error(ErrorCode::BrowserControlUnavailable, &format!("cannot install the adapter: {e}")));
        }
        Ok(session)
    }

    /// Opens a new target of the agent's own at `url`.
    async fn open_target(&self, browser: &Browser, url: &str) -> Result<String, CommandOutcome> {
        let target = self.new_target(browser).await?;
        self.show(browser, &target, url).await?;
        Ok(target)
    }

    /// Opens a blank target of the agent's own, its adapter installed for
    /// the documents it will show.
    async fn new_target(&self, browser: &Browser) -> Result<String, CommandOutcome> {
        let unavailable = |e: crate::cdp::Error| error(ErrorCode::BrowserControlUnavailable, &e.to_string());
        let create = CreateTargetParams::builder().url("about:blank").background(true).build().expect("url set");
        let target: String = browser.cdp.call(None, create).await.map_err(unavailable)?.target_id.into();
        if let Err(outcome) = self.session(browser, &target).await {
            self.close(browser, &target).await;
            return Err(outcome);
        }
        Ok(target)
    }

    /// Navigates the agent's `target` to `url`; a target that cannot show
    /// it is closed (a blank target of ours is not left behind).
    async fn show(&self, browser: &Browser, target: &str, url: &str) -> Result<(), CommandOutcome> {
        let navigated = match self.session(browser, target).await {
            Ok(session) => {
                tracing::debug!(%target, "navigating");
                let navigate = browser.cdp.call(Some(&session), NavigateParams::new(url)).await;
                navigate.map(drop).map_err(|e| error(ErrorCode::BrowserControlUnavailable, &e.to_string()))
            }
            Err(outcome) => Err(outcome),
        };
        if navigated.is_err() {
            self.close(browser, target).await;
        }
        navigated
    }

    /// Closes one of the agent's targets and forgets its session.
    async fn close(&self, browser: &Browser, target: &str) {
        let _ = browser.cdp.call(None, CloseTargetParams::new(TargetId::from(target.to_owned()))).await;
        browser.pages.lock().unwrap().remove(target);
    }

    /// Asks the adapter in `target`, waiting (until `deadline_ms`) for it
    /// to be up in the current document; an adapter that said it cannot
    /// start there ends the wait at once.
    async fn ask(
        &self,
        browser: &Browser,
        target: &str,
        request: &ToPage,
        deadline_ms: u64,
    ) -> Result<PageReply, Unanswered> {
        let session =
            self.session(browser, target).await.map_err(|_| Unanswered::Gone("the target is gone".to_owned()))?;
        loop {
            let ready = browser.ready.notified();
            let (context, failed) = match browser.pages.lock().unwrap().get(target) {
                Some(page) => (page.context, page.failed.clone()),
                None => (None, None),
            };
            if let (None, Some(why)) = (context, failed) {
                return Err(Unanswered::NotStarted(why));
            }
            if let Some(context) = context {
                tracing::debug!(%target, request = request_kind(request), "asking");
                let within = Duration::from_millis(deadline_ms.saturating_sub(now_ms()).max(1));
                let asked = page::ask(&browser.cdp, &session, context, request, within);
                let answer = match request {
                    // A ping has no effect, so it may be given up: a browser
                    // that stopped answering (asleep, stopped) is said so
                    // within seconds rather than at the deadline. Anything
                    // else runs to its end: a prompt being typed is settled
                    // by the journal, never abandoned.
                    ToPage::Ping => tokio::select! {
                        answer = asked => answer,
                        () = unresponsive(&browser.cdp) => return Err(Unanswered::Asleep),
                    },
                    _ => asked.await,
                };
                match answer {
                    Ok(reply) => return Ok(reply),
                    Err(crate::cdp::Error::Closed) => {
                        return Err(Unanswered::Gone("the browser connection closed".into()));
                    }
                    Err(crate::cdp::Error::TimedOut(_)) => {
                        return Err(Unanswered::Gone("the page did not answer in time".into()));
                    }
                    // The document changed under the call: wait for its adapter.
                    Err(_) => forget_context(browser, target, context),
                }
            }
            let left = deadline_ms.saturating_sub(now_ms());
            if left == 0 || browser.cdp.is_closed() {
                return Err(Unanswered::Deadline);
            }
            let _ = tokio::time::timeout(Duration::from_millis(left.min(500)), ready).await;
        }
    }
}

/// How often a wait on a page checks that the browser itself answers, and
/// how long it gives it: a stopped or sleeping browser is told from a busy
/// page within about their sum.
const ALIVE_EVERY: Duration = Duration::from_secs(5);
const ALIVE_WITHIN: Duration = Duration::from_secs(3);
const ASLEEP: &str = "the browser does not answer (asleep, stopped or hung); nothing was typed";

/// Returns once the browser stops answering a browser-level call within
/// [`ALIVE_WITHIN`]; never while it answers (a closed connection is the
/// caller's to see).
async fn unresponsive(cdp: &Cdp) {
    loop {
        tokio::time::sleep(ALIVE_EVERY).await;
        if let Err(crate::cdp::Error::TimedOut(_)) =
            cdp.call_within(ALIVE_WITHIN, None, GetVersionParams::default()).await
        {
            return;
        }
    }
}

fn forget_context(browser: &Browser, target: &str, context: ExecutionContextId) {
    if let Some(page) = browser.pages.lock().unwrap().get_mut(target).filter(|p| p.context == Some(context)) {
        page.context = None;
    }
}

/// The browser's own process id, as DevTools reports it (none if it does not).
async fn browser_pid(cdp: &Cdp, within: Duration) -> Option<u32> {
    let processes = cdp.call_within(within, None, GetProcessInfoParams::default()).await.ok()?.process_info;
    processes.iter().find(|p| p.r#type == "browser").and_then(|p| u32::try_from(p.id).ok())
}

/// The page targets of the browser (ids only).
async fn page_targets(cdp: &Cdp) -> Result<HashSet<String>, crate::cdp::Error> {
    let targets = cdp.call(None, GetTargetsParams::default()).await?.target_infos;
    Ok(targets.into_iter().filter(|t| t.r#type == "page").map(|t| t.target_id.into()).collect())
}

/// Follows one browser connection's events: the adapters' reports, and
/// targets that go away. Ends with the connection.
async fn watch(shared: Arc<Shared>, browser: Arc<Browser>, mut events: tokio::sync::broadcast::Receiver<Event>) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let received = tokio::select! {
            received = events.recv() => received,
            () = shared.stop.cancelled() => break,
        };
        let event = match received {
            Ok(event) => event,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!("missed {n} browser events");
                continue;
            }
            Err(RecvError::Closed) => break,
        };
        tracing::trace!(method = %event.method, session = ?event.session, "browser event");
        match event.method.as_str() {
            crate::cdp::CLOSED => break,
            "Target.targetDestroyed" => {
                let Some(target) = event.params["targetId"].as_str() else { continue };
                browser.pages.lock().unwrap().remove(target);
                let frames = shared.core.lock().unwrap().tab_removed(&target.to_owned());
                if !frames.is_empty() {
                    shared.persist();
                    shared.emit(frames);
                }
            }
            "Target.detachedFromTarget" => {
                let Some(session) = event.params["sessionId"].as_str() else { continue };
                browser.pages.lock().unwrap().retain(|_, p| p.session.as_ref() != session);
            }
            "Runtime.bindingCalled" if event.params["name"] == page::BINDING => {
                let Some(session) = event.session.as_deref() else { continue };
                let target = browser
                    .pages
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(_, p)| p.session.as_ref() == session)
                    .map(|(t, _)| t.clone());
                let (Some(target), Some(payload), Some(context)) = (
                    target,
                    event.params["payload"].as_str(),
                    event.params["executionContextId"].as_i64().map(ExecutionContextId::new),
                ) else {
                    continue;
                };
                let said = page::read_binding(payload, context);
                tracing::debug!(%target, ?said, "the adapter said");
                match said {
                    Some(Said::Ready(context)) => {
                        if let Some(page) = browser.pages.lock().unwrap().get_mut(&target) {
                            page.context = Some(context);
                            page.failed = None;
                        }
                        browser.ready.notify_waiters();
                    }
                    Some(Said::Page(PageReply::Report(report))) => {
                        browser.reports.fetch_add(1, Ordering::SeqCst);
                        let frames =
                            shared.core.lock().unwrap().page_report(&target, &report.url, report.state, report.error);
                        if !frames.is_empty() {
                            shared.persist();
                            shared.emit(frames);
                        }
                    }
                    Some(Said::Page(PageReply::Progress)) => {
                        let frames = shared.core.lock().unwrap().page_progress(&target, now_ms());
                        shared.emit(frames);
                    }
                    // What the page script read; the core keeps a target to its own conversation.
                    Some(Said::Page(PageReply::Callers(seen))) => {
                        let frames = shared.core.lock().unwrap().callers_seen(
                            &target,
                            &seen.conversation,
                            &seen.request_ids,
                            seen.newest.as_deref(),
                            seen.again,
                        );
                        shared.emit(frames);
                    }
                    // Said within a second of the page loading: the command
                    // waiting on this page fails now, with the reason.
                    Some(Said::Failed(why)) => {
                        tracing::warn!(%target, "the adapter did not start: {}", why.detail());
                        if let Some(page) = browser.pages.lock().unwrap().get_mut(&target) {
                            page.context = None;
                            page.failed = Some(why);
                        }
                        browser.ready.notify_waiters();
                    }
                    Some(Said::Page(_)) | None => {}
                }
            }
            _ => {}
        }
    }
    let mut slot = shared.browser.lock().await;
    if slot.as_ref().is_some_and(|b| Arc::ptr_eq(b, &browser)) {
        *slot = None;
    }
    drop(slot);
    if shared.stop.is_cancelled() {
        return;
    }
    let detail = crate::host::loss_detail(browser.pid, Duration::from_secs(2)).await;
    tracing::warn!("lost the browser connection: {detail}");
    // Every managed conversation is out of reach until the browser is back:
    // a host state for each (not a worker's failure), so the daemon and
    // root see which workers this host's browser holds.
    let lost = shared.core.lock().unwrap().browser_lost(&detail);
    shared.emit(lost);
    // A browser that comes back may be a new generation whose targets are
    // all new: reaching it again reports the lost ones at once, so the
    // daemon can reopen their exact conversations without waiting for a
    // command to find out.
    supervise(shared);
}

/// Reaches the browser in the background, with backoff, while the agent
/// manages any conversation and has no connection (or until it stops).
fn supervise(shared: Arc<Shared>) {
    tokio::spawn(async move {
        let mut pause = Duration::from_millis(200);
        // A person's Allow in the browser's dialog is taken up at once.
        let allowed = shared.connector.lock().await.answered();
        while !shared.stop.is_cancelled() && manages_any(&shared) {
            if reach(shared.clone()).await {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = allowed.notified() => {}
                () = shared.stop.cancelled() => return,
            }
            pause = (pause * 2).min(Duration::from_secs(30));
        }
    });
}

fn manages_any(shared: &Shared) -> bool {
    shared.core.lock().unwrap().workers().next().is_some()
}

/// Reaches the browser again (boxed: reaching it starts a new `watch`,
/// which may come back here).
fn reach(shared: Arc<Shared>) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
    Box::pin(async move { shared.reach_browser(false).await.is_ok() })
}

async fn run(shared: Arc<Shared>) {
    let instance = format!("cdp-{}", uuid::Uuid::now_v7().simple());
    loop {
        tokio::select! {
            () = session(&shared, &instance) => {}
            () = shared.stop.cancelled() => break,
        }
        shared.connected.store(false, Ordering::SeqCst);
        *shared.outbox.lock().unwrap() = None;
        tokio::select! {
            () = tokio::time::sleep(shared.config.reconnect_delay) => {}
            () = shared.stop.cancelled() => break,
        }
    }
    shared.connected.store(false, Ordering::SeqCst);
}

/// One session with the daemon: hello, welcome, resync, then commands and
/// heartbeats until either side closes.
async fn session(shared: &Arc<Shared>, instance: &str) {
    if shared.version.lock().unwrap().is_none() {
        // `hello` names the browser: reach it first (bounded; one that
        // cannot be reached is named at a later session). Say what was
        // found: an agent that cannot reach its browser must not be silent.
        let within = shared.config.connect_timeout;
        match tokio::time::timeout(within, shared.browser()).await {
            Ok(Ok(_)) => {}
            Ok(Err(CommandOutcome::Error { code, detail })) => tracing::warn!(
                "no browser session yet ({code}): {detail}; creates are refused with {code} until it answers, \
                 and the daemon shows its workers waiting for the browser (docs/cdp-carrier.md)"
            ),
            Ok(Err(outcome)) => tracing::warn!("no browser session yet: {outcome:?}"),
            Err(_) => tracing::warn!("the browser did not answer within {within:?}; trying again at the next command"),
        }
    }
    let socket = match tokio::time::timeout(shared.config.connect_timeout, dial::dial(&shared.config)).await {
        Ok(Ok(socket)) => socket,
        Ok(Err(why)) => {
            tracing::debug!("the daemon's endpoint did not take the connection: {why}");
            return;
        }
        Err(_) => return,
    };
    let (mut sink, mut stream) = socket.split();
    let browser = shared.version.lock().unwrap().clone();
    let hello = executor_core::hello(&Identity {
        token: shared.config.token.clone(),
        executor_id: shared.config.executor_id.clone(),
        instance_id: instance.to_owned(),
        kind: ExecutorKind::Cdp,
        capabilities: vec![
            "conversation_create".into(),
            "conversation_send".into(),
            protocol::executor::PARK.into(),
            protocol::executor::ROLLOVER.into(),
            protocol::executor::MODEL.into(),
            protocol::executor::EFFORT.into(),
            protocol::executor::PAGE_INSPECT.into(),
        ],
        host: MachineFacts {
            os: std::env::consts::OS.into(),
            browser,
            name: crate::host::machine_name(),
            capacity: shared.config.capacity,
            release: None,
        },
    });
    if sink.send(text(&hello)).await.is_err() {
        return;
    }
    let heartbeat = match stream.next().await {
        Some(Ok(Message::Text(frame))) => match serde_json::from_str::<DaemonFrame>(&frame) {
            Ok(DaemonFrame::Welcome { heartbeat_ms, .. }) => executor_core::heartbeat_every(heartbeat_ms),
            _ => return,
        },
        Some(Ok(Message::Close(close))) => {
            let why = close.map(|c| format!("{} {}", u16::from(c.code), c.reason)).unwrap_or_default();
            tracing::warn!("the daemon refused the session: {why}");
            return;
        }
        _ => return,
    };
    shared.connected.store(true, Ordering::SeqCst);
    tracing::info!(daemon = %shared.config.daemon, "executor session up");
    let resync = shared.core.lock().unwrap().resync();
    for (i, chunk) in resync.chunks(executor_core::RESYNC_CHUNK).enumerate() {
        if i > 0 {
            tokio::time::sleep(executor_core::RESYNC_PAUSE).await;
        }
        for frame in chunk {
            if sink.send(text(frame)).await.is_err() {
                return;
            }
        }
    }
    let (outbox, mut rx) = mpsc::unbounded_channel::<Message>();
    *shared.outbox.lock().unwrap() = Some(outbox.clone());
    // The writer owns the socket's sending half: it ends with this session
    // even when the session is dropped mid-await (the agent stopping), so
    // no half-open session outlives the agent.
    let mut writer = AbortOnDrop(tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            if sink.send(message).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    }));
    let mut beat = tokio::time::interval(heartbeat);
    let mut seq = 0;
    loop {
        tokio::select! {
            message = stream.next() => match message {
                Some(Ok(Message::Text(frame))) => match serde_json::from_str::<DaemonFrame>(&frame) {
                    Ok(DaemonFrame::Command(command)) => {
                        tokio::spawn(handle(shared.clone(), command));
                    }
                    // A call waits on attribution: the worker's page looks now.
                    Ok(DaemonFrame::CallerLookup { worker_id, conversation_id, request_id, until_ms, .. }) => {
                        let tab = shared.core.lock().unwrap().lookup_tab(&worker_id, &conversation_id, &request_id);
                        if let Some(tab) = tab {
                            let shared = shared.clone();
                            tokio::spawn(async move {
                                if let Ok(browser) = shared.browser().await {
                                    let ask = ToPage::Callers { request_id };
                                    let _ = shared.ask(&browser, &tab, &ask, until_ms).await;
                                }
                            });
                        }
                    }
                    // A read-only look at a page, in a target of the agent's own.
                    Ok(DaemonFrame::PageInspect { inspect_id, url, until_ms }) => {
                        let shared = shared.clone();
                        tokio::spawn(async move { shared.inspect_page(inspect_id, url, until_ms).await });
                    }
                    _ => break,
                },
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            _ = beat.tick() => {
                seq += 1;
                let _ = outbox.send(text(&ExecutorFrame::Heartbeat { seq }));
            }
        }
    }
    *shared.outbox.lock().unwrap() = None;
    drop(outbox);
    let _ = tokio::time::timeout(Duration::from_secs(2), &mut writer.0).await;
}

/// A task that is aborted when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Journal, persist, acknowledge, act, record, answer (the order
/// `executor_core` prescribes).
async fn handle(shared: Arc<Shared>, command: Command) {
    let key = command.idempotency_key.clone();
    let begun = shared.core.lock().unwrap().begin(&command, now_ms());
    let plan = match begun {
        Begin::Refused(result) => {
            shared.send(&ack(&command));
            shared.send(&result);
            return;
        }
        Begin::Joined => {
            if shared.persist() {
                shared.send(&ack(&command));
            }
            return;
        }
        Begin::Perform(plan) => plan,
    };
    // ACK means journaled: a command the journal could not keep is neither
    // acknowledged nor performed (the daemon's replay brings it again).
    if !shared.persist() {
        shared.core.lock().unwrap().abandon(&key);
        return;
    }
    shared.send(&ack(&command));
    tracing::debug!(command = %command.command_id, worker = %command.worker_id, plan = plan_kind(&plan), "performing");
    let outcome = perform(&shared, &command, plan).await;
    tracing::debug!(command = %command.command_id, ?outcome, "performed");
    let result = shared.core.lock().unwrap().finish(&key, outcome);
    shared.persist();
    if let Some(result) = result {
        shared.send(&result);
    }
}

async fn perform(shared: &Arc<Shared>, command: &Command, plan: Plan<String>) -> CommandOutcome {
    let worker = &command.worker_id;
    let creating = matches!(command.op, CommandOp::ConversationCreate { .. });
    // What needs no page is answered without reaching the browser.
    match plan {
        Plan::Reply(outcome) => return outcome,
        Plan::Reconcile { tab: None } => {
            return error(ErrorCode::AmbiguousSubmission, "the target closed during submission");
        }
        Plan::Close { tab: None } => {
            let ok = shared.core.lock().unwrap().ok(worker);
            let frames = shared.core.lock().unwrap().closed_by_daemon(worker);
            shared.persist();
            shared.emit(frames);
            return ok;
        }
        _ => {}
    }
    let browser = match shared.browser().await {
        Ok(browser) => browser,
        // The prompt may be in a page this agent cannot reach now: only the
        // page's own record may settle it, never a fresh attempt.
        Err(_) if matches!(plan, Plan::Reconcile { .. }) => {
            return error(ErrorCode::AmbiguousSubmission, "the browser is out of reach while reconciling");
        }
        Err(outcome) => {
            // Nothing reached a page: a create leaves no tab behind.
            if creating {
                shared.core.lock().unwrap().release_unbound(worker);
            }
            return outcome;
        }
    };
    match plan {
        Plan::Reply(outcome) => outcome,
        Plan::Create { url, prompt } => match open_marked(shared, &browser, command, &url).await {
            Ok(target) => {
                shared.send(&ExecutorFrame::ConversationCreated {
                    command_id: command.command_id.clone(),
                    worker_id: worker.clone(),
                });
                submit(shared, &browser, command, &target, &prompt, Submitting::Fresh { creating: true }).await
            }
            Err(outcome) => outcome,
        },
        Plan::Submit { tab, prompt } => {
            // A create is planned as a submit only when resumed after a
            // restart, into the target its journal recorded for it.
            if creating && let Err(outcome) = resume_opened(shared, &browser, command, &tab).await {
                return outcome;
            }
            submit(shared, &browser, command, &tab, &prompt, Submitting::Fresh { creating }).await
        }
        // No steering seam is declared (see protocol::executor::STEER).
        Plan::Steer { .. } => error(ErrorCode::InvalidArgument, "no steering seam on chatgpt.com"),
        Plan::Reconcile { tab: None } => error(ErrorCode::AmbiguousSubmission, "the target closed during submission"),
        // The page settles it: it records a key before clicking and again once confirmed.
        Plan::Reconcile { tab: Some(tab) } => match prompt_of(command) {
            Some(prompt) => submit(shared, &browser, command, &tab, prompt, Submitting::Reconciling { creating }).await,
            None => shared.core.lock().unwrap().ok(worker),
        },
        Plan::Open { url } => match shared.open_target(&browser, &url).await {
            Ok(target) => {
                shared.core.lock().unwrap().tab_opened(worker, target);
                shared.persist();
                shared.core.lock().unwrap().ok(worker)
            }
            Err(outcome) => outcome,
        },
        Plan::Inspect { tab } => {
            let deadline = command.deadline_ms.min(now_ms() + 10_000);
            match shared.ask(&browser, &tab, &ToPage::Ping, deadline).await {
                Ok(PageReply::Report(report)) => {
                    let frames = shared.core.lock().unwrap().inspected(&tab, &report.url, report.state, report.error);
                    shared.persist();
                    shared.emit(frames);
                    shared.core.lock().unwrap().ok(worker)
                }
                Err(Unanswered::NotStarted(why)) => why.outcome(),
                Err(Unanswered::Asleep) => error(ErrorCode::BrowserControlUnavailable, ASLEEP),
                _ => match page_targets(&browser.cdp).await {
                    Ok(alive) if !alive.contains(&tab) => {
                        let frames = shared.core.lock().unwrap().tab_removed(&tab);
                        shared.persist();
                        shared.emit(frames);
                        shared.core.lock().unwrap().ok(worker)
                    }
                    // Alive but silent, or the browser does not answer: not a closed tab.
                    _ => error(ErrorCode::BrowserControlUnavailable, "the managed target does not answer"),
                },
            }
        }
        // The page says whether it may go; the binding is kept (and
        // journaled) before the target closes, so its closing reports nothing.
        Plan::Park { tab } => {
            let deadline = command.deadline_ms.min(now_ms() + 10_000);
            match shared.ask(&browser, &tab, &ToPage::MayClose, deadline).await {
                Ok(PageReply::Report(_)) => {
                    let parked = shared.core.lock().unwrap().parked(worker);
                    if !shared.persist() {
                        if let Some(tab) = parked {
                            shared.core.lock().unwrap().tab_opened(worker, tab);
                        }
                        return error(ErrorCode::Internal, "the agent cannot keep its journal; the tab stays open");
                    }
                    if let Some(tab) = parked {
                        shared.close(&browser, &tab).await;
                    }
                    shared.core.lock().unwrap().park_closed(worker);
                    shared.persist();
                    shared.core.lock().unwrap().ok(worker)
                }
                Ok(PageReply::Refused { code, detail }) => error(code, &detail),
                Err(Unanswered::NotStarted(why)) => why.outcome(),
                _ => error(ErrorCode::TabInUse, "the managed target does not answer; it stays open"),
            }
        }
        // The page agreed before a restart: its target closes now.
        Plan::FinishPark { tab } => {
            shared.close(&browser, &tab).await;
            shared.core.lock().unwrap().park_closed(worker);
            shared.persist();
            shared.core.lock().unwrap().ok(worker)
        }
        Plan::Close { tab } => {
            let ok = shared.core.lock().unwrap().ok(worker);
            if let Some(tab) = tab {
                let close = CloseTargetParams::new(TargetId::from(tab.clone()));
                let _ = browser.cdp.call(None, close).await;
                browser.pages.lock().unwrap().remove(&tab);
            }
            let frames = shared.core.lock().unwrap().closed_by_daemon(worker);
            shared.persist();
            shared.emit(frames);
            ok
        }
    }
}

/// Opens the create's target and journals it by its id *before* it shows
/// any page: a restart then resumes in exactly that target (the core plans
/// a submit into the recorded target), and never adopts a target by its
/// URL, which a person's tab may share. The URL still carries the
/// command's marker, so a person can tell the tab's purpose.
async fn open_marked(
    shared: &Arc<Shared>,
    browser: &Browser,
    command: &Command,
    url: &str,
) -> Result<String, CommandOutcome> {
    let key = &command.idempotency_key;
    shared.core.lock().unwrap().advance(key, Phase::TabOpening);
    shared.persist();
    let target = shared.new_target(browser).await?;
    shared.core.lock().unwrap().tab_opened(&command.worker_id, target.clone());
    if !shared.persist() {
        shared.core.lock().unwrap().release_unbound(&command.worker_id);
        shared.close(browser, &target).await;
        return Err(error(ErrorCode::Internal, "the agent cannot keep its journal; nothing was opened"));
    }
    if let Err(outcome) = shared.show(browser, &target, &format!("{url}{}", tab_marker(key))).await {
        shared.core.lock().unwrap().release_unbound(&command.worker_id);
        shared.persist();
        return Err(outcome);
    }
    Ok(target)
}

/// A create resumed after a restart, in the target its journal recorded:
/// if the restart came before that target was shown the page, it is
/// shown it now (never another target).
async fn resume_opened(
    shared: &Arc<Shared>,
    browser: &Browser,
    command: &Command,
    target: &str,
) -> Result<(), CommandOutcome> {
    let CommandOp::ConversationCreate { project_url, .. } = &command.op else { return Ok(()) };
    let marker = tab_marker(&command.idempotency_key);
    let targets = browser.cdp.call(None, GetTargetsParams::default()).await;
    let shown =
        targets.ok().and_then(|t| t.target_infos.into_iter().find(|t| String::from(t.target_id.clone()) == target));
    match shown {
        Some(info) if info.url.ends_with(&marker) => Ok(()),
        // The core validated the Project URL when it first planned this create.
        Some(_) => {
            let url = project_url.as_deref().unwrap_or("https://chatgpt.com/");
            shared.show(browser, target, &format!("{url}{marker}")).await
        }
        // Nothing reached a page: forgotten, so the replay opens a target anew.
        None => {
            shared.core.lock().unwrap().release_unbound(&command.worker_id);
            shared.persist();
            Err(error(ErrorCode::BrowserControlUnavailable, "the create's target is gone"))
        }
    }
}

/// Whether a prompt is handed to the page for the first time, or its
/// earlier attempt may have reached the page (a restart inside submission).
#[derive(Debug, Clone, Copy)]
enum Submitting {
    /// First attempt; `creating`: the command is a create.
    Fresh { creating: bool },
    /// The page's record settles it; any failure before the page answers
    /// is `AMBIGUOUS_SUBMISSION`, and nothing is released or closed.
    Reconciling { creating: bool },
}

/// Hands the prompt to the page once, recording the phase first; a fresh
/// create refused before any click gives its target up.
async fn submit(
    shared: &Arc<Shared>,
    browser: &Browser,
    command: &Command,
    target: &str,
    prompt: &str,
    how: Submitting,
) -> CommandOutcome {
    let outcome = submit_in(shared, browser, command, target, prompt, how).await;
    if let (Submitting::Fresh { creating: true }, CommandOutcome::Error { code, .. }) = (how, &outcome)
        && !code.outcome_uncertain()
    {
        let released = shared.core.lock().unwrap().release_unbound(&command.worker_id);
        shared.persist();
        if let Some(target) = released {
            shared.close(browser, &target).await;
        }
    }
    outcome
}

async fn submit_in(
    shared: &Arc<Shared>,
    browser: &Browser,
    command: &Command,
    target: &str,
    prompt: &str,
    how: Submitting,
) -> CommandOutcome {
    let (creating, reconciling) = match how {
        Submitting::Fresh { creating } => (creating, false),
        Submitting::Reconciling { creating } => (creating, true),
    };
    let key = &command.idempotency_key;
    match shared.ask(browser, target, &ToPage::Ping, command.deadline_ms).await {
        Ok(_) => {}
        Err(_) if reconciling => {
            return error(ErrorCode::AmbiguousSubmission, "the page that may hold the prompt does not answer");
        }
        Err(Unanswered::Gone(why)) => return error(ErrorCode::BrowserControlUnavailable, &why),
        Err(Unanswered::Asleep) => return error(ErrorCode::BrowserControlUnavailable, ASLEEP),
        Err(Unanswered::NotStarted(why)) => return why.outcome(),
        Err(Unanswered::Deadline) => {
            return error(ErrorCode::DeadlineExceeded, "the page did not load before the deadline");
        }
    }
    shared.core.lock().unwrap().advance(key, Phase::SubmissionStarted);
    // The journal must say a submission started before anything is typed.
    if !shared.persist() {
        return error(ErrorCode::Internal, "the agent cannot keep its journal; nothing was typed");
    }
    let conversation = shared.core.lock().unwrap().managed(&command.worker_id).and_then(|m| m.conversation.clone());
    let request = ToPage::Submit(Submission {
        key: key.clone(),
        prompt: prompt.into(),
        deadline_ms: command.deadline_ms,
        expect_conversation: creating,
        conversation: conversation.map(|c| c.to_string()),
        app: app_of(command).map(str::to_owned),
        model: model_of(command).map(str::to_owned),
        effort: effort_of(command).map(str::to_owned),
    });
    // The submission's own deadline bounds the page; the call waits a little longer for its answer.
    match shared.ask(browser, target, &request, command.deadline_ms.saturating_add(5_000)).await {
        Ok(PageReply::Submitted(report)) => {
            let frames =
                shared.core.lock().unwrap().page_report(&target.to_owned(), &report.url, report.state, report.error);
            shared.emit(frames);
            shared.core.lock().unwrap().advance(key, Phase::Submitted);
            shared.core.lock().unwrap().ok(&command.worker_id)
        }
        Ok(PageReply::Refused { code, detail }) => error(code, &detail),
        Ok(PageReply::Ambiguous { detail }) => error(ErrorCode::AmbiguousSubmission, &detail),
        // Control was lost after the page may have taken it: never resent blindly.
        Ok(_) | Err(_) => error(ErrorCode::AmbiguousSubmission, "browser control was lost while submitting"),
    }
}

/// What a plan does, for logs (a prompt carries an attach identity, which
/// is never logged).
fn plan_kind(plan: &Plan<String>) -> &'static str {
    match plan {
        Plan::Reply(_) => "reply",
        Plan::Create { .. } => "create",
        Plan::Submit { .. } => "submit",
        Plan::Steer { .. } => "steer",
        Plan::Reconcile { .. } => "reconcile",
        Plan::Open { .. } => "open",
        Plan::Inspect { .. } => "inspect",
        Plan::Close { .. } => "close",
        Plan::Park { .. } => "park",
        Plan::FinishPark { .. } => "finish-park",
    }
}

/// What a request to the page asks, for logs.
fn request_kind(request: &ToPage) -> &'static str {
    match request {
        ToPage::Ping => "ping",
        ToPage::Submit(_) => "submit",
        ToPage::Inspect => "inspect",
        ToPage::Callers { .. } => "callers",
        ToPage::Overlay { .. } => "overlay",
        ToPage::MayClose => "may-close",
    }
}

fn text(frame: &ExecutorFrame) -> Message {
    Message::Text(serde_json::to_string(frame).expect("frames serialize").into())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The persisted journal; a fresh one only when there is none yet.
fn load(file: &std::path::Path) -> Result<Core<String>, JournalError> {
    let fail = |why: String| JournalError { file: file.display().to_string(), why };
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| fail(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Core::default()),
        Err(e) => Err(fail(e.to_string())),
    }
}

fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The race a restart mid-flow once lost: the old agent's command
    /// finishing after the halt must not report what its journal refused.
    #[tokio::test]
    async fn a_halted_agent_neither_journals_nor_tells_the_daemon_anything_more() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            daemon: "ws://127.0.0.1:9/executor".into(),
            daemon_pin: None,
            token: String::new(),
            executor_id: "cdp-test".into(),
            browser: Endpoint::UserDataDir(dir.path().join("profile")),
            bundle: crate::page::Bundle::empty(),
            state_file: dir.path().join("agent.json"),
            connect_timeout: Duration::from_secs(1),
            approval_wait: crate::connect::APPROVAL_WAIT,
            reconnect_delay: Duration::from_secs(1),
            capacity: None,
            dedicated: None,
        };
        let shared = Shared::new(config, Core::default());
        let (outbox, mut daemon) = mpsc::unbounded_channel();
        *shared.outbox.lock().unwrap() = Some(outbox);
        assert!(shared.persist(), "a live agent keeps its journal");
        shared.send(&ExecutorFrame::Heartbeat { seq: 1 });
        assert!(daemon.try_recv().is_ok(), "a live agent's frame reaches the daemon");
        shared.halt().await;
        assert!(!shared.persist(), "halted: the journal is not written");
        shared.send(&ExecutorFrame::Heartbeat { seq: 2 });
        assert!(daemon.try_recv().is_err(), "halted: nothing reaches the daemon");
    }

    #[test]
    fn a_journal_that_cannot_be_read_is_refused_and_a_missing_one_starts_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.json");
        assert!(load(&file).unwrap().workers().next().is_none(), "no journal yet: a fresh start");
        std::fs::write(&file, b"{ not json").unwrap();
        let refused = load(&file).unwrap_err().to_string();
        assert!(refused.contains("cannot be read"), "{refused}");
    }
}
