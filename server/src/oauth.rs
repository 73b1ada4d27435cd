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
//!   owner out). Pages are sealed, not stored, so strangers' pages take no
//!   room from the owner's; and no rate limit keyed on what a stranger can
//!   send (the crate's) stands in the owner's way.
//! - **The resource.** RFC 9728 metadata for `<public url>/mcp`; `/mcp`
//!   accepts an access token this server issued for it (or the secret as a
//!   bearer, as before) and otherwise answers 401 with the metadata's URL in
//!   `WWW-Authenticate`, which is how clients discover all of the above.
//! - **Registration.** Redirect URIs are `https` or loopback `http` only;
//!   what the metadata does not advertise is refused before anything is
//!   counted. At most [`MAX_CLIENTS`] registrations, kept owner-only in the
//!   state directory so a host's client id survives a restart ([`Clients`]:
//!   strangers' unused ones lapse and give way), and
//!   [`REGISTRATIONS_PER_WINDOW`] made a minute. Expired records are swept
//!   every minute. Grants themselves live in memory: a restart ends them and
//!   the host asks the owner to approve again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use base64::Engine as _;
use oauth_as::client::{Client, ClientId};
use oauth_as::events::{Event, EventSink};
use oauth_as::http::{ApprovalDecision, ApprovalRequest, AuthorizationService, ServiceBuilder};
use oauth_as::metadata::AuthorizationServerMetadata;
use oauth_as::registration::{
    ClientInformation, ClientMetadata, RegistrationAttempt, RegistrationConfig, RegistrationDecision,
    RegistrationErrorCode, RegistrationErrorResponse, RegistrationPolicy,
};
use oauth_as::scope::ScopeSet;
use oauth_as::server::{AuthorizationServer, ServerConfig};
use oauth_as::store::{MemoryStorage, RevocationWindow, Storage};

/// The one scope: the whole tool catalogue.
pub const SCOPE: &str = "mcp";
/// Dynamic registrations kept at most; a host registers once.
pub const MAX_CLIENTS: usize = 64;
/// How long a registration no token was issued to is kept.
pub const UNUSED_CLIENT_TTL: Duration = Duration::from_secs(30 * 60);
/// Registrations made at most in [`REGISTRATION_WINDOW`].
pub const REGISTRATIONS_PER_WINDOW: usize = 20;
/// The window [`REGISTRATIONS_PER_WINDOW`] counts over.
pub const REGISTRATION_WINDOW: Duration = Duration::from_secs(60);
/// How long a wrong owner key waits for its answer.
pub const WRONG_KEY_DELAY: Duration = Duration::from_secs(1);
/// The longest authorization request a consent page is kept for.
const REQUEST_MAX: usize = 8 << 10;
/// How long a consent page, and the ticket it gives, stays valid.
const CONSENT_TTL: Duration = Duration::from_secs(600);
/// Tickets outstanding at most (only the owner key gets one).
const MAX_PENDING: usize = 256;
/// The cookie carrying a consent ticket back to `/authorize`.
const TICKET_COOKIE: &str = "orchestrator_consent";
/// Where registered clients are kept in the state directory.
pub const CLIENTS_FILE: &str = "oauth-clients.json";

/// What time it is, for the authorization server and everything here that expires.
pub type Now = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// [`Now`] as the `oauth-as` crate asks for it.
struct Clock(Now);

impl oauth_as::server::Clock for Clock {
    fn now(&self) -> SystemTime {
        (self.0)()
    }
}

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
    server: Arc<AuthorizationServer<MemoryStorage, Clock>>,
    service: AuthorizationService<MemoryStorage, Clock>,
    public_url: String,
    resource: String,
    owner_key: String,
    consent: Arc<Consent>,
    clients: Arc<Clients>,
    /// The metadata as served: what registration and the token endpoint honour.
    metadata: AuthorizationServerMetadata,
    /// The same, as the JSON document served at `metadata_path`.
    document: serde_json::Value,
    metadata_path: String,
    register_path: String,
    /// One registration at a time: room is made, then taken.
    registering: tokio::sync::Mutex<()>,
}

/// Never prints the owner key.
impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth").field("public_url", &self.public_url).finish_non_exhaustive()
    }
}

impl OAuth {
    /// Builds the server over the registrations kept in the state directory,
    /// and starts the task that sweeps expired records.
    pub async fn start(setup: OAuthSetup) -> anyhow::Result<Arc<OAuth>> {
        Self::start_with_clock(setup, Arc::new(SystemTime::now)).await
    }

