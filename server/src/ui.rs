//! The operator's dashboard at `/ui` on the daemon's listener: every run,
//! its workers in Execution Continuity's terms (Working, Resuming, Needs
//! you, Paused, Waiting for dependency, Stalled, Complete, Failed; Starting
//! and Stopped around them)
//! with why and since when, the pool's slots, the executors and the last
//! events, kept live over server-sent events from the event log; and the
//! controls (Pause, Resume, Continue now, Stop; per run: pause all, resume
//! all, stop run), executed as the run's root.
//!
//! Access: loopback `Host` only (never a tunnel's host), a link `orchestrator
//! ui` prints (a one-time ticket, good for a minute) exchanged for an
//! HttpOnly, SameSite=Strict session cookie; every change is a `POST` whose
//! `Origin` must be the dashboard's own and which carries the session's
//! anti-forgery token. Server-rendered HTML and one small script, no build step.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use carrier_webext::Bridge;
use control::ControlPlane;
use control::decide::Request as PlaneRequest;
use protocol::continuity::Hold;
use protocol::{RunId, WorkerId, WorkerState};
use serde::Deserialize;

/// How long a ticket `orchestrator ui` printed stays good.
const TICKET_TTL_MS: u64 = 60_000;
/// How long a dashboard session lasts.
const SESSION_TTL_MS: u64 = 12 * 3_600_000;
/// Runs the page lists (newest first).
const RUNS_SHOWN: usize = 20;
/// Events the page lists for the newest run.
const EVENTS_SHOWN: usize = 15;
const COOKIE: &str = "orchestrator_ui";

/// The dashboard's state: what it reads and who may look.
pub struct Ui {
    plane: Arc<ControlPlane>,
    pool: Arc<pool::Pool>,
    bridge: Arc<Bridge>,
    /// One-time tickets → expiry (ms).
    tickets: Mutex<HashMap<String, u64>>,
    /// Session id → (anti-forgery token, expiry ms).
    sessions: Mutex<HashMap<String, (String, u64)>>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn random_hex() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).expect("the OS random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Ui {
    /// The dashboard over the daemon's plane, pool and executor bridge.
    pub fn new(plane: Arc<ControlPlane>, pool: Arc<pool::Pool>, bridge: Arc<Bridge>) -> Arc<Ui> {
        Arc::new(Ui { plane, pool, bridge, tickets: Mutex::default(), sessions: Mutex::default() })
    }

    /// A one-time ticket for `/ui/login` (the admin read hands it out).
    pub fn ticket(&self) -> String {
        let ticket = random_hex();
        let mut tickets = self.tickets.lock().unwrap();
        let now = now_ms();
        tickets.retain(|_, expiry| *expiry > now);
        tickets.insert(ticket.clone(), now + TICKET_TTL_MS);
        ticket
    }

    fn redeem(&self, ticket: &str) -> Option<String> {
        let expiry = self.tickets.lock().unwrap().remove(ticket)?;
        let now = now_ms();
        if expiry <= now {
            return None;
        }
        let session = random_hex();
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|_, (_, expiry)| *expiry > now);
        sessions.insert(session.clone(), (random_hex(), now + SESSION_TTL_MS));
        Some(session)
    }

    /// The session's anti-forgery token, if the request carries a live session.
    fn session(&self, headers: &HeaderMap) -> Option<String> {
        let cookies = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok());
        let id = cookies
            .flat_map(|c| c.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == COOKIE)
            .map(|(_, value)| value.to_owned())?;
        let sessions = self.sessions.lock().unwrap();
        sessions.get(&id).filter(|(_, expiry)| *expiry > now_ms()).map(|(csrf, _)| csrf.clone())
    }
}

/// The `/ui` routes.
pub fn router(ui: Arc<Ui>) -> Router {
    Router::new()
        .route("/ui", get(page))
        .route("/ui/login", get(login))
        .route("/ui/state.json", get(state_json))
        .route("/ui/events", get(events))
        .route("/ui/act", post(act))
        .route_layer(middleware::from_fn(loopback_only))
        .with_state(ui)
}

