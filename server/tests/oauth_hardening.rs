//! OAuth hardening (issue 29, items 4 to 7 and 9a): what strangers can do
//! to `serve --oauth` without the owner key must not lock the owner out,
//! fill registration for good, or send a code where it should not go; and
//! the metadata promises exactly what registration honours. The
//! authorization server runs in process, on a clock the tests move.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use serde_json::{Value, json};
use server::oauth::{MAX_CLIENTS, OAuth, OAuthSetup, UNUSED_CLIENT_TTL};
use support::request;

const REDIRECT: &str = "http://127.0.0.1:9/callback";
const VERIFIER: &str = "a-pkce-verifier-of-the-tests-0123456789-abcdefghijklmnop";

/// An authorization server on loopback, its own runtime on its own thread.
struct As {
    addr: String,
    public: String,
    owner_key: String,
    /// Seconds the clock is ahead of the real one.
    ahead: Arc<AtomicU64>,
}

impl As {
    fn start(state: &Path) -> As {
        Self::start_ahead(state, Arc::default())
    }

    /// Starts on `state`, with the clock `ahead` of the real one.
    fn start_ahead(state: &Path, ahead: Arc<AtomicU64>) -> As {
        let owner_key = "Vq3-hZ8rT0kLw_2nB7xYc5mJ9dFp4sGa1uEi6oRt8yQ".to_owned();
        let (state, key, clock) = (state.to_owned(), owner_key.clone(), ahead.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap().to_string();
                let setup =
                    OAuthSetup { public_url: format!("http://{addr}"), owner_key: key, state_dir: state.clone() };
                let now = Arc::new(move || SystemTime::now() + Duration::from_secs(clock.load(Ordering::SeqCst)));
                let oauth = OAuth::start_with_clock(setup, now).await.unwrap();
                tx.send(addr).unwrap();
                axum::serve(listener, oauth.router()).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        As { public: format!("http://{addr}"), addr, owner_key, ahead }
    }

    fn advance(&self, by: Duration) {
        self.ahead.fetch_add(by.as_secs(), Ordering::SeqCst);
    }

    /// `POST /register`: the status and the JSON answer (`null` if none).
    fn register(&self, metadata: &str) -> (u16, Value) {
        let r = request(&self.addr, "POST", "/register", &[("Content-Type", "application/json")], metadata);
        (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null))
    }

    /// A public client of the authorization code grant, redirecting to [`REDIRECT`].
    fn register_client(&self) -> String {
        let metadata = json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"], "scope": "mcp"});
        let (status, info) = self.register(&metadata.to_string());
        assert_eq!(status, 201, "{info}");
        info["client_id"].as_str().unwrap().to_owned()
    }

    /// The owner's whole flow for `client_id`: the consent page, the owner
    /// key, the code, and the token it buys. Panics where it stops.
    fn owner_flow(&self, client_id: &str) {
        let authorize = authorize_path(client_id, REDIRECT);
        let page = request(&self.addr, "GET", &authorize, &[], "");
        assert_eq!(page.status, 200, "the consent page: {}", page.body);
        let form = form_token(&page.body);
        let body = format!("form={form}&owner_key={}&action=allow", self.owner_key);
        let headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Origin", self.public.as_str())];
        let approved = request(&self.addr, "POST", "/consent", &headers, &body);
        assert_eq!(approved.status, 303, "the owner key is taken: {}", approved.body);
        let ticket = approved.header("set-cookie").unwrap().split(';').next().unwrap().to_owned();
        let back = approved.header("location").unwrap().to_owned();
        let redirected = request(&self.addr, "GET", &back, &[("Cookie", &ticket)], "");
        let location = redirected.header("location").unwrap_or_default();
        assert!(location.starts_with(REDIRECT), "{} {location}: {}", redirected.status, redirected.body);
        let code = location.split(['?', '&']).find_map(|p| p.strip_prefix("code=")).unwrap();
        let redirect = urlencoded(REDIRECT);
        let form = format!(
            "grant_type=authorization_code&code={code}&redirect_uri={redirect}&client_id={client_id}&code_verifier={VERIFIER}"
        );
        let token =
            request(&self.addr, "POST", "/token", &[("Content-Type", "application/x-www-form-urlencoded")], &form);
        assert_eq!(token.status, 200, "{}", token.body);
        assert!(token.body.contains("access_token"), "{}", token.body);
    }

    /// The status `/authorize` answers for `client_id` (200: the consent page).
    fn authorize_status(&self, client_id: &str) -> u16 {
        request(&self.addr, "GET", &authorize_path(client_id, REDIRECT), &[], "").status
    }
}