    /// [`OAuth::start`] on another clock (tests move it).
    pub async fn start_with_clock(setup: OAuthSetup, now: Now) -> anyhow::Result<Arc<OAuth>> {
        let public_url = check_public_url(&setup.public_url)?;
        let resource = format!("{public_url}/mcp");
        let mut config = ServerConfig::new(public_url.clone(), format!("{public_url}/device"));
        config.scopes_supported = Some(vec![SCOPE.to_owned()]);
        config.allowed_resources = Some(vec![resource.clone().into_boxed_str()].into_boxed_slice());
        let mut registration = RegistrationConfig::new();
        registration.allowed_scopes = scopes();
        // Registrations are kept as they were made: no RFC 7592 management.
        registration.management_enabled = false;
        let grants: Vec<String> = registration.allowed_grant_types.iter().map(ToString::to_string).collect();
        config.registration = Some(Box::new(registration));

        let clients = Arc::new(Clients::load(setup.state_dir.join(CLIENTS_FILE), now.clone())?);
        // No rate limiter: the crate's budgets are keyed on client ids anyone
        // can name, and ids past those it tracks share one budget, so
        // strangers naming made-up ids would spend the owner's. None is
        // needed: every credential here is 256 random bits, a code is minted
        // only for the owner key, and `Clients` budgets registrations made.
        let server = AuthorizationServer::with_clock(config, MemoryStorage::new(), Clock(now.clone()))
            .with_registration_policy(Box::new(Bounded(clients.clone())))
            .with_event_sink(Box::new(Log(clients.clone())));
        let server = Arc::new(server);
        for client in clients.all() {
            server.register_client(client).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        }

        // The crate advertises every grant its token endpoint implements and
        // the device endpoint; what a client here can get is what
        // registration offers, and the device grant is not served.
        let mut metadata = server.metadata();
        metadata.grant_types_supported = grants;
        let mut document = serde_json::to_value(&metadata)?;
        if let Some(members) = document.as_object_mut() {
            members.remove("device_authorization_endpoint");
        }
        let local = |endpoint: &str| endpoint.strip_prefix(&public_url).unwrap_or(endpoint).to_owned();
        let metadata_path = oauth_as::metadata::well_known_path(&metadata.issuer);
        let register_path = metadata.registration_endpoint.as_deref().map(local).unwrap_or_default();

        let consent = Arc::new(Consent::new(now.clone())?);
        let resolver = consent.clone();
        let service = ServiceBuilder::new(server.clone())
            // One owner: who is asking is always the owner; whether the owner
            // agreed is the consent resolver's question.
            .with_subject_resolver(|_| Some("owner".to_owned()))
            .with_approval_resolver(move |request| resolver.decide(request))
            .build()
            .map_err(|e| anyhow::anyhow!("oauth: {e:?}"))?;

        let sweeper = server.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60));
            loop {
                every.tick().await;
                if let Err(e) = sweeper.store().sweep_expired(now()).await {
                    tracing::warn!("oauth: sweeping expired records failed: {e}");
                }
            }
        });
        Ok(Arc::new(OAuth {
            server,
            service,
            public_url,
            resource,
            owner_key: setup.owner_key,
            consent,
            clients,
            metadata,
            document,
            metadata_path,
            register_path,
            registering: tokio::sync::Mutex::new(()),
        }))
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
        let meta = &self.metadata;
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
    let path = request.uri().path();
    if path == oauth.metadata_path && matches!(*request.method(), Method::GET | Method::HEAD) {
        return axum::Json(&oauth.document).into_response();
    }
    if path == oauth.register_path && request.method() == Method::POST {
        return register(&oauth, request).await;
    }
    oauth.service.handle(request).await.map(|body| Body::from(body.into_bytes()))
}

