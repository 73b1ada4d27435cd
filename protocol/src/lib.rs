//! Wire and domain vocabulary shared by every crate, the daemon and the extension.
//!
//! # Layout
//! - [`ids`]: typed, validated identifiers (`run_…`, `wrk_…`, conversation UUIDs).
//! - [`state`]: run and worker lifecycle states.
//! - [`assignment`]: the authoritative task a worker retrieves over MCP.
//! - [`continuity`]: Execution Continuity's policy, attempts and wakes.
//! - [`event`]: durable domain events, the control plane's only source of truth.
//! - [`executor`]: executor protocol frames (v3; v1 and v2 still served) (commands, acks, results, observations).
//! - [`error`]: stable error codes that appear on every wire.
//! - [`limits`]: size bounds enforced before anything is persisted.
//! - [`operator`]: what the operator surfaces show and the controls they send.
//! - [`ownership`]: worktree ownership provenance (worker, session, conversation, commits).
//! - [`rollover`]: a worker's move to a fresh conversation, and the capsule it carries.
//! - [`catalog`]: the catalog stamp in the attach tools' descriptions (written and read).
//!
//! Architecture invariant: serde only, no IO, no async runtime; builds for
//! `wasm32-unknown-unknown` so the extension speaks exactly these types.

pub mod assignment;
pub mod catalog;
pub mod continuity;
pub mod error;
pub mod event;
pub mod executor;
pub mod ids;
pub mod limits;
pub mod operator;
pub mod ownership;
pub mod rollover;
pub mod state;

pub use assignment::{Assignment, Scope};
pub use error::ErrorCode;
pub use event::{CommandIntent, Event, EventBody, PromptRef, SlotHealth};
pub use ids::{CommandId, ConversationId, IdError, MessageId, OwnershipId, RunId, WorkerId};
pub use state::{Attribution, BlockedBy, MessageKind, RunState, Waiting, WaitingFor, WorkerDisposition, WorkerState};