/// Loopback `Host` only, and for a change an `Origin` naming that host.
async fn loopback_only(request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("").to_owned();
    if !carrier_webext::bridge::loopback_host(&host) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: the dashboard answers on loopback only").into_response();
    }
    if request.method() != axum::http::Method::GET {
        let origin = request.headers().get(header::ORIGIN).and_then(|o| o.to_str().ok());
        if origin != Some(format!("http://{host}").as_str()) {
            return (StatusCode::FORBIDDEN, "FORBIDDEN: Origin is not the dashboard's").into_response();
        }
    }
    next.run(request).await
}

#[derive(Deserialize)]
struct Ticket {
    ticket: String,
}

async fn login(State(ui): State<Arc<Ui>>, Query(q): Query<Ticket>) -> Response {
    match ui.redeem(&q.ticket) {
        Some(session) => {
            let cookie =
                format!("{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/ui; Max-Age={}", SESSION_TTL_MS / 1000);
            ([(header::SET_COOKIE, cookie)], Redirect::to("/ui")).into_response()
        }
        None => (StatusCode::FORBIDDEN, Html(shell("Orchestrator", "", EXPIRED))).into_response(),
    }
}

const EXPIRED: &str = "<main><h1>Link expired</h1><p>This dashboard link was used already or is older than a \
    minute. Run <code>orchestrator ui</code> again and open the new link.</p></main>";

/// One worker as the dashboard shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerRow {
    /// Its id.
    pub worker_id: String,
    /// Its path.
    pub path: String,
    /// Execution Continuity's term for it.
    pub status: &'static str,
    /// Why, in words.
    pub why: String,
    /// Since when (ms since the epoch).
    pub since_ms: u64,
    /// Its conversation's URL, once bound.
    pub conversation_url: Option<String>,
    /// The executor holding it.
    pub executor_id: Option<String>,
    /// Whether it is the run's root.
    pub root: bool,
    /// Whether it is held (so the control is Resume, not Pause).
    pub held: bool,
    /// Whether a person's answer here releases it (its own question to a
    /// person, or to root); never for ChatGPT's tool-approval card, which
    /// only a click in ChatGPT answers.
    pub answerable: bool,
}

/// What the dashboard reads, once per render.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Snapshot {
    /// This daemon's instance.
    pub instance_id: String,
    /// Executors with a live session: id, kind, browser.
    pub executors: Vec<(String, String, String)>,
    /// The newest runs with their workers and slots.
    pub runs: Vec<RunView>,
}

/// A run as the dashboard shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunView {
    /// The run.
    pub run_id: String,
    /// Its title.
    pub title: String,
    /// Its state.
    pub state: protocol::RunState,
    /// Its workers.
    pub workers: Vec<WorkerRow>,
    /// Its pool's slots: (slot, health, worker path).
    pub slots: Vec<(u32, String, String)>,
    /// Its last events: (cursor, type, when).
    pub events: Vec<(u64, String, u64)>,
}

/// Execution Continuity's term (§17.1) and the why, for `w`.
fn status(w: &control::model::Worker, waiting: Option<&protocol::Waiting>) -> (&'static str, String) {
    let why = |fallback: &str| waiting.map_or_else(|| fallback.to_owned(), |wait| wait.next_step.clone());
    // A hold's own words first: a person's question is what they must read.
    let said = |fallback: &str| w.continuity.hold_reason.clone().unwrap_or_else(|| why(fallback));
    match w.state {
        WorkerState::Completed => return ("Complete", w.outcome.clone().unwrap_or_default()),
        WorkerState::Failed | WorkerState::LaunchFailed => return ("Failed", w.outcome.clone().unwrap_or_default()),
        WorkerState::Cancelled => return ("Stopped", w.outcome.clone().unwrap_or_default()),
        WorkerState::Created | WorkerState::LaunchRequested | WorkerState::Launching => {
            return ("Starting", why("its conversation is being opened"));
        }
        _ => {}
    }
    if waiting.is_some_and(|wait| wait.on == protocol::WaitingFor::Person) {
        return ("Needs you", why("a person must act in its conversation"));
    }
    match w.continuity.hold {
        Some(Hold::AwaitingHuman) => ("Needs you", said("it asked a person")),
        Some(Hold::AwaitingDependency) => {
            ("Waiting for dependency", said("another worker or a deploy must change first"))
        }
        _ if w.state == WorkerState::Waiting => ("Waiting for dependency", why("root's answer")),
        Some(Hold::Paused) => ("Paused", "paused: its current turn may finish, no next one starts".into()),
        Some(Hold::Stalled) => {
            ("Stalled", "no progress across its resumes: look at its conversation, then Resume".into())
        }
        None if w.continuity.in_flight.is_some() => ("Resuming", "a continuation is being delivered".into()),
        None => ("Working", why(w.last_progress.as_deref().unwrap_or(""))),
    }
}

