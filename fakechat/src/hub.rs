//! fakechat's server-side state: conversations, tabs and what the oracle
//! reports. Every change bumps the conversation's version and wakes the
//! pages long-polling for it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::agent::Memory;
use crate::render::{
    App, AppState, Approval, Editor, Generation, Integrity, Locale, Menu, Role, Screen, Turn, TurnError, View,
};

/// Per-conversation presentation, switchable through the control API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Settings {
    /// What occupies the page.
    pub screen: Screen,
    /// Frontend generation.
    pub generation: Generation,
    /// Composer editor.
    pub editor: Editor,
    /// Labels' language.
    pub locale: Locale,
    /// Intact or broken.
    pub integrity: Integrity,
    /// The picker's trigger opens on `pointerdown` only, as Radix's does
    /// (a report of 2026-09-05: a synthetic `click()` is ignored; public
    /// code that drives the live site presses with pointer events).
    #[serde(default)]
    pub picker_pointer_only: bool,
}

/// One submitted user turn, as the oracle reports it (no text, only its hash).
#[derive(Debug, Clone, Serialize)]
pub struct UserTurn {
    /// SHA-256 of the text, hex.
    pub sha256: String,
    /// Length in bytes.
    pub len: usize,
    /// When it was submitted (ms since epoch).
    pub at_ms: u64,
    /// The tab that submitted it.
    pub tab: Option<String>,
    /// Whether it was a worker bootstrap.
    pub bootstrap: bool,
    /// The follow-up a wake prompt names (`Root gave you follow-up #N`), so
    /// a long run can count each follow-up's deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followup: Option<u64>,
    /// The model the page's picker showed when it was sent (none: the
    /// account has no picker).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The thinking effort the picker showed when it was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The names of the files the person attached in the composer and sent
    /// with it (the page's own attachments: never the product's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<String>,
}

/// How a conversation came to be bound to an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Created in a Project whose configured app it inherits.
    Project,
    /// Picked from the `@` mention popover.
    Mention,
    /// Picked through `+` → More → Developer mode.
    PlusMenu,
}

/// The app a conversation may call, and how it got it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    /// The app's id.
    pub app: String,
    /// How.
    pub route: Route,
}

/// The page's pending app choice, sent with a submission.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Selection {
    /// The app's id.
    pub app: String,
    /// `mention` or `plus_menu`.
    pub route: Route,
}

/// An app of the account, and what is behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppConfig {
    /// What the page shows.
    #[serde(flatten)]
    pub app: App,
    /// Its tools are the orchestrator's MCP server (the others are decoys).
    #[serde(default)]
    pub orchestrator: bool,
    /// The tool catalog stamp ChatGPT cached when it last refreshed the app
    /// (fetched on first use; a stale app keeps an old one).
    #[serde(default)]
    pub catalog: Option<String>,
}

impl AppConfig {
    /// An app labelled `label` (its id assigned by [`Hub::set_apps`]), the
    /// orchestrator's when `orchestrator`, its catalog not yet fetched.
    pub fn new(label: &str, orchestrator: bool, state: AppState) -> Self {
        AppConfig { app: App { id: String::new(), label: label.into(), state }, orchestrator, catalog: None }
    }
}

/// What the model in a conversation can call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAccess {
    /// No app is bound: no orchestrator tools.
    None,
    /// Bound to another app than the orchestrator's.
    OtherApp(String),
    /// The orchestrator's app, with ChatGPT's cached catalog stamp.
    Orchestrator {
        /// The app's id.
        app: String,
        /// The app's name (what a tool call's path names).
        label: String,
        /// The cached catalog stamp, once fetched.
        catalog: Option<String>,
    },
}

/// The catalog stamp a stale app is left with: from before the tools changed.
pub const STALE_CATALOG: &str = "0000000000000000";

