//! fakechat's HTTP surface: the pages at the real site's paths, the page
//! script, the fake backend the page script calls, the control API tests use
//! to switch states, and the oracle tests assert against.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::agent;
use crate::hub::{AppConfig, Hub, Refused, Selection, Settings, incident_name};
use crate::render::{self, Editor, Generation, Integrity, Locale, Menu, Screen, TurnError};

/// The page's Content-Security-Policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Csp {
    /// Nonce scripts only, no `'wasm-unsafe-eval'`: the worst case for extensions.
    Strict,
    /// Like the captured real header: nonce scripts plus `'wasm-unsafe-eval'`.
    RealLike,
    /// No CSP header.
    None,
}

impl Csp {
    fn header(self, nonce: &str) -> Option<String> {
        let common = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
                      frame-ancestors 'none'; base-uri 'none'; object-src 'none'";
        match self {
            Csp::Strict => Some(format!("{common}; script-src 'self' 'nonce-{nonce}'")),
            Csp::RealLike => Some(format!("{common}; script-src 'nonce-{nonce}' 'self' 'wasm-unsafe-eval'")),
            Csp::None => None,
        }
    }
}

struct App {
    hub: Arc<Hub>,
    csp: Csp,
}

/// The router over `hub`.
pub fn router(hub: Arc<Hub>, csp: Csp) -> Router {
    let app = Arc::new(App { hub, csp });
    Router::new()
        .route("/", get(new_chat))
        .route("/c/{id}", get(conversation))
        .route("/g/{project}/project", get(project_chat))
        .route("/g/{project}/c/{id}", get(project_conversation))
        .route("/_fakechat/app.js", get(script))
        .route("/_fakechat/api/submit", post(submit))
        .route("/_fakechat/api/view", get(view))
        .route("/_fakechat/api/retry", post(retry))
        .route("/_fakechat/api/stop", post(stop))
        .route("/_fakechat/api/approval", post(approval))
        .route("/_fakechat/api/tab", post(tab))
        .route("/_fakechat/api/composer", get(composer))
        .route("/_fakechat/control", post(control))
        .route("/_fakechat/control/apps", post(control_apps))
        .route("/_fakechat/control/models", post(control_models))
        .route("/_fakechat/oracle", get(oracle))
        .route("/_fakechat/healthz", get(|| async { "ok" }))
        .with_state(app)
}

fn nonce() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `g-p-<32 hex>` optionally followed by `-<slug>`; returns the project id part.
fn project_id(segment: &str) -> Option<&str> {
    let hex = segment.strip_prefix("g-p-")?;
    let (id, rest) = hex.split_at_checked(32)?;
    let slug_ok = rest.is_empty()
        || rest
            .strip_prefix('-')
            .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    (id.bytes().all(|b| b.is_ascii_hexdigit()) && slug_ok).then_some(id)
}

fn render_page(app: &App, conversation: Option<&str>, project: Option<&str>) -> Response {
    let nonce = nonce();
    let Some(view) = app.hub.view(conversation, project, nonce.clone()) else {
        return (StatusCode::NOT_FOUND, Html("<!DOCTYPE html><title>ChatGPT</title><p>Conversation not found</p>"))
            .into_response();
    };
    // A page load is the server's first paint; the page script hydrates it.
    let view = render::View { first_paint: true, ..view };
    let mut response = Html(render::page(&view)).into_response();
    if let Some(csp) = app.csp.header(&nonce) {
        response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_str(&csp).expect("ascii"));
    }
    response
}

async fn new_chat(State(app): State<Arc<App>>) -> Response {
    render_page(&app, None, None)
}

async fn conversation(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    render_page(&app, Some(&id), None)
}

async fn project_chat(State(app): State<Arc<App>>, Path(project): Path<String>) -> Response {
    match project_id(&project) {
        Some(_) => render_page(&app, None, Some(&project)),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn project_conversation(State(app): State<Arc<App>>, Path((project, id)): Path<(String, String)>) -> Response {
    if project_id(&project).is_none()
        || app.hub.read(&id, |c| c.project.clone()).flatten().as_deref() != Some(project.as_str())
    {
        return StatusCode::NOT_FOUND.into_response();
    }
    render_page(&app, Some(&id), None)
}

async fn script() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("../static/app.js")).into_response()
}

