//! The background (Chromium service worker / Firefox event page): the daemon
//! connection and the command router. The browser may stop it at any idle
//! moment, so everything that matters is in `storage.local` (the [`Core`],
//! the pairing, the executor id) and the loader registers every listener at
//! top level; a restart reconnects and the daemon replays what is unfinished.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use executor_core::{
    Begin, Identity, Phase, Plan, ack, app_of, effort_of, error, heartbeat_every, model_of, prompt_of, tab_marker,
};
use js_sys::{Function, Reflect};
use protocol::executor::{
    Command, CommandOp, CommandOutcome, ConversationState, DaemonFrame, ExecutorFrame, ExecutorKind, MachineFacts,
};
use protocol::{ConversationId, ErrorCode};
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

mod connection;
mod inspect;
mod tabs;

use tabs::{FROZEN_LEFT, FROZEN_RELOADED, PAGE_ANSWERS_MS, SUBMIT_GRACE_MS, ask, frozen, show};

use super::{
    call, call_within, from_js, now_ms, object, random_hex, set_timeout, sleep, storage_get, storage_set, to_js,
};
use crate::messages::{FromOverlay, FromPopup, PageReply, Report, Settings, Submission, ToPage};
use crate::pairing::{RECONNECT_FIRST_MS as BACKOFF_MIN_MS, RECONNECT_MOST_MS as BACKOFF_MAX_MS};
use protocol::operator::{Action, View};

/// Notification ids: this prefix and the worker's id.
const NOTICE_PREFIX: &str = "needs-you:";
/// The notifications' icon: a 32×32 square in the surfaces' accent colour.
const NOTICE_ICON: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAYAAABzenr0AAAAL0lEQVR42u3OIQEAAAgDMHIQjPKEgRg3E/Ornr2kEhAQEBAQEBAQEBAQEBAQSAcee1AoiJDX30AAAAAASUVORK5CYII=";

/// The shared executor core, with tab ids as handles.
type Core = executor_core::Core<i32>;

/// How long a managed tab may show a loaded chatgpt.com page whose content
/// script never answers before a command stops waiting for it, saying so:
/// the content script starts at document idle and answers within a second
/// or two (its WebAssembly-free build included), so a page silent this long
/// after loading has no adapter and waiting out the deadline tells nobody why.
const SILENT_AFTER_LOAD_MS: u64 = 20_000;

/// What the options page saves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Pairing {
    /// `ws://127.0.0.1:PORT/executor`.
    pub endpoint: String,
    /// This executor's credential (`exc1.<executor id>.<secret>`), from
    /// `orchestrator pair`; the executor id is the credential's.
    pub token: String,
}

/// What the options page and popup show.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Status {
    /// `connected`, `connecting`, `not paired`, or why the daemon closed.
    pub connection: String,
    /// The executor id the daemon knows this installation by.
    pub executor_id: String,
    /// Managed workers: worker, conversation, tab, state.
    pub workers: Vec<WorkerStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkerStatus {
    pub worker_id: String,
    pub conversation_id: Option<String>,
    pub tab: Option<i32>,
    pub state: Option<ConversationState>,
}

struct Background {
    core: RefCell<Core>,
    /// The credential's executor id once paired (before: a local placeholder).
    executor_id: RefCell<String>,
    instance_id: String,
    /// This machine's OS, as the browser says it (the hello's host facts).
    os: &'static str,
    pairing: RefCell<Option<Pairing>>,
    socket: RefCell<Option<WebSocket>>,
    /// Bumped per connection, so callbacks of an old socket do nothing.
    generation: Cell<u32>,
    connection: RefCell<String>,
    heartbeat: Cell<Option<i32>>,
    heartbeat_seq: Cell<u64>,
    backoff_ms: Cell<u32>,
    reconnect_pending: Cell<bool>,
    /// Whether the connection failed and is being tried again: the failure's
    /// words then stay up through each attempt instead of "connecting".
    retrying: Cell<bool>,
    /// Whether notices are being raised now (one pass at a time).
    raising: Cell<bool>,
    /// The timer of the next notice falling due.
    notice_timer: Cell<Option<i32>>,
    /// Managed tabs being reloaded after a discard, until their page
    /// reports again (the browser may tell of one discard twice).
    reloading: RefCell<std::collections::HashSet<i32>>,
}

thread_local! {
    static BACKGROUND: RefCell<Option<Rc<Background>>> = const { RefCell::new(None) };
}

fn background() -> Option<Rc<Background>> {
    BACKGROUND.with(|b| b.borrow().clone())
}