/// A conversation.
#[derive(Debug, Default)]
pub struct Conversation {
    /// UUID.
    pub id: String,
    /// `g-p-…` project, if created inside one.
    pub project: Option<String>,
    /// Presentation.
    pub settings: Settings,
    /// The thread.
    pub turns: Vec<Turn>,
    /// An assistant turn is streaming.
    pub generating: bool,
    /// The deferral notice is shown.
    pub deferral: bool,
    /// The stream-recovery notice is shown.
    pub recovery: bool,
    /// ChatGPT's tool-approval card, waiting or answered.
    pub approval: Option<Approval>,
    /// The rate-limit dialog is shown.
    pub rate_limited: bool,
    /// Update counter.
    pub version: u64,
    /// Submitted user turns.
    pub user_turns: Vec<UserTurn>,
    /// Clicks on Retry (the product must never click it).
    pub retry_clicks: u32,
    /// Clicks on the stop button (the product must never click it).
    pub stop_clicks: u32,
    /// Clicks in the page on the tool-approval card's buttons, each by its
    /// words, in order (the product must never click them; a test answers
    /// with [`Hub::answer_approval`]).
    pub approval_clicked: Vec<String>,
    /// Incidents shown, in order.
    pub incidents: Vec<String>,
    /// Scenario errors shown.
    pub errors: Vec<String>,
    /// The scripted agent's memory across turns.
    pub agent: Option<Memory>,
    /// The app its model may call.
    pub binding: Option<Binding>,
    /// It reached its maximum length: every later turn ends at once with
    /// the length notice (the real site lets a last message through, then
    /// shows the notice again).
    pub full: bool,
}

/// A browser tab as its page reports it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tab {
    /// The conversation it shows.
    pub conversation: Option<String>,
    /// Visible now.
    pub visible: bool,
    /// Visibility changes: (visible, at_ms).
    pub changes: Vec<(bool, u64)>,
    /// The path it shows (`/`, `/c/<id>`, …).
    pub path: String,
    /// What the page saw happen in it, whoever did it.
    pub interactions: Interactions,
}

/// Every click, key and focus the page saw (its own script's, a person's,
/// the adapter's synthetic ones alike), counted by fakechat's interaction
/// recorder: a read-only inspection leaves all three at 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interactions {
    /// `pointerdown` and `click` events.
    pub clicks: u32,
    /// `keydown` and `input` events.
    pub keys: u32,
    /// `focus` events (an element's or the window's) and selection changes.
    pub focus: u32,
}

#[derive(Default)]
struct Inner {
    conversations: HashMap<String, Conversation>,
    defaults: Settings,
    tabs: HashMap<String, Tab>,
    apps: Vec<AppConfig>,
    /// Project (`g-p-…` segment) → the app its conversations inherit.
    projects: HashMap<String, String>,
    /// The `@` mention popover does not list apps (only the `+` menu does).
    no_app_mentions: bool,
    /// The models the account's picker offers (none: no picker is shown).
    models: Vec<crate::render::Model>,
}

impl Inner {
    fn app(&self, id: &str) -> Option<&AppConfig> {
        self.apps.iter().find(|a| a.app.id == id)
    }

    fn project_app(&self, project: Option<&str>) -> Option<&AppConfig> {
        self.projects.get(project?).and_then(|id| self.app(id))
    }

    fn views(&self) -> Vec<App> {
        self.apps.iter().map(|a| a.app.clone()).collect()
    }

    /// The account's default model: every page load shows it, whatever was
    /// chosen before (rzn-browser's live note 2026-08-31: "The model resets
    /// between page loads"; a single source, the hostile reading).
    fn default_model(&self) -> Option<String> {
        self.models.iter().find(|m| !m.legacy && !m.disabled).map(|m| m.label.clone())
    }
}

/// Why a submission was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No such conversation.
    Unknown,
    /// The conversation is generating (ChatGPT shows Stop, not Send).
    Busy,
    /// The page shows no composer (loading, signed out, challenge, broken).
    NoComposer,
    /// The chosen app does not exist or is disabled.
    App,
    /// The chosen model is not offered, or disabled.
    Model,
}

