//! The durable control plane: runs, workers, assignments, messages and the
//! event log they are folded from.
//!
//! # Layout
//! - [`model`]: the in-memory state, a pure fold over [`protocol::Event`]s.
//! - [`decide`]: pure, guarded transitions: a [`decide::Request`] and the
//!   current state in, the events to append (or a typed error) out.
//! - [`store`]: the [`store::Store`] trait, its SQLite and in-memory
//!   implementations, and the contract suite both must pass.
//! - [`broker`]: bounded waits that wake as soon as a run's cursor advances.
//! - [`keys`]: capabilities and attach identities, derived by HMAC so no
//!   secret is ever stored beside the log.
//! - [`clock`]: the injected clock.
//! - [`plane`]: the shell that runs commands: idempotency, append, fold, wake.
//! - [`queue`]: which executor commands to dispatch (or replay) next; pure.
//! - [`schedule`]: what falls due with time (re-inspecting a conversation
//!   whose blocking state may be stale); pure.
//! - [`scheduler`]: the task that owns `schedule`'s timers and commits what
//!   falls due.
//! - [`continuity`]: Execution Continuity's rules (when an unfinished worker
//!   gets another turn, the spacing floor, the keepalive, the stall guard); pure.
//! - [`operator`]: the operator surfaces' reading of the pool, and a
//!   person's controls made as the run's root.
//! - [`ownership`]: worktree ownership records folded from their own stream,
//!   their indexes, and when a holder is proven dead; pure.
//! - [`prompts`]: bootstrap and wake prompt texts, rendered at dispatch.
//! - [`rollover`]: when a worker moves to a fresh conversation; pure.
//! - [`waiting`]: what a worker that is not working waits for, with the next step.
//!
//! Architecture invariant: `model` and `decide` do no IO and read no clock;
//! only `plane` touches the store, and no SQL type leaves `store::sqlite`.

pub mod broker;
pub mod clock;
pub mod continuity;
pub mod decide;
pub mod error;
pub mod keys;
pub mod model;
pub mod operator;
pub mod ownership;
pub mod plane;
pub mod prompts;
pub mod queue;
pub mod rollover;
pub mod schedule;
pub mod scheduler;
pub mod store;
pub mod tabs;
pub mod waiting;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::Error;
pub use keys::Keyring;
pub use plane::{ChatgptSetup, ControlPlane};
