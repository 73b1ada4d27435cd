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

use crate::peers::Peers;
use crate::tools::Tools;

/// What the HTTP surface accepts.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Extra allowed `Host` values beyond loopback (a tunnel's hostname).
    pub allowed_hosts: Vec<String>,
    /// Allowed `Origin` values; empty refuses every request with an Origin.
    pub allowed_origins: Vec<String>,
    /// The MCP secret, when the endpoint is exposed beyond loopback.
    pub mcp_secret: Option<String>,
    /// The token `/admin/status` requires; no admin route without one.
    pub admin_token: Option<String>,
    /// OAuth 2.1 for hosts that require it (needs `mcp_secret`, the owner key).
    pub oauth: Option<Arc<crate::oauth::OAuth>>,
    /// How long a call waits for its request id to be seen (caller attribution).
    pub attribution_wait: std::time::Duration,
    /// The state directory, as `/admin/status` names it.
    pub state_root: Option<std::path::PathBuf>,
    /// Worktree ownership's Git adapter (`--worktree-root`); none: off.
    pub worktrees: Option<Arc<worktrees::Git>>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            mcp_secret: None,
            admin_token: None,
            oauth: None,
            attribution_wait: crate::tools::ATTRIBUTION_WAIT,
            state_root: None,
            worktrees: None,
        }
    }
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
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(config.allowed_origins.clone())
        .enforce_origin_validation()
        .with_cancellation_token(shutdown);
    let executors = bridge.clone();
    let attribution_wait = config.attribution_wait;
    let worktrees = config.worktrees.clone();
    let admin_plane = plane.clone();
    let admin_pool = pool.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let peers = Peers::over(sessions.clone());
    let service: StreamableHttpService<Tools, LocalSessionManager> = StreamableHttpService::new(
        move || {
            let tools = Tools::new(plane.clone(), pool.clone(), Some(executors.clone()), peers.clone());
            Ok(tools.with_attribution_wait(attribution_wait).with_worktrees(worktrees.clone()))
        },
        sessions,
        mcp_config,
    );
    // /healthz answers the same Hosts as /mcp (no DNS-rebound page may probe it);
    // /executor answers loopback Hosts only (see carrier_webext::loopback_host).
    let health = Router::new()
        .route("/healthz", get(healthz))
        .route_layer(middleware::from_fn_with_state(Arc::new(hosts.clone()), require_host));
    // The plain executor endpoint is for this machine: its peer must be
    // loopback too, whatever Host it names (a listener beyond loopback
    // serves MCP; executors from elsewhere use `--executor-listen`'s TLS).
    let executors = carrier_webext::router(bridge.clone()).route_layer(middleware::from_fn(require_loopback_peer));
    let mut router = health.merge(executors);
    if let Some(token) = &config.admin_token {
        let (hosts, secret) = (config.allowed_hosts.clone(), config.mcp_secret.is_some());
        let origins = config.allowed_origins.clone();
        let state_root = config.state_root.as_ref().map(|p| p.display().to_string());
        let admin = crate::admin::Exposed { hosts, mcp_secret: secret, origins, state_root };
        // The dashboard lives with the admin read: its links come from there.
        let ui = crate::ui::Ui::new(admin_plane.clone(), admin_pool, bridge.clone());
        router = router.merge(crate::ui::router(ui.clone()));
        router = router.merge(crate::admin::router(admin_plane, bridge, admin, token.clone(), ui));
    }
    if let Some(oauth) = &config.oauth {
        let host_check = middleware::from_fn_with_state(Arc::new(hosts.clone()), require_host);
        router = router.merge(oauth.router().route_layer(host_check));
    }
    let router = match &config.mcp_secret {
        None => router.nest_service("/mcp", service),
        Some(secret) => {
            let access = Arc::new(Access { secret: secret.clone(), oauth: config.oauth.clone() });
            let bearer = Router::new()
                .nest_service("/mcp", service.clone())
                .route_layer(middleware::from_fn_with_state(access, require_bearer));
            router.merge(bearer).nest_service(&format!("/s/{secret}/mcp"), service)
        }
    };
    router.layer(middleware::from_fn(session_ended))
}

