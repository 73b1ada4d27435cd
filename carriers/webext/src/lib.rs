//! The executor bridge: the one seam through which every carrier (the
//! WebExtension, the CDP host agent, the fake executor) receives work.
//!
//! # Layout
//! - [`credentials`]: per-executor credentials (`<state-dir>/executors`, 0600).
//! - [`close`]: the documented close reasons.
//! - [`session`]: one executor connection: hello, lease, frames in and out.
//!   Generic over any `Stream`/`Sink` of WebSocket messages.
//! - [`bridge`]: the registry of live sessions, the dispatch loop that turns
//!   the control plane's queue into commands on the right session, and the
//!   `/executor` route.
//! - [`inspect`]: read-only page inspections asked of every executor that
//!   can make them.
//! - [`pair_offer`]: `/executor/pair`, a browser paired without pasting
//!   once a person accepts it at `orchestrator setup`.
//!
//! Architecture invariant: no queue rule lives here. What to send and to
//! whom is `control::queue`; this crate only moves frames and reports.

pub mod bridge;
pub mod close;
pub mod credentials;
pub mod inspect;
pub mod pair_offer;
pub mod session;

pub use bridge::{Bridge, BridgeConfig, remote_router, router};
pub use credentials::Credentials;