fn authorize_path(client_id: &str, redirect: &str) -> String {
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(<sha2::Sha256 as sha2::Digest>::digest(VERIFIER.as_bytes()));
    format!(
        "/authorize?response_type=code&client_id={client_id}&redirect_uri={}&scope=mcp&state=s\
         &code_challenge={challenge}&code_challenge_method=S256",
        urlencoded(redirect)
    )
}

fn urlencoded(text: &str) -> String {
    serde_urlencoded::to_string([("v", text)]).unwrap().split_off(2)
}

fn form_token(page: &str) -> String {
    let at = page.find("name=\"form\" value=\"").expect(page) + "name=\"form\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}

/// Issue 29 item 4: strangers cannot lock the owner out of approval.
/// 300 unauthenticated `/authorize` requests (more than the 256 pending
/// consent pages there were room for), then 8,000 naming client ids that
/// do not exist (more than a rate limiter keyed on client ids tracks, so
/// they spend the budget an untracked id shares); then the owner's whole
/// flow still works: its consent page, the owner key, the code, the token.
#[test]
fn strangers_cannot_lock_the_owner_out_of_approval() {
    let dir = tempfile::tempdir().unwrap();
    let server = As::start(dir.path());
    let stranger = server.register_client();
    for _ in 0..300 {
        server.authorize_status(&stranger);
    }
    for n in 0..8000 {
        server.authorize_status(&format!("no-such-client-{n}"));
    }
    let owner = server.register_client();
    server.owner_flow(&owner);
    // And the stranger's pages, as many as there were, cost the owner nothing either.
    server.owner_flow(&stranger);
}

/// Issue 29 item 5: strangers cannot fill registration for good. With
/// every place taken (one by a client the owner approved), a new
/// registration is still made: the oldest unused registration gives way
/// (to a registration made, not to one refused), the approved one stays.
/// Past the unused lifetime, unused registrations lapse at the next
/// registration and at a restart: only the approved client is kept, on
/// disk too, and registration is open.
#[test]
fn unused_registrations_give_way_and_lapse() {
    let dir = tempfile::tempdir().unwrap();
    let server = As::start(dir.path());
    let owners = server.register_client();
    server.owner_flow(&owners);
    let mut strangers = Vec::new();
    for _ in 1..MAX_CLIENTS {
        // A pace registration's own rate limit allows.
        server.advance(Duration::from_secs(4));
        strangers.push(server.register_client());
    }
    server.advance(Duration::from_secs(4));
    let refused = json!({"redirect_uris": [REDIRECT], "scope": "mcp admin"}).to_string();
    assert_eq!(server.register(&refused).0, 400);
    assert_eq!(server.authorize_status(&strangers[0]), 200, "only a registration made takes a place");
    let newest = server.register_client();
    assert_ne!(server.authorize_status(&strangers[0]), 200, "the oldest unused registration gave way");
    assert_eq!(server.authorize_status(&strangers[1]), 200, "only one");
    assert_eq!(server.authorize_status(&newest), 200);
    assert_eq!(server.authorize_status(&owners), 200, "the approved client stays");
    let kept = |expected: &[&str]| {
        let file = std::fs::read(dir.path().join(server::oauth::CLIENTS_FILE)).unwrap();
        let kept: Vec<Value> = serde_json::from_slice(&file).unwrap();
        let ids: Vec<&str> = kept.iter().map(|k| k["client_id"].as_str().unwrap()).collect();
        assert_eq!(ids, expected, "on disk");
    };

    // Unused past their lifetime, the strangers' registrations lapse at the next one.
    server.advance(UNUSED_CLIENT_TTL);
    let fresh = server.register_client();
    assert_ne!(server.authorize_status(&newest), 200, "lapsed");
    kept(&[&owners, &fresh]);

    // And at a restart.
    let ahead = Arc::new(AtomicU64::new(server.ahead.load(Ordering::SeqCst) + UNUSED_CLIENT_TTL.as_secs()));
    let restarted = As::start_ahead(dir.path(), ahead);
    assert_eq!(restarted.authorize_status(&owners), 200, "kept across the restart");
    assert_ne!(restarted.authorize_status(&fresh), 200, "unused, it lapsed");
    kept(&[&owners]);
    restarted.register_client();
}

/// Issue 29 item 6: malformed registrations do not close registration.
/// Rounds of six malformed ones (not JSON, no redirect URI, a grant not
/// offered, a relative redirect URI, a fragment, an implicit response
/// type), each followed by a well-formed registration, which is made.
/// Well-formed registrations still have a budget a minute, which the
/// clock reopens.
#[test]
fn malformed_registrations_spend_no_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = As::start(dir.path());
    let malformed = [
        "not json".to_owned(),
        json!({"token_endpoint_auth_method": "none"}).to_string(),
        json!({"redirect_uris": [REDIRECT], "grant_types": ["password"]}).to_string(),
        json!({"redirect_uris": ["callback"]}).to_string(),
        json!({"redirect_uris": ["https://host.example/cb#fragment"]}).to_string(),
        json!({"redirect_uris": [REDIRECT], "response_types": ["token"]}).to_string(),
    ];
    for _ in 0..3 {
        for body in &malformed {
            assert_eq!(server.register(body).0, 400, "{body}");
        }
        server.register_client();
    }

    let mut made = 3;
    while server.register(&json!({"redirect_uris": [REDIRECT]}).to_string()).0 == 201 {
        made += 1;
        assert!(made < MAX_CLIENTS, "registration has a budget a minute");
    }
    server.advance(Duration::from_secs(61));
    server.register_client();
}

