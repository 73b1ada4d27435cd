//! What a pairing may hold, decided natively (and tested so): the endpoint
//! must be a loopback `ws://` URL *as the platform's URL parser reads it*,
//! and the credential the one `orchestrator pair` printed.
//!
//! The endpoint check works on the parser's components, never on the text:
//! `ws://127.0.0.1:@evil.com/executor` reads as host `evil.com` with user
//! info `127.0.0.1`, and a text check would send the credential there. The
//! options page checks before saving and the background again right before
//! connecting; the extension's CSP allows loopback WebSockets only.

/// The first wait before reconnecting to the daemon after a disconnect;
/// each failed attempt doubles it (jittered ±50 %), never past
/// [`RECONNECT_MOST_MS`]. Quoted by docs/setup.md and docs/executor-protocol.md.
pub const RECONNECT_FIRST_MS: u32 = 500;
/// The longest wait between attempts: a failed attempt costs nothing, and a
/// person who starts the daemon again should not wait long.
pub const RECONNECT_MOST_MS: u32 = 10_000;

/// A URL as a WHATWG parser (`new URL(…)`, the `url` crate) splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts {
    /// `ws:` (with the colon, as `URL.protocol` gives it).
    pub protocol: String,
    /// User info before `@`, if any.
    pub username: String,
    /// Password after `:` in the user info, if any.
    pub password: String,
    /// The host name (`[::1]` in brackets for IPv6).
    pub hostname: String,
}

/// Loopback host names, as a WHATWG parser writes them. Not `[::1]`: the
/// extension's CSP (which allows loopback WebSockets only) cannot name an
/// IPv6 literal, so such an endpoint could never be dialled.
const LOOPBACK: &[&str] = &["127.0.0.1", "localhost"];

/// The endpoint's parts are a loopback `ws://` URL with no user info.
pub fn check_endpoint(parts: &UrlParts) -> Result<(), &'static str> {
    if parts.protocol != "ws:" {
        return Err("the endpoint must start with ws://");
    }
    if !parts.username.is_empty() || !parts.password.is_empty() {
        return Err("the endpoint must not carry user info (anything before @)");
    }
    if !LOOPBACK.contains(&parts.hostname.as_str()) {
        return Err("the endpoint must be on this machine (127.0.0.1 or localhost)");
    }
    Ok(())
}

/// The executor id a credential (`exc1.<executor id>.<64 hex>`) is bound
/// to, if the credential is well formed (the daemon's own parser).
pub fn credential_executor_id(credential: &str) -> Option<&str> {
    protocol::executor::parse_credential(credential).map(|(id, _)| id)
}

/// The credential is one `orchestrator pair` printed.
pub fn check_credential(credential: &str) -> Result<(), &'static str> {
    credential_executor_id(credential)
        .map(|_| ())
        .ok_or("the credential is the line `orchestrator pair` printed after \"credential:\"")
}