/// The shared state.
pub struct Hub {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
    /// The orchestrator's MCP URL the scripted agent calls.
    pub mcp_url: Option<String>,
    /// When set, the scripted agent keeps one MCP session per conversation
    /// across turns (a host that carries its connector's session), instead
    /// of a new one each turn (what ChatGPT is reported to do). The runtime
    /// pool recognises a worker's wake by its admitted session until caller
    /// attribution (#20) proves the conversation instead.
    pub sessions: Mutex<Option<std::collections::HashMap<String, mcp_client::Client>>>,
    /// While set, a prompt the page sends is held before it is recorded (the
    /// site slow to take it): a test can lose browser control mid-send.
    pub hold_submissions: watch::Sender<bool>,
    /// How many submissions are being held now.
    pub held: std::sync::atomic::AtomicUsize,
    /// While set, a recorded prompt waits (bounded) before the model
    /// answers it (the site slow to answer): a test can lose a tab while
    /// its turn is surely still running.
    pub hold_replies: watch::Sender<bool>,
    /// How long after a turn's first tool call starts its request id lands
    /// in the page's data (on a plain message): the real page may take
    /// seconds.
    pub call_delay: watch::Sender<std::time::Duration>,
    /// How long after a tool call starts its own `api_tool` request message
    /// lands in the page's data: forty seconds, as measured live on
    /// 2026-08-21 (totec448-spec/chat-on-steroids `extension/fiber.js` at
    /// 0cce1eecfc290627d3ec829b8ae7a6dac4dbee91, `requestIdsOf`); nothing in
    /// the product waits for it.
    pub request_message_delay: watch::Sender<std::time::Duration>,
    /// How request ids reach the app and the page (a fault knob).
    pub request_ids: watch::Sender<RequestIds>,
}

