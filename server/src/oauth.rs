//! OAuth 2.1 for MCP hosts that will not connect without it (`serve
//! --oauth`). The protocol (RFC 8414 metadata, RFC 7591 registration, the
//! authorization code grant with PKCE S256 only, refresh rotation, RFC 9207
//! `iss`, RFC 8707 resource indicators, revocation) is the `oauth-as`
//! crate's; this module owns what that crate leaves to its host:
//!
//! - **Consent.** The daemon has one owner. `/authorize` answers with a page
//!   naming the client and where its code will go, and mints the code only
//!   after the owner types the owner key (the MCP secret `orchestrator
//!   expose` created and prints) on that page. A right key gives a
//!   single-use ticket, kept in a cookie, for exactly that request; a wrong
//!   key is answered after [`WRONG_KEY_DELAY`] (the key is 256 random bits:
//!   the delay only slows a guesser, and no lockout lets a stranger lock the
//!   owner out).
//! - **The resource.** RFC 9728 metadata for `<public url>/mcp`; `/mcp`
//!   accepts an access token this server issued for it (or the secret as a
//!   bearer, as before) and otherwise answers 401 with the metadata's URL in
//!   `WWW-Authenticate`, which is how clients discover all of the above.
//! - **Limits and upkeep.** At most [`MAX_CLIENTS`] registrations, kept
//!   owner-only in the state directory so a host's client id survives a
//!   restart; expired records swept every minute. Grants themselves live in
//!   memory: a restart ends them and the host asks the owner to approve again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use oauth_as::client::{Client, ClientId};
use oauth_as::events::{Event, EventSink};
use oauth_as::http::{ApprovalDecision, ApprovalRequest, AuthorizationService, ServiceBuilder};
use oauth_as::rate_limit::{FixedWindowRateLimiter, RateLimitConfig};
use oauth_as::registration::{RegistrationAttempt, RegistrationConfig, RegistrationDecision, RegistrationPolicy};
use oauth_as::scope::ScopeSet;
use oauth_as::server::{AuthorizationServer, ServerConfig, SystemClock};
use oauth_as::store::{MemoryStorage, Storage};

/// The one scope: the whole tool catalogue.
pub const SCOPE: &str = "mcp";
/// Dynamic registrations kept at most; a host registers once.
pub const MAX_CLIENTS: usize = 64;
/// How long a wrong owner key waits for its answer.
pub const WRONG_KEY_DELAY: Duration = Duration::from_secs(1);
/// The longest authorization request a consent page is kept for.
const REQUEST_MAX: usize = 8 << 10;
/// How long a consent page, and the ticket it gives, stays valid.
const CONSENT_TTL: Duration = Duration::from_secs(600);
/// Consent pages and tickets outstanding at most.
const MAX_PENDING: usize = 256;
/// The cookie carrying a consent ticket back to `/authorize`.
const TICKET_COOKIE: &str = "orchestrator_consent";
/// Where registered clients are kept in the state directory.
pub const CLIENTS_FILE: &str = "oauth-clients.json";

/// What `serve --oauth` needs.
pub struct OAuthSetup {
    /// The origin hosts reach the daemon at (`https://<tunnel host>`), no path.
    pub public_url: String,
    /// The owner key typed on the consent page: the MCP secret.
    pub owner_key: String,
    /// The state directory.
    pub state_dir: PathBuf,
}

/// Whether `url` may be the public origin: `https://host[:port]`, or
/// `http://` on a loopback host (tests and local clients), with no path.
pub fn check_public_url(url: &str) -> anyhow::Result<String> {
    let url = url.trim_end_matches('/');
    let (scheme, rest) = url.split_once("://").context("--public-url must start with https://")?;
    let host = carrier_webext::bridge::host_name(rest);
    let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(&host);
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) || host.is_empty() {
        bail!("--public-url must be an origin, https://<host>[:port], with no path: {url:?}");
    }
    // As a browser's Origin writes it: no default port.
    match scheme {
        "https" => Ok(url.strip_suffix(":443").unwrap_or(url).to_owned()),
        "http" if loopback => Ok(url.strip_suffix(":80").unwrap_or(url).to_owned()),
        _ => bail!("--public-url must use https (http only on a loopback host): {url:?}"),
    }
}