/// `POST /register`. What registration must refuse is refused first, with
/// RFC 7591's codes, so a malformed request spends nothing; then at most
/// [`REGISTRATIONS_PER_WINDOW`] registrations are made a window (counting
/// those made), and one made may displace an unused one ([`Clients::add`]).
async fn register(oauth: &OAuth, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, FORM_MAX).await else {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE: a registration over 64 KiB");
    };
    let screened = serde_json::from_slice::<ClientMetadata>(&bytes)
        .map_err(|_| {
            RegistrationErrorResponse::new(
                RegistrationErrorCode::InvalidClientMetadata,
                "the request body is not an RFC 7591 client metadata JSON object",
            )
        })
        .and_then(|asked| oauth.screen(&asked));
    if let Err(refusal) = screened {
        let mut response = (StatusCode::BAD_REQUEST, axum::Json(refusal)).into_response();
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return response;
    }
    let _one_at_a_time = oauth.registering.lock().await;
    if !oauth.clients.may_register() {
        tracing::warn!("oauth: registration refused: {REGISTRATIONS_PER_WINDOW} were made in the last minute");
        let mut response =
            plain(StatusCode::TOO_MANY_REQUESTS, "TOO_MANY_REQUESTS: registration is busy; retry in a minute");
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
        return response;
    }
    oauth.forget(oauth.clients.drop_lapsed()).await;
    let (parts, body) = oauth.service.handle(Request::from_parts(parts, Body::from(bytes))).await.into_parts();
    let body = body.into_bytes();
    if parts.status == StatusCode::CREATED
        && let Ok(made) = serde_json::from_slice::<ClientInformation>(&body)
    {
        match oauth.server.store().get_client(&ClientId::new(made.client_id)).await {
            Ok(Some(client)) => oauth.forget(oauth.clients.add((*client).clone())).await,
            Ok(None) => {}
            Err(e) => tracing::warn!("oauth: reading a registered client failed: {e}"),
        }
    }
    Response::from_parts(parts, Body::from(body))
}

impl OAuth {
    /// Removes registrations [`Clients`] dropped, and what they held.
    async fn forget(&self, gone: Vec<ClientId>) {
        for client_id in gone {
            let config = self.server.config();
            let recorded_at = (self.clients.now)();
            // An unused client holds at most a code, and what it is being turned into.
            let until = recorded_at + config.authorization_code_ttl.max(config.access_token_ttl);
            if let Err(e) = self.server.store().delete_client(&client_id, RevocationWindow { recorded_at, until }).await
            {
                tracing::warn!("oauth: dropping an unused registration failed: {e}");
            }
        }
    }

    /// What registration must refuse: a redirect URI a code must not go to
    /// ([`check_redirect_uri`]), or a grant type, response type or
    /// authentication method the metadata does not advertise.
    fn screen(&self, asked: &ClientMetadata) -> Result<(), RegistrationErrorResponse> {
        for uri in &asked.redirect_uris {
            check_redirect_uri(uri)
                .map_err(|rule| RegistrationErrorResponse::new(RegistrationErrorCode::InvalidRedirectUri, rule))?;
        }
        let meta = &self.metadata;
        let advertised = asked.grant_types.iter().flatten().all(|g| meta.grant_types_supported.contains(g))
            && asked.response_types.iter().flatten().all(|r| meta.response_types_supported.contains(r))
            && asked.token_endpoint_auth_method.iter().all(|m| meta.token_endpoint_auth_methods_supported.contains(m));
        if !advertised {
            return Err(RegistrationErrorResponse::new(
                RegistrationErrorCode::InvalidClientMetadata,
                "grant_types, response_types and token_endpoint_auth_method must be ones the metadata advertises",
            ));
        }
        Ok(())
    }
}

/// Whether an authorization code may be sent to `uri`: `https`, or `http`
/// on a loopback host (127.0.0.1, [::1], localhost); no user info, fragment
/// or wildcard. `oauth-as` then matches it exactly (OAuth 2.1). The error is
/// the rule, never the (stranger's) value.
pub fn check_redirect_uri(uri: &str) -> Result<(), &'static str> {
    const RULE: &str = "a redirect_uri must be https (http only to 127.0.0.1, [::1] or localhost), \
                        with no user info, fragment or wildcard";
    let (scheme, rest) = uri.split_once("://").ok_or(RULE)?;
    if !uri.bytes().all(|b| b.is_ascii_graphic()) || uri.contains(['#', '*', '\\']) {
        return Err(RULE);
    }
    let host = authority_host(rest.split(['/', '?']).next().unwrap_or_default()).ok_or(RULE)?;
    match scheme {
        "https" => Ok(()),
        "http" if ["127.0.0.1", "::1", "localhost"].contains(&host) => Ok(()),
        _ => Err(RULE),
    }
}