/// Issue 29 item 7: a code goes only to a safe redirect URI. Registration
/// refuses `javascript:`, `data:`, plain `http` to a remote host, user
/// info, wildcards and fragments with a 400 `invalid_redirect_uri`
/// (RFC 7591); `https` and loopback `http` are registered; and a redirect
/// URI is matched exactly.
#[test]
fn unsafe_redirect_uris_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = As::start(dir.path());
    for unsafe_uri in [
        "javascript:alert(document.cookie)",
        "data:text/html,<script>alert(1)</script>",
        "http://attacker.example/callback",
        "https://user@attacker.example/callback",
        "https://user:pass@host.example/callback",
        "https://*.example/callback",
        "https://host.example/*",
        "https://host.example/callback#fragment",
        "http://127.0.0.1.attacker.example/callback",
        "https://host.example\\@attacker.example/",
        "https:///callback",
        "callback",
    ] {
        let (status, error) = server.register(&json!({"redirect_uris": [REDIRECT, unsafe_uri]}).to_string());
        assert_eq!((status, error["error"].as_str()), (400, Some("invalid_redirect_uri")), "{unsafe_uri}: {error}");
    }
    for safe in ["https://host.example/cb?x=1", "http://127.0.0.1:9/cb", "http://[::1]:8080/cb", "http://localhost/cb"]
    {
        let (status, info) = server.register(&json!({"redirect_uris": [safe]}).to_string());
        assert_eq!(status, 201, "{safe}: {info}");
    }
    let client = server.register_client();
    assert_eq!(server.authorize_status(&client), 200);
    for near in [format!("{REDIRECT}/"), format!("{REDIRECT}?x=1"), "http://localhost:9/callback".to_owned()] {
        let r = request(&server.addr, "GET", &authorize_path(&client, &near), &[], "");
        assert_eq!(r.status, 400, "exact match only: {near}");
    }
}

/// Issue 29 item 9a: the metadata promises what is honoured. Every
/// advertised endpoint is served; a client registered with every
/// advertised grant type and response type, under each advertised
/// authentication method, is accepted; a grant type or method not
/// advertised is refused.
#[test]
fn the_metadata_advertises_exactly_what_registration_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let server = As::start(dir.path());
    let r = request(&server.addr, "GET", "/.well-known/oauth-authorization-server", &[], "");
    assert_eq!(r.status, 200);
    let meta: Value = serde_json::from_str(&r.body).unwrap();
    for (name, endpoint) in meta.as_object().unwrap().iter().filter(|(k, _)| k.ends_with("_endpoint")) {
        let path = endpoint.as_str().unwrap().strip_prefix(&server.public).unwrap();
        let status = request(&server.addr, "POST", path, &[], "").status;
        assert_ne!(status, 404, "{name} {path} is advertised, so it is served");
    }
    let grants = &meta["grant_types_supported"];
    let responses = &meta["response_types_supported"];
    for method in meta["token_endpoint_auth_methods_supported"].as_array().unwrap() {
        let metadata = json!({"redirect_uris": [REDIRECT], "grant_types": grants, "response_types": responses,
            "token_endpoint_auth_method": method, "scope": "mcp"});
        let (status, info) = server.register(&metadata.to_string());
        assert_eq!(status, 201, "advertised {method} with {grants}: {info}");
    }
    for (grant, method) in [("client_credentials", "client_secret_basic"), ("implicit", "none")]
        .into_iter()
        .chain([("authorization_code", "private_key_jwt"), ("authorization_code", "tls_client_auth")])
    {
        let advertised = grants.as_array().unwrap().iter().any(|g| g == grant)
            && meta["token_endpoint_auth_methods_supported"].as_array().unwrap().iter().any(|m| m == method);
        assert!(!advertised, "{grant} with {method} is not advertised");
        let metadata =
            json!({"redirect_uris": [REDIRECT], "grant_types": [grant], "token_endpoint_auth_method": method});
        let (status, error) = server.register(&metadata.to_string());
        assert_eq!((status, error["error"].as_str()), (400, Some("invalid_client_metadata")), "{grant} {method}");
    }
}