/// The authorization server, its consent and the resource's checks.
pub struct OAuth {
    server: Arc<AuthorizationServer<MemoryStorage>>,
    service: AuthorizationService<MemoryStorage, SystemClock>,
    public_url: String,
    resource: String,
    owner_key: String,
    consent: Arc<Consent>,
}

/// Never prints the owner key.
impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth").field("public_url", &self.public_url).finish_non_exhaustive()
    }
}

impl OAuth {
    /// Builds the server over the registrations kept in the state directory,
    /// and starts the tasks that keep them and sweep expired records.
    pub async fn start(setup: OAuthSetup) -> anyhow::Result<Arc<OAuth>> {
        let public_url = check_public_url(&setup.public_url)?;
        let resource = format!("{public_url}/mcp");
        let mut config = ServerConfig::new(public_url.clone(), format!("{public_url}/device"));
        config.scopes_supported = Some(vec![SCOPE.to_owned()]);
        config.allowed_resources = Some(vec![resource.clone().into_boxed_str()].into_boxed_slice());
        let mut registration = RegistrationConfig::new();
        registration.allowed_scopes = scopes();
        // Registrations are kept as they were made: no RFC 7592 management.
        registration.management_enabled = false;
        config.registration = Some(Box::new(registration));

        let clients_file = setup.state_dir.join(CLIENTS_FILE);
        let kept = load_clients(&clients_file)?;
        let (registered, mut newly) = tokio::sync::mpsc::unbounded_channel();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(kept.len()));
        let server = AuthorizationServer::new(config, MemoryStorage::new())
            .with_registration_policy(Box::new(Bounded { count: count.clone() }))
            .with_rate_limiter(Box::new(FixedWindowRateLimiter::with_config(RateLimitConfig::default())))
            .with_event_sink(Box::new(Log { registered, count }));
        let server = Arc::new(server);
        for client in &kept {
            server.register_client(client.clone()).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        }

        let consent = Arc::new(Consent::default());
        let resolver = consent.clone();
        let service = ServiceBuilder::new(server.clone())
            // One owner: who is asking is always the owner; whether the owner
            // agreed is the consent resolver's question.
            .with_subject_resolver(|_| Some("owner".to_owned()))
            .with_approval_resolver(move |request| resolver.decide(request))
            .build()
            .map_err(|e| anyhow::anyhow!("oauth: {e:?}"))?;

        let keeper = server.clone();
        tokio::spawn(async move {
            let mut clients = kept;
            while let Some(id) = newly.recv().await {
                match keeper.store().get_client(&ClientId::new(id)).await {
                    Ok(Some(client)) => {
                        clients.push((*client).clone());
                        if let Err(e) = save_clients(&clients_file, &clients) {
                            tracing::warn!("oauth: keeping registered clients failed: {e:#}");
                        }
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!("oauth: reading a registered client failed: {e}"),
                }
            }
        });
        let sweeper = server.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60));
            loop {
                every.tick().await;
                if let Err(e) = sweeper.store().sweep_expired(SystemTime::now()).await {
                    tracing::warn!("oauth: sweeping expired records failed: {e}");
                }
            }
        });
        let owner_key = setup.owner_key;
        Ok(Arc::new(OAuth { server, service, public_url, resource, owner_key, consent }))
    }

    /// The resource's metadata URL (RFC 9728, path form).
    pub fn resource_metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.public_url)
    }

    /// Whether `headers` carry an access token this server issued for `/mcp`.
    pub async fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(token) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .filter(|t| !t.is_empty() && t.len() <= 512)
        else {
            return false;
        };
        match self.server.introspect(token).await {
            Ok(Some(issued)) => {
                issued.scope.contains(SCOPE) && (issued.resource.is_empty() || issued.resource.contains(&self.resource))
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!("oauth: token lookup failed: {e}");
                false
            }
        }
    }

    /// The 401 that sends a client to the metadata.
    pub fn challenge(&self) -> Response {
        let value = format!("Bearer resource_metadata=\"{}\", scope=\"{SCOPE}\"", self.resource_metadata_url());
        let mut response =
            (StatusCode::UNAUTHORIZED, "UNAUTHORIZED: an OAuth access token is required").into_response();
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// The authorization server's routes, the resource's metadata and the
    /// consent form (each served on the allowed hosts only; see `http::app`).
    pub fn router(self: &Arc<Self>) -> Router {
        let meta = self.server.metadata();
        let endpoints = [
            Some(oauth_as::metadata::well_known_path(&meta.issuer)),
            Some(meta.authorization_endpoint.clone()),
            Some(meta.token_endpoint.clone()),
            meta.registration_endpoint.clone(),
            meta.revocation_endpoint.clone(),
            meta.introspection_endpoint.clone(),
        ];
        let mut router = Router::new()
            .route("/.well-known/oauth-protected-resource", get(resource_metadata))
            .route("/.well-known/oauth-protected-resource/mcp", get(resource_metadata))
            .route("/consent", post(consent_submit));
        for endpoint in endpoints.into_iter().flatten() {
            let path = endpoint.strip_prefix(&self.public_url).unwrap_or(&endpoint).to_owned();
            if path.starts_with('/') {
                router = router.route(&path, any(authorization_server));
            }
        }
        router.with_state(self.clone())
    }
}

