//! The admin read: `GET /admin/status`, what `orchestrator doctor` and
//! `orchestrator status` ask the *running* daemon about its own
//! configuration and health (never their own flags); and
//! `GET /admin/page-inspect`, the one admin request with an effect beyond
//! the daemon (each able carrier opens, reads and closes a tab of its own). Loopback `Host`s only,
//! and only with the admin token the daemon writes into its state directory
//! at every start (owner-only): whoever can read the state directory may
//! read the status; nobody through a tunnel can, and no web page can (a
//! request with an `Origin` the daemon does not allow is refused, as on `/mcp`).

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use carrier_webext::Bridge;
use control::ControlPlane;
use serde::{Deserialize, Serialize};

/// The token's file in the state directory.
pub const TOKEN_FILE: &str = "admin-token";

/// A fresh admin token, written owner-only into the state directory.
pub fn issue_token(state_dir: &Path) -> anyhow::Result<String> {
    let token = crate::exposure::random_token()?;
    crate::exposure::write_private(&state_dir.join(TOKEN_FILE), &token)?;
    Ok(token)
}

/// The running daemon's admin token.
pub fn read_token(state_dir: &Path) -> anyhow::Result<String> {
    let path = state_dir.join(TOKEN_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        anyhow::anyhow!("cannot read {}: {e} (run as the daemon's user, with its --state-dir)", path.display())
    })?;
    Ok(text.trim().to_owned())
}

/// What the daemon says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The daemon's version.
    pub version: String,
    /// Its tool catalog's stamp.
    pub catalog_stamp: String,
    /// `--app-label`, if set.
    pub app_label: Option<String>,
    /// `--worker-project-url`, if set.
    pub worker_project_url: Option<String>,
    /// Hosts beyond loopback it answers MCP on (`--allowed-host`).
    pub exposed_hosts: Vec<String>,
    /// Whether an MCP secret guards them.
    pub mcp_secret: bool,
    /// Executors holding a credential.
    pub executors_paired: usize,
    /// Executors with a live session.
    pub executors_connected: Vec<String>,
    /// Those executors' machines and room, as their `hello` said.
    #[serde(default)]
    pub executors: Vec<ExecutorSummary>,
    /// Paired executors refused at their `hello` for their protocol version
    /// since the daemon started, and not connected since: each reason names
    /// both builds and which to update.
    #[serde(default)]
    pub executors_refused: Vec<RefusedExecutor>,
    /// Workers' calls refused lately because attribution cannot work on
    /// their path (no header, no ids in the pages, ids in another form),
    /// oldest first.
    #[serde(default)]
    pub unattributable: Vec<carrier_webext::bridge::Unattributable>,
    /// The newest runs (at most [`RUNS_SHOWN`]), newest first.
    #[serde(default)]
    pub runs: Vec<RunSummary>,
    /// Which build answers, and which start of it (absent from older daemons).
    #[serde(default)]
    pub deployment: Option<Deployment>,
}

/// The daemon's deployment identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// Source commit and tree, and the instance id.
    #[serde(flatten)]
    pub identity: crate::deployment::Identity,
    /// SHA-256 of the daemon's binary.
    pub build_id: String,
    /// Its state directory.
    pub state_root: Option<String>,
    /// Its machine's OS (`std::env::consts::OS`).
    #[serde(default)]
    pub os: String,
    /// Its machine's architecture (`std::env::consts::ARCH`).
    #[serde(default)]
    pub arch: String,
    /// Its process id (`canary teardown` stops it once `ps` shows it is an
    /// `orchestrator serve` of the state directory whose admin token read it).
    #[serde(default)]
    pub pid: u32,
}