/// A session's `DELETE` is answered `204 No Content` rather than rmcp's
/// `202 Accepted`: the Python SDK takes only 200 and 204 for success and
/// otherwise logs "Session termination failed" on every close.
async fn session_ended(request: Request, next: Next) -> Response {
    let delete = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

async fn require_loopback_peer(request: Request, next: Next) -> Response {
    match from_loopback(&request) {
        true => next.run(request).await,
        false => (
            StatusCode::FORBIDDEN,
            "FORBIDDEN: executors connect here from this machine only (others: the TLS endpoint)",
        )
            .into_response(),
    }
}

async fn require_host(State(hosts): State<Arc<Vec<String>>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let name = carrier_webext::bridge::host_name(host);
    if hosts.iter().any(|h| h == name) {
        next.run(request).await
    } else {
        (StatusCode::FORBIDDEN, "FORBIDDEN: Host is not allowed").into_response()
    }
}

async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

/// Whether `request` carries `Authorization: Bearer <secret>`, compared
/// in constant time over the secret's length.
pub(crate) fn bears(request: &Request, secret: &str) -> bool {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    given.len() == secret.len() && given.bytes().zip(secret.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Whether a request with `headers` may be served to a web page: it carries
/// no `Origin`, or one of `allowed`. The rule is rmcp's on `/mcp` (RFC 6454
/// scheme, host and port; an entry ending in `:*` or naming no port allows
/// any port; `null` only when listed; an empty list refuses every Origin),
/// so the routes outside rmcp refuse the very pages `/mcp` refuses.
pub(crate) fn origin_allowed(headers: &axum::http::HeaderMap, allowed: &[String]) -> bool {
    let Some(value) = headers.get(header::ORIGIN) else { return true };
    let Some(origin) = value.to_str().ok().and_then(Origin::parse) else { return false };
    allowed.iter().any(|entry| origin.matches(entry))
}

/// An origin as compared: `null` (a sandboxed or opaque page) or a site.
#[derive(Debug, PartialEq, Eq)]
enum Origin {
    /// `Origin: null`.
    Null,
    /// A scheme, a host (lowercase, IPv6 without brackets) and the port as written.
    Site { scheme: String, host: String, port: Option<u16> },
}

impl Origin {
    fn parse(text: &str) -> Option<Origin> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("null") {
            return Some(Origin::Null);
        }
        let uri = axum::http::Uri::try_from(text).ok()?;
        let authority = uri.authority()?;
        Some(Origin::Site {
            scheme: uri.scheme_str()?.to_ascii_lowercase(),
            host: authority.host().trim_matches(['[', ']']).to_ascii_lowercase(),
            port: authority.port_u16(),
        })
    }

    /// Whether the allowed-origin `entry` (`--allowed-origin`) admits this origin.
    fn matches(&self, entry: &str) -> bool {
        let entry = entry.trim();
        let (base, any_port) = entry.strip_suffix(":*").map_or((entry, false), |base| (base, true));
        match (Origin::parse(base), self) {
            (Some(Origin::Null), Origin::Null) => !any_port,
            (Some(Origin::Site { scheme, host, port }), Origin::Site { scheme: s, host: h, port: p }) => {
                let port_ok = match (port, any_port) {
                    // `https://a.example:443:*` names a port and any port: no entry.
                    (Some(_), true) => false,
                    (None, _) => true,
                    // An origin omits its scheme's default port (RFC 6454 §6.2).
                    (Some(port), false) => p.or_else(|| default_port(s)) == Some(port),
                };
                scheme == *s && host == *h && port_ok
            }
            _ => false,
        }
    }
}

/// The port an origin of `scheme` has when it names none (RFC 6454 §4).
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// Who may call `/mcp`: the secret as a bearer, or (with OAuth) an access
/// token issued for it.
struct Access {
    secret: String,
    oauth: Option<Arc<crate::oauth::OAuth>>,
}

async fn require_bearer(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    if bears(&request, &access.secret) {
        return next.run(request).await;
    }
    match &access.oauth {
        Some(oauth) if oauth.admits(request.headers()).await => next.run(request).await,
        Some(oauth) => oauth.challenge(),
        None => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED: bearer secret required").into_response(),
    }
}

/// How long a client may take to send a request's headers, and between two
/// chunks of its body: a stalled socket is closed instead of held forever.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Headers of one request.
    pub header_read: std::time::Duration,
    /// The longest pause while reading a request body.
    pub body_read: std::time::Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { header_read: std::time::Duration::from_secs(10), body_read: std::time::Duration::from_secs(30) }
    }
}

/// The address a request's connection came from, as [`serve`] accepted it
/// (a request extension). Local surfaces (`/ui`, `/admin/*`) decide on it,
/// never on the `Host` header alone: a peer on the network can send any
/// `Host`.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

/// Whether `request` came over a loopback connection ([`Peer`]); a request
/// [`serve`] did not accept carries none, and is not.
pub fn from_loopback<B>(request: &axum::http::Request<B>) -> bool {
    request.extensions().get::<Peer>().is_some_and(|peer| peer.0.ip().is_loopback())
}