/// The host of an authority that is `host[:port]` or `[v6][:port]` and
/// nothing else (no user info).
fn authority_host(authority: &str) -> Option<&str> {
    let bracketed = authority.starts_with('[');
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?,
        None => authority.split_at(authority.find(':').unwrap_or(authority.len())),
    };
    let name = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || (bracketed && b == b':');
    let port = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    (!host.is_empty() && host.bytes().all(name) && port).then_some(host)
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
/// A registration made may displace an unused one ([`Clients::add`]), so
/// this refuses only when every place holds a client the owner approved.
struct Bounded(Arc<Clients>);

impl RegistrationPolicy for Bounded {
    fn authorize(&self, _: &RegistrationAttempt<'_>) -> RegistrationDecision {
        if self.0.has_room() {
            RegistrationDecision::Allow
        } else {
            tracing::warn!("oauth: registration refused: all {MAX_CLIENTS} places hold clients the owner approved");
            RegistrationDecision::Deny
        }
    }
}

/// The authorization server's events as log lines (no credential is in any
/// of them); a token issued marks its client approved.
struct Log(Arc<Clients>);

impl EventSink for Log {
    fn on_event(&self, event: Event<'_>) {
        match event {
            Event::ClientRegistered { client_id } => tracing::info!(client_id, "oauth: client registered"),
            Event::TokenIssued { client_id, .. } => {
                self.0.approved(client_id);
                tracing::debug!("oauth: {event:?}")
            }
            Event::AuthorizationCodeReplayDetected { .. } | Event::RefreshTokenReuseDetected { .. } => {
                tracing::warn!("oauth: {event:?}")
            }
            other => tracing::info!("oauth: {other:?}"),
        }
    }
}

/// The registrations kept, oldest first, owner-only in the state directory
/// so a host's client id survives a restart. Anyone may register (consent
/// is what protects the tools), so a registration no token was issued to
/// lapses after [`UNUSED_CLIENT_TTL`] and, when all [`MAX_CLIENTS`] places
/// are taken, the oldest such gives way: strangers alone cannot fill them.
/// A client a token was issued to (the owner approved it) is kept.
struct Clients {
    file: PathBuf,
    now: Now,
    registry: Mutex<Registry>,
}

struct Registry {
    kept: Vec<Kept>,
    /// When the registrations of the last [`REGISTRATION_WINDOW`] were made.
    recent: Vec<SystemTime>,
}

/// A registration as the file keeps it.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Kept {
    #[serde(flatten)]
    client: Client,
    /// Whether a token was issued to it, that is, the owner approved it.
    #[serde(default)]
    approved: bool,
}

impl Kept {
    /// Unused for [`UNUSED_CLIENT_TTL`] since it was registered.
    fn lapsed(&self, now: SystemTime) -> bool {
        let issued = self.client.registration.as_ref().and_then(|r| r.client_id_issued_at).unwrap_or(0);
        !self.approved && UNIX_EPOCH + Duration::from_secs(issued) + UNUSED_CLIENT_TTL <= now
    }
}