/// A live executor: where it runs and how full it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutorSummary {
    /// Its id.
    pub executor_id: String,
    /// Its machine's name (protocol v2), if it said.
    pub host: Option<String>,
    /// Its browser, if it said.
    pub browser: Option<String>,
    /// Its machine's OS (`macos`, `linux` …), if it said.
    pub os: Option<String>,
    /// The managed conversations it holds now.
    pub load: usize,
    /// The most it takes (protocol v2); none: only the daemon's limits.
    pub capacity: Option<u32>,
    /// Its carrier kind, as its `hello` said.
    #[serde(default)]
    pub kind: Option<protocol::executor::ExecutorKind>,
    /// Its process start (new when the carrier restarts).
    #[serde(default)]
    pub instance: Option<String>,
    /// Its build version (protocol v4), if it said.
    #[serde(default)]
    pub release: Option<String>,
}

/// A paired executor the daemon refused for its protocol version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedExecutor {
    /// Its id.
    pub executor_id: String,
    /// When (ms since the epoch).
    pub at_ms: u64,
    /// The close reason it was sent.
    pub reason: String,
}

/// How many runs the status lists.
pub const RUNS_SHOWN: usize = 20;

/// A run in the status: its workers' states and what they wait for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run.
    pub run_id: String,
    /// Its title.
    pub title: String,
    /// Its state.
    pub state: protocol::RunState,
    /// Its workers, root first.
    pub workers: Vec<WorkerSummary>,
}

/// A worker in the status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSummary {
    /// The worker.
    pub worker_id: String,
    /// Its path, e.g. `/root/w1`.
    pub path: String,
    /// Its state.
    pub state: protocol::WorkerState,
    /// What it waits for, if anything outside it.
    pub waiting_for: Option<protocol::WaitingFor>,
    /// The executor holding its conversation, if any.
    #[serde(default)]
    pub executor_id: Option<String>,
    /// That executor's machine, as its last `hello` named it.
    #[serde(default)]
    pub host: Option<String>,
}

/// The `host:port` of an `http://host:port/mcp` URL: where its admin read answers.
pub fn authority_of(mcp_url: &str) -> String {
    mcp_url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned()
}

/// The running daemon's status, over the admin read at `addr` (loopback
/// `host:port`), with the token from `state_dir`.
pub async fn fetch(addr: &str, state_dir: &Path) -> anyhow::Result<Status> {
    read_json(addr, state_dir, "/admin/status", std::time::Duration::from_secs(10)).await
}

/// One admin read of the daemon at `addr` (loopback), with the admin token
/// from `state_dir`, waiting at most `within`.
async fn read_json<T: serde::de::DeserializeOwned>(
    addr: &str,
    state_dir: &Path,
    path: &str,
    within: std::time::Duration,
) -> anyhow::Result<T> {
    if !carrier_webext::bridge::loopback_host(addr) {
        anyhow::bail!("the admin read is loopback only; {addr} is not (the token never leaves this machine)");
    }
    let token = read_token(state_dir)?;
    let bearer = format!("Bearer {token}");
    let headers = [("Authorization", bearer.as_str())];
    let body = tokio::time::timeout(within, mcp_client::get(addr, path, &headers))
        .await
        .map_err(|_| anyhow::anyhow!("no answer from {addr} within {} s", within.as_secs()))??;
    Ok(serde_json::from_str(&body)?)
}

/// How long the daemon waits for each executor's page inspection: a page
/// load in a person's browser, and the adapter settling on it.
pub const PAGE_INSPECT_WITHIN: std::time::Duration = std::time::Duration::from_secs(45);

/// How every connected executor that can inspect reads the page at `url`
/// (`GET /admin/page-inspect`), read-only: nothing typed, clicked or focused.
pub async fn inspect_page(
    addr: &str,
    state_dir: &Path,
    url: &str,
) -> anyhow::Result<Vec<carrier_webext::inspect::Reading>> {
    let path = format!("/admin/page-inspect?url={}", crate::ownership::percent_encode(url));
    read_json(addr, state_dir, &path, PAGE_INSPECT_WITHIN + std::time::Duration::from_secs(10)).await
}

#[derive(Deserialize)]
struct PageQuery {
    url: String,
}

