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
use protocol::operator::Status;
use protocol::{RunId, WorkerId};
use serde::Deserialize;

/// How long a ticket `orchestrator ui` printed stays good.
const TICKET_TTL_MS: u64 = 60_000;
/// How long a dashboard session lasts.
const SESSION_TTL_MS: u64 = 12 * 3_600_000;
/// The most tickets and sessions held at once: past it the one that
/// expires first gives way (a person has a few tabs, not hundreds).
const TICKETS_MAX: usize = 16;
const SESSIONS_MAX: usize = 16;
/// The most live-update streams open at once (a couple of tabs a session);
/// one more is refused until a page closes.
const STREAMS_MAX: usize = 32;
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
    /// Live-update streams open now.
    streams: Arc<std::sync::atomic::AtomicUsize>,
}

/// One open live-update stream: counted while it lives.
struct Streaming {
    open: Arc<std::sync::atomic::AtomicUsize>,
}

impl Streaming {
    /// A place among the open streams, if there is one left.
    fn open(open: &Arc<std::sync::atomic::AtomicUsize>) -> Option<Streaming> {
        use std::sync::atomic::Ordering::SeqCst;
        open.fetch_update(SeqCst, SeqCst, |n| (n < STREAMS_MAX).then_some(n + 1)).ok()?;
        Some(Streaming { open: open.clone() })
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        self.open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Makes room for one more entry in `map` of at most `max`: the entries
/// that expire first go.
fn bound<V>(map: &mut HashMap<String, V>, max: usize, expiry: impl Fn(&V) -> u64) {
    while map.len() >= max {
        let Some(first) = map.iter().min_by_key(|(_, v)| expiry(v)).map(|(k, _)| k.clone()) else { return };
        map.remove(&first);
    }
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
        Arc::new(Ui {
            plane,
            pool,
            bridge,
            tickets: Mutex::default(),
            sessions: Mutex::default(),
            streams: Arc::default(),
        })
    }

    /// A one-time ticket for `/ui/login` (the admin read hands it out).
    pub fn ticket(&self) -> String {
        let ticket = random_hex();
        let mut tickets = self.tickets.lock().unwrap();
        let now = now_ms();
        tickets.retain(|_, expiry| *expiry > now);
        bound(&mut tickets, TICKETS_MAX, |expiry| *expiry);
        tickets.insert(ticket.clone(), now + TICKET_TTL_MS);
        ticket
    }

    /// Ends every dashboard session and voids every ticket
    /// (`orchestrator ui --revoke-all`); returns how many sessions ended.
    pub fn revoke_all(&self) -> usize {
        self.tickets.lock().unwrap().clear();
        let mut sessions = self.sessions.lock().unwrap();
        let ended = sessions.len();
        sessions.clear();
        ended
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
        bound(&mut sessions, SESSIONS_MAX, |(_, expiry)| *expiry);
        sessions.insert(session.clone(), (random_hex(), now + SESSION_TTL_MS));
        Some(session)
    }

    /// The session's anti-forgery token, if the request carries a live session.
    fn session(&self, headers: &HeaderMap) -> Option<String> {
        self.csrf_of(&session_id(headers)?)
    }

    /// The anti-forgery token of session `id`, while it lives.
    fn csrf_of(&self, id: &str) -> Option<String> {
        let sessions = self.sessions.lock().unwrap();
        sessions.get(id).filter(|(_, expiry)| *expiry > now_ms()).map(|(csrf, _)| csrf.clone())
    }
}

/// The session id the request's cookie names.
fn session_id(headers: &HeaderMap) -> Option<String> {
    let cookies = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok());
    cookies
        .flat_map(|c| c.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
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

/// A loopback connection with a loopback `Host` only, and for a change an
/// `Origin` naming that host; every answer `nosniff`.
async fn loopback_only(request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("").to_owned();
    if !crate::http::from_loopback(&request) || !carrier_webext::bridge::loopback_host(&host) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: the dashboard answers on loopback only").into_response();
    }
    if request.method() != axum::http::Method::GET {
        let origin = request.headers().get(header::ORIGIN).and_then(|o| o.to_str().ok());
        if origin != Some(format!("http://{host}").as_str()) {
            return (StatusCode::FORBIDDEN, "FORBIDDEN: Origin is not the dashboard's").into_response();
        }
    }
    let mut response = next.run(request).await;
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, header::HeaderValue::from_static("nosniff"));
    response
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

/// A run as the dashboard shows it: the operator view's run, its pool and its log.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunView {
    /// The run and its workers, as every operator surface shows them.
    #[serde(flatten)]
    pub run: protocol::operator::Run,
    /// Its pool's slots: (slot, health, worker path).
    pub slots: Vec<(u32, String, String)>,
    /// Its last events: (cursor, type, when).
    pub events: Vec<(u64, String, u64)>,
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
        let view = control::operator::view_all(plane, &live);
        let runs = view
            .runs
            .into_iter()
            .map(|run| {
                let Ok(id) = run.run_id.parse::<RunId>() else {
                    return RunView { run, slots: vec![], events: vec![] };
                };
                let status = self.pool.status(&id, &live, &|_| true);
                let paths: HashMap<&str, &str> =
                    run.workers.iter().map(|w| (w.worker_id.as_str(), w.path.as_str())).collect();
                let slots = status
                    .slots
                    .iter()
                    .map(|s| {
                        let health = serde_json::to_value(s.health).ok().and_then(|v| v.as_str().map(str::to_owned));
                        let path = paths.get(s.worker_id.to_string().as_str()).copied().unwrap_or_default().to_owned();
                        (s.slot, health.unwrap_or_default(), path)
                    })
                    .collect();
                let cursor = plane.run(&id).map_or(0, |r| r.cursor);
                let events = plane
                    .events(
                        &id,
                        cursor.saturating_sub(EVENTS_SHOWN as u64),
                        EVENTS_SHOWN,
                        &control::plane::Viewer::Root,
                    )
                    .map(|page| {
                        page.events.iter().rev().map(|e| (e.cursor, e.body.kind().to_owned(), e.at_ms)).collect()
                    })
                    .unwrap_or_default();
                RunView { run, slots, events }
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
button.stop{border-color:#8a1c00;color:#8a1c00}button[aria-pressed=true]{background:#e8f0fe}\
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
        let rid = escape(&run.run.run_id);
        let title = escape(&run.run.title);
        let _ = write!(
            out,
            "<section aria-labelledby=\"r-{rid}\"><h2 id=\"r-{rid}\">Run “{title}” <small>{:?} · {rid}</small></h2>\
             <p><button data-run=\"{rid}\" data-act=\"pause_all\" aria-label=\"Pause all ({title})\">Pause all</button>\
             <button data-run=\"{rid}\" data-act=\"resume_all\" aria-label=\"Resume all ({title})\">Resume all</button>\
             <button class=\"stop\" data-run=\"{rid}\" data-act=\"stop_run\" aria-label=\"Stop run ({title})\">Stop run</button></p>\
             <table><thead><tr><th scope=\"col\">Worker</th><th scope=\"col\">Status</th><th scope=\"col\">Why</th>\
             <th scope=\"col\">Since</th><th scope=\"col\">Attempts and conversation</th><th scope=\"col\">Conversation</th><th scope=\"col\">Controls</th></tr></thead><tbody>",
            run.run.state
        );
        for w in &run.run.workers {
            let class = match w.status {
                Status::NeedsYou => "s needs",
                Status::Paused => "s paused",
                Status::Stalled => "s stalled",
                Status::Complete => "s done",
                _ => "s",
            };
            let conversation = match &w.conversation_url {
                Some(url) => format!("<a href=\"{}\" target=\"_blank\" rel=\"noopener\">open</a>", escape(url)),
                None => "—".into(),
            };
            let controls = if w.root || w.status.is_final() {
                String::new()
            } else {
                let id = escape(&w.worker_id);
                let label = escape(&w.path);
                // A person's question: answered here, durably, and the worker goes on once.
                let answer = if w.answerable {
                    let choices: String = w
                        .ask
                        .iter()
                        .flat_map(|a| &a.choices)
                        .map(|c| {
                            let c = escape(c);
                            format!(
                                "<button data-worker=\"{id}\" data-act=\"answer\" data-choice=\"{c}\" \
                                 aria-label=\"Answer {label}: {c}\">{c}</button>"
                            )
                        })
                        .collect();
                    format!(
                        "{choices}<label>Answer <input type=\"text\" data-answer=\"{id}\" aria-label=\"Answer {label}\"></label>\
                         <button data-worker=\"{id}\" data-act=\"answer\" aria-label=\"Send the answer to {label}\">Send</button><br>"
                    )
                } else {
                    String::new()
                };
                let (auto, pressed) =
                    if w.auto_resume { ("auto_resume_off", "true") } else { ("auto_resume_on", "false") };
                let on = if w.auto_resume { "on" } else { "off" };
                let auto = format!(
                    "<button data-worker=\"{id}\" data-act=\"{auto}\" aria-pressed=\"{pressed}\" \
                     aria-label=\"Auto Resume: {on} ({label})\">Auto Resume: {on}</button>"
                );
                let resume = if w.held {
                    format!(
                        "<button data-worker=\"{id}\" data-act=\"resume\" aria-label=\"Resume {label}\">Resume</button>"
                    )
                } else {
                    format!(
                        "<button data-worker=\"{id}\" data-act=\"pause\" aria-label=\"Pause {label}\">Pause</button>"
                    )
                };
                // A bound conversation can be replaced by a fresh one (it rolls over).
                let rollover = if w.conversation_url.is_some() {
                    format!(
                        "<button data-worker=\"{id}\" data-act=\"rollover\" aria-label=\"New conversation for {label}\">New conversation</button>"
                    )
                } else {
                    String::new()
                };
                format!(
                    "{answer}{auto}{resume}<button data-worker=\"{id}\" data-act=\"continue\" aria-label=\"Continue now {label}\">Continue now</button>\
                     {rollover}<button class=\"stop\" data-worker=\"{id}\" data-act=\"stop\" aria-label=\"Stop {label}\">Stop</button>"
                )
            };
            let context = match w.ask.as_ref().and_then(|a| a.context.as_deref()) {
                Some(context) => format!("<br><small>{}</small>", escape(context)),
                None => String::new(),
            };
            // Attempts, then the conversation (model, rollovers, meter, parked).
            let lines: Vec<String> = [w.attempts_label(), w.conversation_label()]
                .iter()
                .filter(|line| !line.is_empty())
                .map(|line| escape(line))
                .collect();
            let details = if lines.is_empty() { "—".to_owned() } else { lines.join("<br>") };
            let _ = write!(
                out,
                "<tr data-worker-row=\"{}\"><th scope=\"row\">{}</th><td class=\"{class}\">{}</td><td>{}{context}</td>\
                 <td>{}</td><td>{}</td><td>{conversation}</td><td>{controls}</td></tr>",
                escape(&w.worker_id),
                escape(&w.path),
                w.status.label(),
                escape(&w.why),
                when(w.since_ms),
                details
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
    const choice = b.dataset.choice;
    const input = b.dataset.act === "answer" && choice === undefined ? document.querySelector(`input[data-answer="${b.dataset.worker}"]`) : null;
    if (input && !input.value.trim()) { notice("Write the answer first."); b.disabled = false; return; }
    const answer = choice !== undefined ? choice : input ? input.value : null;
    const body = { action: b.dataset.act, worker_id: b.dataset.worker || null, run_id: b.dataset.run || null,
      text: answer, key: answer !== null ? crypto.randomUUID() : null };
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

/// Server-sent events: `change` whenever the log moves (coalesced), while
/// the session lives; at most [`STREAMS_MAX`] open at once.
async fn events(State(ui): State<Arc<Ui>>, headers: HeaderMap) -> Response {
    let Some(session) = session_id(&headers).filter(|id| ui.csrf_of(id).is_some()) else {
        return (StatusCode::UNAUTHORIZED, "UNAUTHORIZED").into_response();
    };
    let Some(streaming) = Streaming::open(&ui.streams) else {
        return (StatusCode::TOO_MANY_REQUESTS, "TOO_MANY_REQUESTS: too many live pages open; close some")
            .into_response();
    };
    let changes = ui.plane.subscribe_changes();
    let stream = futures_util::stream::unfold((changes, streaming), move |(mut changes, streaming)| {
        let (ui, session) = (ui.clone(), session.clone());
        async move {
            // A revoked or expired session's page stops being fed.
            ui.csrf_of(&session)?;
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
            Some((Ok::<_, Infallible>(event), (changes, streaming)))
        }
    });
    axum::response::sse::Sse::new(stream).into_response()
}

#[derive(Deserialize)]
struct Act {
    action: protocol::operator::Action,
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
async fn act(State(ui): State<Arc<Ui>>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let Some(csrf) = ui.session(&headers) else {
        return (StatusCode::UNAUTHORIZED, "UNAUTHORIZED: open the link `orchestrator ui` prints").into_response();
    };
    if headers.get("x-orchestrator-ui").and_then(|v| v.to_str().ok()) != Some(csrf.as_str()) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: the page's token is missing").into_response();
    }
    let control = match parse_act(&body) {
        Ok(control) => control,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    let plane = ui.plane.clone();
    match tokio::task::spawn_blocking(move || control::operator::apply(&plane, &control)).await {
        Ok(Ok(n)) => (StatusCode::OK, format!("{n} changed")).into_response(),
        Ok(Err((code, why))) => (StatusCode::CONFLICT, format!("{}: {why}", code.as_str())).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL").into_response(),
    }
}

/// The page's control, typed: a clear refusal for anything else (its
/// shape and bounds are `Control::check`'s).
fn parse_act(body: &[u8]) -> Result<control::operator::Control, String> {
    let act: Act = serde_json::from_slice(body).map_err(|e| format!("INVALID_ARGUMENT: {e}"))?;
    let worker_id = act.worker_id.map(|w| w.parse::<WorkerId>()).transpose().map_err(|_| "INVALID_ID: worker_id")?;
    let run_id = act.run_id.map(|r| r.parse::<RunId>()).transpose().map_err(|_| "INVALID_ID: run_id")?;
    if act.key.as_ref().is_some_and(|k| k.len() > 64) {
        return Err("INVALID_ARGUMENT: key is at most 64 bytes".into());
    }
    let key = act.key.map(|k| format!("ui:{k}"));
    Ok(control::operator::Control { action: act.action, worker_id, run_id, text: act.text, key })
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    /// Issue 43: the dashboard decides on the connection, not on the `Host`
    /// it names: a peer on the network naming `127.0.0.1` is refused; a
    /// loopback connection is served, `nosniff`; a request that came over
    /// no accepted connection at all is refused too.
    #[tokio::test]
    async fn the_dashboard_answers_loopback_connections_only_whatever_host_they_name() {
        let app = Router::new().route("/ui", get(|| async { "ok" })).route_layer(middleware::from_fn(loopback_only));
        let ask = |peer: Option<&str>| {
            let mut request = Request::get("/ui").header(header::HOST, "127.0.0.1:7777").body(Body::empty()).unwrap();
            if let Some(peer) = peer {
                request.extensions_mut().insert(crate::http::Peer(peer.parse().unwrap()));
            }
            app.clone().oneshot(request)
        };
        let remote = ask(Some("192.0.2.7:50000")).await.unwrap();
        assert_eq!(remote.status(), StatusCode::FORBIDDEN, "a network peer naming a loopback Host");
        assert_eq!(ask(None).await.unwrap().status(), StatusCode::FORBIDDEN, "no connection known");
        let local = ask(Some("127.0.0.1:50000")).await.unwrap();
        assert_eq!(local.status(), StatusCode::OK);
        assert_eq!(local.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }

    /// Tickets and sessions are bounded in count (the oldest give way) and
    /// all end at once on `revoke_all`.
    #[test]
    fn tickets_and_sessions_are_bounded_and_revocable() {
        let mut map: HashMap<String, u64> = (0..20).map(|i| (format!("k{i}"), 100 + i)).collect();
        bound(&mut map, 16, |e| *e);
        assert_eq!(map.len(), 15, "room for one more");
        assert!(!map.contains_key("k0") && map.contains_key("k19"), "the first to expire went");
        let mut sessions: HashMap<String, (String, u64)> = HashMap::new();
        for i in 0..40u64 {
            bound(&mut sessions, SESSIONS_MAX, |(_, e)| *e);
            sessions.insert(format!("s{i}"), (String::new(), 1_000 + i));
        }
        assert_eq!(sessions.len(), SESSIONS_MAX);
    }

    /// Live-update streams are bounded in count: one more than the bound is
    /// refused, and a closed one makes room.
    #[test]
    fn live_streams_are_bounded_in_count() {
        let open = Arc::default();
        let mut held: Vec<Streaming> = (0..STREAMS_MAX).map(|_| Streaming::open(&open).expect("room")).collect();
        assert!(Streaming::open(&open).is_none(), "one past the bound");
        held.pop();
        assert!(Streaming::open(&open).is_some(), "a closed stream makes room");
    }
}
