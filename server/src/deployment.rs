//! This daemon's deployment identity, for the canary's G1D and for anyone
//! asking which build answers: the source it was built from (stamped by
//! `build.rs`), the binary's own hash, and an instance id new at every start.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The source commit (`unknown` outside a git checkout).
pub const COMMIT: &str = env!("ORCHESTRATOR_COMMIT");
/// The commit's tree, `+dirty` when tracked files differed at build time.
pub const TREE: &str = env!("ORCHESTRATOR_TREE");

/// The workspace's one version: every artifact of a release carries it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `orchestrator --version`: the workspace's one version (every artifact
/// of a release carries it) and the source it was built from.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ORCHESTRATOR_COMMIT"),
    ", tree ",
    env!("ORCHESTRATOR_TREE"),
    ")"
);

/// Which build and which start of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Identity {
    /// Source commit.
    pub commit: String,
    /// Source tree.
    pub tree: String,
    /// This process's instance id (new at every start).
    pub instance_id: String,
}

/// The running process's identity.
pub fn identity() -> Identity {
    Identity { commit: COMMIT.to_owned(), tree: TREE.to_owned(), instance_id: instance_id().to_owned() }
}

/// `inst_<uuid v7>`, made on first use: one per process.
pub fn instance_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| format!("inst_{}", uuid::Uuid::now_v7().simple()))
}

/// SHA-256 (hex) of the running binary's bytes, computed once (`serve`
/// does it at start); `unknown` when the binary cannot be read.
pub fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        use sha2::{Digest, Sha256};
        // The running image (Linux), not whatever file now sits at its path.
        let read = std::fs::read("/proc/self/exe").or_else(|_| std::env::current_exe().and_then(std::fs::read));
        match read {
            Ok(bytes) => Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect(),
            Err(_) => "unknown".into(),
        }
    })
}