fn scopes() -> ScopeSet {
    ScopeSet::from_tokens([SCOPE]).expect("a valid scope token")
}

async fn authorization_server(State(oauth): State<Arc<OAuth>>, request: Request) -> Response {
    let request = match one_client_authentication(request).await {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    oauth.service.handle(request).await.map(|body| Body::from(body.into_bytes()))
}

/// The largest form body an endpoint here reads.
const FORM_MAX: usize = 64 << 10;

/// A token request authenticated with HTTP Basic that also names the same
/// `client_id` in its body loses the body's copy. The Python MCP SDK (2.3)
/// sends both for `client_secret_basic` clients, the default registration;
/// `oauth-as` reads that as two authentication methods (RFC 6749 §2.3) and
/// refuses. A body `client_id` naming another client is left for it to refuse.
async fn one_client_authentication(request: Request) -> Result<Request, Response> {
    use base64::Engine as _;
    let basic_user = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b.trim()).ok())
        .and_then(|raw| String::from_utf8(raw).ok())
        .and_then(|pair| pair.split_once(':').map(|(user, _)| user.to_owned()))
        .and_then(|user| serde_urlencoded::from_str::<Vec<(String, String)>>(&format!("u={user}")).ok())
        .and_then(|mut decoded| decoded.pop().map(|(_, user)| user));
    let Some(user) = basic_user else { return Ok(request) };
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, FORM_MAX)
        .await
        .map_err(|_| plain(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE: a form over 64 KiB"))?;
    let body = match serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes) {
        Ok(pairs) if pairs.iter().any(|(k, v)| k == "client_id" && *v == user) => {
            let kept: Vec<_> = pairs.into_iter().filter(|(k, _)| k != "client_id").collect();
            Body::from(serde_urlencoded::to_string(kept).unwrap_or_default())
        }
        _ => Body::from(bytes),
    };
    let mut parts = parts;
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Request::from_parts(parts, body))
}

async fn resource_metadata(State(oauth): State<Arc<OAuth>>) -> Response {
    axum::Json(serde_json::json!({
        "resource": oauth.resource,
        "authorization_servers": [oauth.public_url],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "ChatGPT carrier pool orchestrator",
    }))
    .into_response()
}

/// Open registration, bounded: the consent step is what protects the tools.
/// Registrations made are counted (by [`Log`]), not attempts: the crate asks
/// before it validates, so malformed requests must not use up places.
struct Bounded {
    count: Arc<std::sync::atomic::AtomicUsize>,
}

impl RegistrationPolicy for Bounded {
    fn authorize(&self, _: &RegistrationAttempt<'_>) -> RegistrationDecision {
        if self.count.load(std::sync::atomic::Ordering::SeqCst) < MAX_CLIENTS {
            RegistrationDecision::Allow
        } else {
            tracing::warn!("oauth: registration refused: {MAX_CLIENTS} clients are registered already");
            RegistrationDecision::Deny
        }
    }
}

/// The authorization server's events as log lines (no credential is in any
/// of them); a registration is handed on to be kept.
struct Log {
    registered: tokio::sync::mpsc::UnboundedSender<String>,
    count: Arc<std::sync::atomic::AtomicUsize>,
}

