//! The CDP carrier: a host agent that drives worker conversations in an
//! explicitly authorized, already running browser session (Chrome or
//! Chromium with remote debugging allowed by its user), addressing each
//! conversation by its exact target. It speaks the one executor protocol,
//! on the same `executor-core` as the extension, and runs the extension's
//! own page adapter in its targets.
//!
//! # Layout
//! - [`discovery`]: where a session says how to reach it
//!   (`DevToolsActivePort` per OS and channel), pure.
//! - [`connect`]: reaching it, bounded, with setup states classified.
//! - [`cdp`]: a small DevTools client that touches only what it is told to.
//! - [`page`]: the adapter bundle and the page side of a managed target.
//! - [`agent`]: the executor: daemon session, journal, commands.
//! - [`host`]: the machine's facts (its name; whether the browser runs).
//! - [`launch`]: the bounded fallback of a dedicated profile it launches.
//! - [`pairing`]: the credential file and daemon URL, checked before use.
//!
//! Architecture invariant: no target the agent did not create is attached
//! to, navigated, evaluated in or closed; target ids are handles, never
//! identity; the user's browser is never launched or relaunched (only a
//! dedicated profile, configured explicitly, ever is).

pub mod agent;
pub mod cdp;
pub mod connect;
pub mod discovery;
pub mod host;
pub mod launch;
pub mod page;
pub mod pairing;

pub use agent::{Agent, Config, JournalError};
pub use connect::{Endpoint, SetupError};
pub use launch::Dedicated;