impl Ui {
    /// Everything the page shows.
    pub async fn snapshot(&self) -> Snapshot {
        let live = self.bridge.connected().await;
        let plane = &self.plane;
        let executors = plane.with_state(|s| {
            live.iter()
                .map(|id| {
                    let kind =
                        s.executor_starts.get(id).map(|(k, _)| format!("{k:?}").to_lowercase()).unwrap_or_default();
                    let browser = s.executor_hosts.get(id).and_then(|h| h.browser.clone()).unwrap_or_default();
                    (id.clone(), kind, browser)
                })
                .collect()
        });
        let mut runs: Vec<(u64, RunId)> =
            plane.with_state(|s| s.runs.values().map(|r| (r.created_at_ms, r.id.clone())).collect());
        runs.sort_by(|a, b| b.cmp(a));
        let runs = runs
            .into_iter()
            .take(RUNS_SHOWN)
            .filter_map(|(_, id)| plane.run(&id))
            .map(|run| {
                let workers: Vec<WorkerRow> = plane
                    .workers_of(&run.id)
                    .iter()
                    .map(|w| {
                        let waiting = plane.waiting_for(w, &live);
                        let (status, why) = status(w, waiting.as_ref());
                        let answerable =
                            w.continuity.hold == Some(Hold::AwaitingHuman) || w.state == WorkerState::Waiting;
                        WorkerRow {
                            worker_id: w.id.to_string(),
                            path: w.path.clone(),
                            status,
                            why,
                            since_ms: w.updated_at_ms,
                            // Only a ChatGPT conversation's address becomes a link.
                            conversation_url: w
                                .conversation
                                .as_ref()
                                .map(|(_, url)| url.clone())
                                .filter(|url| url.starts_with("https://chatgpt.com/")),
                            executor_id: w.executor_id.clone(),
                            root: w.id == run.root,
                            held: w.continuity.hold.is_some(),
                            answerable,
                        }
                    })
                    .collect();
                let status = self.pool.status(&run.id, &live, &|_| true);
                let paths: HashMap<&str, &str> =
                    workers.iter().map(|w| (w.worker_id.as_str(), w.path.as_str())).collect();
                let slots = status
                    .slots
                    .iter()
                    .map(|s| {
                        let health = serde_json::to_value(s.health).ok().and_then(|v| v.as_str().map(str::to_owned));
                        let path = paths.get(s.worker_id.to_string().as_str()).copied().unwrap_or_default().to_owned();
                        (s.slot, health.unwrap_or_default(), path)
                    })
                    .collect();
                let after = run.cursor.saturating_sub(EVENTS_SHOWN as u64);
                let events = plane
                    .events(&run.id, after, EVENTS_SHOWN, &control::plane::Viewer::Root)
                    .map(|page| {
                        page.events.iter().rev().map(|e| (e.cursor, e.body.kind().to_owned(), e.at_ms)).collect()
                    })
                    .unwrap_or_default();
                RunView {
                    run_id: run.id.to_string(),
                    title: run.title.clone(),
                    state: run.state,
                    workers,
                    slots,
                    events,
                }
            })
            .collect();
        Snapshot { instance_id: crate::deployment::instance_id().to_owned(), executors, runs }
    }
}

