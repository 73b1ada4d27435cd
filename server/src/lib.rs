//! The `orchestrator` daemon: configuration, state directory, MCP tools and
//! the HTTP surface, composed over the `control` plane.
//!
//! # Layout
//! - [`state_dir`]: the state directory: lock, daemon secret, database.
//! - [`tools`]: the MCP tool handler (one struct, served over HTTP and stdio).
//! - [`doctor`]: `orchestrator doctor`, the one-time ChatGPT setup checks.
//! - [`setup`]: `orchestrator setup`, a first-time person's one command:
//!   the daemon, the extension installed and paired, each link proven.
//! - [`http`]: the axum app: `/mcp`, `/healthz`, Host/Origin/secret checks.
//! - [`ownership`]: worktree ownership views, and Git projections kept in step.
//! - [`peers`]: which MCP peers (transport sessions) this process can still recognize.
//! - [`stdio_proxy`]: `mcp-stdio` beside a running daemon, relaying to its `/mcp`.
//!
//! Architecture invariant: no domain rule lives here; tools authenticate,
//! translate arguments, call the control plane and shape the output.

pub mod admin;
mod args;
pub mod canary_deploy;
pub mod canary_runner;
pub mod canary_stop;
pub mod daemon_process;
pub mod deployment;
pub mod doctor;
pub mod exposure;
pub mod hosts;
pub mod http;
pub mod inspect_page;
pub mod oauth;
pub mod ownership;
pub mod peers;
pub mod service;
pub mod setup;
pub mod state_dir;
pub mod stdio_proxy;
pub mod tools;
pub mod ui;
