//! The canary: the gates of the runtime pool (G0, G1D, G2–G6, as the seed
//! states them) run in order against one isolated deployment, each leaving
//! a receipt chained to the one before, stopping at the first failure or
//! uncertainty with a typed reason and the claim reached.
//!
//! # Layout
//! - [`gate`]: the gates, their claims, verdicts and stop reasons.
//! - [`receipt`]: receipts, the hash chain, its summary and verification.
//! - [`show`]: a verified chain for a person, or as one JSON document.
//! - [`report`]: a verified chain as one HTML page to publish.
//!
//! Sans-IO apart from reading and writing the receipt directory: the
//! runner that drives a daemon lives with the product binary
//! (`orchestrator canary`), which links this crate.

pub mod gate;
pub mod receipt;
pub mod report;
pub mod show;

pub use gate::{CLAIM_ORDER, Gate, REHEARSAL_PREFIX, Verdict, claim_reached, final_claim, no_claim, os_word};
pub use receipt::{
    Attribution, CAPABILITY_ONLY_PREFIX, Chain, ChainError, Counts, Deployment, Evidence, Executor, Platform, Receipt,
    Target, Writer, verify, verify_head,
};
