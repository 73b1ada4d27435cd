//! The WebExtension executor: the primary carrier. Rust compiled to wasm32;
//! the JavaScript in `static/` only loads the module and forwards browser
//! events to it.
//!
//! # Layout
//! - The judgement (idempotency journal with phases, the plan per command,
//!   the worker ↔ tab ↔ conversation registry, page reports turned into
//!   executor frames) is `executor_core`, shared with every carrier; tabs
//!   are its handles here.
//! - [`messages`]: the typed background ↔ content-script operations.
//! - [`operator`]: what the popup and the overlay show from the daemon's
//!   `operatorView`, and when a person is notified.
//! - [`pairing`]: what a pairing may hold (a loopback endpoint as the URL
//!   parser reads it, a credential of `orchestrator pair`'s form).
//! - `web` (wasm32 only): the browser glue. `background` keeps the daemon
//!   connection (hello, heartbeats, jittered reconnect, state in
//!   `storage.local`, `alarms` to wake up) and routes commands; `content`
//!   runs the shared `chatgpt-dom` adapter in chatgpt.com pages with a
//!   mutation-driven observer; `pages` drives the options page and popup.

pub mod messages;
pub mod operator;
pub mod pairing;

#[cfg(target_arch = "wasm32")]
mod web;