/// `GET /admin/page-inspect?url=…`: every able executor's reading of the
/// page (`Bridge::inspect_page`); an empty list when none is connected.
async fn page_inspect(
    State(admin): State<Arc<Admin>>,
    axum::extract::Query(query): axum::extract::Query<PageQuery>,
) -> Response {
    match admin.bridge.inspect_page(&query.url, PAGE_INSPECT_WITHIN).await {
        Ok(readings) => axum::Json(readings).into_response(),
        Err(refused @ carrier_webext::inspect::Refused::Busy) => {
            (StatusCode::TOO_MANY_REQUESTS, refused.to_string()).into_response()
        }
        Err(refused) => (StatusCode::BAD_REQUEST, refused.to_string()).into_response(),
    }
}

#[derive(Deserialize)]
struct Within {
    within_ms: u64,
}

/// `POST /admin/pairing/open?within_ms=N`: take pairing requests that long
/// (bounded by the bridge); answers the window's length in ms.
async fn pairing_open(
    State(admin): State<Arc<Admin>>,
    axum::extract::Query(q): axum::extract::Query<Within>,
) -> String {
    admin.bridge.open_pairing(std::time::Duration::from_millis(q.within_ms)).to_string()
}

/// `POST /admin/pairing/close`: stop taking them; those waiting expire.
async fn pairing_close(State(admin): State<Arc<Admin>>) -> &'static str {
    admin.bridge.close_pairing();
    "closed"
}

/// `GET /admin/pairing/requests`: the requests waiting (never a secret).
async fn pairing_requests(State(admin): State<Arc<Admin>>) -> axum::Json<Vec<carrier_webext::pair_offer::PairWaiting>> {
    axum::Json(admin.bridge.pair_requests())
}

#[derive(Deserialize)]
struct PairAnswerQuery {
    id: u64,
    accept: bool,
    #[serde(default)]
    operator: bool,
}