/// Serves `router` on `listener` until `shutdown`, then drains open
/// connections for at most ten seconds. Unlike `axum::serve`, headers and
/// bodies are read under [`Timeouts`]; `TCP_NODELAY` is set (executor
/// frames and MCP replies are small and latency-bound).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    timeouts: Timeouts,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    serve_with(listener, router, timeouts, shutdown, None).await
}

/// [`serve`] over TLS (`acceptor`): the remote executor endpoint. A
/// handshake not done within the header timeout is dropped.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: Router,
    timeouts: Timeouts,
    shutdown: CancellationToken,
    acceptor: executor_tls::TlsAcceptor,
) -> std::io::Result<()> {
    serve_with(listener, router, timeouts, shutdown, Some(acceptor)).await
}

async fn serve_with(
    listener: tokio::net::TcpListener,
    router: Router,
    timeouts: Timeouts,
    shutdown: CancellationToken,
    tls: Option<executor_tls::TlsAcceptor>,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceExt;

    let router = router.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(timeouts.body_read));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    // HTTP/1.1 only (what MCP clients and executors speak): an HTTP/2 preface
    // would otherwise open a connection the header timeout does not cover.
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder.http1().timer(TokioTimer::new()).header_read_timeout(timeouts.header_read);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: pause, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let _ = tcp.set_nodelay(true);
        let service = router.clone().map_request(move |r: axum::http::Request<hyper::body::Incoming>| {
            let mut r = r.map(axum::body::Body::new);
            r.extensions_mut().insert(Peer(peer));
            r
        });
        let Some(acceptor) = &tls else {
            let connection =
                builder.serve_connection_with_upgrades(TokioIo::new(tcp), TowerToHyperService::new(service));
            let connection = graceful.watch(connection.into_owned());
            tokio::spawn(async move {
                let _ = connection.await;
            });
            continue;
        };
        let (acceptor, builder, watcher) = (acceptor.clone(), builder.clone(), graceful.watcher());
        let within = timeouts.header_read;
        tokio::spawn(async move {
            let Ok(Ok(stream)) = tokio::time::timeout(within, acceptor.accept(tcp)).await else { return };
            let connection =
                builder.serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
            let _ = watcher.watch(connection.into_owned()).await;
        });
    }
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(std::time::Duration::from_secs(10)) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain executor endpoint (issue 47): a peer that is not loopback
    /// is refused whatever Host it names; a loopback one passes on.
    #[tokio::test]
    async fn the_plain_executor_endpoint_refuses_a_peer_beyond_loopback() {
        use tower::ServiceExt;
        let router = Router::new()
            .route("/executor", get(|| async { "reached" }))
            .route_layer(middleware::from_fn(require_loopback_peer));
        let from = |peer: &str| {
            let mut request = axum::http::Request::get("/executor")
                .header(header::HOST, "127.0.0.1:7777")
                .body(axum::body::Body::empty())
                .unwrap();
            request.extensions_mut().insert(Peer(peer.parse().unwrap()));
            router.clone().oneshot(request)
        };
        assert_eq!(from("10.0.0.2:40000").await.unwrap().status(), StatusCode::FORBIDDEN);
        assert_eq!(from("[2001:db8::1]:40000").await.unwrap().status(), StatusCode::FORBIDDEN);
        assert_eq!(from("127.0.0.1:40000").await.unwrap().status(), StatusCode::OK);
    }

    /// Whether a request with `origin` passes `allowed`, as rmcp decides on `/mcp`.
    fn check(origin: Option<&str>, allowed: &[&str], expected: bool) {
        let mut headers = axum::http::HeaderMap::new();
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, origin.parse().unwrap());
        }
        let allowed: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
        assert_eq!(origin_allowed(&headers, &allowed), expected, "{origin:?} against {allowed:?}");
    }

    #[test]
    fn origins_are_allowed_by_the_rule_mcp_applies() {
        check(None, &[], true);
        check(Some("https://evil.example"), &[], false);
        check(Some("null"), &[], false);
        check(Some("null"), &["null"], true);
        check(Some("https://app.example"), &["https://app.example"], true);
        check(Some("HTTPS://App.Example"), &["https://app.example"], true);
        check(Some("https://app.example.evil"), &["https://app.example"], false);
        check(Some("http://app.example"), &["https://app.example"], false);
        check(Some("https://app.example"), &["https://app.example:443"], true);
        check(Some("https://app.example:8443"), &["https://app.example:443"], false);
        check(Some("https://app.example:8443"), &["https://app.example"], true);
        check(Some("http://localhost:5173"), &["http://localhost:*"], true);
        check(Some("https://app.example"), &["https://app.example:443:*"], false);
        check(Some("http://[::1]:8080"), &["http://[::1]:*"], true);
        check(Some("not an origin"), &["https://app.example"], false);
        check(Some(""), &["https://app.example"], false);
    }
}
