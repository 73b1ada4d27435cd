//! The admin read: `GET /admin/status`, what `orchestrator doctor` and
//! `orchestrator status` ask the *running* daemon about its own
//! configuration and health (never their own flags). Loopback `Host`s only,
//! and only with the admin token the daemon writes into its state directory
//! at every start (owner-only): whoever can read the state directory may
//! read the status; nobody through a tunnel can.

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
}

struct Admin {
    plane: Arc<ControlPlane>,
    bridge: Arc<Bridge>,
    exposed_hosts: Vec<String>,
    mcp_secret: bool,
    token: String,
}

/// The `/admin/status` route.
pub fn router(
    plane: Arc<ControlPlane>,
    bridge: Arc<Bridge>,
    exposed_hosts: Vec<String>,
    mcp_secret: bool,
    token: String,
) -> Router {
    let admin = Arc::new(Admin { plane, bridge, exposed_hosts, mcp_secret, token });
    Router::new()
        .route("/admin/status", get(status))
        .route_layer(middleware::from_fn_with_state(admin.clone(), require_admin))
        .with_state(admin)
}

async fn require_admin(State(admin): State<Arc<Admin>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !carrier_webext::bridge::loopback_host(host) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: the admin read answers loopback only").into_response();
    }
    if !crate::http::bears(&request, &admin.token) {
        return (StatusCode::UNAUTHORIZED, "UNAUTHORIZED: the admin token (state dir) is required").into_response();
    }
    next.run(request).await
}

async fn status(State(admin): State<Arc<Admin>>) -> axum::Json<Status> {
    let setup = admin.plane.chatgpt_setup();
    axum::Json(Status {
        version: env!("CARGO_PKG_VERSION").into(),
        catalog_stamp: crate::tools::catalog().stamp.clone(),
        app_label: setup.app_label.clone(),
        worker_project_url: setup.project_url.clone(),
        exposed_hosts: admin.exposed_hosts.clone(),
        mcp_secret: admin.mcp_secret,
        executors_paired: admin.bridge.paired(),
        executors_connected: admin.bridge.connected().await,
    })
}