/// `POST /admin/pairing/answer?id=N&accept=true|false[&operator=true]`: the
/// executor id paired (the credential goes to the page only), or `declined`.
async fn pairing_answer(
    State(admin): State<Arc<Admin>>,
    axum::extract::Query(q): axum::extract::Query<PairAnswerQuery>,
) -> Response {
    use carrier_webext::pair_offer::AnswerError;
    match admin.bridge.answer_pairing(q.id, q.accept, q.operator) {
        Ok(paired) => paired.unwrap_or_else(|| "declined".to_owned()).into_response(),
        Err(e @ AnswerError::NotWaiting(_)) => (StatusCode::NOT_FOUND, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The pairing desk of the daemon at `addr` (loopback), as `orchestrator
/// setup` drives it with the admin token from `state_dir`.
pub struct PairingDesk<'a> {
    /// The daemon's `host:port`.
    pub addr: &'a str,
    /// Its state directory (the admin token).
    pub state_dir: &'a Path,
}

impl PairingDesk<'_> {
    async fn post(&self, path: &str) -> anyhow::Result<String> {
        if !carrier_webext::bridge::loopback_host(self.addr) {
            anyhow::bail!("the admin read is loopback only; {} is not", self.addr);
        }
        let token = read_token(self.state_dir)?;
        let within = std::time::Duration::from_secs(10);
        let posted = tokio::time::timeout(within, mcp_client::post_with_bearer(self.addr, path, &token)).await;
        Ok(posted.map_err(|_| anyhow::anyhow!("no answer from {} within 10 s", self.addr))??)
    }

    /// Opens the window for `within`.
    pub async fn open(&self, within: std::time::Duration) -> anyhow::Result<()> {
        self.post(&format!("/admin/pairing/open?within_ms={}", within.as_millis())).await.map(drop)
    }

    /// Closes it.
    pub async fn close(&self) -> anyhow::Result<()> {
        self.post("/admin/pairing/close").await.map(drop)
    }

    /// The requests waiting.
    pub async fn requests(&self) -> anyhow::Result<Vec<carrier_webext::pair_offer::PairWaiting>> {
        read_json(self.addr, self.state_dir, "/admin/pairing/requests", std::time::Duration::from_secs(10)).await
    }

    /// Accepts (with a person's controls) or declines request `id`: the
    /// executor id paired, if accepted.
    pub async fn answer(&self, id: u64, accept: bool) -> anyhow::Result<Option<String>> {
        let said = self.post(&format!("/admin/pairing/answer?id={id}&accept={accept}&operator=true")).await?;
        Ok(accept.then(|| said.trim().to_owned()))
    }
}

struct Admin {
    plane: Arc<ControlPlane>,
    bridge: Arc<Bridge>,
    exposed: Exposed,
    token: String,
    ui: Arc<crate::ui::Ui>,
}

/// How the daemon is set up, as `/admin/status` reports it.
pub struct Exposed {
    /// Hosts beyond loopback (`--allowed-host`).
    pub hosts: Vec<String>,
    /// Whether an MCP secret guards them.
    pub mcp_secret: bool,
    /// The daemon's `--allowed-origin`s: a request with any other `Origin` is refused.
    pub origins: Vec<String>,
    /// The state directory.
    pub state_root: Option<String>,
}

/// The `/admin/status` route, and `/admin/ui-ticket` (a one-time link into
/// the dashboard, for `orchestrator ui`).
pub fn router(
    plane: Arc<ControlPlane>,
    bridge: Arc<Bridge>,
    exposed: Exposed,
    token: String,
    ui: Arc<crate::ui::Ui>,
) -> Router {
    let admin = Arc::new(Admin { plane, bridge, exposed, token, ui });
    Router::new()
        .route("/admin/status", get(status))
        .route("/admin/ui-ticket", axum::routing::post(ui_ticket))
        .route("/admin/ui-revoke", axum::routing::post(ui_revoke))
        .route("/admin/ownership", get(ownership))
        .route("/admin/page-inspect", get(page_inspect))
        .route("/admin/pairing/open", axum::routing::post(pairing_open))
        .route("/admin/pairing/close", axum::routing::post(pairing_close))
        .route("/admin/pairing/requests", get(pairing_requests))
        .route("/admin/pairing/answer", axum::routing::post(pairing_answer))
        .route_layer(middleware::from_fn_with_state(admin.clone(), require_admin))
        .with_state(admin)
}

async fn require_admin(State(admin): State<Arc<Admin>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    // The connection, not only the Host it names: a network peer can name any.
    if !crate::http::from_loopback(&request) || !carrier_webext::bridge::loopback_host(host) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: the admin read answers loopback only").into_response();
    }
    // A browser names the page making the request: a page (one served from
    // a rebound name, or any site's fetch) must not probe the daemon, as on
    // `/mcp`. The CLI sends no Origin.
    if !crate::http::origin_allowed(request.headers(), &admin.exposed.origins) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: Origin is not allowed").into_response();
    }
    if !crate::http::bears(&request, &admin.token) {
        return (StatusCode::UNAUTHORIZED, "UNAUTHORIZED: the admin token (state dir) is required").into_response();
    }
    next.run(request).await
}