/// How the connector's request ids reach the orchestrator and the page:
/// as ChatGPT's do ([`RequestIds::Stamped`]), or broken as something on
/// the path would break them, for the canary's attribution check (issue
/// 45). These are faults to plant, not readings of the real site.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RequestIds {
    /// Each call carries `x-request-id`; the page stamps its id.
    #[default]
    Stamped,
    /// A proxy in front of the orchestrator strips the header.
    Stripped,
    /// The page never shows the id (a site change the carrier cannot read).
    Unstamped,
    /// The page shows ids, in another form than the header's.
    OtherForm,
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The follow-up number a wake prompt names (control's `prompts::wake`).
fn followup_of(text: &str) -> Option<u64> {
    let wake = text.split_once("[orchestrator wake v")?.1;
    let after = wake.split_once("follow-up #")?.1;
    let digits = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
    after[..digits].parse().ok()
}

fn hex_sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

impl Hub {
    /// An empty hub.
    pub fn new(mcp_url: Option<String>) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            changed: watch::Sender::new(0),
            mcp_url,
            sessions: Mutex::new(None),
            hold_submissions: watch::Sender::new(false),
            held: std::sync::atomic::AtomicUsize::new(0),
            hold_replies: watch::Sender::new(false),
            call_delay: watch::Sender::new(std::time::Duration::from_millis(300)),
            request_ids: watch::Sender::new(RequestIds::Stamped),
            request_message_delay: watch::Sender::new(std::time::Duration::from_secs(40)),
        }
    }

    /// Keeps one MCP session per conversation from now on (see [`Hub::sessions`]).
    pub fn keep_sessions(&self) {
        self.sessions.lock().unwrap().get_or_insert_with(Default::default);
    }

    /// A receiver that changes whenever anything changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self, conversation: &mut Conversation) {
        conversation.version += 1;
        self.changed.send_modify(|n| *n += 1);
    }

    /// Runs `f` on a conversation and wakes its pages.
    pub fn update<T>(&self, id: &str, f: impl FnOnce(&mut Conversation) -> T) -> Option<T> {
        let mut inner = self.inner.lock().unwrap();
        let conversation = inner.conversations.get_mut(id)?;
        let out = f(conversation);
        self.bump(conversation);
        Some(out)
    }

    /// Reads a conversation.
    pub fn read<T>(&self, id: &str, f: impl FnOnce(&Conversation) -> T) -> Option<T> {
        self.inner.lock().unwrap().conversations.get(id).map(f)
    }

    /// The settings new conversations start with.
    pub fn defaults(&self) -> Settings {
        self.inner.lock().unwrap().defaults
    }

    /// Changes the settings new conversations start with.
    pub fn set_defaults(&self, settings: Settings) {
        self.inner.lock().unwrap().defaults = settings;
        self.changed.send_modify(|n| *n += 1);
    }

    /// Replaces the account's apps; ids are assigned where empty.
    pub fn set_apps(&self, mut apps: Vec<AppConfig>) {
        for (n, a) in apps.iter_mut().enumerate() {
            if a.app.id.is_empty() {
                a.app.id = format!("connector-{n}");
            }
            if a.app.state == AppState::Stale && a.catalog.is_none() {
                a.catalog = Some(STALE_CATALOG.into());
            }
        }
        self.inner.lock().unwrap().apps = apps;
        self.changed.send_modify(|n| *n += 1);
    }

    /// The account's apps.
    pub fn apps(&self) -> Vec<AppConfig> {
        self.inner.lock().unwrap().apps.clone()
    }

    /// Whether the `@` mention popover lists apps (it does by default).
    pub fn set_app_mentions(&self, on: bool) {
        self.inner.lock().unwrap().no_app_mentions = !on;
    }

    /// Makes conversations created in `project` inherit the app labelled
    /// `label` (none: no app). False when no app has that label.
    pub fn set_project_app(&self, project: &str, label: Option<&str>) -> bool {
        let mut inner = self.inner.lock().unwrap();
        match label {
            None => {
                inner.projects.remove(project);
                true
            }
            Some(label) => match inner.apps.iter().find(|a| a.app.label == label) {
                Some(a) => {
                    let id = a.app.id.clone();
                    inner.projects.insert(project.to_owned(), id);
                    true
                }
                None => false,
            },
        }
    }

    /// What the model in `conversation` can call.
    pub fn tool_access(&self, conversation: &str) -> ToolAccess {
        let inner = self.inner.lock().unwrap();
        let Some(binding) = inner.conversations.get(conversation).and_then(|c| c.binding.clone()) else {
            return ToolAccess::None;
        };
        match inner.app(&binding.app) {
            Some(a) if a.orchestrator && a.app.state != AppState::Disabled => ToolAccess::Orchestrator {
                app: a.app.id.clone(),
                label: a.app.label.clone(),
                catalog: a.catalog.clone(),
            },
            Some(a) => ToolAccess::OtherApp(a.app.label.clone()),
            None => ToolAccess::None,
        }
    }

    /// Records the catalog stamp ChatGPT fetched for `app` (first use).
    pub fn cache_catalog(&self, app: &str, stamp: &str) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(a) = inner.apps.iter_mut().find(|a| a.app.id == app && a.catalog.is_none()) {
            a.catalog = Some(stamp.to_owned());
        }
    }

    /// The composer of a page with `menu` open and `pill` chosen (the page
    /// script's popovers; rendered here so fixtures and the live page agree).
    pub fn composer(
        &self,
        conversation: Option<&str>,
        project: Option<&str>,
        menu: Option<Menu>,
        pill: Option<&str>,
        picker: Option<(crate::render::Picker, Option<&str>, Option<&str>)>,
    ) -> Option<View> {
        let mut view = self.view(conversation, project, String::new())?;
        if let Some((open, chosen, effort)) = picker {
            view.picker = Some(open);
            view.model = chosen.map(str::to_owned).or(view.model);
            view.effort = effort.map(str::to_owned).or(view.effort);
        }
        if matches!(menu, Some(Menu::Mention(_))) && self.inner.lock().unwrap().no_app_mentions {
            view.apps.clear();
        }
        view.menu = menu;
        if let Some(id) = pill {
            view.pill = self.inner.lock().unwrap().app(id).map(|a| a.app.clone());
        }
        Some(view)
    }

    /// The view of a conversation, or of a new chat when `id` is `None`.
    pub fn view(&self, id: Option<&str>, project: Option<&str>, nonce: String) -> Option<View> {
        let inner = self.inner.lock().unwrap();
        let Some(id) = id else {
            let s = inner.defaults;
            return Some(View {
                apps: inner.views(),
                pill: inner.project_app(project).map(|a| a.app.clone()),
                screen: s.screen,
                generation: s.generation,
                editor: s.editor,
                locale: s.locale,
                integrity: s.integrity,
                nonce,
                project: project.map(str::to_owned),
                models: inner.models.clone(),
                model: inner.default_model(),
                picker_pointer_only: s.picker_pointer_only,
                ..View::default()
            });
        };
        let c = inner.conversations.get(id)?;
        Some(View {
            screen: c.settings.screen,
            generation: c.settings.generation,
            editor: c.settings.editor,
            locale: c.settings.locale,
            integrity: c.settings.integrity,
            turns: c.turns.clone(),
            generating: c.generating,
            deferral: c.deferral,
            recovery: c.recovery,
            approval: c.approval.clone(),
            rate_limited: c.rate_limited,
            conversation: Some(c.id.clone()),
            nonce,
            project: c.project.clone(),
            version: c.version,
            apps: inner.views(),
            pill: c.binding.as_ref().and_then(|b| inner.app(&b.app)).map(|a| a.app.clone()),
            mention: None,
            menu: None,
            first_paint: false,
            models: inner.models.clone(),
            model: inner.default_model(),
            effort: None,
            picker: None,
            picker_pointer_only: c.settings.picker_pointer_only,
        })
    }

    /// Replaces the models the account's picker offers.
    pub fn set_models(&self, models: Vec<crate::render::Model>) {
        self.inner.lock().unwrap().models = models;
    }

    /// Records a user turn and opens the assistant turn. Creates the
    /// conversation when `id` is `None`. Returns the conversation id.
    pub fn submit(
        &self,
        id: Option<&str>,
        project: Option<&str>,
        text: &str,
        tab: Option<&str>,
        selection: Option<&Selection>,
        model: Option<&str>,
    ) -> Result<String, Refused> {
        let mut inner = self.inner.lock().unwrap();
        let defaults = inner.defaults;
        let model = match model {
            Some(label) if inner.models.iter().any(|m| m.label == label && !m.disabled) => Some(label.to_owned()),
            Some(_) => return Err(Refused::Model),
            None => inner.default_model(),
        };
        if let Some(sel) = selection {
            let usable = inner.app(&sel.app).is_some_and(|a| a.app.state != AppState::Disabled);
            if !usable || sel.route == Route::Project {
                return Err(Refused::App);
            }
        }
        let chosen = selection.map(|s| Binding { app: s.app.clone(), route: s.route });
        let id = match id {
            Some(id) => id.to_owned(),
            None => {
                let id = uuid::Uuid::new_v4().hyphenated().to_string();
                let inherited =
                    inner.project_app(project).map(|a| Binding { app: a.app.id.clone(), route: Route::Project });
                let c = Conversation {
                    id: id.clone(),
                    project: project.map(str::to_owned),
                    settings: defaults,
                    binding: inherited.or(chosen.clone()),
                    ..Conversation::default()
                };
                inner.conversations.insert(id.clone(), c);
                id
            }
        };
        let c = inner.conversations.get_mut(&id).ok_or(Refused::Unknown)?;
        if c.generating {
            return Err(Refused::Busy);
        }
        if c.settings.screen != Screen::Chat || c.settings.integrity == Integrity::Missing {
            return Err(Refused::NoComposer);
        }
        if c.binding.is_none() {
            c.binding = chosen;
        }
        c.user_turns.push(UserTurn {
            sha256: hex_sha256(text),
            len: text.len(),
            at_ms: now_ms(),
            tab: tab.map(str::to_owned),
            bootstrap: text.contains("[orchestrator bootstrap v")
                || text.contains("[orchestrator rollover bootstrap v"),
            followup: followup_of(text),
            model,
            effort: None,
            attachments: Vec::new(),
        });
        c.turns.push(Turn { role: Role::User, text: text.to_owned(), finished: true, error: None, calls: Vec::new() });
        c.turns.push(Turn {
            role: Role::Assistant,
            text: String::new(),
            finished: false,
            error: None,
            calls: Vec::new(),
        });
        c.generating = true;
        self.bump(c);
        Ok(id)
    }

    /// Appends streamed text to the open assistant turn.
    pub fn say(&self, id: &str, text: &str) {
        self.update(id, |c| {
            if let Some(turn) = c.turns.last_mut().filter(|t| t.role == Role::Assistant) {
                turn.text.push_str(text);
            }
        });
    }

    /// A tool call starts in the open assistant turn: its collapsed row
    /// shows at once; its request id is the turn's (`request_id`, or the
    /// id of the turn's calls so far, or a new one), and lands in the
    /// page's data after [`Hub::call_delay`], its request message after
    /// [`Hub::request_message_delay`]. Returns the request id.
    pub fn tool_call(self: &std::sync::Arc<Self>, id: &str, request_id: Option<&str>, tool: &str, app: &str) -> String {
        let mint = || format!("wfr_{}", uuid::Uuid::new_v4().simple());
        let mut chosen = request_id.map(str::to_owned);
        let mut index = None;
        self.update(id, |c| {
            let at = c.turns.len().saturating_sub(1);
            if let Some(turn) = c.turns.last_mut().filter(|t| t.role == Role::Assistant) {
                let request_id =
                    chosen.clone().or_else(|| turn.calls.last().map(|k| k.request_id.clone())).unwrap_or_else(mint);
                index = Some((at, turn.calls.len()));
                let other_form = *self.request_ids.borrow() == RequestIds::OtherForm;
                turn.calls.push(crate::render::ToolCall {
                    shown_id: other_form.then(|| request_id.replacen("wfr_", "req_", 1)),
                    request_id: request_id.clone(),
                    tool: tool.into(),
                    app: app.into(),
                    stamped: false,
                    shown: false,
                });
                chosen = Some(request_id);
            }
        });
        let request_id = chosen.unwrap_or_else(mint);
        let Some(index) = index else { return request_id };
        let land = |delay: std::time::Duration, mark: fn(&mut crate::render::ToolCall)| {
            let (hub, id, request_id) = (self.clone(), id.to_owned(), request_id.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                hub.update(&id, |c| {
                    let call = c.turns.get_mut(index.0).and_then(|t| t.calls.get_mut(index.1));
                    if let Some(call) = call.filter(|k| k.request_id == request_id) {
                        mark(call);
                    }
                });
            });
        };
        if *self.request_ids.borrow() == RequestIds::Unstamped {
            return request_id;
        }
        land(*self.call_delay.borrow(), |k| k.stamped = true);
        land(*self.request_message_delay.borrow(), |k| k.shown = true);
        request_id
    }

    /// Shows ChatGPT's tool-approval card for `app` in the conversation's
    /// last turn (`None`: takes it away), as ChatGPT does when it holds an
    /// app's tool call for the person to allow or deny; the turn goes on
    /// showing Stop meanwhile. False when there is no such conversation.
    /// Nothing in fakechat answers it by itself: a test does, with
    /// [`Hub::answer_approval`] (the person), or a click on its buttons in
    /// the page does, counted by [`Hub::approval_clicks`].
    pub fn approval(&self, id: &str, app: Option<&str>) -> bool {
        self.update(id, |c| {
            c.approval =
                app.map(|app| Approval { app: app.to_owned(), answered: false, turn: c.turns.len().saturating_sub(1) });
            if c.approval.is_some() {
                c.incidents.push("approval_required".into());
            }
        })
        .is_some()
    }

    /// The person answers the card (allow or deny alike): it stays, its
    /// buttons disabled, as the live card does. False when no card waits.
    pub fn answer_approval(&self, id: &str) -> bool {
        self.update(id, |c| match c.approval.as_mut() {
            Some(card) if !card.answered => {
                card.answered = true;
                true
            }
            _ => false,
        })
        .unwrap_or(false)
    }

    /// A click in the page on one of the card's buttons (`button`: its
    /// words), whoever made it: counted, and it answers a waiting card as
    /// the live card's buttons do. False when there is no such conversation.
    pub fn click_approval(&self, id: &str, button: &str) -> bool {
        self.update(id, |c| {
            c.approval_clicked.push(button.to_owned());
            if let Some(card) = c.approval.as_mut() {
                card.answered = true;
            }
        })
        .is_some()
    }

    /// How many clicks the page made on the tool-approval card in the
    /// conversation (0 for an unknown one).
    pub fn approval_clicks(&self, id: &str) -> u32 {
        self.read(id, |c| c.approval_clicked.len() as u32).unwrap_or(0)
    }

    /// Shows (or hides) the stream-recovery notice ("Connection interrupted.
    /// Waiting for the complete answer") in the last turn, whether or not
    /// the answer looks finished. False when there is no such conversation.
    pub fn recovery(&self, id: &str, on: bool) -> bool {
        self.update(id, |c| {
            c.recovery = on;
            if on {
                c.incidents.push("recovery".into());
            }
        })
        .is_some()
    }

    /// Ends the open assistant turn: finished, or with an error inside it.
    pub fn end_turn(&self, id: &str, error: Option<TurnError>) {
        self.update(id, |c| {
            c.generating = false;
            c.deferral = false;
            c.recovery = false;
            if let Some(turn) = c.turns.last_mut().filter(|t| t.role == Role::Assistant) {
                turn.finished = error.is_none();
                turn.error = error;
            }
            if let Some(e) = error {
                c.incidents.push(incident_name(e).into());
            }
        });
    }

    /// Records a tab's visibility.
    pub fn tab(&self, tab: &str, conversation: Option<&str>, visible: bool, path: &str, interactions: Interactions) {
        let mut inner = self.inner.lock().unwrap();
        let entry = inner.tabs.entry(tab.to_owned()).or_default();
        entry.path = path.to_owned();
        // Reports may arrive out of order: a count never goes back.
        let seen = &mut entry.interactions;
        seen.clicks = seen.clicks.max(interactions.clicks);
        seen.keys = seen.keys.max(interactions.keys);
        seen.focus = seen.focus.max(interactions.focus);
        entry.conversation = conversation.map(str::to_owned).or(entry.conversation.take());
        if entry.changes.last().is_none_or(|(v, _)| *v != visible) {
            entry.changes.push((visible, now_ms()));
        }
        entry.visible = visible;
    }

    /// The oracle's report: every conversation's submitted turns, Retry
    /// clicks, incidents and state, and every tab's visibility.
    pub fn oracle(&self) -> serde_json::Value {
        let inner = self.inner.lock().unwrap();
        let binding = |c: &Conversation| {
            c.binding.as_ref().map(|b| {
                let label = inner.app(&b.app).map(|a| a.app.label.clone());
                serde_json::json!({ "app": label, "route": b.route })
            })
        };
        let mut conversations: Vec<&Conversation> = inner.conversations.values().collect();
        conversations.sort_by(|a, b| a.id.cmp(&b.id));
        let conversations: serde_json::Map<String, serde_json::Value> = conversations
            .into_iter()
            .map(|c| {
                let last = c.turns.last();
                let state = if c.settings.screen != Screen::Chat {
                    format!("{:?}", c.settings.screen).to_lowercase()
                } else if c.generating {
                    "generating".into()
                } else if last.is_some_and(|t| t.error.is_some()) {
                    "error".into()
                } else if last.is_some() {
                    "idle".into()
                } else {
                    "ready".into()
                };
                (
                    c.id.clone(),
                    serde_json::json!({
                        "project": c.project,
                        "binding": binding(c),
                        "settings": c.settings,
                        "state": state,
                        "user_turns": c.user_turns,
                        "retry_clicks": c.retry_clicks,
                        "stop_clicks": c.stop_clicks,
                        "approval_clicked": c.approval_clicked,
                        "incidents": c.incidents,
                        "approval": c.approval,
                        "errors": c.errors,
                        "version": c.version,
                    }),
                )
            })
            .collect();
        serde_json::json!({ "conversations": conversations, "tabs": inner.tabs, "defaults": inner.defaults })
    }
}

/// The oracle's name of a turn error.
pub fn incident_name(e: TurnError) -> &'static str {
    match e {
        TurnError::DeliveryTimeout => "delivery_timeout",
        TurnError::SomethingWentWrong => "something_went_wrong",
        TurnError::TooLong => "conversation_too_long",
    }
}