/// Starts the background once per context: loads state, drops tabs that are
/// gone, repairs managed tabs without a live content script, connects.
#[wasm_bindgen]
pub async fn bg_start(why: js_sys::Promise) {
    if background().is_some() {
        return;
    }
    let mut core: Core = match storage_get("local", "core").await {
        Some(value) => from_js(&value).unwrap_or_default(),
        None => Core::default(),
    };
    // Reported closed by the resync once connected.
    if !tabs::stored_tabs_trusted(why).await {
        core.browser_started();
        let _ = storage_set("local", "core", to_js(&core)).await;
    }
    tabs::mark_session().await;
    let pairing = storage_get("local", "pairing").await.and_then(|v| from_js::<Pairing>(&v).ok());
    // The executor id is the one the credential was issued for.
    let executor_id =
        pairing.as_ref().and_then(|p| crate::pairing::credential_executor_id(&p.token)).unwrap_or_default().to_owned();
    // Bounded: a browser that never answers leaves the OS unsaid, not the start stalled.
    let platform = call_within("runtime.getPlatformInfo", &[], 1_000).await.ok();
    let os = platform.and_then(|p| Reflect::get(&p, &"os".into()).ok()).and_then(|os| os.as_string());
    let bg = Rc::new(Background {
        core: RefCell::new(core),
        executor_id: RefCell::new(executor_id),
        instance_id: random_hex(),
        os: crate::machine_os(os.as_deref().unwrap_or_default()),
        pairing: RefCell::new(pairing),
        socket: RefCell::new(None),
        generation: Cell::new(0),
        connection: RefCell::new("connecting".into()),
        heartbeat: Cell::new(None),
        heartbeat_seq: Cell::new(0),
        backoff_ms: Cell::new(BACKOFF_MIN_MS),
        reconnect_pending: Cell::new(false),
        retrying: Cell::new(false),
        raising: Cell::new(false),
        notice_timer: Cell::new(None),
        reloading: RefCell::default(),
    });
    // A view is only as good as the connection that brought it.
    forget_view();
    BACKGROUND.with(|b| *b.borrow_mut() = Some(bg.clone()));
    let _ =
        call("alarms.create", &["keepalive".into(), object(&[("periodInMinutes", keepalive_minutes().into())])]).await;
    bg.reattach_tabs().await;
    bg.connect();
}

/// How often the keepalive alarm wakes this background up. Firefox
/// unloads an event page 30 s after its last event or call into the
/// browser, socket traffic or not (`IdleManager` in its
/// `ext-backgroundPage.js`; measured: unloaded every ~30 s with a 30 s
/// alarm, the daemon connection with it). An alarm is such an event, kept
/// by the browser's parent: after a sleep it fires before the overdue idle
/// check (earlier deadline), where a call from the page would come too
/// late. Every 10 s, the page stays loaded, connected or not, and one
/// unloaded anyway is back within 10 s. Chrome clamps alarms to 30 s and
/// keeps a service worker whose WebSocket is busy. (`getBrowserInfo` is
/// Firefox's alone.)
fn keepalive_minutes() -> f64 {
    let firefox = super::path(super::api(), "runtime.getBrowserInfo").is_ok_and(|f| f.is_function());
    if firefox { 1.0 / 6.0 } else { 0.5 }
}

/// Drops the last `operatorView`: the popup and overlays then show no
/// controls over a pool the extension no longer hears from.
fn forget_view() {
    wasm_bindgen_futures::spawn_local(async {
        let _ = call("storage.local.remove", &["operator".into()]).await;
    });
}

/// This extension's own origin (`chrome-extension://<id>/`,
/// `moz-extension://<uuid>/`); `None` if the runtime does not say.
fn extension_origin() -> Option<String> {
    let runtime = super::path(super::api(), "runtime").ok()?;
    let get_url: Function = Reflect::get(&runtime, &"getURL".into()).ok()?.dyn_into().ok()?;
    get_url.call1(&runtime, &"".into()).ok()?.as_string().filter(|origin| origin.contains("-extension://"))
}