/// `GET /admin/ownership?worktree=|branch=[&repo=]|commit=|id=|repo=`: the
/// ownership records asked for (`orchestrator who`, `orchestrator owners`).
async fn ownership(
    State(admin): State<Arc<Admin>>,
    axum::extract::Query(query): axum::extract::Query<crate::ownership::Query>,
) -> Response {
    let plane = admin.plane.clone();
    match tokio::task::spawn_blocking(move || crate::ownership::answer(&plane, &query)).await {
        Ok(Ok(owners)) => axum::Json(owners).into_response(),
        Ok(Err(e)) => (StatusCode::BAD_REQUEST, format!("INVALID_ARGUMENT: {e}")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The running daemon's answer to an ownership query, over the admin read.
pub async fn fetch_owners(
    addr: &str,
    state_dir: &Path,
    query: &crate::ownership::Query,
) -> anyhow::Result<crate::ownership::Owners> {
    let path = format!("/admin/ownership?{}", query.to_query_string());
    read_json(addr, state_dir, &path, std::time::Duration::from_secs(10)).await
}

async fn ui_ticket(State(admin): State<Arc<Admin>>) -> String {
    admin.ui.ticket()
}

async fn ui_revoke(State(admin): State<Arc<Admin>>) -> String {
    admin.ui.revoke_all().to_string()
}

/// Ends every dashboard session of the daemon at `addr` (loopback), with
/// the admin token from `state_dir`; returns how many ended.
pub async fn ui_revoke_all(addr: &str, state_dir: &Path) -> anyhow::Result<usize> {
    if !carrier_webext::bridge::loopback_host(addr) {
        anyhow::bail!("the dashboard is loopback only; {addr} is not");
    }
    let token = read_token(state_dir)?;
    let ended = mcp_client::post_with_bearer(addr, "/admin/ui-revoke", &token).await?;
    Ok(ended.trim().parse()?)
}

/// A one-time dashboard link from the daemon at `addr` (loopback), with the
/// admin token from `state_dir`: `http://addr/ui/login?ticket=…`, good for a minute.
pub async fn ui_link(addr: &str, state_dir: &Path) -> anyhow::Result<String> {
    if !carrier_webext::bridge::loopback_host(addr) {
        anyhow::bail!("the dashboard is loopback only; {addr} is not");
    }
    let authority = addr.to_owned();
    let token = read_token(state_dir)?;
    let ticket = mcp_client::post_with_bearer(&authority, "/admin/ui-ticket", &token).await?;
    Ok(format!("http://{addr}/ui/login?ticket={}", ticket.trim()))
}

async fn status(State(admin): State<Arc<Admin>>) -> axum::Json<Status> {
    let live = admin.bridge.connected().await;
    let plane = &admin.plane;
    let runs = plane
        .newest_runs(RUNS_SHOWN)
        .into_iter()
        .map(|run| RunSummary {
            run_id: run.id.to_string(),
            title: run.title.clone(),
            state: run.state,
            workers: plane
                .workers_of(&run.id)
                .iter()
                .map(|w| WorkerSummary {
                    worker_id: w.id.to_string(),
                    path: w.path.clone(),
                    state: w.state,
                    waiting_for: plane.waiting_for(w, &live).map(|waiting| waiting.on),
                    executor_id: w.executor_id.clone(),
                    host: w
                        .executor_id
                        .as_ref()
                        .and_then(|id| plane.with_state(|s| s.executor_hosts.get(id).and_then(|h| h.name.clone()))),
                })
                .collect(),
        })
        .collect();
    let executors = plane.with_state(|s| {
        live.iter()
            .map(|id| {
                let facts = s.executor_hosts.get(id).cloned().unwrap_or_default();
                let start = s.executor_starts.get(id).cloned();
                let held = |w: &&control::model::Worker| w.executor_id.as_deref() == Some(id) && !w.state.is_terminal();
                ExecutorSummary {
                    executor_id: id.clone(),
                    host: facts.name,
                    os: Some(facts.os).filter(|os| !os.is_empty()),
                    browser: facts.browser,
                    load: s.workers.values().filter(held).count(),
                    capacity: facts.capacity,
                    kind: start.as_ref().map(|(kind, _)| *kind),
                    instance: start.map(|(_, instance)| instance),
                    release: facts.release,
                }
            })
            .collect()
    });
    let setup = plane.chatgpt_setup();
    axum::Json(Status {
        version: env!("CARGO_PKG_VERSION").into(),
        catalog_stamp: crate::tools::catalog().stamp.clone(),
        app_label: setup.app_label.clone(),
        worker_project_url: setup.project_url.clone(),
        exposed_hosts: admin.exposed.hosts.clone(),
        mcp_secret: admin.exposed.mcp_secret,
        executors_paired: admin.bridge.paired(),
        executors_connected: live,
        executors,
        executors_refused: admin
            .bridge
            .refusals()
            .await
            .into_iter()
            .map(|r| RefusedExecutor { executor_id: r.executor_id, at_ms: r.at_ms, reason: r.reason })
            .collect(),
        unattributable: admin.bridge.unattributable_calls(),
        runs,
        deployment: Some(Deployment {
            identity: crate::deployment::identity(),
            build_id: crate::deployment::build_id().to_owned(),
            state_root: admin.exposed.state_root.clone(),
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
            pid: std::process::id(),
        }),
    })
}

/// The status as a table for a terminal.
pub fn render(status: &Status) -> String {
    let mut out = format!("daemon     {} (catalog {})\n", status.version, status.catalog_stamp);
    out += &match &status.app_label {
        Some(label) => format!("app label  {label:?}\n"),
        None => "app label  not set: restart serve with --app-label \"<the app's name in ChatGPT>\"\n".into(),
    };
    out += &match status.executors.as_slice() {
        [] => format!("executors  none connected ({} paired)\n", status.executors_paired),
        live => {
            let each: Vec<String> = live
                .iter()
                .map(|e| {
                    let room = e.capacity.map_or(format!("{}", e.load), |c| format!("{}/{c}", e.load));
                    let browser = if e.browser.is_none() { ", no browser reached" } else { "" };
                    let room = e.release.as_ref().map_or(room.clone(), |release| format!("{release}, {room}"));
                    match &e.host {
                        Some(host) => format!("{} on {host} ({room}{browser})", e.executor_id),
                        None => format!("{} ({room}{browser})", e.executor_id),
                    }
                })
                .collect();
            format!("executors  {} ({} paired)\n", each.join(", "), status.executors_paired)
        }
    };
    for refused in &status.executors_refused {
        out += &format!("refused    {}: {}\n", refused.executor_id, refused.reason);
    }
    out += &format!("exposure   {}\n", exposure(&status.exposed_hosts, status.mcp_secret).1);
    for run in &status.runs {
        out += &format!("\n{}  {}  {:?}\n", run.run_id, wire(&run.state), run.title);
        for w in &run.workers {
            let waiting = w.waiting_for.map(|on| format!("  waiting for {}", wire(&on))).unwrap_or_default();
            out += &format!("  {:<24} {:<18}{waiting}\n", w.path, wire(&w.state));
        }
    }
    out
}

/// Whether ChatGPT can reach the daemon, and what is true for every client,
/// in the words `serve`'s banner, `status` and `doctor` all use. A secret
/// with no exposed host still guards `/mcp`: a local client must then use
/// the secret too, and is told how.
pub fn exposure(exposed_hosts: &[String], has_secret: bool) -> (bool, String) {
    match (exposed_hosts.first(), has_secret) {
        (Some(host), true) => (
            true,
            format!(
                "{} (`orchestrator expose --host {host}` prints the URL to paste)",
                crate::exposure::shown_url(host)
            ),
        ),
        (None, true) => (
            false,
            "loopback only, but an MCP secret is set (by `orchestrator expose`), so every client needs it, local \
             ones too: http://127.0.0.1:PORT/s/<secret>/mcp, or /mcp with `Authorization: Bearer <secret>` (the \
             secret is the state directory's mcp-secret; `mcp-stdio` uses it by itself). A tunnel that forwards \
             to loopback (OpenAI's tunnel-client) reaches the first; a public tunnel also needs serve's \
             --allowed-host <its hostname>, as `expose` printed"
                .into(),
        ),
        (_, false) => (
            false,
            "not exposed: ChatGPT cannot reach a loopback daemon; run `orchestrator expose --host <your tunnel's \
             hostname>`; local clients use /mcp as it is"
                .into(),
        ),
    }
}

/// A state's wire name (`launch_requested`), as the tools show it.
fn wire(value: &impl Serialize) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}