#[derive(Deserialize)]
struct SubmitBody {
    conversation: Option<String>,
    project: Option<String>,
    text: String,
    tab: Option<String>,
    /// The app the page's composer had chosen, if any.
    app: Option<Selection>,
    /// The model the page's picker was set to, if a person (or the adapter) chose one.
    model: Option<String>,
    /// The files attached in the composer (their names), sent with the text.
    #[serde(default)]
    attachments: Vec<String>,
    /// The thinking effort the page's picker showed (generation B).
    #[serde(default)]
    effort: Option<String>,
}

/// At most this many attachments, each name at most [`ATTACHMENT_NAME_MAX`] bytes.
const ATTACHMENTS_MAX: usize = 10;
const ATTACHMENT_NAME_MAX: usize = 255;

async fn submit(State(app): State<Arc<App>>, Json(body): Json<SubmitBody>) -> Response {
    // Held (bounded) while a test says so; a page that goes away meanwhile
    // drops this request and nothing is recorded.
    let mut hold = app.hub.hold_submissions.subscribe();
    if *hold.borrow_and_update() {
        use std::sync::atomic::Ordering;
        app.hub.held.fetch_add(1, Ordering::SeqCst);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(60), hold.wait_for(|held| !held)).await;
        app.hub.held.fetch_sub(1, Ordering::SeqCst);
    }
    let text = body.text.trim().to_owned();
    if body.attachments.len() > ATTACHMENTS_MAX || body.attachments.iter().any(|n| n.len() > ATTACHMENT_NAME_MAX) {
        return (StatusCode::BAD_REQUEST, "too many attachments, or a name too long").into_response();
    }
    // A file alone may be sent (chatgpt.com sends an attachment without text).
    if text.is_empty() && body.attachments.is_empty() {
        return (StatusCode::BAD_REQUEST, "empty prompt").into_response();
    }
    if body.project.as_deref().is_some_and(|p| project_id(p).is_none()) {
        return (StatusCode::BAD_REQUEST, "bad project").into_response();
    }
    let id = match app.hub.submit(
        body.conversation.as_deref(),
        body.project.as_deref(),
        &text,
        body.tab.as_deref(),
        body.app.as_ref(),
        body.model.as_deref(),
    ) {
        Ok(id) => id,
        Err(Refused::Unknown) => return StatusCode::NOT_FOUND.into_response(),
        Err(Refused::App) => return (StatusCode::BAD_REQUEST, "no such usable app").into_response(),
        Err(Refused::Model) => return (StatusCode::BAD_REQUEST, "no such usable model").into_response(),
        Err(Refused::Busy | Refused::NoComposer) => return StatusCode::CONFLICT.into_response(),
    };
    // The turn was just opened and the conversation is busy until it
    // ends: no other submission lands in between.
    let effort = body.effort.as_ref().filter(|e| e.len() <= ATTACHMENT_NAME_MAX).cloned();
    app.hub.update(&id, |c| {
        if let Some(turn) = c.user_turns.last_mut() {
            turn.attachments = body.attachments.clone();
            turn.effort = effort;
        }
    });
    tokio::spawn(agent::respond(app.hub.clone(), id.clone(), text));
    let url = match app.hub.read(&id, |c| c.project.clone()).flatten() {
        Some(project) => format!("/g/{project}/c/{id}"),
        None => format!("/c/{id}"),
    };
    Json(serde_json::json!({ "conversation": id, "url": url })).into_response()
}

#[derive(Deserialize)]
struct ViewQuery {
    conversation: String,
    after: u64,
}

/// Long poll: returns as soon as the conversation's version passes `after`
/// (or after 25 s with the current view).
async fn view(State(app): State<Arc<App>>, Query(q): Query<ViewQuery>) -> Response {
    let mut changes = app.hub.subscribe();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(25);
    loop {
        let Some(view) = app.hub.view(Some(&q.conversation), None, String::new()) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        if view.version > q.after || tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            return Json(serde_json::json!({
                "version": view.version,
                "layout": view.layout(),
                "thread": render::thread(&view),
                "pageData": render::page_data(&view),
                "actions": render::actions(&view),
                "apps": render::apps(&view),
            }))
            .into_response();
        }
    }
}