/// A browser event, forwarded by the loader's top-level listeners.
#[wasm_bindgen]
pub fn bg_event(kind: String, first: JsValue, second: JsValue) {
    let Some(bg) = background() else { return };
    match kind.as_str() {
        "message" => {
            // The popup (an extension page, whether it opened as the action's
            // popup or in a tab): a person blocks or unblocks a managed chat.
            let sender_url = Reflect::get(&second, &"url".into()).ok().and_then(|u| u.as_string());
            let from_extension_page =
                sender_url.zip(extension_origin()).is_some_and(|(url, origin)| url.starts_with(&origin));
            if from_extension_page {
                match from_js(&first) {
                    Ok(FromPopup::Block { tab, blocked }) => {
                        if let Some(worker_id) = bg.core.borrow().worker_of(&(tab as i32)).cloned() {
                            bg.emit(vec![ExecutorFrame::ConversationBlock { worker_id, blocked }]);
                        }
                    }
                    Ok(FromPopup::Act { action, worker_id, run_id, text }) => bg.act(action, worker_id, run_id, text),
                    Ok(FromPopup::Open { worker_id }) => bg.bring_forward(&worker_id),
                    Err(_) => {}
                }
                return;
            }
            // Unsolicited page reports; only managed tabs count (see Core::page_report).
            let tab = Reflect::get(&second, &"tab".into()).ok().and_then(|t| Reflect::get(&t, &"id".into()).ok());
            // The overlay of a managed tab: its controls act on that tab's worker
            // only, and only if it is still the worker the overlay showed.
            if let (Some(tab), Ok(FromOverlay::Act { worker_id, action, text })) =
                (tab.as_ref().and_then(|t| t.as_f64()), from_js(&first))
            {
                let holder = bg.core.borrow().worker_of(&(tab as i32)).map(ToString::to_string);
                if holder.as_deref() == Some(worker_id.as_str()) && !action.is_run_level() {
                    bg.act(action, Some(worker_id), None, text);
                }
                return;
            }
            match (tab.and_then(|t| t.as_f64()), from_js(&first)) {
                (Some(tab), Ok(PageReply::Report(report))) => bg.on_report(tab as i32, &report),
                (Some(tab), Ok(PageReply::Progress)) => {
                    let frames = bg.core.borrow_mut().page_progress(&(tab as i32), now_ms());
                    bg.emit(frames);
                }
                // What the page script read; the core keeps a tab to its own conversation.
                (Some(tab), Ok(PageReply::Callers(seen))) => {
                    let frames = bg.core.borrow_mut().callers_seen(
                        &(tab as i32),
                        &seen.conversation,
                        &seen.request_ids,
                        seen.newest.as_deref(),
                        seen.again,
                    );
                    bg.emit(frames);
                }
                _ => {}
            }
        }
        "tab_removed" => {
            if let Some(tab) = first.as_f64() {
                let frames = bg.core.borrow_mut().tab_removed(&(tab as i32));
                if !frames.is_empty() {
                    bg.emit(frames);
                    wasm_bindgen_futures::spawn_local(async move { bg.persist().await });
                }
            }
        }
        "tab_updated" => {
            let discarded = Reflect::get(&second, &"discarded".into()).ok().and_then(|d| d.as_bool()) == Some(true);
            if let (true, Some(tab)) = (discarded, first.as_f64()) {
                bg.reload_discarded(tab as i32);
            }
        }
        "tab_replaced" => {
            // Chromium gives a tab it discards a new id (measured on 156):
            // the managed tab is followed under it, then reloaded if discarded.
            if let (Some(added), Some(removed)) = (first.as_f64(), second.as_f64()) {
                let (added, removed) = (added as i32, removed as i32);
                if bg.core.borrow_mut().tab_replaced(&removed, added).is_some() {
                    let bg = bg.clone();
                    wasm_bindgen_futures::spawn_local(async move {
                        bg.persist().await;
                        let tab = call("tabs.get", &[added.into()]).await.ok();
                        let discarded = tab.and_then(|t| Reflect::get(&t, &"discarded".into()).ok());
                        if discarded.and_then(|d| d.as_bool()) == Some(true) {
                            bg.reload_discarded(added);
                        }
                    });
                }
            }
        }
        "alarm" => {
            bg.connect();
            wasm_bindgen_futures::spawn_local(async move { bg.raise_notices().await });
        }
        "notification_clicked" => {
            if let Some(worker) = first.as_string().and_then(|id| id.strip_prefix(NOTICE_PREFIX).map(str::to_owned)) {
                bg.bring_forward(&worker);
            }
        }
        "installed" => {
            // A fresh install has nothing to connect with: show the person the
            // pairing form at once instead of leaving them to find it.
            let reason = Reflect::get(&first, &"reason".into()).ok().and_then(|r| r.as_string());
            if reason.as_deref() == Some("install") && bg.pairing.borrow().is_none() {
                wasm_bindgen_futures::spawn_local(async {
                    let _ = call("runtime.openOptionsPage", &[]).await;
                });
            }
        }
        "storage_changed" => {
            let pairing = Reflect::get(&first, &"pairing".into()).ok().filter(|c| c.is_object());
            if let Some(change) = pairing {
                let value = Reflect::get(&change, &"newValue".into()).unwrap_or(JsValue::UNDEFINED);
                *bg.pairing.borrow_mut() = from_js(&value).ok();
                bg.backoff_ms.set(BACKOFF_MIN_MS);
                bg.retrying.set(false);
                bg.disconnect();
                bg.connect();
            }
        }
        _ => {}
    }
}

impl Background {
    async fn persist(&self) {
        let core = to_js(&*self.core.borrow());
        let _ = storage_set("local", "core", core).await;
        self.publish_status().await;
    }

    async fn publish_status(&self) {
        let workers = self
            .core
            .borrow()
            .workers()
            .map(|(w, m)| WorkerStatus {
                worker_id: w.to_string(),
                conversation_id: m.conversation.as_ref().map(ConversationId::to_string),
                tab: m.tab,
                state: m.state,
            })
            .collect();
        let status = Status {
            connection: self.connection.borrow().clone(),
            executor_id: self.executor_id.borrow().clone(),
            workers,
        };
        let _ = storage_set("local", "status", to_js(&status)).await;
    }