async fn state_json(State(ui): State<Arc<Ui>>, headers: HeaderMap) -> Response {
    if ui.session(&headers).is_none() {
        return (StatusCode::UNAUTHORIZED, "UNAUTHORIZED: open the link `orchestrator ui` prints").into_response();
    }
    axum::Json(ui.snapshot().await).into_response()
}

async fn page(State(ui): State<Arc<Ui>>, headers: HeaderMap) -> Response {
    let Some(csrf) = ui.session(&headers) else {
        let body = "<main><h1>Sign in</h1><p>Run <code>orchestrator ui</code> and open the link it prints.</p></main>";
        return (StatusCode::UNAUTHORIZED, Html(shell("Orchestrator", "", body))).into_response();
    };
    let snapshot = ui.snapshot().await;
    let nonce = random_hex();
    let body = render(&snapshot, &csrf);
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    (
        [(header::CONTENT_SECURITY_POLICY, csp), (header::CACHE_CONTROL, "no-store".into())],
        Html(shell("Orchestrator", &nonce, &body)),
    )
        .into_response()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#111;background:#fff}\
main{padding:16px 24px;max-width:1400px}h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:24px 0 6px}\
table{border-collapse:collapse;width:100%;margin:6px 0}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #ccc;vertical-align:top}\
th{background:#f2f2f2}.s{font-weight:600}.needs{color:#8a1c00}.paused,.stalled{color:#6b4e00}.done{color:#1b5e20}\
button{font:inherit;padding:2px 10px;margin:0 4px 2px 0;border:1px solid #444;border-radius:4px;background:#fff;color:#111;cursor:pointer}\
button:focus-visible,a:focus-visible{outline:3px solid #1a56db;outline-offset:2px}small{color:#444}\
#notice{min-height:1.4em;color:#8a1c00}@media (prefers-reduced-motion: reduce){*{transition:none!important}}";

/// The document around `body`.
fn shell(title: &str, nonce: &str, body: &str) -> String {
    let style = if nonce.is_empty() { String::new() } else { format!("<style nonce=\"{nonce}\">{STYLE}</style>") };
    let script = if nonce.is_empty() { String::new() } else { format!("<script nonce=\"{nonce}\">{SCRIPT}</script>") };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width,initial-scale=1\"><title>{title}</title>{style}</head><body>{body}{script}</body></html>"
    )
}

fn when(ms: u64) -> String {
    let ago = now_ms().saturating_sub(ms) / 1000;
    match ago {
        0..60 => format!("{ago} s ago"),
        60..3600 => format!("{} min ago", ago / 60),
        _ => format!("{} h ago", ago / 3600),
    }
}

/// The page's main element.
pub fn render(snapshot: &Snapshot, csrf: &str) -> String {
    let mut out = format!(
        "<main id=\"main\" data-csrf=\"{csrf}\"><h1>Orchestrator</h1><p><small>daemon instance {}</small></p>\
         <p id=\"notice\" role=\"status\" aria-live=\"polite\"></p>",
        escape(&snapshot.instance_id)
    );
    out.push_str("<h2>Executors</h2>");
    if snapshot.executors.is_empty() {
        out.push_str("<p>No executor is connected: pair the extension or start the CDP agent (docs/setup.md).</p>");
    } else {
        out.push_str("<table><thead><tr><th scope=\"col\">Executor</th><th scope=\"col\">Carrier</th><th scope=\"col\">Browser</th></tr></thead><tbody>");
        for (id, kind, browser) in &snapshot.executors {
            let _ =
                write!(out, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", escape(id), escape(kind), escape(browser));
        }
        out.push_str("</tbody></table>");
    }
    if snapshot.runs.is_empty() {
        out.push_str("<h2>Runs</h2><p>No run yet.</p>");
    }
    for run in &snapshot.runs {
        let rid = escape(&run.run_id);
        let _ = write!(
            out,
            "<section aria-labelledby=\"r-{rid}\"><h2 id=\"r-{rid}\">Run “{}” <small>{:?} · {rid}</small></h2>\
             <p><button data-run=\"{rid}\" data-act=\"pause_all\">Pause all</button>\
             <button data-run=\"{rid}\" data-act=\"resume_all\">Resume all</button>\
             <button data-run=\"{rid}\" data-act=\"stop_run\">Stop run</button></p>\
             <table><thead><tr><th scope=\"col\">Worker</th><th scope=\"col\">Status</th><th scope=\"col\">Why</th>\
             <th scope=\"col\">Since</th><th scope=\"col\">Conversation</th><th scope=\"col\">Controls</th></tr></thead><tbody>",
            escape(&run.title),
            run.state
        );
        for w in &run.workers {
            let class = match w.status {
                "Needs you" => "s needs",
                "Paused" => "s paused",
                "Stalled" => "s stalled",
                "Complete" => "s done",
                _ => "s",
            };
            let conversation = match &w.conversation_url {
                Some(url) => format!("<a href=\"{}\" target=\"_blank\" rel=\"noopener\">open</a>", escape(url)),
                None => "—".into(),
            };
            let controls = if w.root || matches!(w.status, "Complete" | "Failed" | "Stopped") {
                String::new()
            } else {
                let id = escape(&w.worker_id);
                let label = escape(&w.path);
                // A person's question: answered here, durably, and the worker goes on once.
                let answer = if w.answerable {
                    format!(
                        "<label>Answer <input type=\"text\" data-answer=\"{id}\" aria-label=\"Answer {label}\"></label>\
                         <button data-worker=\"{id}\" data-act=\"answer\" aria-label=\"Send the answer to {label}\">Send</button><br>"
                    )
                } else {
                    String::new()
                };
                let resume = if w.held {
                    format!(
                        "<button data-worker=\"{id}\" data-act=\"resume\" aria-label=\"Resume {label}\">Resume</button>"
                    )
                } else {
                    format!(
                        "<button data-worker=\"{id}\" data-act=\"pause\" aria-label=\"Pause {label}\">Pause</button>"
                    )
                };
                format!(
                    "{answer}{resume}<button data-worker=\"{id}\" data-act=\"continue\" aria-label=\"Continue now {label}\">Continue now</button>\
                     <button data-worker=\"{id}\" data-act=\"stop\" aria-label=\"Stop {label}\">Stop</button>"
                )
            };
            let _ = write!(
                out,
                "<tr data-worker-row=\"{}\"><th scope=\"row\">{}</th><td class=\"{class}\">{}</td><td>{}</td><td>{}</td><td>{conversation}</td><td>{controls}</td></tr>",
                escape(&w.worker_id),
                escape(&w.path),
                w.status,
                escape(&w.why),
                when(w.since_ms)
            );
        }
        out.push_str("</tbody></table>");
        if !run.slots.is_empty() {
            out.push_str("<table><caption>Pool slots</caption><thead><tr><th scope=\"col\">Slot</th><th scope=\"col\">Health</th><th scope=\"col\">Worker</th></tr></thead><tbody>");
            for (slot, health, path) in &run.slots {
                let _ = write!(out, "<tr><td>{slot}</td><td>{}</td><td>{}</td></tr>", escape(health), escape(path));
            }
            out.push_str("</tbody></table>");
        }
        if !run.events.is_empty() {
            out.push_str("<details><summary>Last events</summary><ol>");
            for (cursor, kind, at) in &run.events {
                let _ = write!(out, "<li>#{cursor} {} <small>{}</small></li>", escape(kind), when(*at));
            }
            out.push_str("</ol></details>");
        }
        out.push_str("</section>");
    }
    out.push_str("</main>");
    out
}

/// Keeps the page live (server-sent events) and sends the controls.
const SCRIPT: &str = r#"(() => {
  "use strict";
  const main = () => document.getElementById("main");
  const notice = (text) => { document.getElementById("notice").textContent = text; };
  let pending = null;
  let seq = 0;
  // A person typing an answer is never interrupted: the refresh waits.
  const typing = () => [...document.querySelectorAll("input[data-answer]")].some(i => i.value || i === document.activeElement);
  async function refresh() {
    pending = null;
    if (typing()) { pending = setTimeout(refresh, 1000); return; }
    const mine = ++seq;
    const r = await fetch("/ui", { credentials: "same-origin" });
    if (mine !== seq) return;
    if (!r.ok) { notice("The dashboard lost its session: run orchestrator ui again."); return; }
    const doc = new DOMParser().parseFromString(await r.text(), "text/html");
    const fresh = doc.getElementById("main");
    if (!fresh) return;
    const focused = document.activeElement;
    const key = focused && focused.dataset ? [focused.dataset.worker || focused.dataset.run, focused.dataset.act] : null;
    const text = document.getElementById("notice").textContent;
    main().replaceWith(fresh);
    notice(text);
    if (key && key[1]) {
      const again = [...document.querySelectorAll("button[data-act]")].find(b => (b.dataset.worker || b.dataset.run) === key[0] && b.dataset.act === key[1]);
      if (again) again.focus();
    }
  }
  const events = new EventSource("/ui/events");
  events.addEventListener("change", () => { if (!pending) pending = setTimeout(refresh, 250); });
  events.addEventListener("error", () => notice("Live updates paused: the daemon is not answering."));
  document.addEventListener("click", async (e) => {
    const b = e.target.closest && e.target.closest("button[data-act]");
    if (!b) return;
    b.disabled = true;
    const input = b.dataset.act === "answer" ? document.querySelector(`input[data-answer="${b.dataset.worker}"]`) : null;
    if (input && !input.value.trim()) { notice("Write the answer first."); b.disabled = false; return; }
    const body = { action: b.dataset.act, worker_id: b.dataset.worker || null, run_id: b.dataset.run || null,
      text: input ? input.value : null, key: input ? crypto.randomUUID() : null };
    const r = await fetch("/ui/act", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Orchestrator-UI": main().dataset.csrf },
      body: JSON.stringify(body),
    });
    notice(r.ok ? "Done: " + b.textContent + "." : "Refused: " + (await r.text()));
    b.disabled = false;
    if (input && r.ok) input.value = "";
    refresh();
  });
})();"#;

