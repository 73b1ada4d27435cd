//! Which MCP peers this process can still recognize. Admission ties a pool
//! slot to the transport session of the peer it admitted; every wake makes
//! the worker re-attach, and only that session is let back in. The log
//! cannot know whether a session still lives (all of them end with the
//! process), so the edge does: it remembers the session behind each
//! fingerprint it computed and asks rmcp's session manager which are open.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use sha2::Digest;

/// The sessions behind peer fingerprints, shared by every session's tools.
#[derive(Clone, Default)]
pub struct Peers {
    /// Fingerprint → session id, for sessions seen by this process.
    seen: Arc<Mutex<HashMap<String, Arc<str>>>>,
    /// The HTTP transport's sessions; none over stdio (every peer sessionless).
    sessions: Option<Arc<LocalSessionManager>>,
}

impl Peers {
    /// Peers of the streamable-HTTP transport whose sessions live in `sessions`.
    pub fn over(sessions: Arc<LocalSessionManager>) -> Self {
        Self { seen: Arc::default(), sessions: Some(sessions) }
    }

    /// The calling peer's streamable-HTTP session id, if it has one.
    pub fn session_of(ctx: &RequestContext<RoleServer>) -> Option<String> {
        let parts = ctx.extensions.get::<axum::http::request::Parts>()?;
        parts.headers.get("mcp-session-id")?.to_str().ok().map(str::to_owned)
    }

    /// The fingerprint of a peer that claims a pool slot: its session,
    /// hashed (not a secret, but not worth storing raw), remembered so
    /// [`Peers::alive`] can tell whether it still lives (only pool claimants
    /// are remembered, so memory follows the pool, not every session).
    /// Without a session (stdio, stateless HTTP) every caller looks the same:
    /// [`admission::SESSIONLESS`], which admission never admits twice.
    pub fn claimant(&self, session: Option<&str>) -> String {
        let Some(session) = session else { return admission::SESSIONLESS.to_owned() };
        let fingerprint: String = sha2::Sha256::digest(format!("http-session:{session}").as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        self.seen.lock().expect("peers lock").insert(fingerprint.clone(), Arc::from(session));
        fingerprint
    }

    /// The fingerprints whose sessions are open now. Forgets the closed ones,
    /// so what is remembered stays bounded by the live sessions.
    pub async fn alive(&self) -> HashSet<String> {
        let Some(manager) = &self.sessions else { return HashSet::new() };
        let open = manager.sessions.read().await;
        let mut seen = self.seen.lock().expect("peers lock");
        seen.retain(|_, session| open.contains_key(session));
        seen.keys().cloned().collect()
    }
}