#[derive(Deserialize)]
struct ComposerQuery {
    conversation: Option<String>,
    project: Option<String>,
    /// `root`, `more`, `apps`, `mention`, or absent (closed).
    menu: Option<String>,
    #[serde(default)]
    query: String,
    /// The chosen app's id.
    pill: Option<String>,
    /// The model picker: `open`, `advanced`, `submenu`, or absent.
    picker: Option<String>,
    /// The model the page chose, if any (else the account's default shows).
    model: Option<String>,
    /// The effort the page chose, if any.
    effort: Option<String>,
}

/// The composer's app strip and popover for the page script, rendered by
/// the same code as the page.
async fn composer(State(app): State<Arc<App>>, Query(q): Query<ComposerQuery>) -> Response {
    let menu = match q.menu.as_deref() {
        None | Some("") => None,
        Some("root") => Some(Menu::Root),
        Some("more") => Some(Menu::More),
        Some("apps") => Some(Menu::Apps),
        Some("mention") => Some(Menu::Mention(q.query.clone())),
        Some(_) => return (StatusCode::BAD_REQUEST, "unknown menu").into_response(),
    };
    let picker = match q.picker.as_deref() {
        None | Some("") => None,
        Some("open") => Some(render::Picker::Open),
        Some("advanced") => Some(render::Picker::Advanced),
        Some("submenu") => Some(render::Picker::Submenu),
        Some("effort") => Some(render::Picker::Effort),
        Some(_) => return (StatusCode::BAD_REQUEST, "unknown picker").into_response(),
    };
    let conversation = q.conversation.as_deref().filter(|c| !c.is_empty());
    let project = q.project.as_deref().filter(|p| !p.is_empty());
    let chosen = q.model.as_deref().filter(|m| !m.is_empty());
    let effort = q.effort.as_deref().filter(|e| !e.is_empty());
    match app.hub.composer(conversation, project, menu, q.pill.as_deref(), picker.map(|p| (p, chosen, effort))) {
        Some(view) => {
            // `mention`: the chosen app as generation B's `@` route puts it in the editor.
            let mention = view.pill.as_ref().map(render::mention);
            Json(serde_json::json!({
                "apps": render::apps(&view),
                "popover": render::menu(&view),
                "mention": mention,
                "picker": render::picker(&view),
            }))
            .into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The account's apps and the Projects' inherited apps.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppsControl {
    /// Replaces the app list when present.
    apps: Option<Vec<AppConfig>>,
    /// Project segment (`g-p-…`) → the label of the app its conversations inherit (null: none).
    #[serde(default)]
    projects: std::collections::HashMap<String, Option<String>>,
    /// Whether the `@` mention popover lists apps.
    mentions: Option<bool>,
}

/// The models the account's picker offers (none: no picker shows).
async fn control_models(State(app): State<Arc<App>>, Json(models): Json<Vec<render::Model>>) -> Response {
    app.hub.set_models(models);
    StatusCode::NO_CONTENT.into_response()
}

async fn control_apps(State(app): State<Arc<App>>, Json(c): Json<AppsControl>) -> Response {
    if let Some(apps) = c.apps {
        app.hub.set_apps(apps);
    }
    if let Some(on) = c.mentions {
        app.hub.set_app_mentions(on);
    }
    for (project, label) in &c.projects {
        if project_id(project).is_none() {
            return (StatusCode::BAD_REQUEST, "bad project").into_response();
        }
        if !app.hub.set_project_app(project, label.as_deref()) {
            return (StatusCode::BAD_REQUEST, "no app with that label").into_response();
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
struct RetryBody {
    conversation: String,
}

async fn retry(State(app): State<Arc<App>>, Json(body): Json<RetryBody>) -> StatusCode {
    match app.hub.update(&body.conversation, |c| c.retry_clicks += 1) {
        Some(()) => StatusCode::NO_CONTENT,
        None => StatusCode::NOT_FOUND,
    }
}

/// A click on the stop button, recorded for the oracle (fakechat does not
/// stop its scripted turn: nothing the product does may click it).
async fn stop(State(app): State<Arc<App>>, Json(body): Json<RetryBody>) -> StatusCode {
    match app.hub.update(&body.conversation, |c| c.stop_clicks += 1) {
        Some(()) => StatusCode::NO_CONTENT,
        None => StatusCode::NOT_FOUND,
    }
}

#[derive(Deserialize)]
struct ApprovalBody {
    conversation: String,
    /// The clicked button's words.
    button: String,
}

/// A click in the page on the tool-approval card's buttons, recorded for
/// the oracle (the product must never click them); it answers the card, as
/// on the live page.
async fn approval(State(app): State<Arc<App>>, Json(body): Json<ApprovalBody>) -> StatusCode {
    match app.hub.click_approval(&body.conversation, &body.button) {
        true => StatusCode::NO_CONTENT,
        false => StatusCode::NOT_FOUND,
    }
}

#[derive(Deserialize)]
struct TabBody {
    tab: String,
    conversation: Option<String>,
    visible: bool,
    #[serde(default)]
    path: String,
    #[serde(default)]
    interactions: crate::hub::Interactions,
}

async fn tab(State(app): State<Arc<App>>, Json(body): Json<TabBody>) -> StatusCode {
    let path: String = body.path.chars().take(512).collect();
    app.hub.tab(&body.tab, body.conversation.as_deref(), body.visible, &path, body.interactions);
    StatusCode::NO_CONTENT
}

/// A state switch. Absent fields are left as they are; without a
/// `conversation` it changes the defaults for new chats.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Control {
    conversation: Option<String>,
    screen: Option<Screen>,
    generation: Option<Generation>,
    editor: Option<Editor>,
    locale: Option<Locale>,
    integrity: Option<Integrity>,
    /// Start (true) or stop (false) a streaming assistant turn.
    generating: Option<bool>,
    deferral: Option<bool>,
    rate_limited: Option<bool>,
    /// End the current turn with this error inside it.
    turn_error: Option<TurnError>,
}

fn apply(settings: &mut Settings, c: &Control) {
    settings.screen = c.screen.unwrap_or(settings.screen);
    settings.generation = c.generation.unwrap_or(settings.generation);
    settings.editor = c.editor.unwrap_or(settings.editor);
    settings.locale = c.locale.unwrap_or(settings.locale);
    settings.integrity = c.integrity.unwrap_or(settings.integrity);
}

async fn control(State(app): State<Arc<App>>, Json(c): Json<Control>) -> Response {
    let Some(id) = c.conversation.clone() else {
        let mut defaults = app.hub.defaults();
        apply(&mut defaults, &c);
        app.hub.set_defaults(defaults);
        return StatusCode::NO_CONTENT.into_response();
    };
    let found = app.hub.update(&id, |conv| {
        apply(&mut conv.settings, &c);
        if let Some(screen) = c.screen.filter(|s| *s != Screen::Chat) {
            conv.incidents.push(format!("{screen:?}").to_lowercase());
        }
        if let Some(on) = c.deferral {
            conv.deferral = on;
            if on {
                conv.incidents.push("deferral".into());
            }
        }
        if let Some(on) = c.rate_limited {
            conv.rate_limited = on;
            if on {
                conv.incidents.push("rate_limited".into());
            }
        }
        if let Some(on) = c.generating {
            conv.generating = on;
            let open = conv
                .turns
                .last()
                .is_some_and(|t| t.role == render::Role::Assistant && !t.finished && t.error.is_none());
            if on && !open {
                conv.turns.push(render::Turn {
                    role: render::Role::Assistant,
                    text: "Thinking".into(),
                    finished: false,
                    error: None,
                    calls: Vec::new(),
                });
            }
            if !on && let Some(turn) = conv.turns.last_mut().filter(|t| t.role == render::Role::Assistant) {
                turn.finished = true;
            }
        }
        if let Some(error) = c.turn_error {
            conv.generating = false;
            if conv.turns.last().is_none_or(|t| t.role != render::Role::Assistant) {
                conv.turns.push(render::Turn {
                    role: render::Role::Assistant,
                    text: String::new(),
                    finished: false,
                    error: None,
                    calls: Vec::new(),
                });
            }
            if let Some(turn) = conv.turns.last_mut() {
                turn.finished = false;
                turn.error = Some(error);
            }
            conv.incidents.push(incident_name(error).into());
        }
    });
    match found {
        Some(()) => StatusCode::NO_CONTENT.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn oracle(State(app): State<Arc<App>>) -> Json<serde_json::Value> {
    Json(app.hub.oracle())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_segments_follow_the_real_shape() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(project_id(&format!("g-p-{hex}")), Some(hex));
        assert_eq!(project_id(&format!("g-p-{hex}-my-workers")), Some(hex));
        assert_eq!(project_id(&format!("g-p-{hex}-")), None);
        assert_eq!(project_id("g-p-123"), None);
        assert_eq!(project_id(&format!("g-x-{hex}")), None);
    }
}