/// Server-sent events: `change` whenever the log moves (coalesced).
async fn events(State(ui): State<Arc<Ui>>, headers: HeaderMap) -> Response {
    if ui.session(&headers).is_none() {
        return (StatusCode::UNAUTHORIZED, "UNAUTHORIZED").into_response();
    }
    let changes = ui.plane.subscribe_changes();
    let stream = futures_util::stream::unfold(changes, |mut changes| async move {
        // A quiet keep-alive at least every 15 s, so a dead tab's stream ends.
        let changed = tokio::time::timeout(Duration::from_secs(15), changes.changed()).await;
        let event = match changed {
            Ok(Ok(())) => {
                let n = *changes.borrow_and_update();
                axum::response::sse::Event::default().event("change").data(n.to_string())
            }
            Ok(Err(_)) => return None,
            Err(_) => axum::response::sse::Event::default().comment("keep-alive"),
        };
        // Coalesce bursts: at most four changes a second reach the page.
        tokio::time::sleep(Duration::from_millis(250)).await;
        Some((Ok::<_, Infallible>(event), changes))
    });
    axum::response::sse::Sse::new(stream).into_response()
}

#[derive(Deserialize)]
struct Act {
    action: String,
    #[serde(default)]
    worker_id: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    /// A person's answer (`answer`).
    #[serde(default)]
    text: Option<String>,
    /// The answer's idempotency key: a resubmitted form sends nothing twice.
    #[serde(default)]
    key: Option<String>,
}

