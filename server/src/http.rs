//! The HTTP surface: MCP (streamable HTTP) at `/mcp`, `/healthz`, the
//! executor WebSocket at `/executor`, and the checks that keep a loopback
//! daemon safe from web pages and tunnels.
//!
//! - `Host` must be an allowed host (loopback by default): stops DNS rebinding.
//! - A request carrying an `Origin` is refused unless the origin is
//!   explicitly allowed: no web page can drive the tools from a browser.
//! - With an MCP secret configured (required for a non-loopback listener),
//!   `/mcp` demands `Authorization: Bearer <secret>`, and `/s/<secret>/mcp`
//!   serves clients that cannot send headers (ChatGPT connectors).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use carrier_webext::Bridge;
use control::ControlPlane;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::tools::Tools;

/// What the HTTP surface accepts.
#[derive(Debug, Clone, Default)]
pub struct HttpConfig {
    /// Extra allowed `Host` values beyond loopback (a tunnel's hostname).
    pub allowed_hosts: Vec<String>,
    /// Allowed `Origin` values; empty refuses every request with an Origin.
    pub allowed_origins: Vec<String>,
    /// The MCP secret, when the endpoint is exposed beyond loopback.
    pub mcp_secret: Option<String>,
}

/// The axum app over `plane`, with the executor bridge's `/executor` route.
/// `shutdown` ends MCP sessions.
pub fn app(
    plane: Arc<ControlPlane>,
    pool: Arc<pool::Pool>,
    bridge: Arc<Bridge>,
    config: &HttpConfig,
    shutdown: CancellationToken,
) -> Router {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(config.allowed_hosts.iter().cloned());
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(config.allowed_origins.clone())
        .enforce_origin_validation()
        .with_cancellation_token(shutdown);
    let executors = bridge.clone();
    let service: StreamableHttpService<Tools, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(Tools::new(plane.clone(), pool.clone(), Some(executors.clone()))),
        Default::default(),
        mcp_config,
    );
    let router = Router::new().route("/healthz", get(healthz)).merge(carrier_webext::router(bridge));
    match &config.mcp_secret {
        None => router.nest_service("/mcp", service),
        Some(secret) => {
            let bearer = Router::new()
                .nest_service("/mcp", service.clone())
                .route_layer(middleware::from_fn_with_state(Arc::new(secret.clone()), require_bearer));
            router.merge(bearer).nest_service(&format!("/s/{secret}/mcp"), service)
        }
    }
}

async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

async fn require_bearer(State(secret): State<Arc<String>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Constant-time comparison over the secret's length.
    let same =
        given.len() == secret.len() && given.bytes().zip(secret.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    if same {
        next.run(request).await
    } else {
        (StatusCode::UNAUTHORIZED, "UNAUTHORIZED: bearer secret required").into_response()
    }
}
