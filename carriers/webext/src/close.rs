//! Close reasons. Every refusal closes the WebSocket with an application
//! close code (4000–4999) and a reason `CODE: detail`, where CODE is a stable
//! error code from `docs/errors.md`. Documented in `docs/executor-protocol.md`.

use protocol::ErrorCode;

/// This daemon's build version: what `orchestrator --version` begins with, and `welcome` says.
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// Why the daemon closed an executor session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// A missing, unknown or revoked credential, or one issued to another
    /// executor id (4001).
    Unauthorized(&'static str),
    /// The session's credential was revoked (`pair --revoke`, `--rotate`) (4001).
    CredentialRevoked,
    /// `hello` named another protocol version (4002).
    VersionMismatch {
        /// What the executor spoke.
        theirs: u32,
        /// Its build version, if it said one (`host.release`, v4).
        release: Option<String>,
    },
    /// Malformed, oversized, unexpected or too many frames (4003).
    Violation(String),
    /// A well-formed frame with a field over its bound or a URL outside the
    /// allow-list (4003, the frame's code: `TOO_LARGE`, `INVALID_ARGUMENT`);
    /// nothing of it was stored.
    Refused(protocol::executor::FrameRefusal),
    /// No frame within the lease (4004).
    LeaseExpired,
    /// The same executor instance connected again; this older session is replaced (4005).
    Superseded,
    /// Another instance claims an executor id that has a live session: the
    /// newcomer is refused, never preferred (4006).
    IdInUse,
    /// The daemon is shutting down (1001).
    Shutdown,
}

impl CloseReason {
    /// The WebSocket close code.
    pub fn code(&self) -> u16 {
        match self {
            CloseReason::Unauthorized(_) | CloseReason::CredentialRevoked => 4001,
            CloseReason::VersionMismatch { .. } => 4002,
            CloseReason::Violation(_) | CloseReason::Refused(_) => 4003,
            CloseReason::LeaseExpired => 4004,
            CloseReason::Superseded => 4005,
            CloseReason::IdInUse => 4006,
            CloseReason::Shutdown => 1001,
        }
    }

    /// The reason text, `CODE: detail`, at most 123 bytes as WebSocket requires.
    pub fn text(&self) -> String {
        let text = match self {
            CloseReason::Unauthorized(why) => format!("{}: {why}", ErrorCode::Unauthorized),
            CloseReason::CredentialRevoked => {
                format!("{}: this executor's credential was revoked", ErrorCode::Unauthorized)
            }
            CloseReason::VersionMismatch { theirs, release } => {
                use protocol::executor::{OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION};
                // The older side is the one to update; both builds named.
                let older = if *theirs > PROTOCOL_VERSION { "the daemon" } else { "the executor" };
                let release = release.as_deref().unwrap_or("(unsaid)");
                format!(
                    "{}: update {older}: executor {release} speaks v{theirs}, daemon {RELEASE} v{OLDEST_PROTOCOL_VERSION}-v{PROTOCOL_VERSION}",
                    ErrorCode::ProtocolVersionMismatch,
                )
            }
            CloseReason::Violation(why) => format!("{}: {why}", ErrorCode::ProtocolViolation),
            CloseReason::Refused(refusal) => format!("{}: {}", refusal.code, refusal.detail),
            CloseReason::LeaseExpired => format!("{}: no frame within the lease", ErrorCode::DeadlineExceeded),
            CloseReason::Superseded => format!("{}: the same executor connected again", ErrorCode::Conflict),
            CloseReason::IdInUse => {
                format!("{}: another instance of this executor id has a live session", ErrorCode::Conflict)
            }
            CloseReason::Shutdown => "daemon shutting down".to_owned(),
        };
        let mut end = text.len().min(123);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_owned()
    }
}