impl Clients {
    /// The registrations kept in `file`, less the lapsed ones and any whose
    /// redirect URI a code must not go to (kept before that was checked).
    fn load(file: PathBuf, now: Now) -> anyhow::Result<Clients> {
        let mut kept = load_clients(&file)?;
        let (before, at) = (kept.len(), now());
        kept.retain(|k| !k.lapsed(at) && k.client.redirect_uris.iter().all(|uri| check_redirect_uri(uri).is_ok()));
        if kept.len() > MAX_CLIENTS {
            bail!("{} holds {} clients, more than {MAX_CLIENTS}", file.display(), kept.len());
        }
        if kept.len() < before {
            tracing::info!("oauth: {} unused or unsafe registration(s) dropped", before - kept.len());
            save_clients(&file, &kept)?;
        }
        Ok(Clients { file, now, registry: Mutex::new(Registry { kept, recent: Vec::new() }) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save(&self, registry: &Registry) {
        if let Err(e) = save_clients(&self.file, &registry.kept) {
            tracing::warn!("oauth: keeping registered clients failed: {e:#}");
        }
    }

    fn all(&self) -> Vec<Client> {
        self.lock().kept.iter().map(|k| k.client.clone()).collect()
    }

    /// Whether a registration may be added: a place is free or an unused client can give way.
    fn has_room(&self) -> bool {
        let registry = self.lock();
        registry.kept.len() < MAX_CLIENTS || registry.kept.iter().any(|k| !k.approved)
    }

    /// Whether another registration may be made this window. Only those
    /// made count, so requests refused before spend nothing.
    fn may_register(&self) -> bool {
        let now = (self.now)();
        let mut registry = self.lock();
        registry.recent.retain(|&made| !now.duration_since(made).is_ok_and(|age| age >= REGISTRATION_WINDOW));
        registry.recent.len() < REGISTRATIONS_PER_WINDOW
    }

    /// Drops the lapsed registrations and, past [`MAX_CLIENTS`], the oldest
    /// unused one (so only a registration made takes a place): the ids that went.
    fn tidy(&self, registry: &mut Registry) -> Vec<ClientId> {
        let now = (self.now)();
        let mut gone = Vec::new();
        registry.kept.retain(|k| {
            let lapsed = k.lapsed(now);
            if lapsed {
                gone.push(k.client.client_id.clone());
            }
            !lapsed
        });
        if registry.kept.len() > MAX_CLIENTS
            && let Some(oldest) = registry.kept.iter().position(|k| !k.approved)
        {
            gone.push(registry.kept.remove(oldest).client.client_id);
        }
        if !gone.is_empty() {
            tracing::info!("oauth: {} unused registration(s) dropped", gone.len());
            self.save(registry);
        }
        gone
    }

    fn drop_lapsed(&self) -> Vec<ClientId> {
        self.tidy(&mut self.lock())
    }

    /// Keeps a registration just made; the ids it displaced.
    fn add(&self, client: Client) -> Vec<ClientId> {
        let mut registry = self.lock();
        registry.recent.push((self.now)());
        registry.kept.push(Kept { client, approved: false });
        let gone = self.tidy(&mut registry);
        if gone.is_empty() {
            self.save(&registry);
        }
        gone
    }

    /// A token was issued to `client_id`: the owner approved it, so it is kept.
    fn approved(&self, client_id: &str) {
        let mut registry = self.lock();
        if let Some(kept) = registry.kept.iter_mut().find(|k| !k.approved && k.client.client_id.as_str() == client_id) {
            kept.approved = true;
            self.save(&registry);
        }
    }
}

fn load_clients(path: &std::path::Path) -> anyhow::Result<Vec<Kept>> {
    use std::os::unix::fs::PermissionsExt;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if std::fs::metadata(path)?.permissions().mode() & 0o077 != 0 {
        bail!("{} is readable by others; chmod 600 it", path.display());
    }
    serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))
}

fn save_clients(path: &std::path::Path, clients: &[Kept]) -> anyhow::Result<()> {
    crate::exposure::write_private(path, &serde_json::to_string_pretty(clients)?)
}

/// Consent pages and tickets. A page's form is sealed rather than stored,
/// so no number of strangers' pages crowds out the owner's; a ticket is
/// given only for the owner key, single-use and short-lived.
struct Consent {
    /// The key forms are sealed with: a restart voids the pages shown before.
    key: [u8; 32],
    /// Ticket → the authorization request it approves.
    tickets: Mutex<HashMap<String, Pending>>,
    /// Forms answered already (their seal → until when it would hold): one
    /// form takes one answer, right or wrong; a new page makes a new form.
    spent: Mutex<HashMap<String, u64>>,
    now: Now,
}

/// The most answered forms remembered; past it the one that expires first
/// is forgotten (it would hold for the least time anyway).
const SPENT_MAX: usize = 4096;

struct Pending {
    request: String,
    until: SystemTime,
}

/// How form tokens carry bytes.
const BASE64URL: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

impl Consent {
    fn new(now: Now) -> anyhow::Result<Consent> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        Ok(Consent { key, tickets: Mutex::default(), spent: Mutex::default(), now })
    }

    /// A consent form's token: until when it holds, a nonce (each page's
    /// form is its own, to be spent once), and the authorization request
    /// (path and query) it answers, sealed with [`hmac_sha256`].
    fn seal(&self, request: &str) -> String {
        let until = unix_seconds((self.now)() + CONSENT_TTL);
        let mut nonce = [0u8; 16];
        // Without randomness every form is one form: it is spent at its first answer.
        let _ = getrandom::fill(&mut nonce);
        let sealed = format!("{until}.{}.{}", BASE64URL.encode(nonce), BASE64URL.encode(request));
        let mac = BASE64URL.encode(hmac_sha256(&self.key, sealed.as_bytes()));
        format!("{sealed}.{mac}")
    }

