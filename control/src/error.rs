//! The control plane's error type. Every variant maps to one stable
//! [`ErrorCode`]; the message says what was wrong without echoing secrets.

use protocol::ErrorCode;

use crate::store::StoreError;

/// Why a control-plane operation was refused. Nothing was committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A malformed argument.
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
    /// The named entity does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// Missing or invalid capability.
    #[error("capability is missing or not valid")]
    Unauthorized,
    /// Authenticated but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// Not allowed from the current state.
    #[error("{0}")]
    InvalidTransition(String),
    /// The run is not active.
    #[error("run is {0:?}; it does not accept this action")]
    RunNotActive(protocol::RunState),
    /// Same idempotency key, different arguments.
    #[error("idempotency key {key:?} was already used with different arguments")]
    Conflict {
        /// The key.
        key: String,
    },
    /// A configured limit was reached.
    #[error("{0}")]
    LimitReached(String),
    /// The store failed; nothing committed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// An uncertain external effect fences this action until it is reconciled.
    #[error("{0}")]
    ReconcileRequired(String),
    /// The caller's host (ChatGPT) holds an outdated catalog of this daemon's tools.
    #[error("{0}")]
    HostAppStale(String),
    /// A pool admission claim was refused.
    #[error("admission refused: {0}")]
    Admission(admission::Refusal),
    /// A report on work a newer follow-up has superseded.
    #[error("superseded: {0}")]
    Superseded(String),
}

impl Error {
    /// The stable wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidArgument(_) => ErrorCode::InvalidArgument,
            Error::InvalidId(_) => ErrorCode::InvalidId,
            Error::TooLarge { .. } => ErrorCode::TooLarge,
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::Unauthorized => ErrorCode::Unauthorized,
            Error::Forbidden(_) => ErrorCode::Forbidden,
            Error::InvalidTransition(_) => ErrorCode::InvalidTransition,
            Error::RunNotActive(_) => ErrorCode::RunNotActive,
            Error::Conflict { .. } | Error::Superseded(_) => ErrorCode::Conflict,
            Error::LimitReached(_) => ErrorCode::LimitReached,
            Error::Store(StoreError::Corrupt(_)) => ErrorCode::ReconcileRequired,
            Error::Store(_) => ErrorCode::StoreUnavailable,
            Error::Admission(refusal) => refusal.code(),
            Error::ReconcileRequired(_) => ErrorCode::ReconcileRequired,
            Error::HostAppStale(_) => ErrorCode::HostAppStale,
        }
    }
}