/// A control, as the run's root: checked as the MCP tools check it.
async fn act(State(ui): State<Arc<Ui>>, headers: HeaderMap, axum::Json(act): axum::Json<Act>) -> Response {
    let Some(csrf) = ui.session(&headers) else {
        return (StatusCode::UNAUTHORIZED, "UNAUTHORIZED: open the link `orchestrator ui` prints").into_response();
    };
    if headers.get("x-orchestrator-ui").and_then(|v| v.to_str().ok()) != Some(csrf.as_str()) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: the page's token is missing").into_response();
    }
    let plane = ui.plane.clone();
    let done = tokio::task::spawn_blocking(move || apply(&plane, &act)).await;
    match done {
        Ok(Ok(n)) => (StatusCode::OK, format!("{n} changed")).into_response(),
        Ok(Err(e)) => (StatusCode::CONFLICT, e).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL").into_response(),
    }
}

fn apply(plane: &ControlPlane, act: &Act) -> Result<usize, String> {
    let refused = |e: control::Error| e.to_string();
    if let Some(worker) = &act.worker_id {
        let target: WorkerId = worker.parse().map_err(|_| "INVALID_ID: worker_id".to_owned())?;
        let w = plane.worker(&target).ok_or("NOT_FOUND: no such worker")?;
        let actor = plane.run(&w.run_id).ok_or("NOT_FOUND: no such run")?.root;
        if act.action == "answer" {
            // Durable first (a message from root), then the hold goes: the
            // worker's next turn carries the answer, once.
            let text =
                act.text.as_deref().map(str::trim).filter(|t| !t.is_empty()).ok_or("INVALID_ARGUMENT: empty answer")?;
            let root = plane.worker(&actor).ok_or("NOT_FOUND: no root")?;
            let key = act.key.as_deref().map(|k| format!("ui-answer:{k}"));
            plane.send(&root, &target, protocol::MessageKind::Answer, text, None, key.as_deref()).map_err(refused)?;
            if w.continuity.hold.is_some() {
                plane.execute(PlaneRequest::ReleaseHold { actor, target }).map_err(refused)?;
            }
            return Ok(1);
        }
        let request = match act.action.as_str() {
            "pause" => {
                PlaneRequest::SetHold { actor, target, hold: Hold::Paused, reason: "paused from the dashboard".into() }
            }
            "resume" => PlaneRequest::ReleaseHold { actor, target },
            "continue" => PlaneRequest::ContinueNow { actor, target },
            "stop" => PlaneRequest::Interrupt { actor, target, reason: "stopped from the dashboard".into() },
            other => return Err(format!("INVALID_ARGUMENT: unknown action {other}")),
        };
        return Ok(usize::from(!plane.execute(request).map_err(refused)?.is_empty()));
    }
    let run: RunId = act
        .run_id
        .as_deref()
        .ok_or("INVALID_ARGUMENT: worker_id or run_id")?
        .parse()
        .map_err(|_| "INVALID_ID: run_id".to_owned())?;
    let actor = plane.run(&run).ok_or("NOT_FOUND: no such run")?.root;
    if act.action == "stop_run" {
        plane
            .execute(PlaneRequest::CancelRun { actor, reason: "stopped from the dashboard".into() })
            .map_err(refused)?;
        return Ok(1);
    }
    let live = |w: &control::model::Worker| w.id != actor && !w.state.is_terminal();
    let mut changed = 0;
    for w in plane.workers_of(&run).into_iter().filter(live) {
        let request = match act.action.as_str() {
            "pause_all" if w.continuity.hold.is_none() => PlaneRequest::SetHold {
                actor: actor.clone(),
                target: w.id,
                hold: Hold::Paused,
                reason: "paused from the dashboard".into(),
            },
            "resume_all" if matches!(w.continuity.hold, Some(Hold::Paused | Hold::Stalled)) => {
                PlaneRequest::ReleaseHold { actor: actor.clone(), target: w.id }
            }
            "pause_all" | "resume_all" => continue,
            other => return Err(format!("INVALID_ARGUMENT: unknown action {other}")),
        };
        changed += usize::from(!plane.execute(request).map_err(refused)?.is_empty());
    }
    Ok(changed)
}