    /// Managed tabs that still exist keep their binding; a tab without a
    /// live content script (the extension was reloaded) is reloaded at its
    /// exact conversation so the adapter comes back.
    async fn reattach_tabs(self: &Rc<Self>) {
        let tabs: Vec<i32> = self.core.borrow().workers().filter_map(|(_, m)| m.tab).collect();
        let mut alive = Vec::new();
        for tab in tabs {
            // A stored id may name a person's tab after a browser restart: a
            // tab is kept only while it shows its worker's conversation (or
            // the blank page of a create), and a frozen one is reloaded
            // only when that loses nothing.
            if self.still_ours(tab).await {
                alive.push(tab);
                if ask(tab, &ToPage::Ping, PAGE_ANSWERS_MS).await.is_err() {
                    match frozen(tab).await {
                        true => drop(self.thaw(tab).await),
                        false => {
                            let _ = call("tabs.reload", &[tab.into()]).await;
                        }
                    }
                }
            }
        }
        let frames = self.core.borrow_mut().retain_tabs(|t| alive.contains(t));
        self.emit(frames);
        self.persist().await;
    }

    fn on_frame(self: &Rc<Self>, text: &str) {
        match serde_json::from_str::<DaemonFrame>(text) {
            Ok(DaemonFrame::Welcome { heartbeat_ms, .. }) => {
                self.backoff_ms.set(BACKOFF_MIN_MS);
                self.retrying.set(false);
                self.set_connection("connected");
                self.start_heartbeat(heartbeat_every(heartbeat_ms).as_millis() as u64);
                self.resync();
            }
            Ok(DaemonFrame::Command(command)) => {
                let bg = self.clone();
                wasm_bindgen_futures::spawn_local(async move { bg.handle(command).await });
            }
            // A call waits on attribution: have the worker's page look now.
            Ok(DaemonFrame::CallerLookup { worker_id, conversation_id, request_id, .. }) => {
                let tab = self.core.borrow_mut().lookup_tab(&worker_id, &conversation_id, &request_id);
                if let Some(tab) = tab {
                    wasm_bindgen_futures::spawn_local(async move {
                        let _ = ask(tab, &ToPage::Callers { request_id }, PAGE_ANSWERS_MS).await;
                    });
                }
            }
            // A read-only look at a page, in a tab of the extension's own.
            Ok(DaemonFrame::PageInspect { inspect_id, url, until_ms }) => {
                let bg = self.clone();
                wasm_bindgen_futures::spawn_local(async move { bg.inspect_page(inspect_id, url, until_ms).await });
            }
            Ok(DaemonFrame::OperatorView(view)) => {
                let bg = self.clone();
                wasm_bindgen_futures::spawn_local(async move {
                    let _ = storage_set("local", "operator", to_js(&view)).await;
                    bg.raise_notices().await;
                });
            }
            // The popup shows how its last control went.
            Ok(DaemonFrame::OperatorActed { act_id, changed, error, detail }) => {
                let acted = object(&[
                    ("actId", act_id.into()),
                    ("changed", changed.into()),
                    ("error", error.map(|e| e.as_str()).unwrap_or_default().into()),
                    ("detail", detail.into()),
                ]);
                wasm_bindgen_futures::spawn_local(async move {
                    let _ = storage_set("local", "acted", acted).await;
                });
            }
            // A newer daemon's view this build cannot read: shown no more, never a reconnect loop.
            Err(_) if serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v["type"] == "operatorView") => {
                forget_view();
            }
            // A frame this build does not understand: the daemon is not ours to guess about.
            Err(_) => self.disconnect_and_retry("unreadable daemon frame"),
        }
    }

    /// After (re)connecting: what the daemon may have missed while away,
    /// in chunks within the daemon's frame rate.
    fn resync(self: &Rc<Self>) {
        let frames = self.core.borrow().resync();
        let generation = self.generation.get();
        let bg = self.clone();
        wasm_bindgen_futures::spawn_local(async move {
            for (i, chunk) in frames.chunks(executor_core::RESYNC_CHUNK).enumerate() {
                if i > 0 {
                    sleep(executor_core::RESYNC_PAUSE.as_millis() as i32).await;
                }
                if bg.generation.get() != generation {
                    return;
                }
                bg.emit(chunk.to_vec());
            }
        });
    }

    /// A person's control, sent on as `operatorAct` (the daemon answers
    /// `operatorActed`, which the popup shows). What cannot be sent is said
    /// there too, never dropped in silence.
    fn act(&self, action: Action, worker_id: Option<String>, run_id: Option<String>, text: Option<String>) {
        let act_id = random_hex();
        let parsed = (worker_id.map(|w| w.parse()).transpose(), run_id.map(|r| r.parse()).transpose());
        let refusal = match parsed {
            (Ok(worker_id), Ok(run_id)) => {
                let frame = ExecutorFrame::OperatorAct { act_id: act_id.clone(), action, worker_id, run_id, text };
                let open = self.socket.borrow().as_ref().is_some_and(|s| s.ready_state() == WebSocket::OPEN);
                if open && frame.validate().is_ok() {
                    self.send(&frame);
                    return;
                }
                if open { "the control is malformed" } else { "not connected to the orchestrator: nothing was sent" }
            }
            _ => "the control names no known worker or run",
        };
        let acted = object(&[
            ("actId", act_id.into()),
            ("changed", 0.into()),
            ("error", "NOT_SENT".into()),
            ("detail", refusal.into()),
        ]);
        wasm_bindgen_futures::spawn_local(async move {
            let _ = storage_set("local", "acted", acted).await;
        });
    }

    /// Brings a worker's managed tab (and its window) to the front.
    fn bring_forward(&self, worker_id: &str) {
        let tab = self.core.borrow().workers().find(|(w, _)| w.to_string() == worker_id).and_then(|(_, m)| m.tab);
        let Some(tab) = tab else { return };
        wasm_bindgen_futures::spawn_local(async move {
            if let Ok(info) = call("tabs.update", &[tab.into(), object(&[("active", true.into())])]).await
                && let Some(window) = Reflect::get(&info, &"windowId".into()).ok().filter(|w| w.as_f64().is_some())
            {
                let _ = call("windows.update", &[window, object(&[("focused", true.into())])]).await;
            }
        });
    }

    /// Raises a browser notification for each worker that has needed a
    /// person for 30 s (unless the person turned them off), once per wait,
    /// and looks again when the next one falls due.
    async fn raise_notices(self: &Rc<Self>) {
        // One at a time (each reads and writes `notified`), and one timer.
        if self.raising.replace(true) {
            return;
        }
        self.raise_notices_now().await;
        self.raising.set(false);
    }

    async fn raise_notices_now(self: &Rc<Self>) {
        let Some(view) = storage_get("local", "operator").await.and_then(|v| from_js::<View>(&v).ok()) else { return };
        let settings: Settings =
            storage_get("local", "settings").await.and_then(|v| from_js(&v).ok()).unwrap_or_default();
        let mut raised: Vec<String> =
            storage_get("local", "notified").await.and_then(|v| from_js(&v).ok()).unwrap_or_default();
        let (due, next) = crate::operator::notices_due(&view, now_ms(), &raised);
        if settings.no_notifications {
            return;
        }
        for notice in due {
            let options = object(&[
                ("type", "basic".into()),
                ("iconUrl", NOTICE_ICON.into()),
                ("title", notice.title.as_str().into()),
                ("message", notice.message.as_str().into()),
            ]);
            let id = format!("{NOTICE_PREFIX}{}", notice.worker_id);
            let _ = call("notifications.create", &[id.into(), options]).await;
            raised.push(notice.key);
        }
        // Bounded: the oldest waits are forgotten first.
        let excess = raised.len().saturating_sub(256);
        raised.drain(..excess);
        let _ = storage_set("local", "notified", to_js(&raised)).await;
        if let Some(old) = self.notice_timer.take() {
            let clear: Function = Reflect::get(&js_sys::global(), &"clearTimeout".into()).unwrap().unchecked_into();
            let _ = clear.call1(&JsValue::NULL, &old.into());
        }
        if let Some(at) = next {
            let bg = self.clone();
            let later = Closure::once_into_js(move || {
                bg.notice_timer.set(None);
                wasm_bindgen_futures::spawn_local(async move { bg.raise_notices().await });
            });
            let id = set_timeout(later.unchecked_ref(), (at.saturating_sub(now_ms()) + 50).min(60_000) as i32);
            self.notice_timer.set(Some(id));
        }
    }

    fn on_report(self: &Rc<Self>, tab: i32, report: &Report) {
        self.reloading.borrow_mut().remove(&tab);
        // A managed tab's content script shows the overlay for its worker.
        if let Some(worker_id) = self.core.borrow().worker_of(&tab).map(ToString::to_string) {
            wasm_bindgen_futures::spawn_local(async move {
                let _ = ask(tab, &ToPage::Overlay { worker_id }, PAGE_ANSWERS_MS).await;
            });
        }
        let frames = self.core.borrow_mut().page_report(&tab, &report.url, report.state, report.error);
        if !frames.is_empty() {
            self.emit(frames);
            let bg = self.clone();
            wasm_bindgen_futures::spawn_local(async move { bg.persist().await });
        }
    }

    /// Journal, persist, acknowledge, act, record, answer (the order
    /// `executor_core` prescribes).
    async fn handle(self: Rc<Self>, command: Command) {
        let key = command.idempotency_key.clone();
        let begun = self.core.borrow_mut().begin(&command, now_ms());
        let plan = match begun {
            Begin::Refused(result) => {
                self.send(&ack(&command));
                self.send(&result);
                return;
            }
            Begin::Joined => {
                self.persist().await;
                self.send(&ack(&command));
                return;
            }
            Begin::Perform(plan) => plan,
        };
        self.persist().await;
        self.send(&ack(&command));
        let outcome = self.perform(&command, plan).await;
        let result = self.core.borrow_mut().finish(&key, outcome);
        self.persist().await;
        if let Some(result) = result {
            self.send(&result);
        }
    }

    async fn perform(self: &Rc<Self>, command: &Command, plan: Plan<i32>) -> CommandOutcome {
        let creating = matches!(command.op, CommandOp::ConversationCreate { .. });
        match plan {
            Plan::Reply(outcome) => outcome,
            Plan::Create { url, prompt } => match self.open_marked(command, &url).await {
                Ok(tab) => {
                    self.emit(vec![ExecutorFrame::ConversationCreated {
                        command_id: command.command_id.clone(),
                        worker_id: command.worker_id.clone(),
                    }]);
                    self.submit(command, tab, &prompt, true).await
                }
                Err(outcome) => outcome,
            },
            Plan::Submit { tab, prompt } => {
                // A create is planned as a submit only when resumed after a
                // restart, into the tab its journal recorded for it.
                if creating && let Err(outcome) = self.resume_opened(command, tab).await {
                    return outcome;
                }
                self.submit(command, tab, &prompt, creating).await
            }
            // The core plans no steer for a carrier that declared no seam, and
            // the real site shows none (docs/executor-protocol.md).
            Plan::Steer { .. } => error(ErrorCode::InvalidArgument, "no steering seam on chatgpt.com"),
            // The page settles it: it records a key before clicking and again once confirmed.
            Plan::Reconcile { tab: None } => error(ErrorCode::AmbiguousSubmission, "the tab closed during submission"),
            Plan::Reconcile { tab: Some(tab) } => match prompt_of(command) {
                // The page's record settles it: a page that does not answer
                // leaves the outcome unknown, and nothing is released or closed.
                Some(prompt) => match self.wait_for_page(tab, command.deadline_ms, false).await {
                    Ok(()) => self.submit(command, tab, prompt, creating).await,
                    Err(_) => {
                        error(ErrorCode::AmbiguousSubmission, "the page that may hold the prompt does not answer")
                    }
                },
                None => self.ok(command),
            },
            Plan::Open { url } => {
                let tab = match open_tab(&url).await {
                    Ok(tab) => tab,
                    Err(outcome) => return outcome,
                };
                self.core.borrow_mut().tab_opened(&command.worker_id, tab);
                self.persist().await;
                match self.wait_for_page(tab, command.deadline_ms, true).await {
                    Ok(()) => self.ok(command),
                    Err(outcome) => outcome,
                }
            }
            Plan::Inspect { tab } if !self.still_ours(tab).await => {
                self.lost(tab).await;
                self.ok(command)
            }
            Plan::Inspect { tab } => match ask(tab, &ToPage::Ping, PAGE_ANSWERS_MS).await {
                Ok(PageReply::Report(report)) => {
                    let frames = self.core.borrow_mut().inspected(&tab, &report.url, report.state, report.error);
                    self.emit(frames);
                    self.persist().await;
                    self.ok(command)
                }
                Ok(PageReply::NotStarted(why)) => why.outcome(),
                _ if frozen(tab).await => match self.thaw(tab).await {
                    true => error(ErrorCode::BrowserControlUnavailable, FROZEN_RELOADED),
                    false => error(ErrorCode::BrowserControlUnavailable, FROZEN_LEFT),
                },
                _ => error(ErrorCode::BrowserControlUnavailable, "the managed tab does not answer"),
            },
            Plan::Close { tab } => {
                let ok = self.ok(command);
                if let Some(tab) = tab
                    && self.still_ours(tab).await
                {
                    let _ = call("tabs.remove", &[tab.into()]).await;
                }
                let frames = self.core.borrow_mut().closed_by_daemon(&command.worker_id);
                self.emit(frames);
                self.persist().await;
                ok
            }
            // The page says whether it may go; the binding is kept (and
            // journaled) before the tab closes, so its closing reports nothing.
            Plan::Park { tab } if !self.still_ours(tab).await => {
                self.lost(tab).await;
                self.ok(command)
            }
            Plan::Park { tab } => match ask(tab, &ToPage::MayClose, PAGE_ANSWERS_MS).await {
                Ok(PageReply::Report(_)) => {
                    let parked = self.core.borrow_mut().parked(&command.worker_id);
                    self.persist().await;
                    if let Some(tab) = parked {
                        let _ = call("tabs.remove", &[tab.into()]).await;
                    }
                    self.core.borrow_mut().park_closed(&command.worker_id);
                    self.persist().await;
                    self.ok(command)
                }
                Ok(PageReply::Refused { code, detail }) => error(code, &detail),
                Ok(PageReply::NotStarted(why)) => why.outcome(),
                _ => error(ErrorCode::TabInUse, "the managed tab does not answer; it stays open"),
            },
            // The page agreed before a restart: its tab closes now.
            Plan::FinishPark { tab } => {
                if self.still_ours(tab).await {
                    let _ = call("tabs.remove", &[tab.into()]).await;
                }
                self.core.borrow_mut().park_closed(&command.worker_id);
                self.persist().await;
                self.ok(command)
            }
        }
    }

    fn ok(&self, command: &Command) -> CommandOutcome {
        self.core.borrow().ok(&command.worker_id)
    }

    /// Opens the create's tab blank and journals it by its id *before* it
    /// shows any page, then shows it the page: a restart resumes in exactly
    /// that tab ([`Background::resume_opened`]), and never adopts a tab by
    /// its URL, which a person's tab may share. The URL still carries the
    /// command's marker, so a person can tell the tab's purpose.
    async fn open_marked(&self, command: &Command, url: &str) -> Result<i32, CommandOutcome> {
        let key = &command.idempotency_key;
        self.core.borrow_mut().advance(key, Phase::TabOpening);
        self.persist().await;
        let tab = open_tab("about:blank").await?;
        self.core.borrow_mut().tab_opened(&command.worker_id, tab);
        self.persist().await;
        if let Err(outcome) = show(tab, &format!("{url}{}", tab_marker(key))).await {
            let blank = self.core.borrow_mut().release_unbound(&command.worker_id);
            self.persist().await;
            if let Some(blank) = blank {
                let _ = call("tabs.remove", &[blank.into()]).await;
            }
            return Err(outcome);
        }
        Ok(tab)
    }

    /// A create resumed after a restart, in the tab its journal recorded:
    /// shown its page now if the restart came before it was (never another
    /// tab); a tab that is gone is forgotten, so the replay opens one anew
    /// (no page was ever shown there: nothing was typed).
    async fn resume_opened(&self, command: &Command, tab: i32) -> Result<(), CommandOutcome> {
        let CommandOp::ConversationCreate { project_url, .. } = &command.op else { return Ok(()) };
        let marker = tab_marker(&command.idempotency_key);
        match call("tabs.get", &[tab.into()]).await {
            Ok(info) => {
                let url = Reflect::get(&info, &"url".into()).ok().and_then(|u| u.as_string()).unwrap_or_default();
                let start = project_url.as_deref().unwrap_or(protocol::executor::URL_PREFIX);
                match url.as_str() {
                    _ if url.ends_with(&marker) => Ok(()),
                    // Still the blank tab it opened: shown its page now.
                    "" | "about:blank" => show(tab, &format!("{start}{marker}")).await,
                    // Anything else is not that tab any more (after a
                    // browser restart its id may name a person's tab):
                    // untouched, and the create starts afresh.
                    _ => {
                        self.core.borrow_mut().release_unbound(&command.worker_id);
                        self.persist().await;
                        Err(error(ErrorCode::BrowserControlUnavailable, "the create's tab shows another page"))
                    }
                }
            }
            Err(_) => {
                self.core.borrow_mut().release_unbound(&command.worker_id);
                self.persist().await;
                Err(error(ErrorCode::BrowserControlUnavailable, "the create's tab is gone"))
            }
        }
    }

    /// Hands the prompt to the page once, recording the phase first.
    /// Submits in `tab`; a create refused there releases its tab.
    async fn submit(self: &Rc<Self>, command: &Command, tab: i32, prompt: &str, creating: bool) -> CommandOutcome {
        let outcome = self.submit_in(command, tab, prompt, creating).await;
        if creating {
            self.release_if_refused(command, &outcome).await;
        }
        outcome
    }

    async fn submit_in(self: &Rc<Self>, command: &Command, tab: i32, prompt: &str, creating: bool) -> CommandOutcome {
        let key = &command.idempotency_key;
        // Resumed inside a submission (reconciling), the prompt may be in:
        // only the page's record settles it, so the page is never reloaded
        // and a page that does not answer leaves the outcome unknown.
        let reconciling = self.core.borrow().entry(key).is_some_and(|e| e.phase >= Phase::SubmissionStarted);
        if let Err(outcome) = self.wait_for_page(tab, command.deadline_ms, !reconciling).await {
            return match reconciling {
                true => error(ErrorCode::AmbiguousSubmission, "the page that may hold the prompt does not answer"),
                false => outcome,
            };
        }
        self.core.borrow_mut().advance(key, Phase::SubmissionStarted);
        self.persist().await;
        let conversation = self.core.borrow().managed(&command.worker_id).and_then(|m| m.conversation.clone());
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
        let within = command.deadline_ms.saturating_sub(now_ms()) + SUBMIT_GRACE_MS;
        match ask(tab, &request, i32::try_from(within).unwrap_or(i32::MAX)).await {
            Ok(PageReply::Submitted(report)) => {
                self.on_report(tab, &report);
                self.core.borrow_mut().advance(key, Phase::Submitted);
                self.ok(command)
            }
            Ok(PageReply::Refused { code, detail }) => error(code, &detail),
            Ok(PageReply::Ambiguous { detail }) => error(ErrorCode::AmbiguousSubmission, &detail),
            Ok(_) | Err(_) => error(ErrorCode::AmbiguousSubmission, "the page went away while submitting"),
        }
    }

    /// After a create refused before any click, closes its conversation-less
    /// tab and forgets it, so a retry (after the setup is fixed) starts clean.
    async fn release_if_refused(&self, command: &Command, outcome: &CommandOutcome) {
        let CommandOutcome::Error { code, .. } = outcome else { return };
        if matches!(code, ErrorCode::AmbiguousSubmission | ErrorCode::OutcomeUnknown) {
            return;
        }
        let tab = self.core.borrow_mut().release_unbound(&command.worker_id);
        self.persist().await;
        if let Some(tab) = tab {
            let _ = call("tabs.remove", &[tab.into()]).await;
        }
    }

    /// Waits until the tab's content script answers (the page loaded). A
    /// content script that could not start answers with why, and a loaded
    /// chatgpt.com page whose content script stays silent is given up after
    /// [`SILENT_AFTER_LOAD_MS`]: both end the wait at once with
    /// `ADAPTER_BLOCKED` and the reason, never a bare timeout.
    async fn wait_for_page(&self, tab: i32, deadline_ms: u64, may_reload: bool) -> Result<(), CommandOutcome> {
        let mut loaded_since: Option<u64> = None;
        let mut thawed = false;
        loop {
            match ask(tab, &ToPage::Ping, PAGE_ANSWERS_MS).await {
                Ok(PageReply::NotStarted(why)) => return Err(why.outcome()),
                Ok(_) => return Ok(()),
                Err(_) => {}
            }
            if !thawed && frozen(tab).await {
                match may_reload && self.thaw(tab).await {
                    true => thawed = true,
                    false => return Err(error(ErrorCode::BrowserControlUnavailable, FROZEN_LEFT)),
                }
            }
            let Ok(info) = call("tabs.get", &[tab.into()]).await else {
                return Err(error(ErrorCode::BrowserControlUnavailable, "the managed tab closed"));
            };
            let now = now_ms();
            let text = |key: &str| Reflect::get(&info, &key.into()).ok().and_then(|v| v.as_string());
            let loaded = text("status").as_deref() == Some("complete")
                && text("url").is_some_and(|u| u.starts_with(protocol::executor::URL_PREFIX));
            loaded_since = loaded.then(|| loaded_since.unwrap_or(now));
            if loaded_since.is_some_and(|since| now.saturating_sub(since) > SILENT_AFTER_LOAD_MS) {
                return Err(error(
                    ErrorCode::AdapterBlocked,
                    "the page loaded but its content script never answered: the extension's adapter is not running \
                     there",
                ));
            }
            if now > deadline_ms {
                return Err(error(ErrorCode::DeadlineExceeded, "the page did not load before the deadline"));
            }
            sleep(100).await;
        }
    }
}

