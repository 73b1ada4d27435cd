//! The control plane's error type. Every variant maps to one stable
//! [`ErrorCode`]; the message says what was wrong without echoing secrets.

use protocol::ErrorCode;

use crate::store::StoreError;

/// Why a control-plane operation was refused. Nothing was committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A malformed argument at the edge (the message says which and why;
    /// the rules' own refusals are [`Error::Refused`]).
    #[error("{0}")]
    InvalidArgument(String),
    /// A malformed identifier.
    #[error("{0}")]
    InvalidId(#[from] protocol::IdError),
    /// A field over its size bound.
    #[error("{field} is too large: {len} bytes/items, at most {max}")]
    TooLarge {
        /// The field.
        field: &'static str,
        /// Its size.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Missing or invalid capability.
    #[error("capability is missing or not valid")]
    Unauthorized,
    /// The credential belongs to a conversation its worker rolled over
    /// from: that conversation is retired.
    #[error("this conversation was retired when its worker rolled over to a fresh one (epoch {current})")]
    Retired {
        /// The worker's current continuation epoch.
        current: u32,
    },
    /// Same idempotency key, different arguments.
    #[error("idempotency key {key:?} was already used with different arguments")]
    Conflict {
        /// The key.
        key: String,
    },
    /// The store failed; nothing committed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// An uncertain external effect fences this action until it is reconciled.
    #[error("{0}")]
    ReconcileRequired(String),
    /// The caller's host (ChatGPT) holds an outdated catalog of this daemon's tools.
    #[error("{0}")]
    HostAppStale(String),
    /// A transition rule refused the request (see [`crate::decide::Refusal`]).
    #[error(transparent)]
    Refused(#[from] crate::decide::Refusal),
}

impl Error {
    /// The stable wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidArgument(_) => ErrorCode::InvalidArgument,
            Error::InvalidId(_) => ErrorCode::InvalidId,
            Error::TooLarge { .. } => ErrorCode::TooLarge,
            Error::Unauthorized => ErrorCode::Unauthorized,
            Error::Retired { .. } => ErrorCode::ConversationRetired,
            Error::Conflict { .. } => ErrorCode::Conflict,
            Error::Store(StoreError::Corrupt(_)) => ErrorCode::ReconcileRequired,
            Error::Store(_) => ErrorCode::StoreUnavailable,
            Error::ReconcileRequired(_) => ErrorCode::ReconcileRequired,
            Error::HostAppStale(_) => ErrorCode::HostAppStale,
            Error::Refused(refusal) => refusal.code(),
        }
    }
}