impl EventSink for Log {
    fn on_event(&self, event: Event<'_>) {
        match event {
            Event::ClientRegistered { client_id } => {
                tracing::info!(client_id, "oauth: client registered");
                self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = self.registered.send(client_id.to_owned());
            }
            Event::TokenIssued { .. } => tracing::debug!("oauth: {event:?}"),
            Event::AuthorizationCodeReplayDetected { .. } | Event::RefreshTokenReuseDetected { .. } => {
                tracing::warn!("oauth: {event:?}")
            }
            other => tracing::info!("oauth: {other:?}"),
        }
    }
}

fn load_clients(path: &std::path::Path) -> anyhow::Result<Vec<Client>> {
    use std::os::unix::fs::PermissionsExt;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if std::fs::metadata(path)?.permissions().mode() & 0o077 != 0 {
        bail!("{} is readable by others; chmod 600 it", path.display());
    }
    let clients: Vec<Client> = serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    if clients.len() > MAX_CLIENTS {
        bail!("{} holds {} clients, more than {MAX_CLIENTS}", path.display(), clients.len());
    }
    Ok(clients)
}

fn save_clients(path: &std::path::Path, clients: &[Client]) -> anyhow::Result<()> {
    crate::exposure::write_private(path, &serde_json::to_string_pretty(clients)?)
}

/// Consent pages shown and tickets given, each single-use and short-lived.
#[derive(Default)]
struct Consent {
    /// Form token → the authorization request (path and query) it answers.
    pages: Mutex<HashMap<String, Pending>>,
    /// Ticket → the authorization request it approves.
    tickets: Mutex<HashMap<String, Pending>>,
}

struct Pending {
    request: String,
    until: Instant,
}

impl Consent {
    /// Approves the request a ticket was given for; otherwise shows the page.
    fn decide(&self, request: &ApprovalRequest<'_>) -> ApprovalDecision {
        let asked = path_and_query(request.uri);
        if asked.len() > REQUEST_MAX {
            return ApprovalDecision::Respond(Box::new(page(
                StatusCode::URI_TOO_LONG,
                "<p>This authorization request is too long.</p>",
            )));
        }
        if let Some(ticket) = cookie(request.headers, TICKET_COOKIE)
            && let Some(pending) = take(&self.tickets, &ticket)
            && pending.request == asked
        {
            return ApprovalDecision::Approve;
        }
        let Some(form) = remember(&self.pages, asked) else {
            return ApprovalDecision::Respond(Box::new(page(
                StatusCode::SERVICE_UNAVAILABLE,
                "<p>Too many approvals are pending. Try again in a few minutes.</p>",
            )));
        };
        let body = format!(
            "<h1>Allow an MCP client to use the orchestrator?</h1>\
             <p>Client <code>{client}</code> asks for every tool of this orchestrator; its authorization goes to \
             <code>{redirect}</code>.</p>\
             <p>Approve only if you started this connection. Type the owner key that \
             <code>orchestrator expose</code> prints:</p>\
             <form method=\"post\" action=\"/consent\">\
             <input type=\"hidden\" name=\"form\" value=\"{form}\">\
             <input type=\"password\" name=\"owner_key\" autocomplete=\"off\" required>\
             <button type=\"submit\" name=\"action\" value=\"allow\">Allow</button>\
             <button type=\"submit\" name=\"action\" value=\"deny\" formnovalidate>Deny</button></form>",
            client = escape(request.client_id.as_str()),
            redirect = escape(request.redirect_uri),
        );
        ApprovalDecision::Respond(Box::new(page(StatusCode::OK, &body)))
    }
}