    /// The request a form token answers, if this process sealed it and it holds still.
    fn open(&self, token: &str) -> Option<String> {
        let (sealed, mac) = token.rsplit_once('.')?;
        let mac = BASE64URL.decode(mac).ok()?;
        if !constant_time_eq(&mac, &hmac_sha256(&self.key, sealed.as_bytes())) {
            return None;
        }
        let (until, rest) = sealed.split_once('.')?;
        let (_nonce, request) = rest.split_once('.')?;
        if unix_seconds((self.now)()) >= until.parse::<u64>().ok()? {
            return None;
        }
        String::from_utf8(BASE64URL.decode(request).ok()?).ok()
    }

    /// The request a form answers, once: the form is spent by this answer,
    /// whatever it is (allow with a wrong key, deny, allow).
    fn spend(&self, token: &str) -> Option<String> {
        let request = self.open(token)?;
        let (sealed, mac) = token.rsplit_once('.')?;
        let until = sealed.split_once('.')?.0.parse::<u64>().ok()?;
        let now = unix_seconds((self.now)());
        let mut spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
        spent.retain(|_, until| *until > now);
        if spent.contains_key(mac) {
            return None;
        }
        if spent.len() >= SPENT_MAX
            && let Some(first) = spent.iter().min_by_key(|(_, until)| **until).map(|(mac, _)| mac.clone())
        {
            spent.remove(&first);
        }
        spent.insert(mac.to_owned(), until);
        Some(request)
    }

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
            && let Some(pending) = take(&self.tickets, &ticket, (self.now)())
            && pending.request == asked
        {
            return ApprovalDecision::Approve;
        }
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
            form = self.seal(&asked),
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
    let Some(request) = form.get("form").and_then(|token| oauth.consent.spend(token)) else {
        return page_response(
            StatusCode::BAD_REQUEST,
            "<p>This page has expired or was answered already. Start the connection again.</p>",
        );
    };
    if form.get("action").map(String::as_str) != Some("allow") {
        return page_response(StatusCode::OK, "<p>Not allowed. You can close this page.</p>");
    }
    let typed = form.get("owner_key").map(String::as_str).unwrap_or("");
    if !constant_time_eq(typed.trim().as_bytes(), oauth.owner_key.as_bytes()) {
        tracing::warn!("oauth: a consent page was answered with a wrong owner key");
        tokio::time::sleep(WRONG_KEY_DELAY).await;
        return page_response(StatusCode::FORBIDDEN, "<p>That is not the owner key. Start the connection again.</p>");
    }
    let Some(ticket) = remember(&oauth.consent.tickets, request.clone(), (oauth.consent.now)()) else {
        return page_response(StatusCode::SERVICE_UNAVAILABLE, "<p>No randomness for a ticket. Try again.</p>");
    };
    tracing::info!("oauth: the owner approved a client");
    let secure = if oauth.public_url.starts_with("https://") { "; Secure" } else { "" };
    let cookie =
        format!("{TICKET_COOKIE}={ticket}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}{secure}", CONSENT_TTL.as_secs());
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let (Ok(cookie), Ok(location)) = (HeaderValue::from_str(&cookie), HeaderValue::from_str(&request)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Stores `request` under a fresh random key for [`CONSENT_TTL`] from
/// `now`; with [`MAX_PENDING`] outstanding, the oldest gives way.
fn remember(map: &Mutex<HashMap<String, Pending>>, request: String, now: SystemTime) -> Option<String> {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    map.retain(|_, p| p.until > now);
    if map.len() >= MAX_PENDING
        && let Some(oldest) = map.iter().min_by_key(|(_, p)| p.until).map(|(key, _)| key.clone())
    {
        map.remove(&oldest);
    }
    let key = crate::exposure::random_token().ok()?;
    map.insert(key.clone(), Pending { request, until: now + CONSENT_TTL });
    Some(key)
}

/// Removes and returns an entry unexpired at `now`.
fn take(map: &Mutex<HashMap<String, Pending>>, key: &str, now: SystemTime) -> Option<Pending> {
    let pending = map.lock().unwrap_or_else(|e| e.into_inner()).remove(key)?;
    (pending.until > now).then_some(pending)
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
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

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
    fn tickets_are_single_use_short_lived_and_bounded() {
        let map = Mutex::new(HashMap::new());
        let now = SystemTime::now();
        let key = remember(&map, "/authorize?a=1".into(), now).unwrap();
        assert_eq!(take(&map, &key, now).unwrap().request, "/authorize?a=1");
        assert!(take(&map, &key, now).is_none(), "single use");
        let key = remember(&map, "/authorize?a=2".into(), now).unwrap();
        assert!(take(&map, &key, now + CONSENT_TTL).is_none(), "short-lived");
        let first = remember(&map, "/authorize?first".into(), now).unwrap();
        for n in 1..=MAX_PENDING as u64 {
            remember(&map, "/authorize".into(), now + Duration::from_secs(n)).unwrap();
        }
        assert_eq!(map.lock().unwrap().len(), MAX_PENDING, "bounded");
        assert!(take(&map, &first, now).is_none(), "the oldest gave way to the newest");
    }

    /// Issue 29 item 4: a consent page is a sealed form, not a stored entry.
    #[test]
    fn consent_forms_are_sealed_and_expire() {
        let ahead = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let clock = ahead.clone();
        let consent = Consent::new(Arc::new(move || {
            SystemTime::now() + Duration::from_secs(clock.load(std::sync::atomic::Ordering::SeqCst))
        }))
        .unwrap();
        let request = "/authorize?client_id=c&redirect_uri=https%3A%2F%2Fhost.example%2Fcb&state=\"<x>\"";
        let token = consent.seal(request);
        assert_eq!(consent.open(&token).as_deref(), Some(request));
        let (sealed, mac) = token.rsplit_once('.').unwrap();
        let (until, rest) = sealed.split_once('.').unwrap();
        let nonce = rest.split_once('.').unwrap().0;
        let forged = format!("{until}.{nonce}.{}.{mac}", BASE64URL.encode("/authorize?client_id=other"));
        assert_eq!(consent.open(&forged), None, "another request under the same seal");
        let later = format!("{}.{}", until.parse::<u64>().unwrap() + 3600, sealed.split_once('.').unwrap().1);
        assert_eq!(consent.open(&format!("{later}.{mac}")), None, "a longer life under the same seal");
        // Issue 43, finding 5: one form, one answer, right or wrong.
        assert!(consent.spend(&token).is_some(), "the first answer is read");
        assert_eq!(consent.spend(&token), None, "a second answer to the same form is not");
        assert!(consent.spend(&consent.seal(request)).is_some(), "a new page makes a new form");
        let other = Consent::new(Arc::new(SystemTime::now)).unwrap();
        assert_eq!(other.open(&token), None, "another process's seal (a restart)");
        for garbage in ["", ".", "..", "1.2.3", "x.y", &format!("{sealed}.")] {
            assert_eq!(consent.open(garbage), None, "{garbage:?}");
        }
        ahead.store(CONSENT_TTL.as_secs(), std::sync::atomic::Ordering::SeqCst);
        assert_eq!(consent.open(&token), None, "expired");
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        let hex = |bytes: [u8; 32]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(
            hex(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    /// Issue 29 item 7: where a code may go.
    #[test]
    fn redirect_uris_are_https_or_loopback_http() {
        for safe in [
            "https://chatgpt.com/connector_platform_oauth_redirect",
            "https://claude.ai/api/mcp/auth_callback?x=1",
            "https://host.example:8443/cb",
            "http://127.0.0.1:9/callback",
            "http://[::1]:33418/",
            "http://localhost/cb",
        ] {
            assert_eq!(check_redirect_uri(safe), Ok(()), "{safe}");
        }
        for unsafe_uri in [
            "javascript:alert(1)",
            "data:text/html,x",
            "http://host.example/cb",
            "http://127.0.0.1.host.example/cb",
            "https://user@host.example/cb",
            "https://host.example@evil.example/cb",
            "https://*.example/cb",
            "https://host.example/cb#x",
            "https://host.example\\@evil.example/",
            "https://host.example/a b",
            "https://hôst.example/",
            "https:///cb",
            "https://host.example:/cb",
            "https://host.example:123456/cb",
            "https://[::1/cb",
            "https://::1/cb",
            "HTTPS://host.example/cb",
            "com.example.app:/cb",
            "/cb",
        ] {
            assert!(check_redirect_uri(unsafe_uri).is_err(), "{unsafe_uri}");
        }
    }

    #[test]
    fn the_ticket_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; orchestrator_consent=t0k; b=2"));
        assert_eq!(cookie(&headers, TICKET_COOKIE).as_deref(), Some("t0k"));
        assert_eq!(cookie(&headers, "missing"), None);
    }
}