/// Opens an inactive tab that the browser should not discard.
async fn open_tab(url: &str) -> Result<i32, CommandOutcome> {
    let refused = || error(ErrorCode::BrowserControlUnavailable, "the browser refused to open a tab");
    let tab = match call("tabs.create", &[object(&[("url", url.into()), ("active", false.into())])]).await {
        Ok(tab) => tab,
        // A browser with no window left (its last one closed, as macOS
        // allows) opens no tab: the tab comes in a window of its own.
        Err(_) => {
            let window = call("windows.create", &[object(&[("url", url.into()), ("focused", false.into())])])
                .await
                .map_err(|_| refused())?;
            let tabs = Reflect::get(&window, &"tabs".into()).map_err(|_| refused())?;
            Reflect::get_u32(&tabs, 0).map_err(|_| refused())?
        }
    };
    let id = Reflect::get(&tab, &"id".into()).ok().and_then(|v| v.as_f64()).map(|v| v as i32);
    let id = id.ok_or_else(|| error(ErrorCode::BrowserControlUnavailable, "the new tab has no id"))?;
    // Not every browser knows autoDiscardable; discarding is detected and repaired anyway.
    let _ = call("tabs.update", &[id.into(), object(&[("autoDiscardable", false.into())])]).await;
    Ok(id)
}

/// The browser's user agent, cut to the daemon's bound for host facts (a
/// longer one would get every hello refused).
fn user_agent() -> Option<String> {
    let navigator = Reflect::get(&js_sys::global(), &"navigator".into()).ok()?;
    let mut agent = Reflect::get(&navigator, &"userAgent".into()).ok()?.as_string()?;
    let mut end = agent.len().min(protocol::executor::FACT_MAX);
    while !agent.is_char_boundary(end) {
        end -= 1;
    }
    agent.truncate(end);
    Some(agent)
}