/// `POST /consent`: the owner's answer to a consent page.
async fn consent_submit(
    State(oauth): State<Arc<OAuth>>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Response {
    // A browser posting this form names the page's origin; anything else is
    // another site's form.
    if let Some(origin) = headers.get(header::ORIGIN)
        && origin.as_bytes() != oauth.public_url.as_bytes()
    {
        return plain(StatusCode::FORBIDDEN, "FORBIDDEN: this form is answered from its own page only");
    }
    let Some(pending) = form.get("form").and_then(|token| take(&oauth.consent.pages, token)) else {
        return page_response(StatusCode::BAD_REQUEST, "<p>This page has expired. Start the connection again.</p>");
    };
    if form.get("action").map(String::as_str) != Some("allow") {
        return page_response(StatusCode::OK, "<p>Not allowed. You can close this page.</p>");
    }
    let typed = form.get("owner_key").map(String::as_str).unwrap_or("");
    if !constant_time_eq(typed.trim(), &oauth.owner_key) {
        tracing::warn!("oauth: a consent page was answered with a wrong owner key");
        tokio::time::sleep(WRONG_KEY_DELAY).await;
        return page_response(StatusCode::FORBIDDEN, "<p>That is not the owner key. Start the connection again.</p>");
    }
    let Some(ticket) = remember(&oauth.consent.tickets, pending.request.clone()) else {
        return page_response(StatusCode::SERVICE_UNAVAILABLE, "<p>Too many approvals are pending.</p>");
    };
    tracing::info!("oauth: the owner approved a client");
    let secure = if oauth.public_url.starts_with("https://") { "; Secure" } else { "" };
    let cookie =
        format!("{TICKET_COOKIE}={ticket}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}{secure}", CONSENT_TTL.as_secs());
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let (Ok(cookie), Ok(location)) = (HeaderValue::from_str(&cookie), HeaderValue::from_str(&pending.request)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Stores `request` under a fresh random key, unless [`MAX_PENDING`] are outstanding.
fn remember(map: &Mutex<HashMap<String, Pending>>, request: String) -> Option<String> {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    map.retain(|_, p| p.until > now);
    if map.len() >= MAX_PENDING {
        return None;
    }
    let key = crate::exposure::random_token().ok()?;
    map.insert(key.clone(), Pending { request, until: now + CONSENT_TTL });
    Some(key)
}

/// Removes and returns an unexpired entry.
fn take(map: &Mutex<HashMap<String, Pending>>, key: &str) -> Option<Pending> {
    let pending = map.lock().unwrap_or_else(|e| e.into_inner()).remove(key)?;
    (pending.until > Instant::now()).then_some(pending)
}

fn path_and_query(uri: &axum::http::Uri) -> String {
    uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| uri.path().to_owned())
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name && !value.is_empty()).then(|| value.to_owned())
    })
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn escape(text: &str) -> String {
    text.chars().fold(String::with_capacity(text.len()), |mut out, c| {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
        out
    })
}

fn page(status: StatusCode, body: &str) -> oauth_as::http::Response {
    let html = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Orchestrator</title></head><body>{body}</body></html>"
    );
    let mut response = oauth_as::http::Response::new(oauth_as::http::Body::from(html));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    // A consent page is never framed (clickjacking) and never cached.
    response.headers_mut().insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn page_response(status: StatusCode, body: &str) -> Response {
    page(status, body).map(|b| Body::from(b.into_bytes()))
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    (status, text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_is_an_https_origin_or_loopback_http() {
        assert_eq!(check_public_url("https://tunnel.example/").unwrap(), "https://tunnel.example");
        assert_eq!(check_public_url("https://tunnel.example:8443").unwrap(), "https://tunnel.example:8443");
        assert_eq!(
            check_public_url("https://tunnel.example:443").unwrap(),
            "https://tunnel.example",
            "as Origin says it"
        );
        assert_eq!(check_public_url("http://127.0.0.1:7777").unwrap(), "http://127.0.0.1:7777");
        for refused in [
            "http://tunnel.example",
            "tunnel.example",
            "https://tunnel.example/mcp",
            "https://user@tunnel.example",
            "https://",
            "ftp://127.0.0.1",
        ] {
            assert!(check_public_url(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn tickets_are_single_use_and_pending_pages_bounded() {
        let map = Mutex::new(HashMap::new());
        let key = remember(&map, "/authorize?a=1".into()).unwrap();
        assert_eq!(take(&map, &key).unwrap().request, "/authorize?a=1");
        assert!(take(&map, &key).is_none(), "single use");
        for _ in 0..MAX_PENDING {
            remember(&map, "/authorize".into()).unwrap();
        }
        assert!(remember(&map, "/authorize".into()).is_none(), "bounded");
    }

    #[test]
    fn the_ticket_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; orchestrator_consent=t0k; b=2"));
        assert_eq!(cookie(&headers, TICKET_COOKIE).as_deref(), Some("t0k"));
        assert_eq!(cookie(&headers, "missing"), None);
    }
}
